"""An idle local service's reaper pass (every ``reap_interval``, on a thread that shares the GIL
with the service's IO loop) costs a change check, not a scheduling pass: no write transaction
and one read of the approved increases per pass, whatever the number of teams (issue 23: the
pass held the loop a few milliseconds every half second on a hub of 100 teams, and grew with
them)."""

from __future__ import annotations

import pytest
from quota_testing import teams_config

from jupyter_quota.backends.local import ledger
from jupyter_quota.config import JupyterQuota
from jupyter_quota.service import effective
from jupyter_quota.service.app import build_service

TEAMS = 30


@pytest.fixture
def service(tmp_path):
    return build_service(JupyterQuota(config=teams_config(tmp_path / "state", TEAMS, {"requests.cpu": "2"})))


def counting(monkeypatch, owner, name: str) -> list:
    calls = []
    original = getattr(owner, name)

    def counted(*args, **kwargs):
        calls.append(name)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_an_idle_pass_takes_no_write_transaction(service, monkeypatch):
    service.backend.reap()  # the first pass after start decides under the teams it reads
    writes = counting(monkeypatch, ledger.Ledger, "write")
    for _ in range(3):
        service.backend.reap()
    assert writes == []


def test_a_pass_after_a_change_still_schedules(service, monkeypatch):
    service.backend.reap()
    service.registry.put("t00", {"namespace": "team-00", "groups": ["g00"], "hard": {"requests.cpu": "3"}})
    writes = counting(monkeypatch, ledger.Ledger, "write")
    service.backend.reap()  # a new profile object: the teams changed, a pass is due
    assert writes == ["write"]
    service.backend.reap()
    assert writes == ["write"]


def test_the_teams_effective_quotas_read_the_increases_once(service, monkeypatch):
    reads = counting(monkeypatch, effective.EffectiveQuota, "_approved")
    monkeypatch.setattr(service.effective.store, "exists", lambda: True)  # as once a request is made
    profiles = service.effective.profiles()
    assert len(profiles) == TEAMS
    assert len(reads) == 1
