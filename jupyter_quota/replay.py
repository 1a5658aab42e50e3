"""What-if replay: recorded jobs run again through the real scheduler under proposed profiles
(pure; no I/O).

Each recorded job arrives when it was submitted, asks for its GPUs at its priority, and runs for
as long as it ran (a job that never started: its team's median run). Arrival goes through the
quota admission the local backend applies (``backends/local/admission.py``): a high or normal
job is refused when the team's live high and normal jobs and it would pass the team's effective
hard quota (its windows' ``extra`` added); a best-effort job when all the team's live jobs and it
would pass hard plus ``borrowingLimit``. Admitted jobs wait for ``elastic.decide``, the very pass
the local backend runs, on a fake clock that jumps from event to event (an arrival, an end, a
preempted job gone after its grace period, a window opening or closing), at most one pass per
``pass_seconds`` as the backend's loop does. A preempted job holds its GPUs for ``grace``
seconds, then is requeued with the work it had left.

Per team it reports waits (p50, p90, of the jobs that started), utilization of its quota, GPU
hours borrowed, preemptions and refusals; ``capacity_curve`` replays at several cluster sizes,
with what each would cost at the configured GPU price.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction

from . import elastic, elasticteams, priority, windows
from .history import JobRecord
from .quantity import Quantity

#: The one resource the scheduler shares out (every team's ``requests.<gpuResource>``).
GPU = "gpu"
PASS_SECONDS = 60
GRACE_SECONDS = 30
#: Multiples of the machine's GPUs a capacity curve replays at, by default.
CURVE_FACTORS = (0.5, 0.625, 0.75, 0.875, 1.0, 1.25, 1.5, 2.0)


@dataclass
class TeamResult:
    team: str
    namespace: str
    jobs: int = 0
    started: int = 0
    refused: int = 0
    waiting: int = 0  # admitted, not started by the end
    waits: list[int] = field(default_factory=list)
    recorded_waits: list[int] = field(default_factory=list)
    gpu_seconds: float = 0.0
    borrowed_gpu_seconds: float = 0.0
    preemptions: int = 0
    quota_gpu_seconds: float = 0.0

    def to_json(self) -> dict:
        waits = sorted(self.waits)
        recorded = sorted(self.recorded_waits)
        return {
            "team": self.team,
            "namespace": self.namespace,
            "jobs": self.jobs,
            "started": self.started,
            "refused": self.refused,
            "waiting": self.waiting,
            "waitP50Seconds": percentile(waits, 0.5),
            "waitP90Seconds": percentile(waits, 0.9),
            "recordedWaitP50Seconds": percentile(recorded, 0.5),
            "recordedWaitP90Seconds": percentile(recorded, 0.9),
            "gpuHours": round(self.gpu_seconds / 3600, 3),
            "utilization": round(self.gpu_seconds / self.quota_gpu_seconds, 4) if self.quota_gpu_seconds else None,
            "borrowedGpuHours": round(self.borrowed_gpu_seconds / 3600, 3),
            "preemptions": self.preemptions,
        }


@dataclass
class Result:
    since: int
    until: int
    capacity: int
    teams: dict[str, TeamResult]
    passes: int
    #: teams in the history with no profile: their jobs were left out
    unknown_teams: dict[str, int]

    def to_json(self) -> dict:
        used = sum(t.gpu_seconds for t in self.teams.values())
        span = max(1, self.until - self.since)
        return {
            "since": _iso(self.since),
            "until": _iso(self.until),
            "gpus": self.capacity,
            "utilization": round(used / (self.capacity * span), 4) if self.capacity else None,
            "passes": self.passes,
            "teams": [t.to_json() for t in self.teams.values()],
            "teamsWithoutProfile": [{"team": k, "jobs": v} for k, v in sorted(self.unknown_teams.items())],
        }

    def worst_wait_p90(self) -> int:
        return max((percentile(sorted(t.waits), 0.9) or 0 for t in self.teams.values()), default=0)


def replay(
    records: Sequence[JobRecord],
    profiles: Iterable,
    capacity: int,
    since: int,
    until: int,
    pass_seconds: int = PASS_SECONDS,
    grace: int = GRACE_SECONDS,
    aligned: bool = False,
) -> Result:
    """Replay the records submitted in ``[since, until)`` under ``profiles`` on ``capacity`` GPUs.

    A pass runs at the first event at least ``pass_seconds`` after the last pass; ``aligned``:
    at the first multiple of ``pass_seconds`` after ``since`` at or after an event, as a loop that
    wakes on a fixed clock does (a job waits for the next tick).
    """
    replayer = _Replay(records, list(profiles), capacity, since, until, pass_seconds, grace)
    replayer.aligned = aligned
    return replayer.run()


def capacity_curve(
    records: Sequence[JobRecord],
    profiles: Iterable,
    since: int,
    until: int,
    sizes: Iterable[int],
    gpu_hour: float | None = None,
    currency: str | None = None,
    wait_target: int = 3600,
    **kw,
) -> dict:
    """Replays at each cluster size: per size the worst team's p90 wait, refusals, utilization and
    the cost of the GPUs over the window; and the fewest GPUs that keep every team's p90 wait
    within ``wait_target`` seconds (None when no size does)."""
    profiles = list(profiles)
    hours = (until - since) / 3600
    points = []
    for size in sorted(set(sizes)):
        result = replay(records, profiles, size, since, until, **kw)
        teams = result.teams.values()
        points.append(
            {
                "gpus": size,
                "worstWaitP90Seconds": result.worst_wait_p90(),
                "refused": sum(t.refused for t in teams),
                "waiting": sum(t.waiting for t in teams),
                "utilization": result.to_json()["utilization"],
                "cost": None if gpu_hour is None else round(size * hours * gpu_hour, 2),
            }
        )
    meets = [p["gpus"] for p in points if p["worstWaitP90Seconds"] <= wait_target and p["waiting"] == 0]
    return {
        "currency": currency,
        "waitTargetSeconds": wait_target,
        "gpusForWaitTarget": min(meets) if meets else None,
        "points": points,
    }


def curve_sizes(capacity: int, largest_job: int, factors: Sequence[float] = CURVE_FACTORS) -> list[int]:
    """Cluster sizes around ``capacity``, none smaller than the largest job."""
    return sorted({max(largest_job, 1, round(capacity * f)) for f in factors})


def percentile(values: list, p: float) -> int | None:
    """Nearest-rank percentile of sorted ``values``; None for none."""
    if not values:
        return None
    return int(values[max(0, math.ceil(p * len(values)) - 1)])


def gpus_of(profile) -> int | None:
    """The GPUs a profile's hard quota allows (None: no GPU quota)."""
    value = profile.hard.get(f"requests.{profile.gpuResource}")
    return None if value is None else math.floor(Quantity(str(value)).as_fraction())


