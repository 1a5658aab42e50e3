"""The simulated training step (``estimator/simstep.py``) against the analytic estimate and the measured runs.

Two tables, both read from ``tests/data/simstep_cache.json``:

1. Catalog: every catalog architecture's language model (one entry per text ``model_type``, MoE or
   not, tied or not: ``representatives``), cut to ``simcheck.LAYERS`` layers, under each regime of
   ``simcheck.REGIMES``; the analytic estimate (``device="cpu"``: tensor memory) of
   the same facts against the simulated step's live-tensor peak. Printed: the distribution of the
   differences (all cases, then per regime) and the largest; ``tests/test_estimator_simstep.py``
   holds the bound.
2. Calibration: the measured rows a simulated step can run (one GPU, no DeepSpeed/FSDP, full or
   LoRA of a catalog text model, no technique the step leaves out), at full size. Per row: the
   measured peak, the analytic estimate, and the simulated step's peaks (live tensors; the caching
   allocator model's allocated and reserved, ``estimator/allocator.py``) plus a constant for what no
   tensor shows (CUDA context excluded; cuBLAS workspaces and the like), fitted per method on the
   rows of the other sources (group k-fold by source: a row never helps fit its own constant).
   Like with like (``estimator_calibration.measures``): a row that measured the allocated peak
   (LitGPT's ``max_memory_allocated``, marked ``a``) is compared with the allocated figures (the
   analytic estimate less its allocator reserve, the replay's ``peakAllocated``), the others with
   the reserved ones; the constant is fitted on each row's gap to its own kind's figure.

Run: ``PYTHONPATH=$PWD .venv/bin/python benchmarks/estimator_simstep.py`` (reads the cache: seconds).
``--regenerate catalog|calibration|all`` re-runs the simulations and rewrites the cache (needs torch,
transformers and peft; the catalog takes about 10 s per case, the calibration rows 1-3 min each;
``--only NAME`` restricts to model names containing NAME; ``SIMSTEP_CACHE=path`` writes another
file, e.g. to run the two parts in parallel and merge them). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from estimator_calibration import measures  # noqa: E402

from jupyter_quota.estimator import catalog, estimate  # noqa: E402
from jupyter_quota.estimator.configjson import PACKAGE_MOE  # noqa: E402
from jupyter_quota.estimator.simcheck import (  # noqa: E402
    CACHE,
    CATEGORY_PAIRS,
    LAYERS,
    REGIMES,
    TOKENS,
    compare,
    load_cache,
    reduced,
    regime_of,
    text_facts,
)
from jupyter_quota.estimator.simstep import Regime  # noqa: E402
from jupyter_quota.estimator.verify import foreach_peak  # noqa: E402

GIB = 1024**3
CALIBRATION_STEPS = 2


def _write(cache: dict) -> None:
    path = Path(os.environ.get("SIMSTEP_CACHE", CACHE))
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def regenerate_catalog(cache: dict, only: str | None, skip: tuple = ()) -> None:
    from jupyter_quota.estimator.simstep import UnsupportedStep, simulate, versions

    cache["versions"] = versions()
    cache["layers"], cache["tokens"] = LAYERS, TOKENS
    done = {(c["model"], regime_of(c["regime"]).key) for c in cache["cases"]}
    entries = [m for m in catalog._data()["models"] if not only or only.lower() in m["names"][0].lower()]
    if not only:
        entries = representatives(entries)
    seen: dict[str, str] = {}
    # regimes outer: every architecture gets the first regime before any gets the last
    for regime in REGIMES:
        for i, entry in enumerate(entries):
            name = entry["names"][0]
            facts = reduced(text_facts(entry["config"]))
            if (name, regime.key) in done or facts.get("model_type") in skip:
                continue
            fingerprint = json.dumps(facts, sort_keys=True)
            if seen.get(fingerprint, name) != name:
                continue  # the same language model as an earlier entry
            seen[fingerprint] = name
            # an architecture the step cannot build fails every regime; a LoRA setup that fails (PEFT's
            # ParamWrapper under ms-swift's default dropout) fails only the LoRA ones
            unsupported = [
                c
                for c in cache["cases"]
                if c["model"] == name
                and "unsupported" in c
                and (c["regime"]["tuner"] == regime.tuner or "lora" not in c["unsupported"].lower())
            ]
            case = {"model": name, "regime": _regime_json(regime), "facts": facts}
            if entry["config"].get("model_type") in PACKAGE_MOE:
                case["unsupported"] = "ms-swift loads it through its authors' package, which the step does not have"
            elif unsupported:
                case["unsupported"] = unsupported[0]["unsupported"]
            else:
                started = time.time()
                try:
                    case["result"] = simulate(facts, regime, steps=1).to_json()
                except UnsupportedStep as exc:
                    case["unsupported"] = str(exc)
                _log(
                    f"[{i + 1}/{len(entries)}] {name} {regime.key}: {time.time() - started:.0f}s "
                    f"{case.get('unsupported', '')}"
                )
            cache["cases"].append(case)
            _write(cache)


def representatives(entries: list[dict]) -> list[dict]:
    """One catalog entry per language-model architecture (``model_type`` of its text facts, and
    whether it is MoE): the narrowest, as every size of one architecture runs the same code."""
    best: dict[tuple, dict] = {}
    for entry in entries:
        facts = text_facts(entry["config"])
        moe = any(facts.get(k) for k in ("num_experts", "num_local_experts", "n_routed_experts"))
        key = (facts.get("model_type"), bool(moe), bool(facts.get("tie_word_embeddings")))
        width = facts.get("hidden_size") or 0
        if key not in best or width < (text_facts(best[key]["config"]).get("hidden_size") or 0):
            best[key] = entry
    return list(best.values())


def _regime_json(regime: Regime) -> dict:
    return {
        "tuner": regime.tuner,
        "tokens": regime.tokens,
        "batch": regime.batch,
        "grad_ckpt": regime.grad_ckpt,
        "attn": regime.attn,
        "lora_rank": regime.lora_rank,
        "targets": list(regime.targets),
        "accumulate": regime.accumulate,
    }


def calibration_cases() -> list[dict]:
    """The measured rows a simulated step can run: (row, argv, regime, facts) for each."""
    from estimator_calibration import DEFAULT_TSV, load_rows, row_to_argv

    from jupyter_quota.swift import parse_sft_args

    out = []
    for line, row in enumerate(load_rows(DEFAULT_TSV), start=2):
        argv, gpus, tags = row_to_argv(row)
        args = parse_sft_args(argv)
        train = row["train_type"]
        if gpus != 1 or row["deepspeed"] != "none" or "unmodelled" in tags or train not in ("full", "lora"):
            continue
        if args.packing or args.padding_free or args.use_liger_kernel or args.modules_to_save:
            continue
        match = catalog.resolve(args.model)
        if match is None or match.quantization:
            continue
        entry = match.entry
        regime = Regime(
            tuner=train,
            tokens=args.max_length or 2048,
            batch=args.per_device_train_batch_size,
            grad_ckpt=args.gradient_checkpointing,
            attn="eager" if args.attn_impl == "eager" else "sdpa",
            lora_rank=args.lora_rank,
            targets=tuple(args.target_modules),
            accumulate=args.gradient_accumulation(1) > 1,
        )
        out.append(
            {
                "line": line,
                "row": row,
                "argv": argv,
                "regime": regime,
                "facts": text_facts(entry["config"]),
                "model": entry["names"][0],
                "tags": tags,
            }
        )
    return out


def regenerate_calibration(cache: dict, only: str | None) -> None:
    from jupyter_quota.estimator.simstep import UnsupportedStep, simulate_scaled

    runs = cache.setdefault("calibration", [])
    done = {(c["model"], regime_of(c["regime"]).key) for c in runs}
    for case in calibration_cases():
        key = (case["model"], case["regime"].key)
        if key in done or (only and only.lower() not in case["model"].lower()):
            continue
        done.add(key)
        started = time.time()
        entry = {"model": case["model"], "regime": _regime_json(case["regime"]), "facts": case["facts"]}
        try:
            entry["result"] = simulate_scaled(case["facts"], case["regime"], steps=CALIBRATION_STEPS)
        except UnsupportedStep as exc:
            entry["unsupported"] = str(exc)
        _log(f"calibration {case['model']} {case['regime'].key}: {time.time() - started:.0f}s")
        runs.append(entry)
        _write(cache)


def _stats(values: list[float]) -> str:
    a = sorted(abs(v) for v in values)
    p90 = a[min(len(a) - 1, round(0.9 * (len(a) - 1)))]
    return f"n={len(a):3} median |d| {statistics.median(a):6.1%}  p90 {p90:6.1%}  max {a[-1]:6.1%}"


def catalog_table(cache: dict) -> list[dict]:
    rows = compare(cache)
    skipped = {c["model"]: c["unsupported"] for c in cache.get("cases", []) if "unsupported" in c}
    print(f"1. Analytic (device=cpu) vs simulated step, {LAYERS}-layer language models, {TOKENS} tokens")
    print(f"   versions: {cache.get('versions')}")
    if not rows:
        print("   (no cached cases: run with --regenerate catalog)")
        return rows
    print(f"   all:     {_stats([r['diff'] for r in rows])}")
    for key in sorted({r["regime"] for r in rows}):
        sub = [r["diff"] for r in rows if r["regime"] == key]
        dyn = [r["dynamicDiff"] for r in rows if r["regime"] == key]
        print(f"   {key:28} peak {_stats(sub)} | above model states {_stats(dyn)}")
    print("   largest differences (analytic/simulated - 1):")
    for r in sorted(rows, key=lambda r: -abs(r["diff"]))[:12]:
        b, a = r["breakdown"], r["analyticBreakdown"]
        print(
            f"   {r['diff']:+6.1%} {r['model'][:40]:40} {r['regime']:28} sim {r['simulated'] / GIB:6.2f} GiB "
            f"(act {b['activations'] / GIB:.2f} tmp {b['temporaries'] / GIB:.2f}) analytic {r['analytic'] / GIB:6.2f} "
            f"(act {a['activations'] / GIB:.2f} logits {a['logits'] / GIB:.2f})"
        )
    print(f"   not simulated in at least one regime ({len(skipped)} architectures; the last reason):")
    for model, why in sorted(skipped.items()):
        print(f"     {model}: {why[:110]}")
    return rows


def category_table(rows: list[dict]) -> None:
    """Per category: the analytic term less the simulated one, as a share of the simulated peak
    (the categories' shares add up to the peak's difference), all cases and per regime."""
    print()
    print("1b. Per category: (analytic - simulated) / simulated peak; median and range over the cases")
    print(f"   {'regime':32} {'n':>3} " + " ".join(f"{name:>24}" for name, _, _ in CATEGORY_PAIRS))
    groups = [("all", rows)] + [(k, [r for r in rows if r["regime"] == k]) for k in sorted({r["regime"] for r in rows})]
    for label, sub in groups:
        cells = []
        for name, _sim_keys, _ana_keys in CATEGORY_PAIRS:
            d = sorted(r["categoryDiff"][name] for r in sub)
            cells.append(f"{statistics.median(d):+6.1%} [{d[0]:+6.1%},{d[-1]:+6.1%}]")
        print(f"   {label[:32]:32} {len(sub):3} " + " ".join(f"{c:>24}" for c in cells))


def case_table(rows: list[dict]) -> None:
    """Each case's categories, simulated / analytic, in MiB."""
    print()
    print("1c. Per case, MiB simulated / analytic: " + ", ".join(name for name, _, _ in CATEGORY_PAIRS))
    for r in rows:
        mib = [
            (sum(r["breakdown"][k] for k in s) / 2**20, sum(r["analyticBreakdown"][k] for k in a) / 2**20)
            for _name, s, a in CATEGORY_PAIRS
        ]
        cells = [f"{sim:7.0f}/{ana:<7.0f}" for sim, ana in mib]
        print(f"   {r['diff']:+6.1%} {r['model'][:34]:34} {r['regime'][:32]:32} " + " ".join(cells))


