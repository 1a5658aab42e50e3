"""The Job the kube backend creates is the one ``jobspec.build_job`` returns: built once, with the
server's settings passed in, and sent to the API server unchanged (real API server)."""

from __future__ import annotations

import copy

import kubecluster
from kubecluster import team_profile

from jupyter_quota import jobspec
from jupyter_quota.backends.kube import apply_profiles

CACHE = {"name": "hf-cache", "mountPath": "/root/.cache/huggingface", "emptyDir": {}}
HOME = {"name": "home", "mountPath": "/home/jovyan", "persistentVolumeClaim": {"claimName": "claim-{username}"}}


def test_the_kube_backend_submits_exactly_the_job_the_one_builder_returns(
    kube, namespace_name, make_kube_backend, monkeypatch
):
    profile = team_profile(
        namespace_name,
        volumes=[HOME],
        nodeSelector={"jupyter-quota-test/gpu-model": "h100"},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    )
    apply_profiles([profile], kube)
    kubecluster.wait_quota_status(kube, namespace_name)
    backend = make_kube_backend(backoff_limit=3, ttl_seconds_after_finished=120, cache_volumes=[CACHE])
    request = jobspec.parse_job_request({"name": "once", "args": ["--sleep", "600"], "gpus": 2}, profile)

    # The builder, given every setting by hand, and the backend's build agree to the letter.
    expected = jobspec.build_job(
        profile,
        request,
        "ann",
        kubecluster.JOB_COMMAND,
        jobspec.JobSettings(
            image=kubecluster.JOB_IMAGE,
            backoff_limit=3,
            ttl_seconds_after_finished=120,
            mounts=True,
            cache_volumes=(CACHE,),
        ),
    )
    job = backend.build_job(profile, request, "ann", kubecluster.JOB_COMMAND)
    assert job == expected
    spec, pod = expected["spec"], expected["spec"]["template"]["spec"]
    assert (spec["backoffLimit"], spec["ttlSecondsAfterFinished"]) == (3, 120)
    assert pod["containers"][0]["image"] == kubecluster.JOB_IMAGE
    assert [v["name"] for v in pod["volumes"]] == ["home", "hf-cache"]
    assert pod["volumes"][0]["persistentVolumeClaim"] == {"claimName": "claim-ann"}

    # What goes to the API server is that Job, with nothing added or changed on the way.
    posted = []
    real_post = backend.kube.post

    def recording_post(path, body, *args, **kwargs):
        posted.append((path, copy.deepcopy(body)))
        return real_post(path, body, *args, **kwargs)

    monkeypatch.setattr(backend.kube, "post", recording_post)
    submitted = copy.deepcopy(job)
    backend.submit(profile, job, owner="ann")
    assert job == submitted  # the caller's Job is not touched either
    assert posted == [(f"/apis/batch/v1/namespaces/{namespace_name}/jobs", expected)]
    stored = kube.get(f"/apis/batch/v1/namespaces/{namespace_name}/jobs/once")
    assert stored["metadata"]["labels"] == expected["metadata"]["labels"]
    assert stored["metadata"]["annotations"] == expected["metadata"]["annotations"]
    # (ttlSecondsAfterFinished was sent, as ``posted`` shows; v1.20 drops it: its TTL controller is alpha.)
    stored_container = stored["spec"]["template"]["spec"]["containers"][0]
    assert stored_container["env"] == [{"name": "NPROC_PER_NODE", "value": "2"}]
    assert stored_container["volumeMounts"] == pod["containers"][0]["volumeMounts"]
    backend.cancel(profile, "once", by="ann")
