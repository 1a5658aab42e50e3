"""Elastic quota on the local backend: a best-effort job runs on borrowed GPUs, is preempted when
the lender wants them back (SIGTERM, grace, requeued), resumes from its last checkpoint, and a
window closing with ``onClose: preempt`` preempts what no longer fits."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime

from local_testing import GPU_KEY, TRAINER, UNTIL_CANCELLED, phase_is, priority_job, wait_for, wait_log

from jupyter_quota import audit, reasons
from jupyter_quota.config import JupyterQuota
from jupyter_quota.identity import Identity
from jupyter_quota.profiles import TeamProfile
from jupyter_quota.service.app import build_service

A = TeamProfile(team="a", users=["alice"], hard={GPU_KEY: "1"}, borrowingLimit={GPU_KEY: "1"})
B = TeamProfile(team="b", users=["bob"], hard={GPU_KEY: "1"})
GRACE = 5.0


def events(job_json) -> list[str]:
    return [e["event"] for e in job_json.get("history", [])]


def test_a_borrowed_job_is_preempted_for_the_lender_requeued_and_resumed_from_its_checkpoint(
    make_backend, tmp_path, request
):
    backend = make_backend(grace_period=GRACE)
    backend.use_profiles(lambda: [A, B])
    done, checkpoints = tmp_path / "done", tmp_path / "out"
    request.addfinalizer(done.touch)  # the borrower ends even when an assertion fails before it is told to
    backend.submit(A, priority_job(A, "mine", "normal", *UNTIL_CANCELLED), "alice")
    trainer = ("--steps", "3", "--more-steps", "2", "--save-to", str(checkpoints), "--until-file", str(done))
    borrower = backend.submit(A, priority_job(A, "borrower", "best-effort", *trainer), "alice")
    assert (borrower["phase"], borrower["priority"], borrower["borrowed"]) == ("Running", "best-effort", True)
    assert events(borrower) == ["Borrowed"]
    wait_log(backend, A, "borrower", "ready")

    lender = backend.submit(B, priority_job(B, "lender", "normal", *UNTIL_CANCELLED), "bob")
    asked = time.monotonic()
    assert (lender["phase"], lender["reason"]) == ("Pending", reasons.WAITING_FOR_PREEMPTION)
    preempting = backend.get_job(A, "borrower")
    assert (preempting["phase"], preempting["reason"]) == ("Running", reasons.RECLAIMED)
    assert "at step 3" in preempting["message"] and "team-b reclaimed" in preempting["message"]

    requeued = wait_for(backend, A, "borrower", phase_is("Pending"))
    assert events(requeued) == ["Borrowed", "Preempted", "Requeued"]
    assert f"resumes from {checkpoints / 'checkpoint-3'}" in requeued["history"][-1]["message"]
    assert requeued["history"][-1]["checkpoint"] == str(checkpoints / "checkpoint-3")
    # then it waits as any best-effort job does, for idle GPUs to borrow
    assert requeued["reason"] in (reasons.REQUEUED, reasons.WAITING_FOR_BORROWING)
    preempted = requeued["history"][1]
    assert (preempted["step"], preempted["reason"]) == (3, reasons.RECLAIMED)
    running = wait_for(backend, B, "lender", phase_is("Running"))
    # the fake trainer dies of SIGTERM at once: the lender runs after one more pass, well within the grace
    assert time.monotonic() - asked < GRACE + 30, "the lender waited longer than the grace period and a pass"
    assert running["borrowed"] is False

    backend.cancel(B, "lender", "bob")
    resumed = wait_for(backend, A, "borrower", phase_is("Running"))
    assert events(resumed) == ["Borrowed", "Preempted", "Requeued", "Resumed", "Borrowed"]  # borrowed again
    assert resumed["history"][-2]["checkpoint"] == str(checkpoints / "checkpoint-3")
    wait_log(backend, A, "borrower", f"resuming from {checkpoints / 'checkpoint-3'}")
    done.touch()
    finished = wait_for(backend, A, "borrower", phase_is("Succeeded", "Failed"))
    assert finished["phase"] == "Succeeded", finished
    log = backend.logs(A, "borrower", 1000)
    steps = [
        int(line.split("'global_step/max_steps': '")[1].split("/")[0])
        for line in log.splitlines()
        if "global_step" in line
    ]
    assert steps == [1, 2, 3, 4, 5], log  # one log, the steps going on from the checkpoint
    backend.cancel(A, "mine", "alice")


def test_a_window_closing_with_preempt_requeues_the_job_over_the_base_quota_and_audits_it(tmp_path):
    window = {
        "name": "evening",
        "days": ["Mon"],
        "start": "18:00",
        "end": "20:00",
        "extra": {GPU_KEY: "1"},
        "onClose": "preempt",
    }
    config = JupyterQuota()
    config.state_dir = str(tmp_path / "state")
    config.inventory = {"gpus": 2, "cpu": "8", "memory": "16Gi"}
    config.job_command = [sys.executable, TRAINER]
    config.cancel_grace_period = GRACE
    config.profiles = [{"team": "a", "users": ["alice"], "hard": {GPU_KEY: "1"}, "windows": [window]}]
    service = build_service(config)
    clock = {"now": datetime(2026, 11, 30, 19, 0, tzinfo=UTC).timestamp()}  # a Monday, in the window
    service.clock = lambda: clock["now"]
    alice = Identity("alice")
    try:
        assert service.balance(alice, "team-a")["resources"][GPU_KEY]["hard"] == "2"
        for name in ("first", "second"):
            job = service.submit(alice, "team-a", {"name": name, "args": list(UNTIL_CANCELLED), "gpus": 1})
            assert job["phase"] == "Running", job

        clock["now"] = datetime(2026, 11, 30, 20, 0, tzinfo=UTC).timestamp()  # the window closes
        assert service.balance(alice, "team-a")["resources"][GPU_KEY]["hard"] == "1"
        service.backend.schedule()
        closing = service.get_job(alice, "team-a", "second")
        assert (closing["phase"], closing["reason"]) == ("Running", reasons.WINDOW_CLOSED)
        requeued = _wait(service, alice, "second", "Pending")
        assert [e["event"] for e in requeued["history"]] == ["Preempted", "Requeued"]
        assert "starts again from the beginning" in requeued["history"][-1]["message"]  # no checkpoint
        assert requeued["reason"] in (reasons.REQUEUED, reasons.WAITING_FOR_QUOTA)
        assert service.get_job(alice, "team-a", "first")["phase"] == "Running"
        (entry,) = [e for e in audit.entries(config.state_dir) if e["action"] == audit.WINDOW_PREEMPTED]
        assert entry["who"] == audit.SYSTEM and entry["target"] == "job/team-a/second"
        assert "window of namespace team-a closed" in entry["detail"]
    finally:
        for name in ("first", "second"):
            service.cancel(alice, "team-a", name)
            _wait(service, alice, name, "Failed")
        service.close()


def _wait(service, who, name, phase, timeout=120.0):
    deadline = time.monotonic() + timeout
    while True:
        service.backend.reap()
        job = service.get_job(who, "team-a", name)
        if job["phase"] == phase:
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.05)
