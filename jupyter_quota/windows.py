"""Time windows: when a team's quota is raised, and by how much (pure; no clock of its own).

A profile's ``windows`` (``TeamProfile.windows``) each say: on these days, from ``start`` to
``end`` in ``timezone``, the team's hard quota gets ``extra``. A window whose end is at or before
its start runs past midnight into the next day (``20:00``-``08:00``; ``00:00``-``00:00`` is a
whole day). ``days`` are the days a window *starts* on, so Friday's ``20:00``-``08:00`` window
ends on Saturday morning.

Wall-clock times are read in the window's timezone with :mod:`zoneinfo`, so a window keeps its
local hours across daylight-saving changes (a ``20:00``-``08:00`` window lasts 11 or 13 hours on
those nights). A start or end that falls in a spring-forward gap is read with the offset before
the change (PEP 495 ``fold=0``: ``02:30`` that night is ``03:30`` summer time), and one that
happens twice in autumn means its first occurrence. Every comparison is made in UTC.

Entry points: :func:`parse_windows` (validation, with messages naming the field),
:func:`open_windows`, :func:`window_extra` and :func:`next_change`. The scheduler
(``jupyter_quota/elastic.py``) and the service read them with the time they are given.
"""

from __future__ import annotations

import bisect
import functools
import json
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from . import quotaspec
from .bounds import shown
from .errors import InvalidRequest
from .quantity import Quantity

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
#: What happens to jobs over the base quota when a window closes: they run to their end, or are
#: preempted (SIGTERM, grace, requeued; ``jupyter_quota/elastic.py``).
ON_CLOSE_FINISH = "finish"
ON_CLOSE_PREEMPT = "preempt"
ON_CLOSE = (ON_CLOSE_FINISH, ON_CLOSE_PREEMPT)
_FIELDS = ("name", "days", "start", "end", "timezone", "extra", "onClose")
_CLOCK = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])")
#: How far around ``now`` occurrences are listed: a window starts at most a week apart from the
#: last one, and lasts at most a day (plus a DST hour).
_SPAN = timedelta(days=8)


@dataclass(frozen=True)
class Window:
    """One parsed window of a profile."""

    name: str
    days: frozenset[int]  # date.weekday() numbers: 0 is Monday
    start: time
    end: time
    timezone: str
    extra: tuple[tuple[str, str], ...]
    on_close: str

    def occurrences(self, around: datetime) -> list[tuple[datetime, datetime]]:
        """Its [start, end) intervals in UTC that overlap ``around`` ± ``_SPAN``."""
        tz = ZoneInfo(self.timezone)
        local = around.astimezone(tz).date()
        found = []
        for offset in range(-_SPAN.days, _SPAN.days + 1):
            day = local + timedelta(days=offset)
            if day.weekday() in self.days:
                found.append(self._interval(day, tz))
        return found

    def _interval(self, day: date, tz: ZoneInfo) -> tuple[datetime, datetime]:
        end_day = day + timedelta(days=1) if self.end <= self.start else day
        start = datetime.combine(day, self.start, tzinfo=tz).astimezone(UTC)
        end = datetime.combine(end_day, self.end, tzinfo=tz).astimezone(UTC)
        return start, end

    def is_open(self, now: datetime) -> bool:
        return any(start <= now < end for start, end in self.occurrences(now))

    def between(self, since: datetime, until: datetime) -> list[tuple[datetime, datetime]]:
        """Its [start, end) intervals in UTC within [since, until), clipped, in order."""
        tz = ZoneInfo(self.timezone)
        day = since.astimezone(tz).date() - timedelta(days=1)  # one that starts the day before may run on
        last = until.astimezone(tz).date()
        found = []
        while day <= last:
            if day.weekday() in self.days:
                start, end = self._interval(day, tz)
                start, end = max(start, since), min(end, until)
                if start < end:
                    found.append((start, end))
            day += timedelta(days=1)
        return found


