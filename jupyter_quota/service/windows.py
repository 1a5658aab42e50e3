"""Time windows where jobs run: each team's effective quota written at start and at every change.

A window (``jupyter_quota/windows.py``) raises a team's hard quota while it is open. On
Kubernetes the API server enforces the namespace's ResourceQuota, so the service must rewrite it
when a window opens and when it closes. :func:`window_ticker` does that: at start it writes every
team's effective quota for *now* (what a restart or a missed change left behind is put right),
then sleeps until the earliest ``windows.next_change`` of any profile and writes again.

Each pass derives the quota from the profiles and the clock alone, and the writer (the kube
backend's ``apply_profile``: get, compare, replace only what differs) leaves an object that is
already right untouched, so passes are idempotent: two passes, or two service processes, or a
restart inside a window, write the same thing. The clock is injected so that tests drive it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from .. import windows
from ..profiles import TeamProfile
from ..ticker import Ticker

#: The longest sleep between passes (seconds): profiles an admin adds or edits meanwhile are
#: picked up by then, and a clock that jumped is noticed.
MAX_WAIT = 300.0


def reconcile(
    profiles: Iterable[TeamProfile], apply: Callable[[TeamProfile, float], None], now: float, log: logging.Logger
) -> float | None:
    """``apply(profile, now)`` for each profile (a failure is logged, the others still run);
    the epoch time of the next window change of any of them, or None."""
    moment = datetime.fromtimestamp(now, UTC)
    changes = []
    for profile in profiles:
        try:
            apply(profile, now)
        except Exception:  # one team's refusal must not keep the others' windows shut
            log.exception("jupyter_quota: writing the effective quota of team %s failed", profile.team)
            changes.append(now + 10.0)  # retry soon
        change = windows.next_change(profile, moment)
        if change is not None:
            changes.append(change.timestamp())
    return min(changes, default=None)


def window_ticker(
    profiles: Callable[[], list[TeamProfile]],
    apply: Callable[[TeamProfile, float], None],
    clock: Callable[[], float],
    log: logging.Logger | None = None,
    max_wait: float = MAX_WAIT,
) -> Ticker:
    """A :class:`~jupyter_quota.ticker.Ticker` running :func:`reconcile` at start and at each
    window change; ``wake()`` makes it run now (after a profile edit, or a test moving its clock);
    its ``passes`` count the passes done, for whoever waits on one."""
    log = log or logging.getLogger(__name__)

    def follow() -> float | None:
        now = clock()
        change = reconcile(profiles(), apply, now, log)
        return None if change is None else max(0.0, change - now) + 0.05

    return Ticker(follow, max_wait, name="jupyter-quota-windows", log=log)
