"""Temporary increases on the kube backend, against the real test API server: an approval writes
the namespace's ResourceQuota at once, the expiry writes it back (the service's timer, or the
reconcile of a service started after the end), and a restart in between puts a quota someone
reset back to what is in force. A driven clock stands in for hours."""

from __future__ import annotations

import time

import kubecluster
import pytest

from jupyter_quota import jobspec
from jupyter_quota.access import TeamRegistry
from jupyter_quota.backends.kube import apply_profiles
from jupyter_quota.config import JupyterQuota
from jupyter_quota.identity import Identity
from jupyter_quota.increases import MIN_HOURS
from jupyter_quota.profiles import TeamProfile
from jupyter_quota.service import QuotaService

pytestmark = pytest.mark.slow

GPU = "requests.nvidia.com/gpu"
BEA = Identity("bea")
ADA = Identity("ada", admin=True)
LIMITS = {
    "limits": [
        {
            "type": "Container",
            "default": {"cpu": "1", "memory": "1Gi"},
            "defaultRequest": {"cpu": "100m", "memory": "128Mi"},
        }
    ]
}


class Clock:
    def __init__(self):
        self.now = time.time()

    def __call__(self):
        return self.now


def quota_hard(kube, namespace) -> str:
    """The main ResourceQuota's GPU limit as the API server holds it."""
    return kube.get(f"/api/v1/namespaces/{namespace}/resourcequotas/team-quota")["spec"]["hard"][GPU]


def until(predicate, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.fixture
def team(kube, namespace_name, tmp_path):
    entry = {"team": "inc", "namespace": namespace_name, "users": ["bea"], "hard": {GPU: "2"}, "limitRange": LIMITS}
    apply_profiles([TeamProfile(**entry)], kube)
    kubecluster.wait_quota_status(kube, namespace_name)
    config = JupyterQuota()
    config.state_dir = str(tmp_path / "state")
    config.profiles = [entry]
    return config, entry


def make_service(config, backend, clock=time.time) -> QuotaService:
    return QuotaService(config, TeamRegistry(config.profiles), backend, clock=clock)


def test_approval_raises_the_resourcequota_and_restarts_reconcile_it(kube, namespace_name, team, make_kube_backend):
    config, entry = team
    clock = Clock()
    service = make_service(config, make_kube_backend(), clock)
    made = service.request_increase(BEA, namespace_name, {"resources": {GPU: "2"}, "hours": 8, "reason": "deadline"})
    assert quota_hard(kube, namespace_name) == "2"
    service.decide_increase(ADA, made["name"], {"comment": "ok"}, approve=True)
    assert quota_hard(kube, namespace_name) == "4", "written through the API server at once"
    until(lambda: service.balance(BEA, namespace_name)["resources"][GPU]["hard"] == "4", what="the watched balance")

    # admission on the cluster's own quota: 3 GPUs fit in the raised 4
    profile = service.profile_for(BEA, namespace_name)
    request = jobspec.parse_job_request({"name": "three", "args": ["--sleep", "1"], "gpus": 3}, profile)
    job = service.backend.build_job(profile, request, "bea", kubecluster.JOB_COMMAND)
    assert service.backend.submit(profile, job, "bea")["name"] == "three"

    # someone writes the base profile back while the increase is in force; a restart puts it right
    apply_profiles([TeamProfile(**entry)], kube)
    assert quota_hard(kube, namespace_name) == "2"
    restarted = make_service(config, make_kube_backend(), clock)
    restarted.start()
    try:
        assert quota_hard(kube, namespace_name) == "4"
    finally:
        restarted.close()

    # the end passes while no service runs: the next one expires it and writes the base quota
    clock.now += 8 * 3600 + 1
    later = make_service(config, make_kube_backend(), clock)
    later.start()
    try:
        assert quota_hard(kube, namespace_name) == "2"
        assert [i["phase"] for i in later.list_increases(ADA)["increases"]] == ["Expired"]
        actions = [(e["who"], e["action"]) for e in later.audit_log(ADA)]
        assert actions == [("bea", "increase.requested"), ("ada", "increase.approved"), ("system", "increase.expired")]
        later.close()
        again = make_service(config, make_kube_backend(), clock)
        again.start()  # idempotent: nothing more to expire, nothing to write
        again.close()
        assert len(again.audit_log(ADA)) == 3
        assert quota_hard(kube, namespace_name) == "2"
    finally:
        later.close()


def test_the_running_service_restores_the_quota_at_the_end(kube, namespace_name, team, make_kube_backend):
    config, _ = team
    service = make_service(config, make_kube_backend())
    service.start()
    try:
        # the shortest request (one minute, increases.MIN_HOURS) on the real clock: the timer, not a
        # test call, expires it
        body = {"resources": {GPU: "1"}, "hours": MIN_HOURS, "reason": "r"}
        made = service.request_increase(BEA, namespace_name, body)
        service.decide_increase(ADA, made["name"], {}, approve=True)
        assert quota_hard(kube, namespace_name) == "3"
        # the expiry writes the quota inside its transaction, then commits the audit entry: the
        # entry is the end of the expiry
        expired = lambda: service.audit_log(ADA)[-1]["action"] == "increase.expired"  # noqa: E731
        until(expired, timeout=180, what="the timer's expiry")
        assert quota_hard(kube, namespace_name) == "2"
        assert service.list_increases(BEA)["increases"][0]["phase"] == "Expired"
    finally:
        service.close()


def test_apply_effective_writes_the_open_windows_and_increases(kube, namespace_name, team, make_kube_backend):
    """The hook a window's opening or closing calls: the ResourceQuota holds what is in force then."""
    from datetime import UTC, datetime

    config, entry = team
    window = {"name": "nights", "days": ["Mon"], "start": "20:00", "end": "08:00", "extra": {GPU: "2"}}
    config.profiles = [{**entry, "windows": [window]}]
    monday_21h = datetime(2026, 11, 30, 21, 0, tzinfo=UTC).timestamp()
    clock = Clock()
    clock.now = monday_21h
    service = make_service(config, make_kube_backend(), clock)
    made = service.request_increase(BEA, namespace_name, {"resources": {GPU: "1"}, "hours": 13, "reason": "r"})
    service.decide_increase(ADA, made["name"], {}, approve=True)
    assert quota_hard(kube, namespace_name) == "5", "base 2 + window 2 + increase 1"
    service.apply_effective("inc", monday_21h + 12 * 3600)  # Tuesday 09:00: the window has closed
    assert quota_hard(kube, namespace_name) == "3"
    service.apply_effective("inc", monday_21h + 13 * 3600 + 1)  # and the increase has ended
    assert quota_hard(kube, namespace_name) == "2"
