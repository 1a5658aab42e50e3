"""Write jupyter_quota/estimator/ranges.json: each regime's interval from the calibration residuals.

For every row of benchmarks/data/estimator_calibration.tsv the estimator's CUDA figure is computed
(the argv of ``estimator_calibration.row_to_argv``) and its residual ``measured / estimated - 1`` is
filed under the row's regime (``jupyter_quota.estimator.ranges.regime_of``: method x parallelism x
family) and under each wider regime it falls back to. Rows whose run used something the argv cannot
say (GaLore, LISA, AWQ/GPTQ checkpoints, torchtune's activation offloading or compile: tag
``unmodelled`` without ``fsdp-as-ddp``) and rows whose figure is suspect (tag ``weak``) are not
residuals of the argv they map to, and are left out; FSDP rows stay (``--fsdp`` is in their argv).

A regime's interval (docs/estimator.md §9.1), from its n residuals sorted:
  low  = min(the floor(0.05 (n+1))-th smallest, 0) - NOISE
  high = max(the ceil(0.95 (n+1))-th smallest (the largest when n < 19), 0) + NOISE
NOISE (5%) is the run-to-run spread of measured peaks (docs/estimator.md §9.1); a regime needs
MIN_ROWS rows, or the estimate falls back to a wider one. Estimates from approximate model facts
(no config.json: the size read from the name) have no measured rows yet: their interval is widened
by APPROXIMATE_WIDEN on both sides, a stated assumption rather than a fit.

Run: ``PYTHONPATH=$PWD python benchmarks/estimator_ranges.py`` (writes the file), ``--check``
(exits 1 when the shipped file differs from what the data gives).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import estimator_calibration as cal  # noqa: E402

from jupyter_quota.estimator import estimate  # noqa: E402
from jupyter_quota.estimator.ranges import RANGES, fallbacks, interval, regime_of  # noqa: E402

GIB = 1024**3
NOISE = 0.05
MIN_ROWS = 5
APPROXIMATE_WIDEN = 0.20


def calibration_rows(path: Path = cal.DEFAULT_TSV) -> list[dict]:
    """Every calibration row with its estimate, measured peak, regime and whether it is fitted."""
    out = []
    for index, row in enumerate(cal.load_rows(path), start=2):  # line 1 is the header
        argv, gpus, tags = cal.row_to_argv(row)
        est = estimate(argv, gpus=gpus)
        measured = float(row["measured_gib_per_gpu"]) * GIB
        out.append(
            {
                "line": index,
                "row": row,
                "argv": argv,
                "gpus": gpus,
                "tags": tags,
                "estimate": est,
                "measured": measured,
                "residual": measured / est.peak_bytes_per_gpu - 1,
                "key": regime_of(est.model, est.args, gpus),
                "fitted": "weak" not in tags and ("unmodelled" not in tags or "fsdp-as-ddp" in tags),
            }
        )
    return out


def spread(residuals: list[float]) -> tuple[float, float]:
    """(low, high) of one regime's residuals, as the module's docstring says."""
    values = sorted(residuals)
    n = len(values)
    lo_rank = max(1, math.floor(0.05 * (n + 1)))
    hi_rank = min(n, math.ceil(0.95 * (n + 1)))
    return min(values[lo_rank - 1], 0.0) - NOISE, max(values[hi_rank - 1], 0.0) + NOISE


def fit(rows: list[dict]) -> dict:
    """The ranges table from the fitted rows among ``rows``."""
    grouped: dict[str, list[float]] = {}
    for r in rows:
        if r["fitted"]:
            for name in fallbacks(r["key"]):
                grouped.setdefault(name, []).append(r["residual"])
    regimes = {}
    for name in sorted(grouped):
        values = grouped[name]
        if len(values) >= MIN_ROWS or name == "*/*/*":
            low, high = spread(values)
            regimes[name] = {"rows": len(values), "low": round(low, 4), "high": round(high, 4)}
    return {
        "about": "written by benchmarks/estimator_ranges.py from benchmarks/data/estimator_calibration.tsv "
        "(docs/estimator.md §9.1); do not edit by hand",
        "noise": NOISE,
        "minRows": MIN_ROWS,
        "approximate": {"widen": APPROXIMATE_WIDEN},
        "regimes": regimes,
    }


def held_out(rows: list[dict]) -> list[dict]:
    """Leave-one-out: each fitted row's range from a table fitted without it; every other row's
    (never fitted) from the whole table. Each row gains ``low``, ``high`` and ``held``."""
    whole = fit(rows)
    out = []
    for i, r in enumerate(rows):
        data = fit(rows[:i] + rows[i + 1 :]) if r["fitted"] else whole
        est = r["estimate"]
        span = interval(est.peak_bytes_per_gpu, r["key"], est.approximate, data)
        out.append({**r, "low": span.low, "high": span.high, "regime": span.regime})
    return out


def main(argv: list[str]) -> int:
    data = fit(calibration_rows())
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    if "--check" in argv:
        same = RANGES.exists() and RANGES.read_text(encoding="utf-8") == text
        print("ranges.json is up to date" if same else "ranges.json is stale: run benchmarks/estimator_ranges.py")
        return 0 if same else 1
    RANGES.write_text(text, encoding="utf-8")
    for name, r in data["regimes"].items():
        print(f"{name:24} n={r['rows']:>3}  [{r['low']:+.0%}, {r['high']:+.0%}]")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
