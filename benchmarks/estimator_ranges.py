"""Write jupyter_quota/estimator/ranges.json: each regime's interval from the calibration residuals,
checked on runs held out by source.

For every row of benchmarks/data/estimator_calibration.tsv the estimator's CUDA figure is computed
(the argv of ``estimator_calibration.row_to_argv``), of the kind the row measured
(``estimator_calibration.measures``: the allocated peak where the source reported
``max_memory_allocated`` or the "active" peak, the reserved peak otherwise), and its residual
``measured / estimated - 1`` is
filed under the row's regime (``jupyter_quota.estimator.ranges.regime_of``: method x parallelism x
family) and under each wider regime it falls back to. Rows whose run used something the argv cannot
say (GaLore, LISA, AWQ/GPTQ checkpoints, torchtune's activation offloading or compile: tag
``unmodelled``, among them LitGPT's rows on Lightning's own FSDP) and rows whose figure is suspect
(tag ``weak``) are not residuals of the argv they map to, and are left out.

Rows of one source (one script, table or post) share a setup: a dataset, a stack, a GPU, a way of
reporting. So a range is only as good as it is on a source it has never seen, and everything here is
held out by source (group k-fold with every source its own fold), never by single rows.

A regime's interval (docs/estimator.md §9.1), from its n residuals sorted:
  low  = min(the floor(0.05 (n+1))-th smallest, 0) - NOISE
  high = max(the ceil(0.95 (n+1))-th smallest (the largest when n < 19), 0) + NOISE
NOISE (5%) is the run-to-run spread of measured peaks. A regime needs MIN_ROWS rows from at least
MIN_SOURCES sources, or the estimate falls back to a wider one. Then each source is left out in turn:
its rows are checked against the intervals fitted on the other sources, and each row's exceedance
(how far its residual fell outside, 0 inside) is filed under the regime that carries it. A regime
whose held-out rows fell outside is widened on both sides by the conformal quantile of those
exceedances (the ceil(0.90 (n+1))-th smallest, the largest when n < 9), so that it would have held
90% of them. A regime whose interval is then wider than USEFUL_WIDTH (high - low, as a share of
the estimate), or that no held-out row checked (then widened by APPROXIMATE_WIDEN on both sides), is
marked ``approximate``: the estimate's ``regime`` says ``approximate (...)`` rather than claiming 90%.

Estimates from approximate model facts (no config.json: the size read from the name) have no
measured rows: their interval is widened by APPROXIMATE_WIDEN on both sides, a stated assumption.

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
MIN_SOURCES = 3
COVERAGE = 0.90
USEFUL_WIDTH = 0.60
APPROXIMATE_WIDEN = 0.20


def calibration_rows(path: Path = cal.DEFAULT_TSV) -> list[dict]:
    """Every calibration row with its estimate, measured peak, regime, source and whether it is fitted."""
    out = []
    for index, row in enumerate(cal.load_rows(path), start=2):  # line 1 is the header
        argv, gpus, tags = cal.row_to_argv(row)
        est = estimate(argv, gpus=gpus)
        measured = float(row["measured_gib_per_gpu"]) * GIB
        kind = cal.measures(row)
        # the estimate's figure of the kind the row measured: allocated or reserved (the peak)
        compared = est.allocated_bytes_per_gpu if kind == "allocated" else est.peak_bytes_per_gpu
        out.append(
            {
                "line": index,
                "row": row,
                "source": row["source"],  # one script, table or post: the unit held out together
                "argv": argv,
                "gpus": gpus,
                "tags": tags,
                "estimate": est,
                "measured": measured,
                "measures": kind,
                "compared": compared,
                "residual": measured / compared - 1,
                "key": regime_of(est.model, est.args, gpus),
                "fitted": "weak" not in tags and "unmodelled" not in tags,
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


def _spans(rows: list[dict]) -> dict:
    """{regime: {rows, sources, low, high}} from the fitted rows among ``rows``, before any check."""
    grouped: dict[str, list[float]] = {}
    sources: dict[str, set] = {}
    for r in rows:
        if r["fitted"]:
            for name in fallbacks(r["key"]):
                grouped.setdefault(name, []).append(r["residual"])
                sources.setdefault(name, set()).add(r["source"])
    out = {}
    for name in sorted(grouped):
        values = grouped[name]
        if (len(values) >= MIN_ROWS and len(sources[name]) >= MIN_SOURCES) or name == "*/*/*":
            low, high = spread(values)
            out[name] = {"rows": len(values), "sources": len(sources[name]), "low": low, "high": high}
    return out


def _carrier(key: tuple[str, str, str], spans: dict) -> str:
    return next(n for n in fallbacks(key) if n in spans)


def _exceedance(residual: float, span: dict) -> float:
    return max(0.0, span["low"] - residual, residual - span["high"])


def conformal(exceedances: list[float]) -> float:
    """The margin that would have held COVERAGE of ``exceedances`` (split-conformal rank)."""
    if not exceedances:
        return 0.0
    values = sorted(exceedances)
    return values[min(len(values), math.ceil(COVERAGE * (len(values) + 1))) - 1]


def fit(rows: list[dict]) -> dict:
    """The ranges table from the fitted rows among ``rows``, each regime checked by source: on its
    fitted rows (its width, and whether it may claim 90%), and on every row whose figure is not
    suspect, unmodelled techniques too (reported, ``heldOutAll``: not used to widen, since a plan
    fits the range's upper end and those runs are not what the argv says)."""
    spans = _spans(rows)
    exceed: dict[str, list[float]] = {name: [] for name in spans}
    exceed_all: dict[str, list[float]] = {name: [] for name in spans}
    for source in sorted({r["source"] for r in rows}):
        others = _spans([r for r in rows if r["source"] != source])
        for r in rows:
            if r["source"] == source:
                carrier = _carrier(r["key"], spans)
                gap = _exceedance(r["residual"], others[_carrier(r["key"], others)])
                if "weak" not in r["tags"]:  # a suspect figure (a device's cap, an upper bound) is no need
                    exceed_all[carrier].append(gap)
                if r["fitted"]:
                    exceed[carrier].append(gap)
    regimes = {}
    for name, span in spans.items():
        held = exceed[name]
        # unchecked by any held-out run: widened as approximate model facts are, a stated assumption
        margin = conformal(held) if held else APPROXIMATE_WIDEN
        low, high = span["low"] - margin, span["high"] + margin
        approximate = not held or high - low > USEFUL_WIDTH
        # the unwidened interval's share of every run it carries, held out by source
        every = exceed_all[name]
        regimes[name] = {
            "rows": span["rows"],
            "sources": span["sources"],
            "heldOut": len(held),
            "heldOutInRange": round(sum(e == 0 for e in held) / len(held), 4) if held else None,
            "heldOutAll": len(every),
            "heldOutAllInRange": round(sum(e == 0 for e in every) / len(every), 4) if every else None,
            "low": round(low, 4),
            "high": round(high, 4),
            "approximate": approximate,
        }
    return {
        "about": "written by benchmarks/estimator_ranges.py from benchmarks/data/estimator_calibration.tsv "
        "(docs/estimator.md §9.1); do not edit by hand",
        "noise": NOISE,
        "minRows": MIN_ROWS,
        "minSources": MIN_SOURCES,
        "coverage": COVERAGE,
        "usefulWidth": USEFUL_WIDTH,
        "approximate": {"widen": APPROXIMATE_WIDEN},
        "regimes": regimes,
    }


def held_out(rows: list[dict]) -> list[dict]:
    """Group k-fold by source: every row's range comes from the table ``fit`` gives without any row of
    its source (that table's own check by source included). Each row gains ``low``, ``high`` and
    ``regime``."""
    tables = {source: fit([r for r in rows if r["source"] != source]) for source in {r["source"] for r in rows}}
    out = []
    for r in rows:
        est = r["estimate"]
        span = interval(r["compared"], r["key"], est.approximate, tables[r["source"]])
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
    print(f"{'regime':24} {'rows':>4} {'sources':>7} {'held out':>8} {'in range':>8} {'all rows':>12}  range")
    for name, r in data["regimes"].items():
        inside = "-" if r["heldOutInRange"] is None else f"{r['heldOutInRange']:.0%}"
        every = "-" if r["heldOutAllInRange"] is None else f"{r['heldOutAllInRange']:.0%} of {r['heldOutAll']}"
        print(
            f"{name:24} {r['rows']:>4} {r['sources']:>7} {r['heldOut']:>8} {inside:>8} {every:>12}  "
            f"[{r['low']:+.0%}, {r['high']:+.0%}]{'  approximate' if r['approximate'] else ''}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
