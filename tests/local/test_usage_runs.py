"""Usage on the local backend counts each run of a job, not the time a preempted job waited
requeued: one preempted after running T1, waiting W and resumed for T2 is charged T1 + T2."""

from __future__ import annotations

import sqlite3
import time

import pytest
from local_testing import GPU_KEY, UNTIL_CANCELLED, Profile, make_job, phase_is, priority_job, wait_for

from jupyter_quota import usage
from jupyter_quota.backends.local import clock
from jupyter_quota.profiles import TeamProfile

A = TeamProfile(team="a", users=["alice"], hard={GPU_KEY: "1"}, borrowingLimit={GPU_KEY: "1"})
B = TeamProfile(team="b", users=["bob"], hard={GPU_KEY: "1"})
T0 = usage.parse_time("2026-11-30T08:00:00Z", "t0")
T1, W, T2 = 600, 3600, 900  # ran 10 min, waited requeued an hour, ran 15 min more


def job(profile, name, priority):
    return priority_job(profile, name, priority, *UNTIL_CANCELLED, cpu="2")


@pytest.fixture
def at(monkeypatch):
    """Set the local backend's clock (what it writes as start, requeue and end times)."""
    now = {"t": T0}
    monkeypatch.setattr(clock, "now", lambda: usage.format_time(now["t"]))

    def move(t: int) -> None:
        now["t"] = t

    return move


def charged(backend, since: int, until: int, now: int) -> dict[str, dict]:
    """``by=job`` usage of the window as the REST route computes it, per job name."""
    window = usage.Window(since, until, by="job")
    rows = usage.rows_json(usage.integrate(backend.usage_spans(since, until), window, now), window)
    return {row["job"]: row for row, _ in rows}


def test_a_preempted_and_resumed_job_is_charged_its_runs_not_its_wait(make_backend, at):
    backend = make_backend(grace_period=5.0)
    backend.use_profiles(lambda: [A, B])
    backend.submit(A, job(A, "mine", "normal"), "alice")
    borrower = backend.submit(A, job(A, "borrower", "best-effort"), "alice")
    assert (borrower["phase"], borrower["borrowed"]) == ("Running", True)

    at(T0 + T1)  # the lender takes its GPU back: the borrower is preempted and requeued now
    backend.submit(B, job(B, "lender", "normal"), "bob")
    wait_for(backend, A, "borrower", phase_is("Pending"))
    wait_for(backend, B, "lender", phase_is("Running"))

    at(T0 + T1 + W)  # the lender is done: the borrower runs again from now
    backend.cancel(B, "lender", "bob")
    resumed = wait_for(backend, A, "borrower", phase_is("Running"))
    assert resumed["startedAt"] == usage.format_time(T0)  # the job's first start, as a Job's startTime

    end = T0 + T1 + W + T2
    rows = charged(backend, T0 - 60, end + 60, now=end)
    assert rows["borrower"]["gpuSeconds"] == T1 + T2  # not T1 + W + T2
    assert rows["borrower"]["cpuSeconds"] == 2 * (T1 + T2)
    assert rows["borrower"]["memoryGibSeconds"] == T1 + T2
    # A window that cuts through both runs counts the part of each inside it.
    cut = charged(backend, T0 + T1 // 2, T0 + T1 + W + T2 // 2, now=end)
    assert cut["borrower"]["gpuSeconds"] == T1 // 2 + T2 // 2
    # The wait alone costs nothing.
    assert "borrower" not in charged(backend, T0 + T1, T0 + T1 + W, now=end)
    backend.cancel(A, "borrower", "alice")
    backend.cancel(A, "mine", "alice")


def test_a_job_that_ran_once_has_one_run_from_its_start_to_its_finish_kept_when_pruned(make_backend, at):
    backend, profile = make_backend(retention_seconds=-1, retention_count=0), Profile()
    at(int(time.time()) - 3600)  # it starts an hour ago (its end is its exit record's: now), so it held something
    backend.submit(profile, make_job("once", "--lines", "1", cpu="2"), owner="alice")
    done = wait_for(backend, profile, "once", phase_is("Succeeded"))
    before = _runs(make_backend.ledger_path)
    assert before == [("once", 1, done["startedAt"], done["finishedAt"])]
    assert backend.prune() == 1  # into job_history: the run stays, and so does its usage
    assert _runs(make_backend.ledger_path) == before
    start, end = usage.parse_time(done["startedAt"], "s"), usage.parse_time(done["finishedAt"], "f")
    rows = charged(backend, start - 60, end + 60, now=end + 60)
    assert rows["once"]["cpuSeconds"] == 2 * (end - start)


def _runs(ledger_path):
    con = sqlite3.connect(ledger_path)
    try:
        return con.execute("SELECT name, run, started_at, ended_at FROM job_runs ORDER BY job_id, run").fetchall()
    finally:
        con.close()
