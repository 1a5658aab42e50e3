"""A quota recommended from history, the way the Kubernetes VPA recommender sizes a container
(pure; no I/O).

The VPA recommender (``vertical-pod-autoscaler/pkg/recommender/logic/recommender.go`` and
``estimator.go``) keeps a histogram of samples whose weights decay with a 24 h half-life, takes
its P90 as the target, its P50 and P95 as the lower and upper bound, adds a 15 % safety margin to
all three, and widens the bounds while the history is short: with ``confidence`` the history's
length in days, ``upper = P95 x (1 + 1/confidence)`` and ``lower = P50 x (1 + 0.001/confidence)^-2``.

Here the signal is a team's **demand** (``demand.py``: concurrent requested GPUs, CPU or memory,
running plus waiting plus refused), a step function, so the weighted percentile is exact: each
piece of the step function weighs the integral of ``2^((t - until) / halfLife)`` over its span.
The recommended hard quota is the target rounded up to what a quota is set in (whole GPUs,
tenths of a core, whole GiB). How often demand exceeded the current quota is a share of the
**working hours** (``Settings.working``: Monday to Friday, 09:00-18:00 UTC by default), when
people wait for their jobs; nights and weekends would dilute a weekday peak.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from . import demand as demand_mod
from . import windows
from .history import JobRecord
from .quantity import Quantity
from .times import rfc3339

GIB = 2**30
#: VPA's defaults (``recommender.go``: targetCPUPercentile, lowerBoundCPUPercentile,
#: upperBoundCPUPercentile; ``safetyMarginFraction``; ``--cpu-histogram-decay-half-life``).
PERCENTILE, LOWER_PERCENTILE, UPPER_PERCENTILE = 0.9, 0.5, 0.95
MARGIN = 0.15
HALF_LIFE_HOURS = 168.0
WINDOW_DAYS = 28
#: The hours exceededShare counts, by default (``c.Recommendations.working_*``).
WORKING_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri")
WORKING_HOURS = "09:00-18:00"
WORKING_TIMEZONE = "UTC"
WORKING_NAMES = ("Recommendations.working_days", "Recommendations.working_hours", "Recommendations.working_timezone")
#: The most points a row's ``series`` has: a plot of the window, not a record of it.
SERIES_POINTS = 400


def working_hours(
    days: Iterable[str] = WORKING_DAYS, hours: str = WORKING_HOURS, timezone: str = WORKING_TIMEZONE
) -> windows.Window | None:
    """The working hours as a window (``hours`` ``HH:MM-HH:MM``; an end at or before the start runs
    past midnight, ``00:00-00:00`` is the whole day); ``hours`` empty: every hour counts (None).
    :class:`InvalidRequest` names the setting that is wrong."""
    if hours == "":
        return None
    return windows.parse_hours(list(days), hours, timezone, WORKING_NAMES)


@dataclass(frozen=True)
class Settings:
    """How recommendations are made (``Recommendations`` traits in ``recommendations.py``)."""

    percentile: float = PERCENTILE
    margin: float = MARGIN
    half_life_hours: float = HALF_LIFE_HOURS
    window_days: float = WINDOW_DAYS
    #: the hours exceededShare counts (None: every hour)
    working: windows.Window | None = field(default_factory=working_hours)


@dataclass(frozen=True)
class Resource:
    """A quota resource a row is about: its key, how a record asks for it, its unit in words."""

    key: str
    amount: demand_mod.Amount
    unit: str  # "GPUs", "cores", "GiB"
    scale: float  # amount per unit (memory: bytes per GiB)
    step: float  # what a quota is rounded up to, in units


def resources(gpu_resource: str, hard: Mapping[str, str]) -> list[Resource]:
    """The rows of a team: its GPUs always, CPU and memory where its quota limits them."""
    out = [Resource(f"requests.{gpu_resource}", lambda r: r.gpus, "GPUs", 1.0, 1.0)]
    if "requests.cpu" in hard:
        out.append(Resource("requests.cpu", lambda r: r.cpus, "cores", 1.0, 0.1))
    if "requests.memory" in hard:
        out.append(Resource("requests.memory", lambda r: r.memory, "GiB", float(GIB), 1.0))
    return out


def recommend_team(
    team: str,
    namespace: str,
    hard: Mapping[str, str],
    gpu_resource: str,
    records: Iterable[JobRecord],
    since: int,
    until: int,
    settings: Settings = Settings(),
    series: bool = False,
    waits_known: bool = True,
) -> list[dict]:
    """The team's rows (``GET /recommendations``) from its records over ``[since, until)``;
    with ``series``, each row also has its demand and what ran over time (``demand_series``).
    ``waits_known`` False: the records are usage spans (``history.from_spans``), each job submitted
    when it started, so the wait is unknown (None, said in words) rather than 0."""
    records = list(records)
    first = min((r.submitted for r in records), default=until)
    # VPA's confidence: the history's length in days (at least an hour: the first sample)
    confidence = max((until - max(first, since)) / 86400, 1 / 24)
    waits = sorted(r.wait(until) for r in records if since <= r.submitted < until)
    spans = None  # every hour counts
    if settings.working is not None:
        moments = (datetime.fromtimestamp(since, UTC), datetime.fromtimestamp(until, UTC))
        spans = [(int(a.timestamp()), int(b.timestamp())) for a, b in settings.working.between(*moments)]
    wait_p90 = _plain_percentile(waits, 0.9) if waits_known else None
    rows = []
    for res in resources(gpu_resource, hard):
        asked = demand_mod.demand(records, since, until, res.amount)
        held = demand_mod.demand(records, since, until, res.amount, running=True)
        stat = weighted_percentiles(
            asked, settings.half_life_hours * 3600, (settings.percentile, LOWER_PERCENTILE, UPPER_PERCENTILE)
        )
        p90, p50, p95 = (v / res.scale for v in stat)
        factor = 1 + settings.margin
        target = p90 * factor
        lower = p50 * factor * (1 + 0.001 / confidence) ** -2
        upper = p95 * factor * (1 + 1 / confidence)
        current = _units(hard.get(res.key), res.scale)
        exceeded = None
        if current is not None and spans != []:  # a window without working hours judges nothing
            exceeded = asked.share_above(current * res.scale, spans)
        idle = None
        if current:
            idle = 1 - held.mean_below(current * res.scale) / (current * res.scale)
        rows.append(
            {
                "team": team,
                "namespace": namespace,
                "resource": res.key,
                "current": hard.get(res.key),
                "recommended": _quantity(_round_up(target, res.step), res),
                "lower": _quantity(_round_down(lower, res.step), res),
                "upper": _quantity(_round_up(upper, res.step), res),
                "demandP90": _quantity(round(p90, 3), res),
                "exceededShare": None if exceeded is None else round(exceeded, 4),
                "idleShare": None if idle is None else round(idle, 4),
                "waitP90Seconds": None if wait_p90 is None else int(wait_p90),
                "explanation": _explain(
                    team, res, since, until, current, exceeded, wait_p90, p90, target, settings, waits_known
                ),
            }
        )
        if series:
            rows[-1]["series"] = demand_series(asked, held, res, current, since, until)
    return rows


def demand_series(asked, held, res: Resource, current: float | None, since: int, until: int) -> dict:
    """A row's plot: the peak demand and the peak of what ran in each bucket (whole hours, at
    most ``SERIES_POINTS`` of them), in the row's unit, beside the current quota."""
    hours = max(1, math.ceil((until - since) / 3600 / SERIES_POINTS))
    bucket = hours * 3600
    count = max(1, math.ceil((until - since) / bucket))
    return {
        "since": rfc3339(since),
        "step": bucket,
        "unit": res.unit,
        "quota": current,
        "demand": [round(v / res.scale, 3) for v in demand_mod.peaks(asked, since, bucket, count)],
        "held": [round(v / res.scale, 3) for v in demand_mod.peaks(held, since, bucket, count)],
    }