# -- the simulation ------------------------------------------------------------------------------


@dataclass
class _Live:
    job: elastic.Job
    team: str
    left: int  # seconds of work left
    submitted: int
    started_at: int | None = None
    ends: int | None = None
    recorded_wait: int | None = None


class _Replay:
    def __init__(self, records, profiles, capacity, since, until, pass_seconds, grace):
        self.profiles = {p.team: p for p in profiles}
        self.capacity = capacity
        self.since, self.until = since, until
        self.pass_seconds, self.grace = max(1, pass_seconds), grace
        self.results = {p.team: TeamResult(p.team, p.namespace) for p in profiles}
        self.unknown: dict[str, int] = {}
        self.arrivals = self._arrivals(records)
        self.running: dict[int, _Live] = {}
        self.pending: dict[int, _Live] = {}
        self.live: dict[str, dict[int, _Live]] = {}  # namespace -> its admitted, unfinished jobs
        self.gone: list[tuple[int, int]] = []  # (when its grace ends, key): preempted, holding its GPUs
        self.ends: list[tuple[int, int]] = []  # (when, key) of running jobs
        self.nominated: set[int] = set()
        self.passes = 0
        self.windowed = [p for p in profiles if p.windows]
        span = (datetime.fromtimestamp(since, UTC), datetime.fromtimestamp(until, UTC))
        self.timelines = [windows.Timeline(p, *span) for p in self.windowed]  # worked out once
        #: without borrowing limits or windows no job can run over its team's quota: none borrows
        self.may_borrow = bool(self.windowed) or any(p.borrowingLimit for p in profiles)
        self._last_now = since
        self.aligned = False  # passes on the clock's pass_seconds ticks from since (``replay``)
        self._teams_key: tuple | None = None
        self._teams_at: dict[str, elastic.Team] = {}
        #: the scheduler's running jobs, kept between passes (a pass costs what changed)
        self.cohort = elastic.Cohort(self._teams(since), {GPU: capacity})
        # Use and borrowing are integrated per team by rates that change only at a pass or an end:
        self.team_of = {p.namespace: p.team for p in profiles}
        self.held: dict[str, dict[int, _Live]] = {p.namespace: {} for p in profiles}  # running, by namespace
        self.borrowed: dict[str, dict[object, bool]] = {}  # namespace -> its jobs running borrowed, as of the last pass
        self.rates = {p.namespace: (0.0, 0.0) for p in profiles}  # GPUs held, GPUs borrowed
        self.rated_since = dict.fromkeys(self.rates, since)
        self.stale: set[str] = set()  # namespaces whose running jobs changed since the last pass
        self.touched: set[str] = set()  # namespaces whose rates change now

    def _arrivals(self, records) -> list[_Live]:
        durations: dict[str, list[int]] = {}
        for r in records:
            if r.started is not None and r.finished is not None:
                durations.setdefault(r.team, []).append(r.finished - r.started)
        medians = {t: sorted(d)[len(d) // 2] for t, d in durations.items()}
        amounts: dict[float, int | Fraction] = {}  # GPUs as recorded -> as the scheduler counts them
        out = []
        for order, r in enumerate(sorted(records, key=lambda r: r.submitted)):
            if not self.since <= r.submitted < self.until:
                continue
            profile = self.profiles.get(r.team)
            if profile is None:
                self.unknown[r.team] = self.unknown.get(r.team, 0) + 1
                continue
            if r.started is None:
                work = medians.get(r.team, 3600)
            else:
                work = (r.finished if r.finished is not None else self.until) - r.started
            gpus = amounts.get(r.gpus)
            if gpus is None:
                exact = Fraction(r.gpus).limit_denominator(1000)
                gpus = amounts[r.gpus] = int(exact) if exact.denominator == 1 else exact
            usage = {GPU: gpus}
            level = r.priority if r.priority in priority.PRIORITIES else priority.NORMAL
            live = _Live(elastic.Job(order, profile.namespace, level, usage, order), r.team, max(1, work), r.submitted)
            if r.started is not None:
                live.recorded_wait = r.started - r.submitted
            out.append(live)
        return out

    def run(self) -> Result:
        now, index, last = self.since, 0, self.since
        while True:
            nxt = self._next_event(index)
            if nxt is None or nxt >= self.until:
                self._advance(last, self.until)
                break
            # one pass per pass_seconds at most, as the backend's loop: events in between wait for it
            if self.aligned:
                now = self.since - (self.since - nxt) // self.pass_seconds * self.pass_seconds  # the tick at or after
                now = max(now, last + self.pass_seconds) if self.passes else now
            else:
                now = max(nxt, last + self.pass_seconds) if self.passes else nxt
            now = min(now, self.until)
            if now >= self.until:
                self._advance(last, self.until)
                break
            self._advance(last, now)
            last = now
            index = self._events(now, index)
            self._pass(now)
            for namespace in self.touched:
                self._rate(namespace, now)
            self.touched.clear()
        for live in self.pending.values():
            self.results[live.team].waiting += 1
        return Result(self.since, self.until, self.capacity, self.results, self.passes, self.unknown)

    def _next_event(self, index: int) -> int | None:
        candidates = []
        if index < len(self.arrivals):
            candidates.append(self.arrivals[index].submitted)
        if self.ends:
            candidates.append(self.ends[0][0])
        if self.gone:
            candidates.append(self.gone[0][0])
        if self.windowed and (self.pending or self.running):
            candidates.append(self._next_window(self._last_now))
        candidates = [c for c in candidates if c is not None]
        return min(candidates) if candidates else None

    def _next_window(self, now: int) -> int | None:
        edges = [e for e in (t.next_change(now) for t in self.timelines) if e is not None]
        return min(edges) if edges else None

    def _events(self, now: int, index: int) -> int:
        self._last_now = now
        while self.ends and self.ends[0][0] <= now:
            _, key = heapq.heappop(self.ends)
            live = self.running.get(key)
            if live is not None and not live.job.preempting and live.ends is not None and live.ends <= now:
                del self.live[live.job.namespace][key]
                self._stop(live, now)
        while self.gone and self.gone[0][0] <= now:
            _, key = heapq.heappop(self.gone)
            live = self.running[key]
            self._stop(live, now)
            live.job.preempting, live.job.preempted_for = False, None
            self.pending[key] = live
        teams = self._teams(now)
        while index < len(self.arrivals) and self.arrivals[index].submitted <= now:
            live = self.arrivals[index]
            index += 1
            result = self.results[live.team]
            result.jobs += 1
            if self._admit(live, teams):
                self.pending[live.job.key] = live
                self.live.setdefault(live.job.namespace, {})[live.job.key] = live
            else:
                result.refused += 1
        return index

    def _stop(self, live: _Live, now: int) -> None:
        """A running job ended, or a preempted one is gone: it holds no GPUs from ``now``."""
        namespace, key = live.job.namespace, live.job.key
        self.cohort.remove(live.job)
        del self.running[key], self.held[namespace][key]
        self.borrowed.get(namespace, {}).pop(key, None)
        self.touched.add(namespace)
        self.stale.add(namespace)  # its borrowing is worked out again at the next pass

    def _admit(self, live: _Live, teams: Mapping[str, elastic.Team]) -> bool:
        """The admission of ``backends/local/admission.py``, on GPUs."""
        team = teams[live.job.namespace]
        if GPU not in team.nominal:
            return True
        mine = [j.job for j in self.live.get(live.job.namespace, {}).values() if not j.job.preempting]
        size = live.job.usage[GPU]
        if live.job.priority == priority.BEST_EFFORT:
            total = sum(j.usage[GPU] for j in mine)
            return total + size <= team.nominal[GPU] + team.borrowing_limit.get(GPU, 0)
        guaranteed = sum(j.usage[GPU] for j in mine if j.priority != priority.BEST_EFFORT)
        return guaranteed + size <= team.nominal[GPU]

    def _pass(self, now: int) -> None:
        if not self.pending and not self.windowed:
            return
        self.passes += 1
        teams = self._teams(now)
        if teams is not self.cohort.teams:
            self.stale.update(self.held)  # every team's borrowing may change with its quota
        for key, live in self.pending.items():
            live.job.nominated = key in self.nominated
        plan = self._decide(teams, [j.job for j in self.pending.values()])
        for d in plan.decisions:
            if d.action == elastic.START:
                self.nominated.discard(d.key)
                live = self.pending.pop(d.key)
                if live.started_at is None:
                    live.started_at = now
                    result = self.results[live.team]
                    result.started += 1
                    result.waits.append(now - live.submitted)
                    if live.recorded_wait is not None:
                        result.recorded_waits.append(live.recorded_wait)
                live.ends = now + live.left
                self.running[d.key] = live
                self.held[live.job.namespace][d.key] = live
                self.stale.add(live.job.namespace)
                heapq.heappush(self.ends, (live.ends, d.key))
            elif d.action == elastic.PREEMPT:
                live = self.running[d.key]
                live.job.preempting, live.job.preempted_for = True, d.preemptor
                live.left = max(1, (live.ends or now) - now)
                live.ends = None
                heapq.heappush(self.gone, (now + self.grace, d.key))
                self.results[live.team].preemptions += 1
                self.stale.add(live.job.namespace)
            elif d.reason == "WaitingForPreemption":
                self.nominated.add(d.key)
            else:
                self.nominated.discard(d.key)
        if self.may_borrow:  # as of this pass, as the backend marks its running jobs
            for namespace in self.stale:
                self.borrowed[namespace] = dict(self.cohort.borrowed_in(namespace))
        self.touched |= self.stale
        self.stale.clear()

    def _decide(self, teams: dict[str, elastic.Team], pending: list[elastic.Job]) -> elastic.Plan:
        """One pass of the scheduler on the kept cohort (a test compares it with ``elastic.decide``)."""
        self.cohort.set_teams(teams)
        return self.cohort.decide(pending)

    def _rate(self, namespace: str, now: int) -> None:
        """The team's use and borrowing so far at the rates that held, and its rates from ``now``."""
        result = self.results[self.team_of[namespace]]
        used, borrowed = self.rates[namespace]
        dt = now - self.rated_since[namespace]
        result.gpu_seconds += used * dt
        result.borrowed_gpu_seconds += borrowed * dt
        self.rated_since[namespace] = now
        flags = self.borrowed.get(namespace, {})
        used = borrowed = 0.0
        for key, live in self.held[namespace].items():
            gpus = float(live.job.usage[GPU])
            used += gpus
            if flags.get(key):
                borrowed += gpus
        self.rates[namespace] = (used, borrowed)

    def _advance(self, start: int, end: int) -> None:
        """The quotas over ``[start, end)``; at the end, use and borrowing up to ``until``."""
        if end == self.until:
            for namespace in self.rates:
                self._rate(namespace, end)
        dt = end - start
        if dt <= 0:
            return
        if self.windowed or end == self.until:  # without windows the quotas never change: once, at the end
            span = dt if self.windowed else self.until - self.since
            teams = self._teams(start)
            for result in self.results.values():
                nominal = teams[result.namespace].nominal.get(GPU)
                if nominal:
                    result.quota_gpu_seconds += float(nominal) * span

    def _teams(self, now: int) -> dict[str, elastic.Team]:
        """Each team's elastic settings at ``now`` (cached while no window opens or closes)."""
        key = self._window_key(now)
        if self._teams_key != key:
            self._teams_key, self._teams_at = key, _teams(self.profiles.values(), now)
        return self._teams_at

    def _window_key(self, now: int):
        return tuple(t.open_at(now) for t in self.timelines)


def _teams(profiles, now: int) -> dict[str, elastic.Team]:
    """The scheduler's teams, as the local backend's pass builds them (``elasticteams.team``), on
    the effective hard quota (the open windows' ``extra`` added)."""
    moment = datetime.fromtimestamp(now, UTC)
    return {p.namespace: elasticteams.team(p, moment, GPU, add_windows=True) for p in profiles}


def _iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
