"""A job pod mounts the volumes its team's profile names, ``{username}`` expanded (real API server)."""

from __future__ import annotations

import time

import kubecluster
from kubecluster import team_profile

from jupyter_quota import jobspec
from jupyter_quota.backends.kube import apply_profiles

HOME = {"name": "home", "mountPath": "/home/jovyan", "persistentVolumeClaim": {"claimName": "claim-{username}"}}
SHARED = {
    "name": "shared",
    "mountPath": "/srv/shared",
    "readOnly": True,
    "persistentVolumeClaim": {"claimName": "alpha-shared"},
}


def test_a_job_of_ann_mounts_her_home_claim_and_her_teams_share(kube, namespace_name, make_kube_backend):
    profile = team_profile(namespace_name, volumes=[HOME, SHARED])  # any team member may submit; ann does
    apply_profiles([profile], kube)
    kubecluster.wait_quota_status(kube, namespace_name)
    backend = make_kube_backend(cache_volumes=[{"name": "hf-cache", "mountPath": "/cache", "emptyDir": {}}])
    request = jobspec.parse_job_request({"name": "tune", "args": ["--sleep", "600"], "gpus": 1}, profile)
    backend.submit(profile, backend.build_job(profile, request, "ann", kubecluster.JOB_COMMAND), owner="ann")

    stored = kube.get(f"/apis/batch/v1/namespaces/{namespace_name}/jobs/tune")["spec"]["template"]["spec"]
    assert stored["volumes"] == [
        {"name": "home", "persistentVolumeClaim": {"claimName": "claim-ann"}},
        {"name": "shared", "persistentVolumeClaim": {"claimName": "alpha-shared"}},
        {"name": "hf-cache", "emptyDir": {}},
    ]
    assert stored["containers"][0]["volumeMounts"] == [
        {"name": "home", "mountPath": "/home/jovyan"},
        {"name": "shared", "readOnly": True, "mountPath": "/srv/shared"},
        {"name": "hf-cache", "mountPath": "/cache"},
    ]
    # The job controller's pod carries them too (it stays unscheduled: the test cluster has no claims).
    deadline = time.monotonic() + 30
    while not (pods := kube.get(f"/api/v1/namespaces/{namespace_name}/pods", labelSelector="job-name=tune")["items"]):
        assert time.monotonic() < deadline, "the job controller made no pod"
        time.sleep(0.1)
    claims = [
        v["persistentVolumeClaim"]["claimName"] for v in pods[0]["spec"]["volumes"] if "persistentVolumeClaim" in v
    ]
    assert claims == ["claim-ann", "alpha-shared"]
    backend.cancel(profile, "tune", by="ann")
