"""Learning from finished jobs: a bounded, auditable correction of the estimate per model family
and regime, from the peaks ms-swift measured (``memory(GiB)``, see ``swiftlog.peak_memory_gib``).

Pure: records in, corrections and error tables out. The method is docs/estimator.md §13: the
factor is a high quantile of measured/estimated, so that after correction most past jobs of the
regime would have fitted; it is clamped, so that a few odd jobs cannot move estimates far, and
it is never applied from fewer than ``MIN_JOBS`` jobs.

A job's log is written by user code, so its peak is not a trusted measurement: each team learns
from its own jobs only (the caller picks the records), a peak no GPU of the job could hold or far
outside the estimate's range (``plausible``) is shown in the error table but not learned from, and
a correction for every team is one an admin approved (``shared_corrections``).
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
FAR = 2.0  # a peak past twice the range's upper end, or under half its lower end, is not learned from
SHARED_FIELDS = ("family", "regime", "factor", "approvedBy", "reason")


@dataclass(frozen=True)
class Measured:
    """One finished job: what was estimated for it and what ms-swift measured (GiB per GPU)."""

    family: str
    regime: str
    estimated_gib: float
    measured_gib: float
    #: learned from (``plausible``); an untrusted record is still in the error table
    trusted: bool = True

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
    #: "team": learned from the team's own jobs; "shared": approved by an admin for every team
    source: str = "team"
    approved_by: str = ""
    reason: str = ""

    def note(self) -> str:
        if self.source == "shared":
            why = f": {self.reason}" if self.reason else ""
            return (
                f"corrected x{self.factor:.2f} by a shared correction for {self.family} in regime "
                f"{self.regime}, approved by {self.approved_by}{why}"
            )
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
            "source": self.source,
        }


def usable(records: Iterable[Measured]) -> list[Measured]:
    """Records that can teach anything: both figures positive and finite."""
    return [
        r
        for r in records
        if r.estimated_gib > 0 and r.measured_gib > 0 and math.isfinite(r.estimated_gib + r.measured_gib)
    ]


def plausible(
    estimated_gib: float, measured_gib: float, gpu_gib: float | None, span_gib: tuple[float, float] | None
) -> bool:
    """Whether a logged peak may be learned from: no more than the GPU's memory (when known), and
    within ``FAR`` times the estimate's range (or the estimate, without one) either way."""
    if gpu_gib and measured_gib > gpu_gib:
        return False
    low, high = span_gib if span_gib else (estimated_gib, estimated_gib)
    return low / FAR <= measured_gib <= high * FAR


def corrections(records: Iterable[Measured]) -> dict[tuple[str, str], Correction]:
    """Every (family, regime) with at least ``MIN_JOBS`` usable, trusted records, and its correction."""
    groups: dict[tuple[str, str], list[Measured]] = defaultdict(list)
    for r in usable(records):
        if r.trusted:
            groups[(r.family, r.regime)].append(r)
    out = {}
    for (family, regime), group in groups.items():
        if len(group) < MIN_JOBS:
            continue
        raw = quantile([r.ratio for r in group], QUANTILE)
        out[(family, regime)] = Correction(family, regime, min(MAX_RAISE, max(MAX_LOWER, raw)), raw, len(group))
    return out


def shared_corrections(entries: Iterable[dict]) -> dict[tuple[str, str], Correction]:
    """The corrections an admin approved for every team (``JupyterQuota.shared_corrections``),
    each ``{family, regime, factor, approvedBy, reason?}``; ``ValueError`` names a bad field."""
    out = {}
    for i, entry in enumerate(entries):
        where = f"shared_corrections[{i}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{where} must be an object with {', '.join(SHARED_FIELDS)}")
        unknown = sorted(map(str, set(entry) - set(SHARED_FIELDS)))
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)}; it takes {', '.join(SHARED_FIELDS)}")
        for name in ("family", "regime", "approvedBy"):
            if not isinstance(entry.get(name), str) or not entry[name].strip():
                raise ValueError(f"{where}.{name} must be a non-empty string")
        factor = entry.get("factor")
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not MAX_LOWER <= factor <= MAX_RAISE:
            raise ValueError(f"{where}.factor must be a number from {MAX_LOWER} to {MAX_RAISE}, not {factor!r}")
        reason = entry.get("reason", "")
        if not isinstance(reason, str):
            raise ValueError(f"{where}.reason must be a string")
        key = (entry["family"], entry["regime"])
        out[key] = Correction(*key, float(factor), float(factor), 0, "shared", entry["approvedBy"], reason)
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
