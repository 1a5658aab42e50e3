"""The kube backend on a real kube-apiserver v1.20.2: what only a cluster can show.

The shared contract (balance, submit, refusal, LimitRange, lifecycle, cancel, restart) is in
``tests/contract``; here: the pre-check against the API server's own FailedCreate text, the Job
we create, watch resilience across an API-server restart, logs, ``profiles apply``, config.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import re
import threading
import time
from datetime import datetime

import kubecluster
import pytest
from kubecluster import team_profile

from jupyter_quota import errors, jobspec, quota
from jupyter_quota.backends import make_backend
from jupyter_quota.backends.kube import KubeBackend, LogsUnavailable, apply_profiles
from jupyter_quota.backends.kube.admission import AdmissionBusy
from jupyter_quota.backends.kube.client import ClusterUnavailable, KubeError
from jupyter_quota.config import JupyterQuota

GPU_KEY = "requests.nvidia.com/gpu"
#: The promise README and ``cache.py`` make: with no data from the API server for this many
#: seconds, the balance says ``stale: true``.
STALE_BOUND = 15.0
#: Anything that names where the API server is: a URL, an IPv4 address, a host:port.
INTERNAL_ADDRESS = re.compile(r"https?://|\b\d{1,3}(\.\d{1,3}){3}\b|\blocalhost\b|[\w.-]+:\d{2,5}\b")


def build(backend, profile, name, *args, gpus=1, parallelism=1, owner="alice"):
    """The Job ``backend`` builds for ``owner``'s request (``parallelism`` set after: no request can)."""
    request = jobspec.parse_job_request({"name": name, "args": list(args), "gpus": gpus}, profile)
    job = backend.build_job(profile, request, owner, kubecluster.JOB_COMMAND)
    job["spec"]["parallelism"] = job["spec"]["completions"] = parallelism
    return job


def setup_team(kube, namespace, **fields):
    profile = team_profile(namespace, **fields)
    apply_profiles([profile], kube)
    kubecluster.wait_quota_status(kube, namespace)
    return profile


