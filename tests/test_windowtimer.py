"""``jupyter_quota/service/windows.py``: a pass writes every team's quota and says when the next window
change is; one team's failure does not stop the others. (The same on the real API server, with
the quota service: ``tests/kube/test_windows_on_kube.py``.)"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from jupyter_quota.profiles import TeamProfile
from jupyter_quota.service.windows import reconcile, window_ticker

GPU = "requests.nvidia.com/gpu"
LOG = logging.getLogger("test_windowtimer")


def profile(team: str, start: str, end: str) -> TeamProfile:
    window = {"name": "w", "days": ["Mon"], "start": start, "end": end, "extra": {GPU: "1"}}
    return TeamProfile(team=team, hard={GPU: "1"}, windows=[window])


MONDAY_9 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC).timestamp()  # a Monday


def test_a_pass_applies_every_profile_and_returns_the_earliest_change():
    applied = []
    profiles = [profile("late", "18:00", "20:00"), profile("early", "12:00", "13:00")]
    change = reconcile(profiles, lambda p, now: applied.append((p.team, now)), MONDAY_9, LOG)
    assert applied == [("late", MONDAY_9), ("early", MONDAY_9)]
    assert datetime.fromtimestamp(change, UTC) == datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_one_teams_failure_is_logged_and_retried_soon_while_the_others_are_written(caplog):
    applied = []

    def apply(p, now):
        if p.team == "broken":
            raise RuntimeError("refused")
        applied.append(p.team)

    profiles = [profile("broken", "18:00", "20:00"), profile("fine", "18:00", "20:00")]
    change = reconcile(profiles, apply, MONDAY_9, LOG)
    assert applied == ["fine"]
    assert change == MONDAY_9 + 10.0  # sooner than the window at 18:00
    assert "writing the effective quota of team broken failed" in caplog.text


def test_the_timer_passes_at_start_and_on_wake_with_the_clock_it_is_given():
    seen = []
    clock = [MONDAY_9]
    timer = window_ticker(lambda: [profile("a", "18:00", "20:00")], lambda p, now: seen.append(now), lambda: clock[0])
    timer.start()
    try:
        assert timer.wait_passes(1, 30)
        clock[0] = MONDAY_9 + 9 * 3600
        timer.wake()
        assert timer.wait_passes(2, 30)
    finally:
        timer.close()
    assert seen[0] == MONDAY_9 and MONDAY_9 + 9 * 3600 in seen
