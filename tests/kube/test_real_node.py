"""The kube backend on a real node: containerd and a kubelet v1.20.2 run the Jobs' pods
(``kubenode.py``), so phases, exit codes, OOM kills, image failures, logs and timestamps are the
kubelet's, not a test helper's.

The node is tainted and labelled (``kubecluster.REAL_NODE_TAINT``/``REAL_NODE_LABEL``): these
tests' profiles tolerate and select it, as an admin's GPU profile would, and the other tests of
the tier keep the simulated nodes.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import kubecluster
import kubenode
import pytest
from kubecluster import REAL_NODE_LABEL, REAL_NODE_TAINT, team_profile, until

from jupyter_quota import jobspec, peaks, swiftlog
from jupyter_quota.backends.kube import apply_profiles
from jupyter_quota.jobmemory import JobMemory

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import tiny_swift  # noqa: E402

TOLERATION = {"key": REAL_NODE_TAINT["key"], "operator": "Equal", "value": "true", "effect": "NoSchedule"}
#: What a job of these tests asks for: the plan's requests and limits (1 fake GPU).
RESOURCES = {"requests": {"cpu": "500m", "memory": "3Gi"}, "limits": {"cpu": "2", "memory": "3Gi"}}
#: Waits on a loaded 2-core machine (the phases come from the kubelet's status updates).
SWIFT_TIMEOUT = 600.0


@pytest.fixture(scope="session")
def node_cluster(request):
    return kubecluster.node_or_fail(request.config)


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """The tiny model and dataset, on the host, mounted into the pods at the same path (hostPath)."""
    root = tmp_path_factory.mktemp("tiny-swift")
    os.chmod(root, 0o777)
    tiny_swift.build_tiny_model(root / "model")
    tiny_swift.build_dataset(root / "data.jsonl")
    return root


def real_profile(namespace: str, image: str = kubenode.JOB_IMAGE, volumes=(), **fields):
    fields.setdefault("hard", {"requests.nvidia.com/gpu": "2", "requests.memory": "8Gi", "limits.memory": "8Gi"})
    return team_profile(
        namespace,
        image=image,
        nodeSelector=dict(REAL_NODE_LABEL),
        tolerations=[TOLERATION],
        volumes=list(volumes),
        **fields,
    )


def submit(backend, profile, name: str, args: list[str], command: list[str], resources=RESOURCES, gpus: int = 1):
    request = jobspec.parse_job_request({"name": name, "args": args, "gpus": gpus, "resources": resources}, profile)
    return backend.submit(profile, backend.build_job(profile, request, "alice", command), owner="alice")


def ended(backend, profile, name: str):
    def check():
        job = backend.get_job(profile, name)
        return job if job["phase"] in ("Succeeded", "Failed") else None

    return check


def pod_of(kube, namespace: str, name: str) -> dict:
    pods = kube.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"job-name={name}")["items"]
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    return pods[0]


def test_a_swift_sft_job_succeeds_on_the_node_and_its_log_feeds_loss_and_learning(
    node_cluster, kube, namespace_name, make_kube_backend, tiny, tmp_path
):
    hostpath = {"name": "work", "mountPath": str(tiny), "hostPath": {"path": str(tiny), "type": "Directory"}}
    profile = real_profile(namespace_name, volumes=[hostpath])
    apply_profiles([profile], kube)
    kubecluster.wait_quota_status(kube, namespace_name)
    backend = make_kube_backend(job_image_pull_policy="Never")
    args = tiny_swift.swift_flags(tiny / "model", tiny / "data.jsonl", tiny / "out" / namespace_name)
    memory = JobMemory(str(tmp_path), backend)
    job = submit(backend, profile, "tune", args, ["swift", "sft"])
    memory.on_submit(profile, job)

    done = until(ended(backend, profile, "tune"), SWIFT_TIMEOUT, "the swift job to end")
    logs = backend.logs(profile, "tune", tail_lines=5000)
    assert done["phase"] == "Succeeded", (done, logs[-3000:])
    pod = pod_of(kube, namespace_name, "tune")
    assert pod["spec"]["nodeName"] == kubenode.NODE_NAME
    container = pod["spec"]["containers"][0]
    assert container["image"] == kubenode.JOB_IMAGE and container["imagePullPolicy"] == "Never"
    assert container["resources"] == {
        "requests": {"cpu": "500m", "memory": "3Gi", "nvidia.com/gpu": "1"},
        "limits": {"cpu": "2", "memory": "3Gi", "nvidia.com/gpu": "1"},
    }
    assert done["exitCode"] == 0
    # The widget's loss plot and steps come from this log (swiftlog), served by the kubelet.
    progress = swiftlog.parse_log(logs)
    assert progress.step == progress.max_steps == 3, logs[-2000:]
    assert progress.steps == [1, 2, 3] and all(loss > 0 for loss in progress.losses), logs[-2000:]
    assert list((tiny / "out" / namespace_name).glob("v*/checkpoint-3")), "no checkpoint on the volume"
    # Learning: the ended job's log is read once; ms-swift's memory(GiB) lands beside the estimate.
    shown = memory.decorate(profile, backend.get_job(profile, "tune"))
    assert shown["memory"]["estimatedGib"] > 0
    assert shown["memory"]["measuredGib"] == progress.peak_memory_gib
    assert peaks.find(str(tmp_path), namespace_name, "tune")["learned_at"] is not None
    print(
        f"\nreal node: pod {pod['metadata']['name']} on {pod['spec']['nodeName']}, "
        f"resources {container['resources']}, ran {done.get('startedAt')} .. {done.get('finishedAt')}, "
        f"loss {progress.losses}, memory(GiB) {progress.peak_memory_gib}"
    )


def test_a_container_past_its_memory_limit_is_oom_killed_and_the_message_names_the_limit(
    node_cluster, kube, namespace_name, make_kube_backend
):
    profile = real_profile(namespace_name, image=kubenode.BUSYBOX_IMAGE)
    apply_profiles([profile], kube)
    kubecluster.wait_quota_status(kube, namespace_name)
    backend = make_kube_backend()
    # `tail /dev/zero` keeps one endless line in memory: the cgroup's OOM killer ends it.
    small = {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"memory": "32Mi"}}
    submit(backend, profile, "hog", [], ["sh", "-c", "echo start; tail /dev/zero"], resources=small)

    done = until(ended(backend, profile, "hog"), 180, "the memory hog to end")
    terminated = pod_of(kube, namespace_name, "hog")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["reason"] == "OOMKilled" and terminated["exitCode"] == 137
    assert done["phase"] == "Failed" and done["reason"] == "OOMKilled", done
    assert "its memory limit (32Mi)" in done["message"] and "more memory" in done["message"], done["message"]
    print(f"\nOOMKilled: {done['reason']}: {done['message']}")


def test_an_image_the_node_cannot_get_fails_the_job_at_once_naming_the_image(
    node_cluster, kube, namespace_name, make_kube_backend
):
    profile = real_profile(namespace_name, image="localhost/no-such-image:1")
    apply_profiles([profile], kube)
    kubecluster.wait_quota_status(kube, namespace_name)
    backend = make_kube_backend(job_image_pull_policy="Never")
    submit(backend, profile, "noimage", [], ["swift", "sft"])

    done = until(ended(backend, profile, "noimage"), 120, "the job without an image to fail")
    assert done["reason"] == "ErrImageNeverPull", done
    assert 'the image "localhost/no-such-image:1"' in done["message"], done["message"]
    print(f"\nimage: {done['reason']}: {done['message']}")
    # Its Pending pod still holds quota: cancel deletes the Job (a failed job is otherwise left alone).
    assert backend.cancel(profile, "noimage", by="alice")["reason"] == "Cancelled"


def test_a_pod_no_node_can_hold_is_unschedulable_with_the_schedulers_reason(
    node_cluster, kube, namespace_name, make_kube_backend
):
    profile = real_profile(namespace_name, image=kubenode.BUSYBOX_IMAGE, hard={"requests.nvidia.com/gpu": "64"})
    apply_profiles([profile], kube)
    kubecluster.wait_quota_status(kube, namespace_name)
    backend = make_kube_backend()
    submit(backend, profile, "huge", [], ["sh", "-c", "true"], resources={}, gpus=9)  # the node has 8

    def pending_reason():
        job = backend.get_job(profile, "huge")
        return job if job.get("reason") == "Unschedulable" else None

    job = until(pending_reason, 60, "the scheduler's verdict")
    assert job["phase"] == "Pending"
    assert "Insufficient nvidia.com/gpu" in job["message"], job["message"]
    print(f"\nunschedulable: {job['reason']}: {job['message']}")
    backend.cancel(profile, "huge", by="alice")


def test_a_failing_command_fails_the_job_with_its_exit_code(node_cluster, kube, namespace_name, make_kube_backend):
    profile = real_profile(namespace_name, image=kubenode.BUSYBOX_IMAGE)
    apply_profiles([profile], kube)
    kubecluster.wait_quota_status(kube, namespace_name)
    backend = make_kube_backend()
    small = {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"memory": "32Mi"}}
    submit(backend, profile, "fails", [], ["sh", "-c", "echo trying; exit 3"], resources=small)

    done = until(ended(backend, profile, "fails"), 120, "the failing job to end")
    assert done["phase"] == "Failed" and done["exitCode"] == 3, done
    assert done["message"].endswith("the training container exited with code 3"), done["message"]
    assert backend.logs(profile, "fails") == "trying\n"
    print(f"\nfailed command: {done['reason']}: {done['message']}")


def test_cancel_ends_the_pod_within_its_grace_period_and_frees_the_quota(
    node_cluster, kube, namespace_name, make_kube_backend
):
    profile = real_profile(namespace_name, image=kubenode.BUSYBOX_IMAGE)
    apply_profiles([profile], kube)
    kubecluster.wait_quota_status(kube, namespace_name)
    backend = make_kube_backend()
    small = {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"memory": "32Mi"}}
    # A trainer that ends on SIGTERM, as ms-swift (Python) does; sh as PID 1 would ignore it and
    # the pod would take the whole grace period (30 s).
    script = "trap 'echo stopping; exit 143' TERM; echo ready; while :; do sleep 1 & wait $!; done"
    submit(backend, profile, "long", [], ["sh", "-c", script], resources=small)

    def running():
        return backend.get_job(profile, "long")["phase"] == "Running" and "ready" in backend.logs(profile, "long")

    until(running, 120, "the job to run")
    used = until(lambda: _used_gpus(backend, profile) == "1" and "1", 60, "the quota to count the pod")
    assert used == "1"
    t0 = time.monotonic()
    assert backend.cancel(profile, "long", by="alice")["reason"] == "Cancelled"
    until(lambda: _used_gpus(backend, profile) == "0", 90, "the quota to be freed")
    freed = time.monotonic() - t0
    until(lambda: not kube.get(f"/api/v1/namespaces/{namespace_name}/pods")["items"], 60, "the pod to go")
    gone = time.monotonic() - t0
    assert freed < 30, f"the quota was freed {freed:.1f} s after cancel: the pod took its whole grace period"
    print(f"\ncancel: quota freed {freed:.1f} s, pod gone {gone:.1f} s after the cancel")


def test_usage_is_recorded_from_the_pods_own_start_and_finish(node_cluster, kube, namespace_name, make_kube_backend):
    profile = real_profile(namespace_name, image=kubenode.BUSYBOX_IMAGE)
    apply_profiles([profile], kube)
    kubecluster.wait_quota_status(kube, namespace_name)
    backend = make_kube_backend()
    backend.track([namespace_name])
    small = {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"memory": "32Mi"}}
    submit(backend, profile, "short", [], ["sh", "-c", "sleep 3; echo done"], resources=small)

    until(ended(backend, profile, "short"), 120, "the job to end")
    pod = pod_of(kube, namespace_name, "short")
    spans = until(lambda: [s for s in backend.usage_spans(0, 2**40, [namespace_name]) if s.end], 30, "the usage record")
    assert len(spans) == 1
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert spans[0].start == _epoch(pod["status"]["startTime"])
    assert spans[0].end == _epoch(terminated["finishedAt"])
    assert spans[0].end - spans[0].start >= 3
    print(
        f"\nusage: {spans[0].start}..{spans[0].end} = pod startTime {pod['status']['startTime']}, "
        f"finishedAt {terminated['finishedAt']}"
    )


def _used_gpus(backend, profile) -> str:
    """The GPUs the team's balance shows used (the quota controller's count, via the watch)."""
    return backend.balance(profile)["resources"]["requests.nvidia.com/gpu"]["used"]


def test_a_running_job_whose_pod_log_goes_quiet_is_flagged_stalled(
    node_cluster, kube, namespace_name, make_kube_backend
):
    from jupyter_quota.stall import NO_LOG_PROGRESS, StallPolicy

    profile = real_profile(namespace_name, image=kubenode.BUSYBOX_IMAGE)
    apply_profiles([profile], kube)
    kubecluster.wait_quota_status(kube, namespace_name)
    backend = make_kube_backend(stall_policy=StallPolicy(minutes=0.1))  # 6 s without a log line
    backend.log_progress.ttl = 0.5
    small = {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"memory": "32Mi"}}
    quiet = "trap 'exit 143' TERM; echo step 1; while :; do sleep 1 & wait $!; done"
    busy = "trap 'exit 143' TERM; while :; do echo step; sleep 1 & wait $!; done"
    submit(backend, profile, "quiet", [], ["sh", "-c", quiet], resources=small)
    submit(backend, profile, "busy", [], ["sh", "-c", busy], resources=small, gpus=0)

    flagged = until(lambda: {f["name"]: f for f in backend.stalled()}.get("quiet"), 120, "the quiet job flagged")
    assert flagged["stalled"]["reason"] == NO_LOG_PROGRESS
    assert "no log output for" in flagged["stalled"]["message"]
    assert backend.get_job(profile, "busy")["phase"] == "Running"
    assert "busy" not in {f["name"] for f in backend.stalled()}
    # The job as a user reads it carries the same flag (read in the background, never waited for).
    shown = until(lambda: backend.get_job(profile, "quiet")["stalled"], 30, "the flag on the job")
    assert shown["reason"] == NO_LOG_PROGRESS
    print(f"\nstalled: {shown}")
    for name in ("quiet", "busy"):
        backend.cancel(profile, name, by="alice")


def test_a_restarted_service_finds_the_running_pod_and_counts_it_once(
    node_cluster, kube, namespace_name, make_kube_backend, tmp_path
):
    # The job ends when the test says so (a file on a hostPath), not after a sleep racing the restart.
    gate = tmp_path / "gate"
    gate.mkdir()
    os.chmod(gate, 0o777)
    volume = {"name": "gate", "mountPath": "/gate", "hostPath": {"path": str(gate), "type": "Directory"}}
    profile = real_profile(namespace_name, image=kubenode.BUSYBOX_IMAGE, volumes=[volume])
    apply_profiles([profile], kube)
    kubecluster.wait_quota_status(kube, namespace_name)
    usage_path = str(tmp_path / "usage.sqlite")
    first = make_kube_backend(usage_path=usage_path)
    first.track([namespace_name])
    small = {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"memory": "32Mi"}}
    script = "echo started; while [ ! -e /gate/end ]; do sleep 0.2; done; echo ended"
    submit(first, profile, "held", [], ["sh", "-c", script], resources=small)
    until(lambda: first.usage_spans(0, 2**40, [namespace_name]), 120, "the first service to record the start")
    first.close()

    second = make_kube_backend(usage_path=usage_path)  # the restarted service, same usage file
    second.track([namespace_name])
    until(lambda: second.get_job(profile, "held")["phase"] == "Running", 30, "the restarted service to see the pod")
    (gate / "end").write_text("")
    until(ended(second, profile, "held"), 120, "the job to end")
    spans = until(
        lambda: [s for s in second.usage_spans(0, 2**40, [namespace_name]) if s.end], 30, "the finish recorded"
    )
    assert len(second.usage_spans(0, 2**40, [namespace_name])) == 1
    pod = pod_of(kube, namespace_name, "held")
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert spans[0].end == _epoch(terminated["finishedAt"]) and spans[0].start == _epoch(pod["status"]["startTime"])
    assert second.logs(profile, "held") == "started\nended\n"


def _epoch(text: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())
