"""``times.now_rfc3339`` formats once per second (every cached balance answer stamps it) and
still follows the clock, a step back included."""

from __future__ import annotations

import time

from jupyter_quota import times


def test_now_follows_the_clock_second_by_second(monkeypatch):
    for now in (1_800_000_000.2, 1_800_000_000.9, 1_800_000_001.0, 1_799_999_999.5):
        monkeypatch.setattr(time, "time", lambda now=now: now)
        assert times.now_rfc3339() == times.rfc3339(now)
    assert times.now_rfc3339() == "2027-01-15T07:59:59Z"
