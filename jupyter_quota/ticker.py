"""The one periodic loop: every background pass of the service and the backends runs on a Ticker.

The increases' expiry, the time windows, the stalled-job policy, the kube usage recorder and the
local reaper each give it their work as a plain function; it runs that on a daemon thread, at
most ``period`` seconds apart, sooner when the work asks (it returns the seconds until it wants
its next pass) or when someone calls :meth:`Ticker.wake`. As jupyterhub-idle-culler's one
``PeriodicCallback`` and Kueue's ``wait.UntilWithBackoff``: a pass that raises is logged and the
loop goes on, and :meth:`Ticker.close` stops it and joins, after which no pass starts.

It sits on the ground floor (it imports nothing of the package), so that the backends, below the
application layer, use the same loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

#: the work of one pass: None to wait the full period, or the seconds until the next pass is due
Work = Callable[[], "float | None"]
#: how the loop waits: ``wait(condition, timeout)`` with ``condition`` held (``Condition.wait``)
Wait = Callable[[threading.Condition, float], object]


class Ticker:
    """``work()`` on a thread of its own: now (or after a first period), then again each time
    the period, the delay the work returned, or :meth:`wake` says so; :attr:`passes` counts the
    passes done and :meth:`wait_passes` waits for them (tests, and whoever needs one done)."""

    def __init__(
        self,
        work: Work,
        period: float,
        *,
        name: str,
        log: logging.Logger | None = None,
        first_pass_now: bool = True,
        condition: threading.Condition | None = None,
        wait: Wait | None = None,
    ):
        """``condition``: wait on this one instead of a private one, so that whoever notifies it
        also wakes the loop (the kube watch cache's ``changed``). ``wait`` replaces
        ``Condition.wait`` (a test's fake time)."""
        if period <= 0:
            raise ValueError(f"a Ticker's period must be more than 0 seconds, not {period}")
        self.name = name
        self._work = work
        self._period = period
        self._log = log or logging.getLogger("jupyter_quota")
        self._first_pass_now = first_pass_now
        self._wakeup = condition or threading.Condition()
        self._wait = wait or threading.Condition.wait
        self._woken = False
        self._closed = False
        self._done = threading.Condition()  # passes: its own, so waiters never wake the loop
        self._passes = 0
        self._thread: threading.Thread | None = None

    @property
    def passes(self) -> int:
        """Passes done since :meth:`start` (one that raised counts too)."""
        return self._passes

    def start(self) -> None:
        """Start the loop (once; a closed Ticker stays closed)."""
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def wake(self) -> None:
        """Run a pass now: at once when the loop waits, else right after the pass under way."""
        with self._wakeup:
            self._woken = True
            self._wakeup.notify_all()

    def close(self, timeout: float = 10.0) -> None:
        """Stop: the pass under way ends, no other starts; waits up to ``timeout`` s for the thread."""
        with self._wakeup:
            self._closed = True
            self._wakeup.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def wait_passes(self, count: int, timeout: float) -> bool:
        """Block until ``count`` passes are done; False if ``timeout`` seconds passed first."""
        with self._done:
            return self._done.wait_for(lambda: self._passes >= count, timeout)

    def _run(self) -> None:
        if not self._first_pass_now:
            self._sleep(self._period)
        while not self._closed:
            try:
                delay = self._work()
            except Exception:  # noqa: BLE001 - the next pass tries again; the log has this one
                self._log.exception("jupyter_quota: a pass of %s failed; the next one tries again", self.name)
                delay = None
            with self._done:
                self._passes += 1
                self._done.notify_all()
            self._sleep(self._period if delay is None else min(self._period, max(0.0, delay)))

    def _sleep(self, seconds: float) -> None:
        with self._wakeup:
            if not self._woken and not self._closed:
                self._wait(self._wakeup, seconds)
            self._woken = False
