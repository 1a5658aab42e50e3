"""The kube backend on a real node: containerd and a kubelet v1.20.2 run the Jobs' pods
(``kubenode.py``), so phases, exit codes, OOM kills, image failures, logs and timestamps are the
kubelet's, not a test helper's.

The node is tainted and labelled (``kubecluster.REAL_NODE_TAINT``/``REAL_NODE_LABEL``): these
tests' profiles tolerate and select it, as an admin's GPU profile would, and the other tests of
the tier keep the simulated nodes.
"""

from __future__ import annotations

import json
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
GPU_KEY = "requests.nvidia.com/gpu"


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


def ended(backend, profile, name: str, with_exit_code: bool = False):
    """The job once it has ended; ``with_exit_code``: and its pod's exit code is read too (the
    backend's pod watch may see the container's end after its job watch sees the Job's)."""

    def check():
        job = backend.get_job(profile, name)
        if job["phase"] not in ("Succeeded", "Failed") or (with_exit_code and "exitCode" not in job):
            return None
        return job

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

    done = until(ended(backend, profile, "tune", with_exit_code=True), SWIFT_TIMEOUT, "the swift job to end")
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


#: What torch prints when an allocation on the GPU fails (torch 2.x); the pod prints it, as a
#: trainer on a real GPU would, since no GPU is here to run out of.
CUDA_OOM_TEXT = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 23.64 GiB of which 1.02 GiB is free."
)


def test_cuda_out_of_memory_in_the_pod_log_is_out_of_memory_and_can_be_re_planned(
    node_cluster, kube, namespace_name, make_kube_backend, tiny, tmp_path
):
    from jupyter_quota.service.planning import Planning

    # No memory quota: the plans of the re-plan request more host memory than this test's pods.
    hard = {"requests.nvidia.com/gpu": "2"}
    profile = real_profile(namespace_name, image=kubenode.BUSYBOX_IMAGE, gpuMemory="24Gi", hard=hard)
    apply_profiles([profile], kube)
    kubecluster.wait_quota_status(kube, namespace_name)
    backend = make_kube_backend()
    memory = JobMemory(str(tmp_path), backend)
    # The job's args are a real swift sft's (so it is estimated at submit); its command prints
    # torch's out-of-memory error and exits 1, as the trainer does when the GPU is full.
    args = tiny_swift.swift_flags(tiny / "model", tiny / "data.jsonl", tiny / "out" / namespace_name)
    script = f"echo '{{\"loss\": 2.1, \"memory(GiB)\": 22.9}}'; echo '{CUDA_OOM_TEXT}' >&2; exit 1"
    small = {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"memory": "32Mi"}}
    job = submit(backend, profile, "oom", args, ["sh", "-c", script, "swift"], resources=small)
    memory.on_submit(profile, job)

    until(ended(backend, profile, "oom", with_exit_code=True), 120, "the job to fail")
    shown = memory.decorate(profile, backend.get_job(profile, "oom"))
    assert shown["phase"] == "Failed" and shown["exitCode"] == 1, shown
    assert shown["reason"] == "OutOfMemory", shown
    assert shown["memory"]["outOfMemory"] is True
    assert shown["message"].startswith("CUDA out of memory: estimated"), shown["message"]
    assert "job.retry()" in shown["message"] and "exited with code 1" in shown["message"], shown["message"]

    planning = Planning(None, backend, memory, lambda who, namespace: profile, "upper")
    replanned = planning.replan(None, namespace_name, "oom")
    note = "this configuration ran out of GPU memory in job oom"
    refused = [r for r in replanned["rejected"] if note in r["plan"]["estimate"]["assumptions"]]
    assert len(refused) == 1, replanned["rejected"]
    assert replanned["recommended"] is not None and note not in replanned["recommended"]["estimate"]["assumptions"]
    summary = replanned["recommended"]["summary"]
    print(f"\nCUDA out of memory: {shown['reason']}: {shown['message']}; re-planned: {summary}")


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

    done = until(ended(backend, profile, "fails", with_exit_code=True), 120, "the failing job to end")
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


