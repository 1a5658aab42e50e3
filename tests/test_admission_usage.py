"""Admission counts what the ledger holds, whoever wrote it (``backends.local.quotausage``).

A job admitted or cancelled by another backend on the same ledger (another server process) counts
at the next admission, and nothing of a transaction rolled back does. And the quotas admission's
copy of a namespace's usage gives must be exactly those ``admission.quotas_with_status`` reads
from the ledger's rows, quantity formats and scopes included.
"""

from __future__ import annotations

import random
import threading
import time
from datetime import datetime

import pytest
from local_testing import GPU_KEY, NO_GPUS, NS, Profile, make_backend, make_job  # noqa: F401 - fixture

from jupyter_quota import errors, podresources, quota
from jupyter_quota.backends.local import admission, ledger, quotausage

REFUSED_AT_TWO = (
    "exceeded quota: a-quota, requested: requests.nvidia.com/gpu=1, "
    "used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2"
)


def test_a_job_admitted_or_cancelled_by_another_server_counts_at_the_next_admission(make_backend):
    ours, theirs, profile = make_backend(NO_GPUS), make_backend(NO_GPUS), Profile(hard={GPU_KEY: "2"})
    ours.submit(profile, make_job("one"), owner="alice")  # our copy of the namespace is read now
    theirs.submit(profile, make_job("two"), owner="bob")
    with pytest.raises(errors.AdmissionDenied) as refused:
        ours.submit(profile, make_job("three"), owner="alice")
    assert refused.value.message == REFUSED_AT_TWO  # their job counts: no over-admission
    theirs.cancel(profile, "two", by="bob")
    assert ours.submit(profile, make_job("three"), owner="alice")["phase"] == "Pending"  # freed quota is usable
    with pytest.raises(errors.AdmissionDenied) as refused:
        theirs.submit(profile, make_job("four"), owner="bob")
    assert refused.value.message == REFUSED_AT_TWO


def test_a_rolled_back_transaction_leaves_nothing_in_the_copy(make_backend, monkeypatch):
    backend, profile = make_backend(NO_GPUS), Profile(hard={GPU_KEY: "2"})
    backend.submit(profile, make_job("first", gpus=0), owner="alice")  # the copy holds the namespace
    lifecycle = backend._jobs
    outcomes = {}

    def fail(con, launches):
        raise RuntimeError("the pass broke the transaction")

    def submit(name):
        try:
            outcomes[name] = backend.submit(profile, make_job(name), owner="alice")["phase"]
        except RuntimeError as e:
            outcomes[name] = str(e)

    monkeypatch.setattr(lifecycle, "_guarded_pass", fail)
    with lifecycle._lock:  # both wait for one transaction: the second admission sees the first
        threads = [threading.Thread(target=submit, args=(name,)) for name in ("one", "two")]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while len(lifecycle._queue) < 2:
            assert time.monotonic() < deadline, "the submissions never queued"
            time.sleep(0.01)
    for thread in threads:
        thread.join(30)
    assert outcomes == {"one": "the pass broke the transaction", "two": "the pass broke the transaction"}
    monkeypatch.undo()
    # Neither stands, so both GPUs are free.
    assert backend.submit(profile, make_job("both", gpus=2), owner="alice")["phase"] == "Pending"


def _job(rng: random.Random, name: str) -> dict:
    """A Job whose pod mixes quantity formats and scopes (best effort, deadline, priority class)."""
    job = make_job(
        name,
        gpus=rng.choice([0, 0, 1]),
        cpu=rng.choice(["1", "500m", "0.5", "01", "2"]),
        memory=rng.choice(["1Gi", "1G", "1500M", "512Mi", "0"]),
    )
    pod = job["spec"]["template"]["spec"]
    if rng.random() < 0.2:
        pod["containers"][0]["resources"] = {}  # BestEffort
    if rng.random() < 0.3:
        pod["activeDeadlineSeconds"] = 3600  # Terminating
    if rng.random() < 0.3:
        pod["priorityClassName"] = rng.choice(["high", "low", "low", "rare"])
    return job


SCOPED = [
    {
        "spec": {
            "hard": {
                "pods": "100",
                "requests.cpu": "100",
                "limits.memory": "1Ti",
                "requests.memory": "1Ti",
                GPU_KEY: "10",
                "count/jobs.batch": "100",
                "count/pods": "100",
            }
        }
    },
    {"spec": {"hard": {"pods": "100"}, "scopes": ["BestEffort"]}},
    {"spec": {"hard": {"requests.cpu": "100", "limits.memory": "1Ti"}, "scopes": ["NotBestEffort", "Terminating"]}},
    {"spec": {"hard": {"requests.memory": "1Ti", GPU_KEY: "10"}, "scopes": ["NotTerminating"]}},
    {
        "spec": {
            "hard": {"requests.cpu": "100", "pods": "100"},
            "scopeSelector": {
                "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]
            },
        }
    },
    {
        "spec": {
            "hard": {"requests.cpu": "100"},  # few jobs, often one: its amount's text is kept verbatim
            "scopeSelector": {
                "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["rare"]}]
            },
        }
    },
]