def calibration_table(cache: dict) -> list[dict]:
    sims = {(c["model"], regime_of(c["regime"]).key): c for c in cache.get("calibration", [])}
    rows = []
    for case in calibration_cases():
        sim = sims.get((case["model"], case["regime"].key))
        if not sim or "result" not in sim:
            continue
        measured = float(case["row"]["measured_gib_per_gpu"]) * GIB
        est = estimate(case["argv"], 1)
        res = sim["result"]
        source = case["row"]["source"].split()[0]
        # like with like: a row that measured the allocated peak (LitGPT's max_memory_allocated)
        # against the allocated figures (the analytic estimate less its allocator reserve, the
        # replay's peakAllocated), the others against the reserved ones
        kind = measures(case["row"])
        allocated = kind == "allocated"
        rows.append(
            {
                "case": case,
                "measured": measured,
                "measures": kind,
                "analytic": est.allocated_bytes_per_gpu if allocated else est.peak_bytes_per_gpu,
                "live": res["peak_bytes"],
                "allocated": res["allocator"]["peakAllocated"],
                "reserved": res["allocator"]["peakReserved"],
                # the rows' stacks ran torch's foreach AdamW (ms-swift's "adamw_torch" before torch
                # 2.8, LitGPT's torch.optim.AdamW), the step the fused one: its update buffer added
                "replayed": max(
                    res["allocator"]["peakAllocated" if allocated else "peakReserved"],
                    foreach_peak(res["breakdown"]),
                ),
                "source": source,
                "method": case["regime"].tuner,
            }
        )
    print()
    print("2. Measured rows a simulated step can run: analytic vs simulated step + allocator model")
    if not rows:
        print("   (no cached calibration runs: run with --regenerate calibration)")
        return rows
    # what no tensor shows (workspaces: in the allocated and the reserved peak alike), per method,
    # fitted on the other sources' rows (group k-fold by source), each against its own kind's figure
    for r in rows:
        others = [
            o["measured"] - o["replayed"] for o in rows if o["source"] != r["source"] and o["method"] == r["method"]
        ]
        others = others or [o["measured"] - o["replayed"] for o in rows if o["source"] != r["source"]]
        r["extra"] = statistics.median(others) if others else 0.0
        r["simulated"] = r["replayed"] + r["extra"]
    print(
        f"   {'line':>4} {'source':24} {'model':22} {'regime':34} {'meas':>5} {'analyt':>6} {'live':>5} "
        f"{'alloc':>5} {'resv':>5} {'+extra':>6} {'e(an)':>6} {'e(sim)':>6}"
    )
    for r in rows:
        c = r["case"]
        print(
            f"   {c['line']:>3}{'a' if r['measures'] == 'allocated' else ' '} "
            f"{r['source'][:24]:24} {c['model'].split('/')[-1][:22]:22} {c['regime'].key[:34]:34} "
            f"{r['measured'] / GIB:5.1f} {r['analytic'] / GIB:6.1f} {r['live'] / GIB:5.1f} {r['allocated'] / GIB:5.1f} "
            f"{r['reserved'] / GIB:5.1f} {r['extra'] / GIB:+6.2f} {r['analytic'] / r['measured'] - 1:+6.0%} "
            f"{r['simulated'] / r['measured'] - 1:+6.0%}"
        )
    print("   error = predicted/measured - 1; under = share under-predicted by more than 10%")
    groups = [("all", rows)] + [(f"method {m}", [r for r in rows if r["method"] == m]) for m in ("full", "lora")]
    groups += [(f"source {s}", [r for r in rows if r["source"] == s]) for s in sorted({r["source"] for r in rows})]
    for label, sub in groups:
        if not sub:
            continue
        for name, key in (
            ("analytic", "analytic"),
            ("simulated+allocator", "simulated"),
            ("replayed (+foreach)", "replayed"),
        ):
            errs = [r[key] / r["measured"] - 1 for r in sub]
            under = sum(1 for e in errs if e < -0.10) / len(errs)
            print(f"   {label:34} {name:20} {_stats(errs)}  under {under:5.1%}")
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--regenerate",
        choices=("catalog", "calibration", "all"),
        help="re-run the simulations missing from the cache and add them (needs torch)",
    )
    parser.add_argument("--fresh", action="store_true", help="with --regenerate: drop the cached cases first")
    parser.add_argument("--only", help="with --regenerate: only models whose name contains this")
    parser.add_argument(
        "--skip", default="", help="with --regenerate: model_types to leave for later (comma-separated; slow ones)"
    )
    parser.add_argument(
        "--categories",
        action="store_true",
        help="also print the per-category difference (parameters, gradients, optimizer, dynamic) per regime",
    )
    parser.add_argument(
        "--cases", metavar="NAME", help="with --categories: print each case of models whose name contains NAME"
    )
    args = parser.parse_args(argv)
    cache = load_cache(Path(os.environ.get("SIMSTEP_CACHE", CACHE)))
    if args.regenerate:
        if args.fresh:
            cache = {"versions": {}, "cases": [], "calibration": []}
        if args.regenerate in ("calibration", "all"):
            regenerate_calibration(cache, args.only)
        if args.regenerate in ("catalog", "all"):
            regenerate_catalog(cache, args.only, tuple(filter(None, args.skip.split(","))))
    table = catalog_table(cache)
    if args.categories and table:
        category_table(table)
        if args.cases:
            case_table([r for r in table if args.cases.lower() in r["model"].lower()])
    rows = calibration_table(cache)
    if args.regenerate in ("calibration", "all"):
        # what no tensor shows, per measured row: verify.workspace's data
        cache["gaps"] = [
            {
                "line": r["case"]["line"],
                "model": r["case"]["model"],
                "source": r["source"],
                "method": r["method"],
                "gap": int(r["measured"] - r["replayed"]),  # after the foreach update's buffer
            }
            for r in rows
        ]
        _write(cache)


if __name__ == "__main__":
    main()
