"""The kube backend's usage records (``backends/kube/usagestore.py``): idempotent per pod uid."""

from __future__ import annotations

from jupyter_quota import labels, usage
from jupyter_quota.backends.kube.usagestore import UsageStore, pod_record

T0 = "2026-11-30T10:00:00Z"


def pod(uid="u1", phase="Running", finished=None, started=T0):
    status = {"phase": phase, "startTime": started}
    if finished:
        status["containerStatuses"] = [{"name": "train", "state": {"terminated": {"finishedAt": finished}}}]
    job_labels = {labels.TEAM: "a", labels.USER: "ann", labels.JOB: "j"}
    return {
        "metadata": {"uid": uid, "namespace": "team-a", "labels": job_labels},
        "spec": {"containers": [{"name": "train", "resources": {"requests": {"cpu": "500m", "memory": "1Gi",
                                                                          "nvidia.com/gpu": "2"}}}]},
        "status": status,
    }  # fmt: skip


def test_a_pod_counts_its_requests_from_start_to_its_containers_finish():
    record = pod_record(pod(phase="Succeeded", finished="2026-11-30T10:01:40Z"), owner="ann@example.org")
    span = record.span
    assert (span.user, span.job, span.end - span.start) == ("ann@example.org", "j", 100)
    assert (span.gpus_milli, span.cpu_milli, span.memory_milli) == (2000, 500, 1000 * usage.GIB)
    assert pod_record(pod(started=None)) is None  # not started: held nothing


def test_seeing_a_pod_again_changes_nothing_and_a_finish_never_moves(tmp_path):
    store = UsageStore(str(tmp_path / "usage.sqlite3"))
    running = pod_record(pod())
    store.record([running, running])
    store.record([pod_record(pod(phase="Succeeded", finished="2026-11-30T10:01:40Z"))])
    store.record([running, pod_record(pod(phase="Succeeded", finished="2026-11-30T11:00:00Z"))])
    store.finish(["u1"], at=2_000_000_000)
    store.close()
    again = UsageStore(str(tmp_path / "usage.sqlite3"))  # a restart reads what was written
    spans = again.spans(0, 2**40)
    assert [(s.end - s.start) for s in spans] == [100]
    assert again.running() == {}


def test_a_pod_gone_without_a_finish_is_finished_when_seen_gone(tmp_path):
    store = UsageStore(str(tmp_path / "usage.sqlite3"))
    store.record([pod_record(pod("u1")), pod_record(pod("u2"))])
    assert store.running() == {"u1": "team-a", "u2": "team-a"}
    start = pod_record(pod()).span.start
    store.finish(["u2"], at=start + 30)
    assert {s.end for s in store.spans(0, 2**40)} == {None, start + 30}
    assert store.spans(0, 2**40, namespaces={"team-b"}) == []
