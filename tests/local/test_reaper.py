"""The reaper: jobs outlive the server and the next one records their end; lost jobs; the reaper
thread, its idle passes and storage outages."""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import threading
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


@pytest.mark.parametrize(("code", "phase"), [(0, "Succeeded"), (4, "Failed")])
def test_a_job_outlives_the_server_and_the_next_server_records_its_end(make_backend, tmp_path, code, phase):
    # The job ends when the test touches a file, after both servers saw it Running: a timer
    # could run out while a loaded machine is still between the two.
    release = tmp_path / "release"
    first, profile = make_backend(), Profile()
    first.start()  # with its reaper thread, as a server runs it
    first.submit(profile, make_job("long", "--until-file", str(release), "--exit", str(code)), owner="alice")
    assert first.get_job(profile, "long")["phase"] == "Running"
    pid = ledger_rows(make_backend.ledger_path)[0]["pid"]
    assert os.getsid(pid) == pid and os.getpgid(pid) == pid  # a session of its own
    first.close()  # the server stops; the job must not
    del first

    second = make_backend()
    assert second.get_job(profile, "long")["phase"] == "Running"
    second.reap()
    assert second.get_job(profile, "long")["phase"] == "Running"  # alive, not our child
    assert procfs.identify(pid) is not None
    release.touch()
    job = wait_for(second, profile, "long", phase_is("Succeeded", "Failed"))
    assert job["phase"] == phase and job["exitCode"] == code


def test_a_job_killed_while_no_server_runs_is_lost(make_backend):
    first, profile = make_backend(), Profile()
    first.submit(profile, make_job("doomed", *UNTIL_CANCELLED), owner="alice")
    wait_log(first, profile, "doomed", "ready")
    row = ledger_rows(make_backend.ledger_path)[0]
    proc = procfs.ProcessId(row["pid"], row["pid_start"], row["boot_id"])
    first.close()
    del first
    os.killpg(row["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 60
    while procfs.is_running(proc):
        assert time.monotonic() < deadline
        time.sleep(0.01)

    # The job's own process dies with its group too, a moment later; until the reaper sees none
    # of the job's processes left, the job is Running/Terminating and keeps its GPU.
    second = make_backend()
    deadline = time.monotonic() + 60
    while True:
        second.reap()
        job = second.get_job(profile, "doomed")
        if job["phase"] != "Running":
            break
        assert job["reason"] == "Terminating" and time.monotonic() < deadline, job
        time.sleep(0.02)
    assert (job["phase"], job["reason"]) == ("Failed", "Lost")
    assert "disappeared while the server was not watching" in job["message"]
    assert "exitCode" not in job
    assert second.balance(profile)["resources"][GPU_KEY]["used"] == "0"


def test_reaper_thread_records_ends_without_being_asked(make_backend):
    backend, profile = make_backend(poll_interval=0.05), Profile()
    backend.start()
    try:
        backend.submit(profile, make_job("quick"), owner="alice")
        deadline = time.monotonic() + 60
        while backend.get_job(profile, "quick")["phase"] != "Succeeded":
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        backend.close()


def test_a_missing_workdir_refuses_the_submit_and_fails_a_waiting_job_at_start(make_backend, tmp_path):
    workdir = tmp_path / "soon-gone"
    backend, profile = make_backend(workdir=str(workdir)), Profile(hard={GPU_KEY: "4"})
    with pytest.raises(errors.Forbidden, match=r"soon-gone .*does not exist"):
        backend.submit(profile, make_job("early"), owner="alice")
    assert ledger_rows(make_backend.ledger_path) == []  # refused before admission
    workdir.mkdir()
    release = tmp_path / "release"
    backend.submit(profile, make_job("first", "--until-file", str(release), gpus=2), owner="alice")
    assert backend.submit(profile, make_job("homeless"), owner="alice")["phase"] == "Pending"
    workdir.rmdir()  # gone while "homeless" waits for a GPU
    release.touch()
    job = wait_for(backend, profile, "homeless", phase_is("Succeeded", "Failed"))
    assert (job["phase"], job["reason"]) == ("Failed", "StartError")
    assert "soon-gone" in job["message"] and "does not exist" in job["message"]
    assert backend.balance(profile)["resources"][GPU_KEY]["used"] == "0"


def test_an_idle_reaper_takes_no_write_lock(make_backend, monkeypatch):
    backend, profile = make_backend(NO_GPUS), Profile()
    backend.submit(profile, make_job("stuck"), owner="alice")  # Pending: Unschedulable
    backend.reap()
    writes = []
    real = backend._ledger.write
    monkeypatch.setattr(backend._ledger, "write", lambda: writes.append(1) or real())
    for _ in range(5):
        backend.reap()
    assert writes == []
    make_backend(NO_GPUS).submit(profile, make_job("other"), owner="bob")
    backend.reap()  # the ledger changed: the next pass looks again
    assert len(writes) == 1
    assert backend.get_job(profile, "other")["reason"] == "Unschedulable"


def test_a_second_storage_outage_is_logged_again_after_the_reaper_recovers(make_backend, monkeypatch):
    """The reaper logs a full state dir once per outage, not once per pass, and not once ever: a
    pass that succeeds ends the outage. The ledger's failures are injected into the real reaper
    thread (a full disk needs a mount of its own; tests/test_state_dir.py does that end to end)."""
    records, done = [], threading.Event()
    log = logging.getLogger("test-storage-outage")
    log.propagate = False
    handler = logging.Handler()
    handler.emit = records.append
    log.addHandler(handler)
    backend = make_backend(poll_interval=0.01, log=log)
    real_reap = backend._jobs.reap
    # start()'s pass, then the thread's: full twice, recovered, full again, then fine for good.
    script = iter(["full", "full", "full", "ok", "full", "full"])

    def reap():
        step = next(script, None)
        if step is None:
            done.set()
        if step == "full":
            raise sqlite3.OperationalError("database or disk is full")
        real_reap()

    monkeypatch.setattr(backend._jobs, "reap", reap)
    backend.start()
    try:
        assert done.wait(60), "the reaper thread did not run the scripted passes"
    finally:
        backend.close()
        log.removeHandler(handler)
    warnings = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and "is full" in warnings[0] and warnings[0] == warnings[1], warnings
    assert not [r for r in records if r.levelno >= logging.ERROR], [r.getMessage() for r in records]