def parse_windows(entries) -> list[Window]:
    """A profile's ``windows`` list, checked; :class:`InvalidRequest` names the bad field."""
    if not isinstance(entries, list):
        raise InvalidRequest(f"windows must be a list of windows, not {shown(entries)}")
    parsed = [_parse(entry, f"windows[{i}]") for i, entry in enumerate(entries)]
    names = [w.name for w in parsed]
    for name in names:
        if names.count(name) > 1:
            raise InvalidRequest(f"windows: the name {shown(name)} is used twice; each window needs its own name")
    return parsed


def parse_hours(days, hours, timezone, names: tuple[str, str, str]) -> Window:
    """Weekly hours given as three settings (``days``, ``hours`` as ``HH:MM-HH:MM``, ``timezone``),
    as a window; :class:`InvalidRequest` names the setting (``names``) that is wrong."""
    start, _, end = hours.partition("-") if isinstance(hours, str) else ("", "", "")
    if not (_CLOCK.fullmatch(start.strip()) and _CLOCK.fullmatch(end.strip())):
        raise InvalidRequest(f'{names[1]} must be "HH:MM-HH:MM", 24-hour, such as "09:00-18:00", not {shown(hours)}')
    return Window(
        name=names[1],
        days=_days(list(days) if isinstance(days, list | tuple) else days, names[0]),
        start=_clock(start.strip(), names[1]),
        end=_clock(end.strip(), names[1]),
        timezone=_timezone(timezone, names[2]),
        extra=(),
        on_close=ON_CLOSE_FINISH,
    )


def open_windows(profile, now: datetime) -> list[Window]:
    """The profile's windows open at ``now`` (an aware datetime), in the profile's order."""
    now = _utc(now)
    return [w for w in _windows(profile) if w.is_open(now)]


def window_extra(profile, now: datetime) -> dict[str, str]:
    """What the open windows add to the hard quota at ``now``: resource to canonical quantity."""
    total: dict[str, Quantity] = {}
    for window in open_windows(profile, now):
        for name, value in window.extra:
            total[name] = total.get(name, Quantity(0)) + Quantity(value)
    return {name: str(q) for name, q in sorted(total.items())}


def next_change(profile, now: datetime) -> datetime | None:
    """The first instant after ``now`` when the set of open windows changes (UTC), or None when
    it never does (no windows, or windows that are always open)."""
    now = _utc(now)
    windows = _windows(profile)
    current = {w.name for w in windows if w.is_open(now)}
    edges = sorted({t for w in windows for interval in w.occurrences(now) for t in interval if t > now})
    for edge in edges:
        if {w.name for w in windows if w.is_open(edge)} != current:
            return edge
    return None


class Timeline:
    """A profile's open windows over ``[since, until)``, worked out once (a replay asks at every
    pass): ``open_at`` and ``next_change`` answer as ``open_windows`` and ``next_change`` do,
    with times as epoch seconds (past ``until`` they are not to be relied on)."""

    def __init__(self, profile, since: datetime, until: datetime):
        self.windows = _windows(profile)
        # a day either side: an interval open at ``since`` began before it, one may end after ``until``
        lo, hi = _utc(since) - timedelta(days=2), _utc(until) + timedelta(days=2)
        spans = [(w.name, int(a.timestamp()), int(b.timestamp())) for w in self.windows for a, b in w.between(lo, hi)]
        edges = sorted({t for _, a, b in spans for t in (a, b)} | {int(lo.timestamp())})
        #: each edge where the open set changes, and the open set from there (names, profile order)
        self.edges: list[int] = []
        self.sets: list[tuple[str, ...]] = []
        for edge in edges:
            opened = {name for name, a, b in spans if a <= edge < b}
            names = tuple(w.name for w in self.windows if w.name in opened)
            if not self.sets or names != self.sets[-1]:
                self.edges.append(edge)
                self.sets.append(names)

    def open_at(self, now: int) -> tuple[str, ...]:
        """The names of the windows open at ``now``, in the profile's order."""
        return self.sets[max(0, bisect.bisect_right(self.edges, now) - 1)]

    def next_change(self, now: int) -> int | None:
        """The first instant after ``now`` when the open set changes."""
        i = bisect.bisect_right(self.edges, now)
        return self.edges[i] if i < len(self.edges) else None


