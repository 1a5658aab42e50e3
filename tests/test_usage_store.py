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


def test_a_pod_finished_for_being_unseen_takes_its_real_finish_or_runs_on_when_seen_again(tmp_path):
    """A finish inferred from a pod missing from the cache (a re-list in flight after a restart:
    CI saw a pod that ran 8 s counted as 10 s) gives way to what the pod itself says when it is
    seen again: its containers' finish, or that it still runs. An exact finish never moves."""
    store = UsageStore(str(tmp_path / "usage.sqlite3"))
    store.record([pod_record(pod("u1")), pod_record(pod("u2"))])
    start = pod_record(pod()).span.start
    store.finish(["u1", "u2"], at=start + 120)  # both missing from one sweep
    store.record([pod_record(pod("u1", phase="Succeeded", finished="2026-11-30T10:01:40Z"))])
    store.record([pod_record(pod("u2"))])  # still running after all
    assert {s.end for s in store.spans(0, 2**40)} == {start + 100, None}
    assert store.running() == {"u2": "team-a"}
    store.record([pod_record(pod("u1", phase="Succeeded", finished="2026-11-30T11:00:00Z"))])
    assert {s.end for s in store.spans(0, 2**40)} == {start + 100, None}  # exact: never moved again


class _StartingWatch:
    """A namespaced pods cache whose team-a watch starts and syncs while the recorder reads it:
    the read finds nothing, the check right after would find the watch synced (after a restart)."""

    namespaced = True

    def __init__(self, items):
        self.started, self._items = False, items

    def __getitem__(self, kind):
        return self

    def namespaces(self):
        listed = ["team-a"] if self.started else []
        self.started = True  # the watch comes up just after this read
        return listed

    def items(self, namespace):
        return self._items

    def reflectors(self, namespace):
        return ["pods"] if self.started else []

    def synced(self, kinds, namespace):
        return self.started

    def get(self, namespace, name):
        return None


def test_a_watch_that_starts_during_a_sweep_does_not_make_its_pods_look_gone(tmp_path):
    import logging

    from jupyter_quota.backends.kube.usagerecorder import UsageRecorder

    store = UsageStore(str(tmp_path / "usage.sqlite3"))
    store.record([pod_record(pod("u1"))])  # recorded running before a restart
    recorder = UsageRecorder(_StartingWatch([pod("u1")]), store, logging.getLogger("test"))
    recorder.sweep(now=pod_record(pod()).span.start + 500)
    assert store.running() == {"u1": "team-a"}, "judged gone by a watch that was not there when read"
    recorder.sweep(now=pod_record(pod()).span.start + 600)  # now the watch is there, and the pod in it
    assert store.running() == {"u1": "team-a"}
