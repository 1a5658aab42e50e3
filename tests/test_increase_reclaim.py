"""After an increase ends, what a team runs over its quota is borrowed, and the team whose
quota it is takes it back when it asks, whatever else is configured (issue 25, item 2); the
approver is warned when approving would make the teams' quotas exceed the inventory.

Once, on 4 GPUs (alpha 2, beta 2), alpha's 4-GPU job started under a +2 increase kept all 4
after the increase ended: beta's 1-GPU job waited hours, unless some team had a
``borrowingLimit`` (an unrelated setting), which turned the elastic policy on.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime

import pytest
from local_testing import GPU_KEY, TRAINER, UNTIL_CANCELLED

from jupyter_quota import reasons
from jupyter_quota.backends.local import elasticpass
from jupyter_quota.backends.local.livejobs import Elastic
from jupyter_quota.config import JupyterQuota
from jupyter_quota.extension import build_service
from jupyter_quota.identity import Identity
from jupyter_quota.magics.display import increases_text
from jupyter_quota.profiles import TeamProfile

ANN, BEA, ADA = Identity("ann"), Identity("bea"), Identity("ada", admin=True)
TUESDAY_NOON = datetime(2026, 12, 1, 12, 0, tzinfo=UTC).timestamp()
HOUR = 3600.0


@pytest.fixture
def service(tmp_path):
    config = JupyterQuota()
    config.state_dir = str(tmp_path / "state")
    config.inventory = {"gpus": 4, "cpu": "16", "memory": "64Gi"}
    config.job_command = [sys.executable, TRAINER]
    config.cancel_grace_period = 5.0
    config.admin_users = ["ada"]
    config.profiles = [
        {"team": "alpha", "users": ["ann"], "hard": {GPU_KEY: "2"}},
        {"team": "beta", "users": ["bea"], "hard": {GPU_KEY: "2"}},
    ]
    made = build_service(config)
    clock = {"now": TUESDAY_NOON}
    made.clock = lambda: clock["now"]
    made.test_clock = clock
    yield made
    made.close()


def increase(service, gpus="2", hours=1):
    made = service.request_increase(ANN, "team-alpha", {"resources": {GPU_KEY: gpus}, "hours": hours, "reason": "r"})
    return made, service.decide_increase(ADA, made["name"], {}, approve=True)


def test_a_job_over_quota_after_its_increase_ends_is_borrowed_and_reclaimed_by_the_owner(service):
    _, approved = increase(service)
    assert approved["phase"] == "Approved"
    big = service.submit(ANN, "team-alpha", {"name": "big", "args": list(UNTIL_CANCELLED), "gpus": 4})
    assert big["phase"] == "Running", big
    try:
        service.test_clock["now"] = TUESDAY_NOON + HOUR + 1  # the increase has ended
        service.expire_increases()
        service.backend.schedule()
        over = service.get_job(ANN, "team-alpha", "big")
        assert over["phase"] == "Running" and over["borrowed"] is True, over  # as onClose: finish does

        asked = service.submit(BEA, "team-beta", {"name": "mine", "args": list(UNTIL_CANCELLED), "gpus": 1})
        assert (asked["phase"], asked["reason"]) == ("Pending", reasons.WAITING_FOR_PREEMPTION), asked
        reclaimed = service.get_job(ANN, "team-alpha", "big")
        assert reclaimed["reason"] == reasons.RECLAIMED and "team-beta reclaimed" in reclaimed["message"]
        _wait(service, BEA, "team-beta", "mine", "Running")
        requeued = service.get_job(ANN, "team-alpha", "big")
        assert requeued["phase"] == "Pending", requeued
    finally:
        for who, ns, name in ((ANN, "team-alpha", "big"), (BEA, "team-beta", "mine")):
            try:
                service.cancel(who, ns, name)
            except Exception:  # noqa: BLE001 - not submitted, or ended already
                continue
            _wait(service, who, ns, name, "Failed")


def test_the_policy_is_on_while_a_team_runs_over_its_quota_whatever_else_is_configured():
    alpha = TeamProfile(team="alpha", hard={GPU_KEY: "2"})
    beta = TeamProfile(team="beta", hard={GPU_KEY: "2"})

    def running(namespace, gpus, job_id):
        key = elasticpass.Key(job_id, f"{namespace}/j{job_id}")
        return Elastic(key, namespace, "normal", {GPU_KEY: gpus}, None, False)

    within = [running("team-alpha", 2, 1), running("team-beta", 2, 2)]
    assert not elasticpass.active([alpha, beta], within)  # nothing to decide beyond the node fit
    over = [running("team-alpha", 4, 1)]
    assert elasticpass.active([alpha, beta], over)  # an increase ended under it: borrowed now
    assert not elasticpass.active([TeamProfile(team="alpha", hard={GPU_KEY: "4"}), beta], over)


def test_the_approver_is_warned_when_the_quotas_would_exceed_the_inventory(service):
    made = service.request_increase(ANN, "team-alpha", {"resources": {GPU_KEY: "2"}, "hours": 1, "reason": "r"})
    (pending,) = service.list_increases(ADA)["increases"]
    (warning,) = pending["warnings"]
    assert "6 GPUs" in warning and "4 GPUs" in warning, warning  # 2 + 2 + 2 of 4
    assert "warnings" not in service.list_increases(ANN)["increases"][0]  # for the approver only
    approved = service.decide_increase(ADA, made["name"], {}, approve=True)
    assert approved["warnings"] == [warning]
    assert f"warning: {warning}" in increases_text([approved])  # the CLI's and the magic's answer


def test_no_warning_while_the_quotas_fit_the_inventory(service):
    made = service.request_increase(ANN, "team-alpha", {"resources": {GPU_KEY: "1"}, "hours": 1, "reason": "r"})
    service.put_profile(ADA, "beta", {"users": ["bea"], "hard": {GPU_KEY: "1"}})
    (pending,) = service.list_increases(ADA)["increases"]
    assert pending["warnings"] == []
    assert service.decide_increase(ADA, made["name"], {}, approve=True)["warnings"] == []


def _wait(service, who, namespace, name, phase, timeout=120.0):
    deadline = time.monotonic() + timeout
    while True:
        service.backend.reap()
        job = service.get_job(who, namespace, name)
        if job["phase"] == phase:
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.05)