def _windows(profile) -> list[Window]:
    entries = getattr(profile, "windows", profile)
    return list(_parse_cached(json.dumps(entries, sort_keys=True)))


@functools.lru_cache(maxsize=256)  # the scheduler asks for every team on every pass
def _parse_cached(text: str) -> tuple[Window, ...]:
    return tuple(parse_windows(json.loads(text)))


def _utc(now: datetime) -> datetime:
    if now.tzinfo is None:
        raise ValueError("a window is read at an aware datetime (one with a timezone), not a naive one")
    return now.astimezone(UTC)


def _parse(entry, path: str) -> Window:
    if not isinstance(entry, dict):
        raise InvalidRequest(
            f'{path} must be an object, e.g. {{"name": "nights", "days": ["Mon"], "start": "20:00", '
            f'"end": "08:00", "extra": {{"requests.nvidia.com/gpu": "2"}}}}, not {shown(entry)}'
        )
    unknown = sorted(map(str, set(entry) - set(_FIELDS)))
    if unknown:
        raise InvalidRequest(
            f"{path}: unknown field(s) {', '.join(map(shown, unknown))}; it takes {', '.join(_FIELDS)}"
        )
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InvalidRequest(f"{path}.name must be a non-empty string, not {shown(name)}")
    extra = entry.get("extra", {})
    if not isinstance(extra, dict):
        raise InvalidRequest(
            f'{path}.extra must be an object of resource to quantity, e.g. {{"requests.nvidia.com/gpu": "2"}}'
        )
    errs = quotaspec.hard_errors(extra, f"{path}.extra")
    if errs:
        raise InvalidRequest("; ".join(errs))
    on_close = entry.get("onClose", ON_CLOSE_FINISH)
    if on_close not in ON_CLOSE:
        raise InvalidRequest(f'{path}.onClose must be "finish" or "preempt", not {shown(on_close)}')
    return Window(
        name=name,
        days=_days(entry.get("days"), f"{path}.days"),
        start=_clock(entry.get("start"), f"{path}.start"),
        end=_clock(entry.get("end"), f"{path}.end"),
        timezone=_timezone(entry.get("timezone", "UTC"), f"{path}.timezone"),
        extra=tuple((k, str(Quantity(str(v)))) for k, v in sorted(extra.items())),
        on_close=on_close,
    )


def _days(value, path: str) -> frozenset[int]:
    if not isinstance(value, list) or not value:
        raise InvalidRequest(f'{path} must be a non-empty list of days, e.g. ["Sat", "Sun"], not {shown(value)}')
    bad = [d for d in value if d not in DAYS]
    if bad:
        raise InvalidRequest(f"{path}: unknown day {shown(bad[0])}; days are {', '.join(DAYS)}")
    return frozenset(DAYS.index(d) for d in value)


def _clock(value, path: str) -> time:
    match = _CLOCK.fullmatch(value) if isinstance(value, str) else None
    if not match:
        raise InvalidRequest(f'{path} must be a 24-hour time "HH:MM" such as "20:00", not {shown(value)}')
    return time(int(match[1]), int(match[2]))


def _timezone(value, path: str) -> str:
    # Only the database's own names: ZoneInfo opens the key as a path, so a folder ("America")
    # or a 300-character name raised IsADirectoryError or "File name too long" (500s).
    try:
        if not isinstance(value, str) or value not in _zone_names():
            raise ValueError
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidRequest(
            f'{path} must be an IANA timezone name such as "UTC" or "Europe/Paris", not {shown(value)}'
        ) from None
    return value


@functools.cache
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones())