def wait(predicate, timeout=30.0, what="condition"):
    """Poll ``predicate`` until truthy; NotFound counts as not yet (the watch may lag a create)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except errors.NotFound:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_job_whose_pods_do_not_fit_together_is_refused_with_the_failedcreate_text(
    kube, namespace_name, make_kube_backend
):
    profile = setup_team(kube, namespace_name)  # 2 GPUs
    backend = make_kube_backend()
    assert backend.cache.wait(lambda: backend.cache["resourcequotas"].items(namespace_name), 10)

    # Our pre-check refuses the whole Job: three 1-GPU pods do not fit in 2.
    with pytest.raises(errors.AdmissionDenied) as refused:
        backend.submit(profile, build(backend, profile, "trio", "--sleep", "600", parallelism=3), owner="alice")
    assert refused.value.reason == "ExceededQuota"
    assert backend.cache["jobs"].get(namespace_name, "trio") is None
    assert kube.get(f"/apis/batch/v1/namespaces/{namespace_name}/jobs").get("items") == []

    # The same Job created directly: Kubernetes admits two pods and refuses the third.
    direct = build(backend, profile, "direct", "--sleep", "600", parallelism=3)
    kube.post(f"/apis/batch/v1/namespaces/{namespace_name}/jobs", direct)
    event = wait(
        lambda: next(
            (
                e
                for e in kube.get(f"/api/v1/namespaces/{namespace_name}/events")["items"]
                if e["reason"] == "FailedCreate" and e["involvedObject"]["name"] == "direct"
            ),
            None,
        ),
        what="the job controller's FailedCreate event",
    )
    assert event["type"] == "Warning" and event["source"]["component"] == "job-controller"
    pod_name = re.match(r'^Error creating: pods "(direct-[a-z0-9]{5})" is forbidden: ', event["message"]).group(1)
    assert event["message"] == "Error creating: " + quota.forbidden_message("pods", pod_name, refused.value)
    assert refused.value.message == (
        "exceeded quota: team-quota, requested: requests.nvidia.com/gpu=1, "
        "used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2"
    )

    # The half-admitted job is not silent: its refusal shows on it while its pods run.
    shown = wait(lambda: backend.get_job(profile, "direct"), what="the job in the cache")
    assert shown["name"] == "direct"
    kube.delete(
        f"/apis/batch/v1/namespaces/{namespace_name}/jobs/direct",
        body={"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"},
    )


def test_pods_refused_by_the_cluster_show_on_the_job_as_failedcreate(kube, namespace_name, make_kube_backend):
    """The API server stays the authority: a Job our pre-check did not see refused shows why."""
    profile = setup_team(kube, namespace_name)
    backend = make_kube_backend()
    # Someone else's pod takes both GPUs, created directly (our cache may not have seen it yet).
    kube.post(
        f"/api/v1/namespaces/{namespace_name}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "squatter"},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "busybox",
                        "command": ["--sleep", "600"],
                        "resources": {"limits": {"nvidia.com/gpu": "2"}},
                    }
                ]
            },
        },
    )
    job = build(backend, profile, "late", "--sleep", "1")
    kube.post(f"/apis/batch/v1/namespaces/{namespace_name}/jobs", job)  # as a stale pre-check would
    shown = wait(
        lambda: (j := backend.get_job(profile, "late")).get("reason") == "FailedCreate" and j,
        what="FailedCreate on the job",
    )
    assert shown["phase"] == "Pending"
    assert re.match(
        r'^Error creating: pods "late-[a-z0-9]{5}" is forbidden: exceeded quota: team-quota, '
        r"requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2, "
        r"limited: requests.nvidia.com/gpu=2$",
        shown["message"],
    ), shown["message"]


def test_the_job_carries_the_profiles_placement_image_volumes_and_labels(
    kube, kube_cluster, namespace_name, make_kube_backend
):
    try:
        kube.post(
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "jq-team-high"},
                "value": 1000,
            },
        )
    except KubeError as e:
        if e.code != 409:  # made by an earlier test: fine
            raise
    profile = setup_team(
        kube,
        namespace_name,
        image="registry.example/swift:4.0",
        nodeSelector={"jupyter-quota-test/gpu-model": "h100"},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        priorityClassName="jq-team-high",
    )
    backend = make_kube_backend(
        backoff_limit=2,
        ttl_seconds_after_finished=600,
        cache_volumes=[{"name": "hf-cache", "mountPath": "/root/.cache/huggingface", "emptyDir": {}}],
    )
    backend.submit(
        profile,
        build(backend, profile, "placed", "--sleep", "30", "--model", "qwen", owner="alice@example.org"),
        owner="alice@example.org",
    )
    stored = kube.get(f"/apis/batch/v1/namespaces/{namespace_name}/jobs/placed")
    labels = stored["metadata"]["labels"]
    assert labels["jupyter-quota/team"] == profile.team
    assert labels["jupyter-quota/user"] == "alice_example.org"
    assert labels["jupyter-quota/job"] == "placed"
    assert labels["app.kubernetes.io/managed-by"] == "jupyter-quota"
    assert stored["spec"]["backoffLimit"] == 2
    pod_spec = stored["spec"]["template"]["spec"]
    container = pod_spec["containers"][0]
    assert container["image"] == "registry.example/swift:4.0"
    assert container["command"] == [*kubecluster.JOB_COMMAND, "--sleep", "30", "--model", "qwen"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container["volumeMounts"] == [{"name": "hf-cache", "mountPath": "/root/.cache/huggingface"}]
    assert pod_spec["volumes"] == [{"name": "hf-cache", "emptyDir": {}}]
    assert pod_spec["nodeSelector"] == {"jupyter-quota-test/gpu-model": "h100"}
    assert pod_spec["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert pod_spec["priorityClassName"] == "jq-team-high"
    pod = wait(
        lambda: next(
            iter(kube.get(f"/api/v1/namespaces/{namespace_name}/pods", labelSelector="job-name=placed")["items"]), None
        ),
        what="the pod",
    )
    pod = wait(
        lambda: (
            (p := kube.get(f"/api/v1/namespaces/{namespace_name}/pods/{pod['metadata']['name']}"))["spec"].get(
                "nodeName"
            )
            and p
        ),
        what="the pod scheduled",
    )
    assert pod["spec"]["nodeName"] == "gpu-node-1"  # the h100 node
    assert pod["spec"]["priority"] == 1000
    job = backend.get_job(profile, "placed")
    assert job["owner"] == "alice@example.org"
    backend.cancel(profile, "placed", by="alice")


def test_logs_come_from_the_pod_log_api_or_say_why_not(kube, namespace_name, make_kube_backend):
    profile = setup_team(kube, namespace_name)
    backend = make_kube_backend()
    backend.submit(profile, build(backend, profile, "talky", "--sleep", "60"), owner="alice")
    wait(lambda: backend.get_job(profile, "talky")["phase"] == "Running", what="Running")
    with pytest.raises(LogsUnavailable) as unavailable:
        backend.logs(profile, "talky")  # the simulated node has no kubelet to serve them
    assert unavailable.value.status == 503
    assert re.match(
        r'^the cluster could not serve the logs of pod "talky-[a-z0-9]{5}" of job "talky": ', unavailable.value.message
    ), unavailable.value.message
    assert "127.0.0.1" in unavailable.value.message  # the API server's own reason, kept
    backend.cancel(profile, "talky", by="alice")


def test_profiles_apply_is_idempotent_and_dry_run_shows_a_diff(kube, namespace_name):
    profile = team_profile(
        namespace_name,
        hard={GPU_KEY: "2", "requests.memory": "1024Mi"},
        limitRange={"limits": [{"type": "Container", "default": {"cpu": "1"}}]},
    )
    dry = apply_profiles([profile], kube, dry_run=True)
    assert [(r["kind"], r["action"]) for r in dry] == [
        ("Namespace", "created"),
        ("ResourceQuota", "created"),
        ("LimitRange", "created"),
    ]
    assert all(r["dryRun"] and r["diff"].startswith("--- live: (none)") for r in dry)
    assert '"requests.nvidia.com/gpu": "2"' in dry[1]["diff"]
    with pytest.raises(KubeError) as missing:
        kube.get(f"/api/v1/namespaces/{namespace_name}")
    assert missing.value.code == 404

    applied = apply_profiles([profile], kube)
    assert [r["action"] for r in applied] == ["created", "created", "created"]
    again = apply_profiles([profile], kube)
    assert [r["action"] for r in again] == ["unchanged", "unchanged", "unchanged"]
    assert all(r["diff"] == "" for r in again)

    changed = team_profile(
        namespace_name,
        hard={GPU_KEY: "4", "requests.memory": "1Gi"},
        limitRange={"limits": [{"type": "Container", "default": {"cpu": "1"}}]},
    )
    preview = apply_profiles([changed], kube, dry_run=True)
    assert [r["action"] for r in preview] == ["unchanged", "updated", "unchanged"]
    assert '-      "requests.nvidia.com/gpu": "2"' in preview[1]["diff"]
    assert '+      "requests.nvidia.com/gpu": "4"' in preview[1]["diff"]
    live = kube.get(f"/api/v1/namespaces/{namespace_name}/resourcequotas/team-quota")
    assert live["spec"]["hard"][GPU_KEY] == "2"  # dry run stored nothing
    assert [r["action"] for r in apply_profiles([changed], kube)] == ["unchanged", "updated", "unchanged"]
    live = kube.get(f"/api/v1/namespaces/{namespace_name}/resourcequotas/team-quota")
    assert live["spec"]["hard"][GPU_KEY] == "4"
    assert [r["action"] for r in apply_profiles([changed], kube)] == ["unchanged"] * 3
    kube.delete(f"/api/v1/namespaces/{namespace_name}")


def test_config_selects_the_kube_backend(kube_cluster):
    config = JupyterQuota(
        backend="kube",
        kube_config_file=str(kube_cluster.kubeconfig),
        job_image="img",
        kube_backoff_limit=1,
        kube_ttl_seconds_after_finished=-1,
    )
    backend = make_backend(config)
    assert isinstance(backend, KubeBackend) and backend.name == "kube"
    assert backend.job_image == "img" and backend.backoff_limit == 1
    backend.start()
    try:
        assert backend.wait_synced(30)
    finally:
        backend.close()


def test_balance_reads_make_no_api_call(kube, namespace_name, make_kube_backend, monkeypatch):
    profile = setup_team(kube, namespace_name)
    backend = make_kube_backend()
    assert backend.cache.wait(lambda: backend.cache["resourcequotas"].items(namespace_name), 10)

    def no_calls(*args, **kwargs):
        raise AssertionError("a balance read called the API server")

    monkeypatch.setattr(backend.kube, "open", no_calls)
    monkeypatch.setattr(backend.kube, "request", no_calls)
    for _ in range(100):
        assert backend.balance(profile)["resources"][GPU_KEY]["hard"] == "2"


def test_the_watch_survives_an_api_server_restart(kube, kube_cluster, namespace_name, make_kube_backend, caplog):
    """Balance says ``stale: true`` while the API server is down and recovers by itself after."""
    caplog.set_level(logging.INFO)
    profile = setup_team(kube, namespace_name)
    backend = make_kube_backend()
    assert backend.cache.wait(lambda: backend.cache["resourcequotas"].items(namespace_name), 10)
    before = backend.balance(profile)
    assert before["stale"] is False

    kube_cluster.stop_apiserver()
    try:
        down = wait(lambda: (b := backend.balance(profile))["stale"] and b, timeout=30, what="stale: true")
        frozen = down["observedAt"]
        time.sleep(1.5)
        still = backend.balance(profile)
        assert still["stale"] is True and still["observedAt"] == frozen
        assert still["resources"] == before["resources"]  # last known values, marked stale
    finally:
        ready_in = kube_cluster.start_apiserver()
    recovered = wait(lambda: not (b := backend.balance(profile))["stale"] and b, timeout=30, what="recovery")
    assert recovered["observedAt"] >= frozen
    # The watch really resumed: a change made after the restart reaches the balance.
    kube.patch(f"/api/v1/namespaces/{namespace_name}/resourcequotas/team-quota", {"spec": {"hard": {GPU_KEY: "3"}}})
    wait(lambda: backend.balance(profile)["resources"][GPU_KEY]["hard"] == "3", what="the new hard limit")
    backend.submit(profile, build(backend, profile, "after-restart", "--sleep", "0.1"), owner="alice")
    wait(lambda: backend.get_job(profile, "after-restart")["phase"] == "Succeeded", what="Succeeded")

    ours = [r for r in caplog.records if r.name.startswith("jupyter_quota")]
    assert any("list/watch failed" in r.getMessage() for r in ours), "the break was not logged"
    assert not [r for r in ours if r.exc_info or "Traceback" in r.getMessage()], "a traceback was logged"
    print(
        f"\napiserver ready {ready_in:.1f}s after restart; relists: "
        f"{ {k: r.lists for k, r in backend.cache.reflectors.items()} }"
    )


def epoch(rfc3339: str) -> float:
    return datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%S%z").timestamp()


def test_a_hung_api_server_turns_the_balance_stale_within_the_bound(
    kube, kube_cluster, namespace_name, make_kube_backend, caplog
):
    """SIGSTOP is a partition: connections stay open and nothing arrives. The balance must say so.

    A quiet but healthy cluster stays fresh past the bound; a frozen one is ``stale`` within it,
    with ``observedAt`` held at the last data; a submit meanwhile answers 503 without the API
    server's address (that goes to the log); SIGCONT and the balance recovers by itself.
    """
    caplog.set_level(logging.INFO)
    profile = setup_team(kube, namespace_name)
    backend = make_kube_backend()
    assert backend.cache.wait(lambda: backend.cache["resourcequotas"].items(namespace_name), 10)

    # Quiet and healthy: nothing changes for longer than the bound, and nothing reads stale.
    quiet_until = time.monotonic() + STALE_BOUND + 5
    while time.monotonic() < quiet_until:
        quiet = backend.balance(profile)
        assert quiet["stale"] is False, quiet
        time.sleep(0.2)

    kube_cluster.pause_apiserver()
    paused_at, paused_wall = time.monotonic(), time.time()
    try:
        hung = wait(
            lambda: (b := backend.balance(profile))["stale"] and b,
            timeout=3 * STALE_BOUND,
            what="stale: true while the API server is frozen",
        )
        elapsed = time.monotonic() - paused_at
        print(
            f"\nstale {elapsed:.1f}s after SIGSTOP (bound {STALE_BOUND:.0f}s); observedAt {hung['observedAt']}, "
            f"{paused_wall - epoch(hung['observedAt']):.1f}s before SIGSTOP"
        )
        assert elapsed <= STALE_BOUND + 2, f"stale only {elapsed:.1f}s after SIGSTOP"
        # observedAt is the last data from the cluster: not after the freeze, and it stays there.
        assert epoch(hung["observedAt"]) <= paused_wall + 1, (hung["observedAt"], paused_wall)
        with pytest.raises(ClusterUnavailable) as unavailable:
            backend.submit(profile, build(backend, profile, "while-hung", "--sleep", "1"), owner="alice")
        body = json.dumps(unavailable.value.to_json())
        assert unavailable.value.status == 503
        assert "did not answer" in unavailable.value.message, body
        assert not INTERNAL_ADDRESS.search(body), f"the 503 names an internal address: {body}"
        host = kube.host.split("://", 1)[1]
        assert any(host in r.getMessage() for r in caplog.records), "the details did not reach the server log"
        still = backend.balance(profile)
        assert still["stale"] is True and still["observedAt"] == hung["observedAt"]
    finally:
        kube_cluster.resume_apiserver()
    recovered = wait(lambda: not (b := backend.balance(profile))["stale"] and b, timeout=60, what="recovery")
    assert epoch(recovered["observedAt"]) > epoch(hung["observedAt"])


def test_concurrent_submits_admit_exactly_the_jobs_that_fit(kube, namespace_name, make_kube_backend):
    """Ten 1-GPU submits at once into 2 GPUs: two are created, eight get the pre-check's 403.

    The quota charges a Job's pods only when the job controller creates them, after the Job:
    without turns, all ten pass the pre-check and eight fail later as FailedCreate.
    """
    profile = setup_team(kube, namespace_name)  # 2 GPUs
    backend = make_kube_backend()
    assert backend.cache.wait(lambda: backend.cache["resourcequotas"].items(namespace_name), 10)
    start = threading.Barrier(10)

    def submit(i):
        job = build(backend, profile, f"race-{i}", "--sleep", "600")
        start.wait()
        try:
            return backend.submit(profile, job, owner="alice")
        except errors.AdmissionDenied as e:
            return e

    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        results = list(pool.map(submit, range(10)))
    admitted = sorted(r["name"] for r in results if isinstance(r, dict))
    refused = [r for r in results if isinstance(r, errors.AdmissionDenied)]
    print(
        f"\n10 concurrent 1-GPU submits into 2 GPUs: {len(admitted)} admitted (201), "
        f"{len(refused)} refused (403 {sorted({r.reason for r in refused})})"
    )
    assert len(admitted) == 2 and len(refused) == 8, results
    for r in refused:
        assert r.status == 403 and r.reason == "ExceededQuota"
        assert r.message == (
            "exceeded quota: team-quota, requested: requests.nvidia.com/gpu=1, "
            "used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2"
        )
    # None fails later: both admitted jobs run, and the cluster refused no pod.
    for name in admitted:
        wait(lambda name=name: backend.get_job(profile, name)["phase"] == "Running", what=f"{name} Running")
    jobs = kube.get(f"/apis/batch/v1/namespaces/{namespace_name}/jobs")["items"]
    assert sorted(j["metadata"]["name"] for j in jobs) == admitted
    events = kube.get(f"/api/v1/namespaces/{namespace_name}/events")["items"]
    assert [e["message"] for e in events if e["reason"] == "FailedCreate"] == []
    used = kube.get(f"/api/v1/namespaces/{namespace_name}/resourcequotas/team-quota")["status"]["used"]
    assert used[GPU_KEY] == "2"
    for name in admitted:
        backend.cancel(profile, name, by="alice")


def test_a_submit_waits_until_the_job_before_it_has_its_pods(kube, kube_cluster, namespace_name, make_kube_backend):
    """Without a job controller the first Job gets no pod, so the quota does not yet show its use:
    the next submit answers 503 saying so rather than admit on a count that is too low."""
    profile = setup_team(kube, namespace_name)  # 2 GPUs
    backend = make_kube_backend(sync_timeout=3)
    assert backend.cache.wait(lambda: backend.cache["resourcequotas"].items(namespace_name), 10)
    kube_cluster.stop_controller_manager()
    try:
        backend.submit(profile, build(backend, profile, "first", "--sleep", "600", gpus=2), owner="alice")
        with pytest.raises(AdmissionBusy) as busy:
            backend.submit(profile, build(backend, profile, "second", "--sleep", "600"), owner="alice")
    finally:
        kube_cluster.start_controller_manager()
    assert busy.value.status == 503
    assert busy.value.message.startswith('the cluster has not created the pods of job "first" (submitted '), (
        busy.value.message
    )
    assert [j["metadata"]["name"] for j in kube.get(f"/apis/batch/v1/namespaces/{namespace_name}/jobs")["items"]] == [
        "first"
    ]
    # Once the job controller is back and "first" has its pod, the next turn sees both GPUs used.
    wait(lambda: backend.get_job(profile, "first")["phase"] == "Running", timeout=60, what="first Running")
    with pytest.raises(errors.AdmissionDenied) as refused:
        backend.submit(profile, build(backend, profile, "second", "--sleep", "600"), owner="alice")
    assert refused.value.message == (
        "exceeded quota: team-quota, requested: requests.nvidia.com/gpu=1, "
        "used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2"
    )
    backend.cancel(profile, "first", by="alice")
