"""A best-effort endpoint borrowing another team's GPU is preempted when the lender submits a
training job, as a best-effort job is (the real elastic pass of the local backend, real processes:
``fake_deploy.py`` serving, ``fake_trainer.py`` training): the endpoint says why, the lender's job
runs on its GPU, and the endpoint is requeued, starting again (probed again, Ready again) once
the GPU is free. Waits are on phases; each wait turns the backend and the endpoint watch by hand.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from local_testing import GPU_KEY, TRAINER, UNTIL_CANCELLED

from jupyter_quota import reasons
from jupyter_quota.config import JupyterQuota
from jupyter_quota.errors import Conflict
from jupyter_quota.identity import Identity
from jupyter_quota.service.app import build_service

FAKE_DEPLOY = str(Path(__file__).resolve().parent.parent / "fake_deploy.py")
ALICE, BOB = Identity("alice"), Identity("bob")
GRACE = 5.0


@pytest.fixture
def service(tmp_path):
    config = JupyterQuota()
    config.state_dir = str(tmp_path / "state")
    config.inventory = {"gpus": 2, "cpu": "8", "memory": "16Gi"}
    config.job_command = [sys.executable, TRAINER]
    config.deploy_command = [sys.executable, FAKE_DEPLOY]
    config.cancel_grace_period = GRACE
    config.profiles = [
        {"team": "a", "users": ["alice"], "hard": {GPU_KEY: "1"}, "borrowingLimit": {GPU_KEY: "1"}},
        {"team": "b", "users": ["bob"], "hard": {GPU_KEY: "1"}},
    ]
    service = build_service(config)
    yield service
    for who, ns, name in ((ALICE, "team-a", "mine"), (ALICE, "team-a", "chat"), (BOB, "team-b", "train")):
        try:
            service.cancel(who, ns, name)
        except Exception:  # noqa: BLE001 - never created, or ended already
            pass
    for who, ns, name in ((ALICE, "team-a", "mine"), (ALICE, "team-a", "chat"), (BOB, "team-b", "train")):
        try:
            until(service, lambda w=who, n=ns, j=name: service.get_job(w, n, j), lambda j: j["phase"] == "Failed")
        except Exception:  # noqa: BLE001 - never created
            pass
    service.close()


def until(service, read, done, timeout=120.0, watch=True):
    """``read()`` once ``done`` says so; each try reaps and schedules (and probes endpoints if ``watch``)."""
    deadline = time.monotonic() + timeout
    while True:
        service.backend.reap()
        service.backend.schedule()
        if watch:
            service.endpoints.watch_pass()
        value = read()
        if done(value):
            return value
        assert time.monotonic() < deadline, value
        time.sleep(0.05)


def endpoint(service):
    return service.get_endpoint(ALICE, "team-a", "chat")


def gpus_used(service, who, ns) -> str:
    return service.balance(who, ns)["resources"][GPU_KEY]["used"]


def models(service) -> list[str]:
    with urllib.request.urlopen(service.endpoint_target(ALICE, "team-a", "chat") + "/v1/models", timeout=10) as r:
        return [m["id"] for m in json.load(r)["data"]]


def test_a_borrowing_endpoint_is_preempted_for_the_lenders_training_and_comes_back(service):
    mine = service.submit(ALICE, "team-a", {"name": "mine", "args": list(UNTIL_CANCELLED), "gpus": 1})
    assert mine["phase"] == "Running", mine
    body = {"name": "chat", "args": ["--model", "/m/tiny-chat"], "gpus": 1, "priority": "best-effort"}
    created = service.create_endpoint(ALICE, "team-a", body)
    assert created["priority"] == "best-effort"
    first = until(service, lambda: endpoint(service), lambda e: e["phase"] == "Ready")
    assert service.get_job(ALICE, "team-a", "chat")["borrowed"] is True, "it runs on team b's idle GPU"
    assert gpus_used(service, ALICE, "team-a") == "2"
    assert models(service) == ["tiny-chat"]

    # team b wants its GPU back for training: the endpoint is preempted, then requeued
    train = service.submit(BOB, "team-b", {"name": "train", "args": list(UNTIL_CANCELLED), "gpus": 1})
    assert (train["phase"], train["reason"]) == ("Pending", reasons.WAITING_FOR_PREEMPTION), train
    preempting = service.get_job(ALICE, "team-a", "chat")
    assert preempting["reason"] == reasons.RECLAIMED and "team-b reclaimed" in preempting["message"], preempting
    requeued = until(service, lambda: endpoint(service), lambda e: e["phase"] == "Pending")
    assert requeued["reason"] in (reasons.REQUEUED, reasons.WAITING_FOR_BORROWING), requeued
    history = service.get_job(ALICE, "team-a", "chat")["history"]
    assert [e["event"] for e in history] == ["Borrowed", "Preempted", "Requeued"]
    assert history[1]["reason"] == reasons.RECLAIMED and "requeued" in history[2]["message"]
    assert requeued["models"] == [] and "readyAt" not in requeued
    with pytest.raises(Conflict) as refused:
        models(service)
    assert refused.value.reason == reasons.NOT_READY and "Pending" in str(refused.value)

    # the GPU moved back: the lender's training runs on the GPU the endpoint had; the requeued
    # endpoint stays admitted in team a's balance (as a requeued job does) but holds no GPU
    lent = service.get_job(ALICE, "team-a", "mine")["gpuIndices"]
    running = until(service, lambda: service.get_job(BOB, "team-b", "train"), lambda j: j["phase"] == "Running")
    assert running["borrowed"] is False and running["gpuIndices"] != lent
    assert gpus_used(service, BOB, "team-b") == "1"
    assert service.get_job(ALICE, "team-a", "chat")["gpuIndices"] == []

    # the GPU frees up: the endpoint starts again, a new process the proxy must not reach before
    # it answers /health (its readiness was for the process that was preempted)
    service.cancel(BOB, "team-b", "train")
    restarted = until(
        service, lambda: service.get_job(ALICE, "team-a", "chat"), lambda j: j["phase"] == "Running", watch=False
    )
    assert restarted["startedAt"] >= first["startedAt"] and restarted["borrowed"] is True
    assert endpoint(service)["phase"] == "Starting", "ready was for the preempted process"
    with pytest.raises(Conflict):
        service.endpoint_target(ALICE, "team-a", "chat")
    again = until(service, lambda: endpoint(service), lambda e: e["phase"] == "Ready")
    assert again["readyAt"] >= restarted["startedAt"] and models(service) == ["tiny-chat"]