def weighted_percentiles(step: demand_mod.Step, half_life: float, percentiles: Iterable[float]) -> list[float]:
    """Percentiles of the step function's values, each piece weighted by the integral of
    ``2^((t - until) / half_life)`` over it (recent time weighs more; 0 pieces count too)."""
    rate = math.log(2) / half_life
    pieces = []
    for start, end, value in step.segments():
        weight = math.exp((end - step.until) * rate) - math.exp((start - step.until) * rate)
        pieces.append((value, weight))
    pieces.sort()
    total = sum(w for _, w in pieces)
    out = []
    for p in percentiles:
        if total <= 0:
            out.append(0.0)
            continue
        goal, seen, found = p * total, 0.0, pieces[-1][0]
        for value, weight in pieces:
            seen += weight
            if seen >= goal * (1 - 1e-12):
                found = value
                break
        out.append(found)
    return out


def _plain_percentile(values: list[float], p: float) -> float | None:
    """The nearest-rank percentile of sorted ``values`` (None for none)."""
    if not values:
        return None
    return values[max(0, math.ceil(p * len(values)) - 1)]


def _units(text: str | None, scale: float) -> float | None:
    if text is None:
        return None
    return float(Quantity(str(text)).as_fraction()) / scale


def _round_up(value: float, step: float) -> float:
    return math.ceil(round(value / step, 6)) * step


