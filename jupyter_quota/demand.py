"""A team's demand over time: how much it asked for at once (pure; no I/O).

The signal is **concurrent requested amount** (GPUs, CPU cores or memory bytes) as a step
function of time: every job counts from its submission to its end, so the demand is what ran
*plus what waited or was refused* (a job that never started asks until the history ends). A
quota that refuses work hides its own need; counting only what ran would recommend the quota
that caused the refusals. ``running`` alone, from start to end, is what the quota held.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .history import JobRecord

#: What a record asks for, per resource of a row.
Amount = Callable[[JobRecord], float]


@dataclass(frozen=True)
class Step:
    """A step function on ``[times[0], until)``: ``values[i]`` holds on ``[times[i], times[i+1])``
    (the last one up to ``until``)."""

    times: tuple[int, ...]
    values: tuple[float, ...]
    until: int

    def segments(self) -> Iterable[tuple[int, int, float]]:
        """``(start, end, value)`` for each piece of positive length."""
        ends = (*self.times[1:], self.until)
        for start, end, value in zip(self.times, ends, self.values, strict=True):
            if end > start:
                yield start, end, value

    def share_above(self, level: float, spans: Iterable[tuple[int, int]] | None = None) -> float:
        """The share of the time the value is above ``level``: of all of it, or of ``spans``
        (``[start, end)`` pairs that do not overlap, such as working hours); 0 for no time."""
        if not self.times:
            return 0.0
        if spans is None:
            spans = [(self.times[0], self.until)]
        ends = (*self.times[1:], self.until)
        total = above = 0
        for start, end in spans:
            start, end = max(start, self.times[0]), min(end, self.until)
            if end <= start:
                continue
            total += end - start
            i = bisect.bisect_right(self.times, start) - 1
            while i < len(self.times) and self.times[i] < end:
                if self.values[i] > level + 1e-9:
                    above += min(end, ends[i]) - max(start, self.times[i])
                i += 1
        return above / total if total > 0 else 0.0

    def mean_below(self, level: float) -> float:
        """The time-average of ``min(value, level)``."""
        total = self.until - self.times[0] if self.times else 0
        if total <= 0:
            return 0.0
        return sum((e - s) * min(v, level) for s, e, v in self.segments()) / total


def demand(records: Iterable[JobRecord], since: int, until: int, amount: Amount, running: bool = False) -> Step:
    """The concurrent amount asked for (``running``: held) over ``[since, until)``."""
    changes: dict[int, float] = {}
    for r in records:
        size = amount(r)
        if not size:
            continue
        start = r.started if running else r.submitted
        if start is None:
            continue  # never started: it held nothing
        end = r.end(until)
        start = max(start, since)
        if end <= start:
            continue
        changes[start] = changes.get(start, 0.0) + size
        if end < until:
            changes[end] = changes.get(end, 0.0) - size
    times, values, level = [since], [0.0], 0.0
    for t in sorted(changes):
        level += changes[t]
        value = max(0.0, round(level, 9))  # float sums of 0.5s and 0.25s drift by 1e-16
        if t == times[-1]:
            values[-1] = value
        elif value != values[-1]:
            times.append(t)
            values.append(value)
    return Step(tuple(times), tuple(values), until)


def peaks(step: Step, since: int, bucket: int, count: int) -> list[float]:
    """The highest value of ``step`` in each of ``count`` buckets of ``bucket`` seconds from
    ``since`` (a plot's points: a peak inside a bucket stays visible, as a mean would hide it)."""
    out = [0.0] * count
    for start, end, value in step.segments():
        first = max(0, (start - since) // bucket)
        last = min(count - 1, (end - 1 - since) // bucket)
        for i in range(first, last + 1):
            if value > out[i]:
                out[i] = value
    return out
