"""One team's profile whose raised quota passes 2^63-1 (issue 25, item 1): refused where it
enters (``PUT /profiles``, an increase's approval), and, where one is already stored, held to
its own hard quota and flagged, while every other team keeps scheduling and the scrape answers.

Once, a window with ``extra: 9223372036854775807`` GPUs was accepted while closed; when it opened,
the effective quota could not be built, so every scheduling pass failed ("reaping failed" ten
times a second), every team's jobs stayed Pending, and ``/metrics`` answered 400.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime

import pytest
from local_testing import phase_is, wait_for
from quota_testing import FAKE_TRAINER

from jupyter_quota.config import JupyterQuota
from jupyter_quota.errors import InvalidRequest, NotFound
from jupyter_quota.extension import build_service
from jupyter_quota.identity import Identity
from jupyter_quota.quantity import MAX_INT64

GPU = "requests.nvidia.com/gpu"
ANN, BEA, ADA, OTTO = Identity("ann"), Identity("bea"), Identity("ada", admin=True), Identity("otto", admin=True)
ALWAYS = {"name": "always", "days": ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"], "start": "00:00", "end": "00:00"}
CLOSED = {"name": "never-today", "days": ["Mon"], "start": "20:00", "end": "20:01"}
LOG = "test-broken-profile"
TUESDAY_NOON = datetime(2026, 12, 1, 12, 0, tzinfo=UTC).timestamp()  # CLOSED is closed


def profiles(beta_windows=()) -> list[dict]:
    return [
        {"team": "alpha", "users": ["ann"], "hard": {GPU: "2"}},
        {"team": "beta", "users": ["bea"], "hard": {GPU: "2"}, "windows": list(beta_windows)},
    ]


def make_service(tmp_path, beta_windows=()):
    config = JupyterQuota()
    config.state_dir = str(tmp_path / "state")
    config.inventory = {"gpus": 4, "cpu": "32", "memory": "256Gi"}
    config.job_command = [sys.executable, str(FAKE_TRAINER)]
    config.reap_interval = 0.1
    config.admin_users = ["ada", "otto"]
    config.profiles = profiles(beta_windows)
    return build_service(config, log=logging.getLogger(LOG))


@pytest.fixture
def service(tmp_path):
    made = make_service(tmp_path)
    yield made
    made.close()


def test_a_window_whose_extra_can_pass_the_bound_is_refused_whatever_the_time(service):
    huge = {**CLOSED, "extra": {GPU: str(MAX_INT64)}}
    with pytest.raises(InvalidRequest) as refused:
        service.put_profile(ADA, "gamma", {"hard": {GPU: "2"}, "windows": [huge]})
    message = refused.value.message
    assert refused.value.status == 400 and "windows" in message and str(MAX_INT64) in message, message
    assert GPU in message
    with pytest.raises(NotFound):
        service.profile(ADA, "gamma")  # nothing was stored


def test_windows_that_each_fit_but_not_together_are_refused(service):
    half = str(2**62)
    windows = [{**CLOSED, "extra": {GPU: half}}, {**ALWAYS, "extra": {GPU: half}}]
    with pytest.raises(InvalidRequest, match="windows"):
        service.put_profile(ADA, "beta", {"users": ["bea"], "hard": {GPU: "2"}, "windows": windows})
    assert service.profile(ADA, "beta")["windows"] == []  # the old profile stands
    fits = [{**CLOSED, "extra": {GPU: str(MAX_INT64 - 2)}}]
    assert service.put_profile(ADA, "beta", {"users": ["bea"], "hard": {GPU: "2"}, "windows": fits})["windows"]


def test_an_approval_that_would_pass_the_bound_is_refused_and_the_request_stays_pending(service):
    """Refused while the window is closed, too: it would pass the bound when the window opens."""
    service.clock = lambda: TUESDAY_NOON
    near = [{**CLOSED, "extra": {GPU: str(MAX_INT64 - 10)}}]  # 2 + this = 2^63-9: fits
    service.put_profile(ADA, "beta", {"users": ["bea"], "hard": {GPU: "2"}, "windows": near})
    made = service.request_increase(BEA, "team-beta", {"resources": {GPU: "100"}, "hours": 1, "reason": "r"})
    with pytest.raises(InvalidRequest) as refused:
        service.decide_increase(ADA, made["name"], {}, approve=True)
    assert str(MAX_INT64) in refused.value.message and GPU in refused.value.message, refused.value.message
    (listed,) = service.list_increases(ADA)["increases"]
    assert listed["phase"] == "Pending"
    assert service.balance(BEA, "team-beta")["resources"][GPU]["hard"] == "2"
    assert "the extras of windows[0].extra, increase" in refused.value.message


def test_a_stored_broken_profile_is_flagged_while_every_other_team_keeps_scheduling(tmp_path, hold, caplog):
    """The scenario of the issue: beta's window (from the config, or stored before the check)
    is open and raises its quota past 2^63-1."""
    broken = [{**ALWAYS, "extra": {GPU: str(MAX_INT64)}}]
    service = make_service(tmp_path, beta_windows=broken)
    caplog.set_level(logging.WARNING, logger=LOG)
    try:
        service.start()
        alpha, beta = service.registry.get("alpha"), service.registry.get("beta")
        job = service.submit(ANN, "team-alpha", {"name": "a1", "args": hold, "gpus": 2})
        assert job["name"] == "a1"
        wait_for(service.backend, alpha, "a1", phase_is("Running"), timeout=60)

        # the broken team is held to its own hard quota: its balance, list and submits answer
        assert service.balance(BEA, "team-beta")["resources"][GPU]["hard"] == "2"
        service.submit(BEA, "team-beta", {"name": "b1", "args": hold, "gpus": 1})
        wait_for(service.backend, beta, "b1", phase_is("Running"), timeout=60)

        # the scrape answers, every team in it
        text = service.scrape(ADA).decode()
        assert 'namespace="team-alpha"' in text and 'namespace="team-beta"' in text

        # flagged for the admin view: beta's entry says why, alpha's has nothing
        listed = {ns["team"]: ns for ns in service.namespaces(ADA)["namespaces"]}
        assert "profileError" not in listed["alpha"]
        flag = listed["beta"]["profileError"]
        assert "always" in flag and str(MAX_INT64) in flag and GPU in flag, flag

        # logged once, however many passes and reads met it
        for _ in range(5):
            service.backend.reap()
            service.namespaces(ADA)
        said = [r for r in caplog.records if r.name == LOG and "team beta" in r.getMessage()]
        assert len(said) == 1, [r.getMessage() for r in said]
        assert not [r for r in caplog.records if "failed" in r.getMessage()], caplog.text

        # an admin fixes the profile: the flag goes
        service.put_profile(ADA, "beta", {"users": ["bea"], "hard": {GPU: "2"}})
        listed = {ns["team"]: ns for ns in service.namespaces(ADA)["namespaces"]}
        assert "profileError" not in listed["beta"], listed["beta"]
    finally:
        service.close()
