"""Time windows on the kube backend, against the real test API server: the quota service writes
the namespace's ResourceQuota when a window opens and when it closes, a restart inside a window
writes nothing, and a change passed while no service ran is put right at the next start. A
driven clock stands in for the evening and the morning (``jupyter_quota/service/windows.py``)."""

from __future__ import annotations

from datetime import UTC, datetime

import kubecluster
import pytest
from kubecluster import until

from jupyter_quota.access import TeamRegistry
from jupyter_quota.backends.kube import apply_profiles
from jupyter_quota.config import JupyterQuota
from jupyter_quota.identity import Identity
from jupyter_quota.profiles import TeamProfile
from jupyter_quota.service import QuotaService

pytestmark = pytest.mark.slow

GPU = "requests.nvidia.com/gpu"
BEA = Identity("bea")
#: +2 GPUs every night, 20:00 to 08:00 UTC.
NIGHTS = {
    "name": "nights",
    "days": ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"],
    "start": "20:00",
    "end": "08:00",
    "extra": {GPU: "2"},
}


def at(hhmm: str, day: int = 1) -> float:
    hour, minute = map(int, hhmm.split(":"))
    return datetime(2026, 6, day, hour, minute, tzinfo=UTC).timestamp()


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def quota(kube, namespace) -> dict:
    return kube.get(f"/api/v1/namespaces/{namespace}/resourcequotas/team-quota")


@pytest.fixture
def team(kube, namespace_name, tmp_path):
    entry = {"team": "win", "namespace": namespace_name, "users": ["bea"], "hard": {GPU: "2"}, "windows": [NIGHTS]}
    apply_profiles([TeamProfile(**entry)], kube)
    kubecluster.wait_quota_status(kube, namespace_name)
    config = JupyterQuota()
    config.state_dir = str(tmp_path / "state")
    config.profiles = [entry]
    return config


def started(config, backend, clock) -> QuotaService:
    """A quota service started at ``clock``'s time, once its first windows pass is done."""
    service = QuotaService(config, TeamRegistry(config.profiles), backend, clock=clock)
    service.start()
    assert service.window_timer.wait_passes(1, 60), "the windows timer made no pass in 60 s"
    return service


def test_the_quota_follows_the_window_through_the_api_server_and_restarts_change_nothing(
    kube, namespace_name, team, make_kube_backend
):
    clock = Clock(at("19:00"))
    service = started(team, make_kube_backend(), clock)
    try:
        assert quota(kube, namespace_name)["spec"]["hard"][GPU] == "2"  # before the window
        clock.now = at("20:00")
        service.window_timer.wake()
        until(lambda: quota(kube, namespace_name)["spec"]["hard"][GPU] == "4", what="the window's opening")
    finally:
        service.close()
    written = quota(kube, namespace_name)["metadata"]["resourceVersion"]

    # a restart inside the window: the quota is already right, so nothing is written
    clock.now = at("23:00")
    again = started(team, make_kube_backend(), clock)
    again.close()
    assert quota(kube, namespace_name)["metadata"]["resourceVersion"] == written

    # the window closes while no service runs: the next start writes the base quota back ...
    clock.now = at("09:00", day=2)
    later = started(team, make_kube_backend(), clock)
    try:
        assert quota(kube, namespace_name)["spec"]["hard"][GPU] == "2"
        # ... and the running service follows the clock to the next evening
        clock.now = at("20:00", day=2)
        later.window_timer.wake()
        until(lambda: quota(kube, namespace_name)["spec"]["hard"][GPU] == "4", what="the next opening")
        # and the balance users see, from the watched ResourceQuota, says so
        until(lambda: later.balance(BEA, namespace_name)["resources"][GPU]["hard"] == "4", what="the balance")
    finally:
        later.close()
