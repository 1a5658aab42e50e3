"""Cancel (``backend.cancel``): SIGTERM to the whole job, SIGKILL after the grace period, Pending and
finished jobs."""

from __future__ import annotations

import os
import signal
import sqlite3
import time

import pytest
from local_testing import (
    GPU_KEY,
    NO_GPUS,
    UNTIL_CANCELLED,
    Profile,
    ledger_rows,
    make_job,
    phase_is,
    wait_for,
    wait_log,
)

from jupyter_quota import errors
from jupyter_quota.backends.local import procfs


def _live_group_members(pgid):
    """Pids of processes in group ``pgid`` that are not zombies (an orphan's reaping may lag)."""
    live = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            live.append(int(entry))
    return live


def test_cancel_sends_sigterm_to_the_process_group(make_backend):
    # A grace period no loaded machine outlasts: the exit code, not a stopwatch, shows that
    # SIGTERM ended the job (a SIGKILL would give 128 + 9).
    backend, profile = make_backend(grace_period=3600), Profile()
    backend.submit(profile, make_job("ft-1", *UNTIL_CANCELLED), owner="alice")
    wait_log(backend, profile, "ft-1", "ready")
    backend.cancel(profile, "ft-1", by="bob")
    job = wait_for(backend, profile, "ft-1", phase_is("Succeeded", "Failed"))
    assert (job["phase"], job["reason"], job["message"]) == ("Failed", "Cancelled", "cancelled by bob")
    assert job["exitCode"] == 128 + signal.SIGTERM
    assert _live_group_members(ledger_rows(make_backend.ledger_path)[0]["pid"]) == []
    assert backend.balance(profile)["resources"][GPU_KEY]["used"] == "0"


def test_cancel_kills_a_job_that_ignores_sigterm_after_the_grace_period(make_backend):
    # The grace period is an hour, and the test ends it (the deadline is in the ledger), so no
    # stopwatch races a loaded machine: a cancel that waited for the grace period would not
    # return, and a SIGKILL before the deadline would end the job before the test moves it.
    backend, profile = make_backend(grace_period=3600), Profile()
    backend.submit(profile, make_job("stubborn", "--ignore-term", *UNTIL_CANCELLED), owner="alice")
    wait_log(backend, profile, "stubborn", "ready")
    pid = ledger_rows(make_backend.ledger_path)[0]["pid"]
    job = backend.cancel(profile, "stubborn", by="bob")  # returns: not held for the grace period
    assert (job["phase"], job["reason"]) == ("Running", "Terminating")
    assert job["message"].startswith("cancelled by bob")
    time.sleep(0.3)  # time for the SIGTERM to arrive; a slow machine only makes the check weaker
    backend.reap()
    assert backend.get_job(profile, "stubborn")["phase"] == "Running"  # SIGTERM ignored
    con = sqlite3.connect(make_backend.ledger_path)
    with con:  # the grace period is over
        con.execute("UPDATE jobs SET kill_after = 0 WHERE name = 'stubborn'")
        con.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
    con.close()
    job = wait_for(backend, profile, "stubborn", phase_is("Succeeded", "Failed"))
    assert (job["phase"], job["reason"], job["message"]) == ("Failed", "Cancelled", "cancelled by bob")
    assert job["exitCode"] == 128 + signal.SIGKILL
    assert _live_group_members(pid) == []  # the whole group is dead (zombies aside)


def test_cancel_a_pending_job_marks_it_and_a_finished_one_is_unchanged(make_backend):
    backend, profile = make_backend(NO_GPUS), Profile()
    backend.submit(profile, make_job("waiting"), owner="alice")
    job = backend.cancel(profile, "waiting", by="bob")
    assert (job["phase"], job["reason"], job["message"]) == ("Failed", "Cancelled", "cancelled by bob")
    assert job["finishedAt"].endswith("Z")
    assert backend.cancel(profile, "waiting", by="carol") == job  # idempotent
    with pytest.raises(errors.NotFound, match=r'jobs\.batch "ghost" not found'):
        backend.cancel(profile, "ghost", by="bob")


def test_cancel_after_the_job_ended_unrecorded_reports_how_it_really_ended(make_backend):
    backend, profile = make_backend(), Profile()
    backend.submit(profile, make_job("done", "--exit", "0"), owner="alice")
    row = ledger_rows(make_backend.ledger_path)[0]
    proc = procfs.ProcessId(row["pid"], row["pid_start"], row["boot_id"])
    deadline = time.monotonic() + 60
    while procfs.is_running(proc):  # ended, but no reap has recorded it
        assert time.monotonic() < deadline
        time.sleep(0.01)
    job = backend.cancel(profile, "done", by="bob")
    assert (job["phase"], job["exitCode"]) == ("Succeeded", 0)