def test_the_copy_gives_the_quotas_the_ledger_rows_give(tmp_path):
    """Jobs come and go in random order; after each change both ways agree to the string."""
    book, rng, profile = ledger.Ledger(tmp_path / "ledger.sqlite"), random.Random(14), Profile()
    quotas = [dict(q, metadata={"name": f"q{i}", "namespace": NS}) for i, q in enumerate(SCOPED)]
    copy = quotausage.QuotaUsage()
    live: list[int] = []
    for step in range(150):
        if step == 75:  # the profile changes: a quota with scopes the copy has not summed yet
            quotas = [
                *quotas,
                {
                    "metadata": {"name": "late", "namespace": NS},
                    "spec": {"hard": {"requests.memory": "1Ti"}, "scopes": ["NotBestEffort"]},
                },
            ]
        with book.write() as con:
            action = rng.random()
            if live and action < 0.3:  # a job ends
                job_id = live.pop(rng.randrange(len(live)))
                con.execute("UPDATE jobs SET phase = 'Failed' WHERE id = ?", (job_id,))
            elif live and action < 0.45:  # a job starts: its phase changes, not what it charges
                ledger.update(con, rng.choice(live), "Pending", phase="Running", pid=1)
            else:
                job = _job(rng, f"job-{step}")
                ledger.insert(con, admission.job_row(profile, job, "alice", quota.admit_job(job, [], [])))
                live.append(con.execute("SELECT max(id) FROM jobs").fetchone()[0])
            if step % 3 == 0:  # sometimes in the transaction that wrote, sometimes after it
                rows = ledger.live_in_namespace(con, NS)
                assert copy.quotas_with_status(con, NS, quotas) == admission.quotas_with_status(quotas, rows)
        if step % 3 == 1:
            with book.write() as con:
                rows = ledger.live_in_namespace(con, NS)
                assert copy.quotas_with_status(con, NS, quotas) == admission.quotas_with_status(quotas, rows)
    assert len(live) > 20  # the namespace grew: the sums were kept up to date, not rebuilt


def test_one_job_shows_its_amount_as_written_and_more_their_canonical_sum(tmp_path):
    """As ``quota_status`` sums them: a single amount keeps its text ("01"), a sum is canonical."""
    book, profile, copy = ledger.Ledger(tmp_path / "ledger.sqlite"), Profile(), quotausage.QuotaUsage()
    quotas = [{"metadata": {"name": "q", "namespace": NS}, "spec": {"hard": {"requests.cpu": "10"}}}]
    shown = []
    for name in ("one", "two"):
        with book.write() as con:
            job = make_job(name, gpus=0, cpu="01")
            ledger.insert(con, admission.job_row(profile, job, "alice", quota.admit_job(job, [], [])))
            rows = ledger.live_in_namespace(con, NS)
            assert copy.quotas_with_status(con, NS, quotas) == admission.quotas_with_status(quotas, rows)
            shown.append(copy.quotas_with_status(con, NS, quotas)[0]["status"]["used"]["requests.cpu"])
    assert shown == ["01", "2"]


def test_a_job_charged_only_until_a_deadline_is_counted_from_the_rows(tmp_path, monkeypatch):
    """A pod with a ``deletionTimestamp`` stops charging when its grace ends: never cached."""
    book, profile, copy = ledger.Ledger(tmp_path / "ledger.sqlite"), Profile(), quotausage.QuotaUsage()
    quotas = [{"metadata": {"name": "q", "namespace": NS}, "spec": {"hard": {"requests.cpu": "10", "pods": "5"}}}]

    def used():
        with book.write() as con:
            got = copy.quotas_with_status(con, NS, quotas)
            assert got == admission.quotas_with_status(quotas, ledger.live_in_namespace(con, NS))
        return got[0]["status"]["used"]

    with book.write() as con:
        for name, stamp in (("kept", None), ("ending", "2050-01-01T00:00:00Z")):
            job = make_job(name, gpus=0, cpu="2")
            if stamp:
                job["spec"]["template"]["metadata"] = {"deletionTimestamp": stamp, "deletionGracePeriodSeconds": 30}
            ledger.insert(con, admission.job_row(profile, job, "alice", quota.admit_job(job, [], [])))
    assert used() == {"pods": "2", "requests.cpu": "4"}

    class Later(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2051, 1, 1, tzinfo=tz)

    monkeypatch.setattr(podresources, "datetime", Later)
    assert used() == {"pods": "1", "requests.cpu": "2"}  # its grace ended
