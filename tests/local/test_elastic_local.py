"""Elastic quota on the local backend: a best-effort job runs on borrowed GPUs, is preempted when
the lender wants them back (SIGTERM, grace, requeued), resumes from its last checkpoint, and a
window closing with ``onClose: preempt`` preempts what no longer fits."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime

from local_testing import GPU_KEY, TRAINER, UNTIL_CANCELLED, phase_is, wait_for, wait_log

from jupyter_quota import reasons
from jupyter_quota.backends.local import elasticpass
from jupyter_quota.jobspec import JobRequest, build_job
from jupyter_quota.profiles import TeamProfile

A = TeamProfile(team="a", users=["alice"], hard={GPU_KEY: "1"}, borrowingLimit={GPU_KEY: "1"})
B = TeamProfile(team="b", users=["bob"], hard={GPU_KEY: "1"})
GRACE = 5.0


def job(profile, name, priority, *trainer_args):
    one = {"nvidia.com/gpu": "1", "memory": "1Gi"}
    request = JobRequest(
        name=name,
        args=list(trainer_args),
        resources={"requests": {**one, "cpu": "1"}, "limits": one},
        priority=priority,
    )
    return build_job(profile, request, "alice", [sys.executable, TRAINER])


def events(job_json) -> list[str]:
    return [e["event"] for e in job_json.get("history", [])]


def test_a_borrowed_job_is_preempted_for_the_lender_requeued_and_resumed_from_its_checkpoint(make_backend, tmp_path):
    backend = make_backend(grace_period=GRACE)
    backend.use_profiles(lambda: [A, B])
    done, checkpoints = tmp_path / "done", tmp_path / "out"
    backend.submit(A, job(A, "mine", "normal", *UNTIL_CANCELLED), "alice")
    trainer = ("--steps", "3", "--more-steps", "2", "--save-to", str(checkpoints), "--until-file", str(done))
    borrower = backend.submit(A, job(A, "borrower", "best-effort", *trainer), "alice")
    assert (borrower["phase"], borrower["priority"], borrower["borrowed"]) == ("Running", "best-effort", True)
    assert events(borrower) == ["Borrowed"]
    wait_log(backend, A, "borrower", "ready")

    lender = backend.submit(B, job(B, "lender", "normal", *UNTIL_CANCELLED), "bob")
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


def test_a_window_closing_with_preempt_requeues_the_jobs_over_the_base_quota(make_backend, monkeypatch):
    window = {
        "name": "evening",
        "days": ["Mon"],
        "start": "18:00",
        "end": "20:00",
        "extra": {GPU_KEY: "1"},
        "onClose": "preempt",
    }
    team = TeamProfile(team="a", users=["alice"], hard={GPU_KEY: "1"}, windows=[window])
    clock = {"now": datetime(2026, 11, 30, 19, 0, tzinfo=UTC)}  # a Monday, in the window
    monkeypatch.setattr(elasticpass, "now", lambda: clock["now"])
    backend = make_backend(grace_period=GRACE)
    backend.use_profiles(lambda: [team])
    assert backend.balance(team)["resources"][GPU_KEY]["hard"] == "2"
    first = backend.submit(team, job(team, "first", "normal", *UNTIL_CANCELLED), "alice")
    second = backend.submit(team, job(team, "second", "normal", *UNTIL_CANCELLED), "alice")
    assert first["phase"] == second["phase"] == "Running"

    clock["now"] = datetime(2026, 11, 30, 20, 0, tzinfo=UTC)  # the window closes
    assert backend.balance(team)["resources"][GPU_KEY]["hard"] == "1"
    backend.schedule()
    closing = backend.get_job(team, "second")
    assert (closing["phase"], closing["reason"]) == ("Running", reasons.WINDOW_CLOSED)
    requeued = wait_for(backend, team, "second", phase_is("Pending"))
    assert events(requeued) == ["Preempted", "Requeued"]
    assert "starts again from the beginning" in requeued["history"][-1]["message"]  # it saved no checkpoint
    assert requeued["reason"] in (reasons.REQUEUED, reasons.WAITING_FOR_QUOTA)
    assert backend.get_job(team, "first")["phase"] == "Running"
    backend.cancel(team, "first", "alice")
    backend.cancel(team, "second", "alice")
