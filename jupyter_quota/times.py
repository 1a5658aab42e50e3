"""Time on the ground floor: the clock and the one way times are written.

Every layer reads these (domain records, backends, the application layer), so they import
nothing of the package. Times are written as the Kubernetes API writes them: RFC 3339, UTC,
whole seconds, ``Z`` (``2026-11-29T08:30:00Z``).
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable

#: epoch seconds now; what a service is given so that tests can drive time
Clock = Callable[[], float]

#: the real clock
system_clock: Clock = time.time


def rfc3339(epoch: float) -> str:
    """``epoch`` as the Kubernetes API writes a time: RFC 3339, UTC, whole seconds, ``Z``."""
    t = time.gmtime(epoch)  # not strftime: its %Y writes year 999 as "999"
    return f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}Z"


def epoch_of(stamp: str) -> float:
    """An RFC 3339 UTC time as :func:`rfc3339` writes it, in epoch seconds."""
    return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))


_last_stamp: tuple[int, str] = (-1, "")


def now_rfc3339() -> str:
    """The current time, e.g. ``2026-11-29T08:30:00Z`` (formatted once per second: every answer
    of a cached balance read stamps it)."""
    global _last_stamp
    second = int(time.time())
    last = _last_stamp
    if last[0] != second:
        last = _last_stamp = (second, rfc3339(second))
    return last[1]
