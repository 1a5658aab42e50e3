"""The scheduler (``scheduler``): FIFO on freed GPUs, why a job waits, rows it cannot carry, incremental passes."""

from __future__ import annotations

import pytest
from local_testing import (
    GPU_KEY,
    INVENTORY,
    NO_GPUS,
    UNTIL_CANCELLED,
    Profile,
    insert_raw,
    make_job,
    phase_is,
    wait_for,
)

from jupyter_quota.backends.local import scheduler


def test_pending_jobs_start_fifo_on_freed_gpus_and_unschedulable_ones_say_why(make_backend):
    backend, profile = make_backend(), Profile(hard={GPU_KEY: "8"})
    for name in ("a", "b", "c"):
        backend.submit(profile, make_job(name, *UNTIL_CANCELLED), owner="alice")
    a, b, c = (backend.get_job(profile, n) for n in "abc")
    assert (a["phase"], a["gpuIndices"]) == ("Running", [0])
    assert (b["phase"], b["gpuIndices"]) == ("Running", [1])
    assert (c["phase"], c["reason"]) == ("Pending", "WaitingForResources")
    assert c["message"] == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."

    big = backend.submit(profile, make_job("big", gpus=3), owner="alice")
    assert (big["phase"], big["reason"]) == ("Pending", "Unschedulable")
    assert big["message"] == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    huge = backend.submit(profile, make_job("huge", gpus=0, cpu="64", memory="1Ti"), owner="alice")
    assert huge["message"] == "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."

    backend.cancel(profile, "a", by="alice")
    c = wait_for(backend, profile, "c", phase_is("Running"))
    assert c["gpuIndices"] == [0] and "reason" not in c
    assert backend.get_job(profile, "big")["reason"] == "Unschedulable"


@pytest.mark.parametrize(
    "requests",
    [
        {"ephemeral-storage": "1e200000"},
        {"cpu": "1e200000", "memory": "1Gi"},
        {"nvidia.com/gpu": "1e2147483647"},
    ],
)
def test_a_row_the_arithmetic_cannot_carry_fails_and_the_others_start(make_backend, requests):
    backend, profile = make_backend(NO_GPUS), Profile(hard={GPU_KEY: "8"})
    backend.submit(profile, make_job("first", *UNTIL_CANCELLED), owner="alice")  # waits: no GPUs here
    insert_raw(make_backend.ledger_path, "bad", requests)
    backend.submit(profile, make_job("second", *UNTIL_CANCELLED), owner="alice")
    assert backend.get_job(profile, "second")["reason"] == "Unschedulable"  # its pass was not stopped

    restarted = make_backend()  # a server with GPUs, starting on this ledger
    restarted.reap()
    assert [restarted.get_job(profile, n)["phase"] for n in ("first", "second")] == ["Running", "Running"]
    bad = restarted.get_job(Profile(team="b", namespace="team-b"), "bad")
    assert (bad["phase"], bad["reason"]) == ("Failed", "InvalidJob")
    resource = next(iter(requests))
    assert bad["message"].startswith(f"the job cannot be scheduled: resources.requests[{resource}]")
    assert "out of range" in bad["message"] and "finishedAt" in bad


def test_a_bad_row_written_while_a_server_runs_fails_without_stopping_its_passes(make_backend):
    backend, profile = make_backend(), Profile(hard={GPU_KEY: "8"})
    backend.submit(profile, make_job("first", *UNTIL_CANCELLED), owner="alice")
    insert_raw(make_backend.ledger_path, "bad", {"cpu": "1e200000"})
    second = backend.submit(profile, make_job("second", *UNTIL_CANCELLED), owner="alice")
    assert (second["phase"], second["gpuIndices"]) == ("Running", [1])
    assert backend.get_job(Profile(team="b", namespace="team-b"), "bad")["reason"] == "InvalidJob"


def test_a_pass_tries_only_new_jobs_until_capacity_frees(make_backend, monkeypatch):
    """Incremental scheduling: waiting jobs are not re-decided on every submission, and an end
    recorded by another server process (one without GPUs, so it starts nothing) is not missed."""
    backend, profile = make_backend(), Profile(hard={GPU_KEY: "100"})
    for name in ("a", "b"):
        backend.submit(profile, make_job(name, *UNTIL_CANCELLED), owner="alice")
    for i in range(5):
        backend.submit(profile, make_job(f"wait-{i}"), owner="alice")
    tried = []  # the jobs each pass of ``backend`` (the one with GPUs) tried
    real = scheduler.schedule

    def spy(inventory, running, pending):
        if inventory["gpus"]:
            tried.append([p.key for p in pending])
        return real(inventory, running, pending)

    monkeypatch.setattr(scheduler, "schedule", spy)
    late = backend.submit(profile, make_job("late"), owner="alice")
    assert late["reason"] == "WaitingForResources"
    assert [len(keys) for keys in tried] == [1]  # the new job only, not the five before it

    other = make_backend(NO_GPUS)
    other.cancel(profile, "a", by="alice")
    wait_for(other, profile, "a", phase_is("Failed"))
    job = wait_for(backend, profile, "wait-0", phase_is("Running"))
    assert job["gpuIndices"] == [0]
    assert len(tried[-1]) == 6  # capacity freed: every waiting job was tried, oldest first
    assert backend.get_job(profile, "wait-1")["reason"] == "WaitingForResources"


def test_scheduler_fit_is_pure_and_skips_what_does_not_fit():
    running = [scheduler.Running({"nvidia.com/gpu": "1", "cpu": "6"}, [1])]
    pending = [
        scheduler.Pending("too-much-cpu", {"cpu": "4"}),
        scheduler.Pending("gpu", {"nvidia.com/gpu": "1", "cpu": "1"}),
        scheduler.Pending("other-gpu", {"nvidia.com/gpu": "1"}),
        scheduler.Pending("foreign", {"example.com/fpga": "1"}),
    ]
    decisions = {d.key: d for d in scheduler.schedule(INVENTORY, running, pending)}
    assert decisions["too-much-cpu"].reason == "WaitingForResources"
    assert decisions["too-much-cpu"].message == "0/1 nodes are available: 1 Insufficient cpu."
    assert decisions["gpu"].start and decisions["gpu"].gpu_indices == [0]
    assert not decisions["other-gpu"].start
    assert decisions["foreign"].reason == "Unschedulable"
    assert decisions["foreign"].message == "0/1 nodes are available: 1 Insufficient example.com/fpga."