#: The preempted fine-tune's length: long enough that the lender's job comes in the middle of it.
PREEMPTED_STEPS = 16


def _priority_class(kube, name: str, value: int) -> None:
    body = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    kube.post("/apis/scheduling.k8s.io/v1/priorityclasses", body)


def test_a_best_effort_swift_sft_preempted_by_the_scheduler_is_requeued_and_resumes_from_its_checkpoint(
    node_cluster, kube, namespace_name, make_kube_backend, tiny, tmp_path
):
    """No Kueue: the scheduler's own priority preemption. Team a's best-effort fine-tune runs on
    the node's GPUs that team b leaves idle; team b's job needs all 8 of them, so the scheduler
    deletes the fine-tune's pod; the service sees the Preempted event, requeues the Job, and it
    resumes from its last checkpoint on the volume once team b's job is done."""
    tag = namespace_name.rsplit("-", 1)[1]
    low, high = f"jq-best-effort-{tag}", f"jq-normal-{tag}"
    _priority_class(kube, low, 100)
    _priority_class(kube, high, 1000)
    lender_ns = f"{namespace_name}-b"
    gate = tmp_path / "gate"
    gate.mkdir()
    os.chmod(gate, 0o777)
    try:
        work = {"name": "work", "mountPath": str(tiny), "hostPath": {"path": str(tiny), "type": "Directory"}}
        # the ResourceQuota of each namespace still counts its own pods: room for the preempted Job's
        # replacement pod (the Job controller's, deleted with the Job) beside the requeued one
        borrower = real_profile(
            namespace_name, volumes=[work], priorityClasses={"best-effort": low}, hard={GPU_KEY: "4"}
        )
        holder = {"name": "gate", "mountPath": "/gate", "hostPath": {"path": str(gate), "type": "Directory"}}
        lender = real_profile(
            lender_ns,
            image=kubenode.BUSYBOX_IMAGE,
            volumes=[holder],
            priorityClasses={"normal": high},
            hard={GPU_KEY: "8"},
        )
        apply_profiles([borrower, lender], kube)
        kubecluster.wait_quota_status(kube, namespace_name)
        kubecluster.wait_quota_status(kube, lender_ns)
        backend = make_kube_backend(job_image_pull_policy="Never")
        backend.requeuer.checkpoint_interval = 1.0
        data = tiny_swift.build_dataset(tiny / f"data-{tag}.jsonl", rows=64)
        out = tiny / "out" / namespace_name
        args = tiny_swift.swift_flags(tiny / "model", data, out, max_steps=PREEMPTED_STEPS)
        args[args.index("--save_steps") + 1] = "2"  # a checkpoint every other step
        # held after checkpoint-2 (the volume is the same path in the pod) until the preemption
        # has happened, so it comes mid-run however fast the machine
        release = tiny / f"released-{tag}"
        args += tiny_swift.hold_after_checkpoint(2, release, tiny / f"hold-{tag}.py")
        request = jobspec.parse_job_request(
            {"name": "tune", "args": args, "gpus": 1, "resources": RESOURCES, "priority": "best-effort"}, borrower
        )
        backend.submit(borrower, backend.build_job(borrower, request, "alice", ["swift", "sft"]), owner="alice")

        def checkpointed():
            job = backend.get_job(borrower, "tune")
            assert job["phase"] in ("Pending", "Running"), (job, backend.logs(borrower, "tune", 50))
            return any(out.glob("v*/checkpoint-*/trainer_state.json"))

        until(checkpointed, SWIFT_TIMEOUT, "a whole checkpoint on the volume")
        first_pod = pod_of(kube, namespace_name, "tune")
        assert first_pod["spec"]["priorityClassName"] == low and first_pod["spec"]["priority"] == 100
        script = "echo holding; while [ ! -e /gate/end ]; do sleep 0.2; done; echo done"
        small = {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"memory": "32Mi"}}
        submit(backend, lender, "mine", [], ["sh", "-c", script], resources=small, gpus=8)

        seen = set()

        def requeued():
            job = backend.get_job(borrower, "tune")
            seen.add(job.get("reason"))
            assert job["phase"] != "Succeeded", "the fine-tune ended before the scheduler preempted it"
            return job if [e["event"] for e in job.get("history", [])][-2:] == ["Preempted", "Requeued"] else None

        job = until(requeued, 180, "the service to requeue the preempted job")
        preempted, requeue = job["history"]
        assert (preempted["reason"], preempted["pod"]) == ("Preempted", first_pod["metadata"]["name"]), preempted
        assert f"Preempted by {lender_ns}/mine-" in preempted["message"], preempted["message"]
        checkpoint = requeue["checkpoint"]
        assert checkpoint and (Path(checkpoint) / "trainer_state.json").is_file(), requeue
        resumed_from = int(checkpoint.rsplit("-", 1)[1])
        assert 2 <= resumed_from <= preempted["step"] < PREEMPTED_STEPS, (resumed_from, preempted)
        release.touch()  # the resumed pod goes on to the end
        assert job["phase"] == "Pending" and job["reason"] == "Requeued", job
        assert f"it resumes from {checkpoint}" in job["message"], job["message"]
        until(lambda: backend.get_job(lender, "mine")["phase"] == "Running", 120, "the lender's job to run")
        uid = kube.get(f"/apis/batch/v1/namespaces/{namespace_name}/jobs/tune")["metadata"]["uid"]
        (new_pod,) = kube.get(f"/api/v1/namespaces/{namespace_name}/pods", labelSelector=f"controller-uid={uid}")[
            "items"
        ]
        command = new_pod["spec"]["containers"][0]["command"]
        assert command[-2:] == ["--resume_from_checkpoint", checkpoint], command
        assert new_pod["metadata"]["name"] != first_pod["metadata"]["name"]

        (gate / "end").write_text("")  # team b is done: its GPUs are idle again
        until(ended(backend, lender, "mine"), 120, "the lender's job to end")
        done = until(ended(backend, borrower, "tune"), SWIFT_TIMEOUT, "the resumed fine-tune to end")
        log = backend.logs(borrower, "tune", tail_lines=5000)
        assert done["phase"] == "Succeeded", (done, log[-3000:])
        assert [e["event"] for e in done["history"]] == ["Preempted", "Requeued", "Resumed"], done["history"]
        assert done["history"][-1]["checkpoint"] == checkpoint
        # the resumed pod's log goes on from the checkpoint's step to the end
        steps = swiftlog.parse_log(log).steps
        assert steps == list(range(resumed_from + 1, PREEMPTED_STEPS + 1)), (resumed_from, steps)
        evidence = {
            "preemptedPod": first_pod["metadata"]["name"],
            "reasonsSeen": sorted(r for r in seen if r),
            "history": done["history"],
            "resumedFromStep": resumed_from,
            "resumedPod": new_pod["metadata"]["name"],
            "resumedPodCommandTail": command[-2:],
            "resumedSteps": [steps[0], steps[-1]],
        }
        report = Path(os.environ.get("JUPYTER_QUOTA_TEST_OUTPUT", ROOT / "test-output")) / "kube"
        report.mkdir(parents=True, exist_ok=True)
        (report / "preemption.json").write_text(json.dumps(evidence, indent=1))
        print(f"\npreemption: {json.dumps(evidence)}")
    finally:
        for path in (
            f"/api/v1/namespaces/{lender_ns}",
            f"/apis/scheduling.k8s.io/v1/priorityclasses/{low}",
            f"/apis/scheduling.k8s.io/v1/priorityclasses/{high}",
        ):
            try:
                kube.delete(path)
            except Exception:  # noqa: BLE001 - not made, or gone already
                pass
