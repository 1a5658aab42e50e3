"""Learning from finished jobs: a bounded, auditable correction of the estimate per model family
and regime, from the peaks ms-swift measured (``memory(GiB)``, see ``swiftlog.peak_memory_gib``).

Pure: records in, corrections and error tables out. The method is docs/estimator.md §13: the
factor is a high quantile of measured/estimated, so that after correction most past jobs of the
regime would have fitted; it is clamped, so that a few odd jobs cannot move estimates far, and
it is never applied from fewer than ``MIN_JOBS`` jobs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace

MIN_JOBS = 3  # a correction needs this many measured jobs of one family and regime
QUANTILE = 0.9  # of measured/estimated: the correction covers 9 in 10 past jobs
MAX_RAISE = 1.5  # an estimate is raised by at most 50% ...
MAX_LOWER = 0.95  # ... and lowered by at most 5%: under-prediction is the failure that hurts


@dataclass(frozen=True)
class Measured:
    """One finished job: what was estimated for it and what ms-swift measured (GiB per GPU)."""

    family: str
    regime: str
    estimated_gib: float
    measured_gib: float

    @property
    def ratio(self) -> float:
        return self.measured_gib / self.estimated_gib

    @property
    def error(self) -> float:
        """Signed relative error of the estimate: negative when it under-predicted."""
        return (self.estimated_gib - self.measured_gib) / self.measured_gib


@dataclass(frozen=True)
class Correction:
    """The factor applied to one family and regime's estimates, and what it rests on."""

    family: str
    regime: str
    factor: float  # clamped to [MAX_LOWER, MAX_RAISE]
    raw: float  # the quantile before clamping
    jobs: int

    def note(self) -> str:
        clamp = "" if self.factor == self.raw else f" (clamped from x{self.raw:.2f})"
        return (
            f"corrected x{self.factor:.2f}{clamp} from {self.jobs} finished jobs of {self.family} "
            f"in regime {self.regime} (the {QUANTILE:.0%} quantile of measured/estimated)"
        )

    def to_json(self) -> dict:
        return {
            "family": self.family,
            "regime": self.regime,
            "factor": round(self.factor, 4),
            "raw": round(self.raw, 4),
            "jobs": self.jobs,
            "note": self.note(),
        }


def usable(records: Iterable[Measured]) -> list[Measured]:
    """Records that can teach anything: both figures positive and finite."""
    return [
        r
        for r in records
        if r.estimated_gib > 0 and r.measured_gib > 0 and math.isfinite(r.estimated_gib + r.measured_gib)
    ]


def corrections(records: Iterable[Measured]) -> dict[tuple[str, str], Correction]:
    """Every (family, regime) with at least ``MIN_JOBS`` usable records, and its correction."""
    groups: dict[tuple[str, str], list[Measured]] = defaultdict(list)
    for r in usable(records):
        groups[(r.family, r.regime)].append(r)
    out = {}
    for (family, regime), group in groups.items():
        if len(group) < MIN_JOBS:
            continue
        raw = quantile([r.ratio for r in group], QUANTILE)
        out[(family, regime)] = Correction(family, regime, min(MAX_RAISE, max(MAX_LOWER, raw)), raw, len(group))
    return out


def regime_of(estimate) -> str:
    """The regime an estimate learns in: method/parallelism/family as the range's regime before
    any fallback (``ranges.regime_of``), e.g. ``qlora/zero2/dense``."""
    from .ranges import regime_of as regime_key

    if estimate.model is None or estimate.args is None:
        return "unknown"
    return "/".join(regime_key(estimate.model, estimate.args, estimate.gpus))


def family_of(estimate) -> str:
    return estimate.model.model_type if estimate.model is not None else "unknown"


def corrected(estimate, fixes: dict[tuple[str, str], Correction]):
    """``estimate`` (an ``Estimate``) with its family and regime's correction applied, if there is
    one: the peak (and range) scaled, the difference in the breakdown's ``overhead`` (the parts
    still add up to the peak), and the correction named in the assumptions and ``correction``."""
    fix = fixes.get((family_of(estimate), regime_of(estimate)))
    if fix is None:
        return estimate
    peak = estimate.peak_bytes_per_gpu
    raised = math.ceil(peak * fix.factor)
    breakdown = dict(estimate.breakdown, overhead=estimate.breakdown["overhead"] + raised - peak)
    changes = {
        "peak_bytes_per_gpu": raised,
        "breakdown": breakdown,
        "assumptions": [*estimate.assumptions, fix.note()],
        "correction": fix.to_json(),
    }
    if estimate.range is not None:  # a plan fits the range's upper end: it moves with the peak
        low, high = (math.ceil(b * fix.factor) for b in (estimate.range.low, estimate.range.high))
        changes["range"] = estimate.range._replace(low=low, high=high)
    return replace(estimate, **changes)


def error_table(records: Iterable[Measured]) -> list[dict]:
    """Per family and regime, then all rows: how far the estimates were from the measured peaks
    (before any correction), and the correction they now get."""
    rows = usable(records)
    fixes = corrections(rows)
    groups: dict[tuple[str, str], list[Measured]] = defaultdict(list)
    for r in rows:
        groups[(r.family, r.regime)].append(r)
    table = [
        _row(family, regime, group, fixes.get((family, regime))) for (family, regime), group in sorted(groups.items())
    ]
    if rows:
        table.append(_row("all", "all", rows, None))
    return table


def _row(family: str, regime: str, group: list[Measured], fix: Correction | None) -> dict:
    errors = [abs(r.error) for r in group]
    return {
        "family": family,
        "regime": regime,
        "jobs": len(group),
        "medianErrorPct": round(100 * quantile(errors, 0.5), 1),
        "p90ErrorPct": round(100 * quantile(errors, 0.9), 1),
        "underPredictedOver10Pct": round(sum(r.error < -0.10 for r in group) / len(group), 3),
        "correction": fix.to_json() if fix else None,
    }


def quantile(values: list[float], q: float) -> float:
    """The q-quantile by linear interpolation between order statistics (numpy's default)."""
    if not values:
        raise ValueError("quantile of no values")
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
