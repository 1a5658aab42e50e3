"""Each job's estimate and the peak ms-swift measured, kept in the service's records (``records.py``,
table ``peaks``) for both backends: what ``estimator.learning`` learns from, and what a job's
``memory`` field and an out-of-memory re-plan show.
"""

from __future__ import annotations

import json
import time

from .estimator.learning import Measured, family_of, plausible, regime_of
from .quantity import parse_quantity
from .records import open_records

GIB = 1024**3


def remember(state_dir: str, job: dict, profile, shown, raw) -> None:
    """Record the estimate a new job was shown (``shown``, maybe corrected) and the uncorrected one."""
    gpu_bytes = None
    if profile.gpuMemory:
        gpu_bytes = parse_quantity(profile.gpuMemory).value()
    span = (shown.range.low, shown.range.high) if shown.range is not None else (None, None)
    with open_records(state_dir).write() as con:
        con.execute(
            "INSERT OR REPLACE INTO peaks (namespace, job, team, owner, created_at, family, regime, gpu,"
            " gpu_bytes, gpus, args, estimated_bytes, raw_bytes, range_lo, range_hi)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                job["namespace"],
                job["name"],
                profile.team,
                job["owner"],
                time.time(),
                family_of(raw),
                regime_of(raw),
                profile.gpuModel,
                gpu_bytes,
                raw.gpus,
                json.dumps(raw.args.to_argv() if raw.args else []),
                shown.peak_bytes_per_gpu,
                raw.peak_bytes_per_gpu,
                span[0],
                span[1],
            ),
        )


def find(state_dir: str, namespace: str, name: str) -> dict | None:
    with open_records(state_dir).read() as con:
        row = con.execute("SELECT * FROM peaks WHERE namespace = ? AND job = ?", (namespace, name)).fetchone()
    return dict(row) if row else None


def learn(state_dir: str, namespace: str, name: str, measured_gib: float | None, out_of_memory: bool) -> dict | None:
    """Store what an ended job's log said, once (a second call changes nothing); the record."""
    with open_records(state_dir).write() as con:
        con.execute(
            "UPDATE peaks SET learned_at = ?, measured_gib = ?, out_of_memory = ?"
            " WHERE namespace = ? AND job = ? AND learned_at IS NULL",
            (time.time(), measured_gib, int(out_of_memory), namespace, name),
        )
    return find(state_dir, namespace, name)


def measured(state_dir: str, teams: set[str] | None = None) -> list[Measured]:
    """Every learned job with a measured peak (of ``teams``, when given), as learning's records.

    A job that ran out of memory measured at least its GPU's memory: it counts with that as its
    peak when the GPU's memory is declared, so a regime that ran out learns to estimate higher.
    A peak its log claims beyond the GPU's memory or far outside the estimate's range is kept,
    untrusted (``learning.plausible``): the log is written by user code.
    """
    with open_records(state_dir).read() as con:
        rows = con.execute(
            "SELECT team, family, regime, raw_bytes, measured_gib, out_of_memory, gpu_bytes, range_lo, range_hi"
            " FROM peaks WHERE learned_at IS NOT NULL"
        ).fetchall()
    out = []
    for row in rows:
        if teams is not None and row["team"] not in teams:
            continue
        peak = row["measured_gib"]
        gpu_gib = row["gpu_bytes"] / GIB if row["gpu_bytes"] else None
        if row["out_of_memory"] and gpu_gib:
            peak = max(peak or 0.0, gpu_gib)
        if peak:
            estimated = row["raw_bytes"] / GIB
            span = (row["range_lo"] / GIB, row["range_hi"] / GIB) if row["range_hi"] is not None else None
            trusted = plausible(estimated, float(peak), gpu_gib, span)
            out.append(Measured(row["family"], row["regime"], estimated, float(peak), trusted))
    return out


def memory_json(record: dict | None) -> dict | None:
    """A job's ``memory`` field (openapi.yaml ``JobMemory``) from its record; None without one."""
    if record is None:
        return None
    span = None
    if record["range_lo"] is not None and record["range_hi"] is not None:
        span = [round(record["range_lo"] / GIB, 2), round(record["range_hi"] / GIB, 2)]
    return {
        "estimatedGib": round(record["estimated_bytes"] / GIB, 2),
        "rangeGib": span,
        "measuredGib": record["measured_gib"],
        "gpu": record["gpu"] or None,
        "outOfMemory": bool(record["out_of_memory"]),
    }
