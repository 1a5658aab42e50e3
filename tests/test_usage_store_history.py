"""The kube usage store as history (issue 21): submissions, Jobs that waited, quota refusals,
and a file written before these columns existed (``backends/kube/usagestore.py``)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from jupyter_quota import demand, history, labels
from jupyter_quota.backends.kube.usagestore import UsageStore, job_waiting, pod_record, refusal

T0 = 1_795_000_000  # epoch seconds
LIMITS = [{"spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "100m", "memory": "128Mi"}}]}}]


def stamp(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def job(uid="j1", name="train", gpus="1", parallelism=2, created=T0):
    meta_labels = {labels.TEAM: "a", labels.USER: "ann", labels.PRIORITY: "high"}
    container = {"name": "train", "resources": {"requests": {"nvidia.com/gpu": gpus}}}
    return {
        "metadata": {"uid": uid, "name": name, "namespace": "team-a", "labels": meta_labels,
                     "creationTimestamp": stamp(created)},
        "spec": {"parallelism": parallelism, "template": {"metadata": {"labels": meta_labels},
                                                           "spec": {"containers": [container]}}},
    }  # fmt: skip


def running_pod(uid="p1", started=T0 + 600):
    meta_labels = {labels.TEAM: "a", labels.USER: "ann", labels.JOB: "train"}
    return {
        "metadata": {"uid": uid, "namespace": "team-a", "labels": meta_labels},
        "spec": {"containers": [{"name": "train", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]},
        "status": {"phase": "Running", "startTime": stamp(started)},
    }


def test_a_job_that_waited_counts_from_its_submission_and_its_pods_carry_it(tmp_path):
    store = UsageStore(str(tmp_path / "usage.sqlite3"))
    waiting = job_waiting(job(), LIMITS, owner="ann@example.org")
    assert (waiting.span.gpus_milli, waiting.span.cpu_milli) == (2000, 200)  # 2 pods, LimitRange defaults
    store.wait([waiting, waiting])  # seen twice: one row
    (asked,) = store.records(T0, T0 + 3600)
    assert asked == history.JobRecord("a", "ann@example.org", T0, None, None, 2.0, 0.2, 2 * 128 * 2**20, "high")
    assert store.waiting() == {"j1": "team-a"}

    store.record([pod_record(running_pod(), "ann@example.org", submitted=T0)])
    store.started(["j1"], T0 + 600)  # from now on the pod's row counts, submitted with its Job
    (ran,) = store.records(T0, T0 + 3600)
    assert (ran.submitted, ran.started, ran.finished, ran.gpus) == (T0, T0 + 600, None, 1.0)
    assert ran.wait(T0 + 3600) == 600 and store.waiting() == {}
    store.wait([job_waiting(job(), LIMITS, end=T0 + 900)])  # an end seen later does not bring it back
    assert len(store.records(T0, T0 + 3600)) == 1


def test_a_job_deleted_before_it_started_asked_until_it_was_seen_gone(tmp_path):
    store = UsageStore(str(tmp_path / "usage.sqlite3"))
    store.wait([job_waiting(job(), LIMITS)])
    store.end_waiting(["j1"], T0 + 300)
    (asked,) = store.records(T0, T0 + 3600)
    assert (asked.started, asked.finished, asked.wait(T0 + 3600)) == (None, T0 + 300, 300)
    assert store.records(T0 + 300, T0 + 3600) == []  # over before this window


def test_a_job_missing_from_the_cache_for_a_moment_is_not_ended_for_good(tmp_path):
    # a re-list in flight: the sweep sees the Job gone, then it is back, waiting or started
    store = UsageStore(str(tmp_path / "usage.sqlite3"))
    store.wait([job_waiting(job(), LIMITS)])
    store.end_waiting(["j1"], T0 + 1)
    store.wait([job_waiting(job(), LIMITS)])  # seen again, still waiting
    assert [r.finished for r in store.records(T0, T0 + 3600)] == [None] and store.waiting() == {"j1": "team-a"}
    store.end_waiting(["j1"], T0 + 2)
    store.started(["j1"], T0 + 3)  # seen again, started: its pods' rows count, no phantom
    assert store.records(T0, T0 + 3600) == [] and store.waiting() == {}
    store.wait([job_waiting(job(uid="j2"), LIMITS, end=T0 + 5)])  # a real end stays
    store.started(["j2"], T0 + 6)
    assert [r.finished for r in store.records(T0, T0 + 3600)] == [T0 + 5]


def test_a_refusal_asks_until_the_users_retry_and_a_retry_does_not_add_demand(tmp_path):
    store = UsageStore(str(tmp_path / "usage.sqlite3"))
    store.refused(refusal(job(parallelism=1), LIMITS, "ann@example.org", T0 + 60))
    store.refused(refusal(job(parallelism=1), LIMITS, "ann@example.org", T0 + 120))  # retried: replaces
    store.refused(refusal(job(parallelism=1), LIMITS, "bob@example.org", T0 + 130))  # another user's
    store.submitted("team-a", "ann@example.org", T0 + 600)  # ann's job got in
    records = sorted(store.records(T0, T0 + 3600), key=lambda r: (r.user, r.submitted))
    assert [(r.user, r.submitted, r.started, r.finished) for r in records] == [
        ("ann@example.org", T0 + 60, None, T0 + 120),
        ("ann@example.org", T0 + 120, None, T0 + 600),
        ("bob@example.org", T0 + 130, None, None),  # never retried: asks to the end of the history
    ]
    step = demand.demand(records, T0, T0 + 3600, lambda r: r.gpus)
    assert max(step.values) == 2  # ann's one GPU once (her retries), and bob's
    assert store.waiting() == {}  # refusals are not Jobs to look for in the cluster


def test_a_file_written_before_the_history_columns_is_migrated_and_keeps_its_pods(tmp_path):
    path = str(tmp_path / "usage.sqlite3")
    con = sqlite3.connect(path)
    con.executescript(  # the first release's schema, without finish_inferred either
        """
        CREATE TABLE pods (uid TEXT PRIMARY KEY, namespace TEXT NOT NULL, team TEXT NOT NULL,
            user TEXT NOT NULL, job TEXT NOT NULL, gpus_milli INTEGER NOT NULL, cpu_milli INTEGER NOT NULL,
            memory_milli INTEGER NOT NULL, started_at INTEGER NOT NULL, finished_at INTEGER);
        """
    )
    con.execute("INSERT INTO pods VALUES ('old', 'team-a', 'a', 'ann', 'j', 1000, 0, 0, ?, ?)", (T0, T0 + 60))
    con.commit()
    con.close()
    store = UsageStore(path)
    (old,) = store.records(T0, T0 + 3600)
    assert (old.submitted, old.started, old.finished, old.priority) == (T0, T0, T0 + 60, "normal")  # no wait known
    assert [s.start for s in store.spans(T0, T0 + 3600)] == [T0]
    store.record([pod_record(running_pod(uid="new"), "ann", submitted=T0 + 100)])
    store.close()
    again = UsageStore(path)  # opening a migrated file again changes nothing
    assert sorted(r.submitted for r in again.records(T0, T0 + 3600)) == [T0, T0 + 100]


def test_a_job_that_never_started_waited_until_it_stopped_asking():
    cancelled = history.JobRecord("a", "ann", T0, None, T0 + 300, 1.0)
    assert cancelled.wait(T0 + 3600) == 300
    assert history.JobRecord("a", "ann", T0, None, None, 1.0).wait(T0 + 3600) == 3600
