"""Time windows where jobs run: each team's effective quota written at start and at every change.

A window (``jupyter_quota/windows.py``) raises a team's hard quota while it is open. On
Kubernetes the API server enforces the namespace's ResourceQuota, so the service must rewrite it
when a window opens and when it closes. :class:`WindowTimer` does that: at start it writes every
team's effective quota for *now* (what a restart or a missed change left behind is put right),
then sleeps until the earliest ``windows.next_change`` of any profile and writes again.

Each pass derives the quota from the profiles and the clock alone, and the writer (the kube
backend's ``apply_profile``: get, compare, replace only what differs) leaves an object that is
already right untouched, so passes are idempotent: two passes, or two service processes, or a
restart inside a window, write the same thing. The clock is injected so that tests drive it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from .. import windows
from ..profiles import TeamProfile

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


class WindowTimer:
    """A thread running :func:`reconcile` at start and at each window change; ``wake()`` makes
    it run now (after a profile edit, or a test moving its clock); ``passes`` counts the passes
    done, for whoever waits on one."""

    def __init__(
        self,
        profiles: Callable[[], list[TeamProfile]],
        apply: Callable[[TeamProfile, float], None],
        clock: Callable[[], float],
        log: logging.Logger | None = None,
        max_wait: float = MAX_WAIT,
    ):
        self._profiles, self._apply, self._clock = profiles, apply, clock
        self._log = log or logging.getLogger(__name__)
        self._max_wait = max_wait
        self._wake, self._stop = threading.Event(), threading.Event()
        self._done = threading.Condition()
        self.passes = 0
        self._thread = threading.Thread(target=self._loop, name="jupyter-quota-windows", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)

    def wait_passes(self, count: int, timeout: float) -> bool:
        """Block until ``count`` passes are done (tests); False if ``timeout`` passed first."""
        with self._done:
            return self._done.wait_for(lambda: self.passes >= count, timeout)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            now = self._clock()
            try:
                change = reconcile(self._profiles(), self._apply, now, self._log)
            except Exception:  # noqa: BLE001 - e.g. the registry unreadable: try again later
                self._log.exception("jupyter_quota: the time windows' pass failed")
                change = None
            with self._done:
                self.passes += 1
                self._done.notify_all()
            wait = self._max_wait if change is None else min(self._max_wait, max(0.0, change - now) + 0.05)
            self._wake.wait(wait)