def _round_down(value: float, step: float) -> float:
    return math.floor(round(value / step, 6)) * step


def _quantity(units: float, res: Resource) -> str:
    """A quantity string as a quota holds it: ``3``, ``2500m``, ``64Gi``."""
    if res.unit == "GiB":
        gib = units
        return f"{int(gib)}Gi" if float(gib).is_integer() else str(Quantity(str(round(gib * GIB))))
    if float(units).is_integer():
        return str(int(units))
    return f"{round(units * 1000)}m"


def _explain(team, res, since, until, current, exceeded, wait_p90, p90, target, settings, waits_known=True) -> str:
    days = round((until - since) / 86400)
    parts = [f"in the last {days} days {team}"]
    hours = "the time" if settings.working is None else f"working hours ({describe_hours(settings.working)})"
    if current is not None and exceeded is None:
        parts.append(f"had no {hours} to judge its quota of {_number(current)} {res.unit} by")
    elif current is not None:
        parts.append(f"needed more than {_number(current)} {res.unit} {round(100 * exceeded)}% of {hours}")
    else:
        parts.append(f"has no quota on {res.key}")
    words = " ".join(parts)
    if not waits_known:
        wait = "not recorded (this history is usage spans: jobs that waited or were refused are not in its demand)"
    else:
        wait = "no jobs" if wait_p90 is None else show_duration(wait_p90)
    return (
        f"{words}; p90 wait {wait}; its demand's P{round(100 * settings.percentile)} (recent days weigh more, "
        f"half-life {_number(settings.half_life_hours)} h) is {_number(round(p90, 2))} {res.unit}, "
        f"plus {round(100 * settings.margin)}% margin: {_number(round(target, 2))}"
    )


def describe_hours(window: windows.Window) -> str:
    """``Mon-Fri 09:00-18:00 UTC``, ``Mon, Wed 20:00-08:00 Europe/Paris``."""
    days = sorted(window.days)
    if len(days) > 2 and days == list(range(days[0], days[-1] + 1)):
        named = f"{windows.DAYS[days[0]]}-{windows.DAYS[days[-1]]}"
    else:
        named = ", ".join(windows.DAYS[d] for d in days)
    return f"{named} {window.start:%H:%M}-{window.end:%H:%M} {window.timezone}"


def show_duration(seconds: float) -> str:
    """``2 h 10 m``, ``45 m``, ``30 s``."""
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    hours, minutes = divmod(seconds // 60, 60)
    if hours >= 24:
        days, hours = divmod(hours, 24)
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} m" if minutes else f"{hours} h"
    return f"{minutes} m"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
