"""The interval every estimate carries: how far measured peaks of its regime fell from the estimate.

A regime is method x parallelism x model family (``regime_of``). ``ranges.json`` holds, per regime,
the spread of ``measured / estimated - 1`` over the calibration rows of that regime; it is written
by ``benchmarks/estimator_ranges.py`` from ``benchmarks/data/estimator_calibration.tsv``, never by
hand. A regime with too few rows or sources falls back to a wider one (``lora/ddp/dense`` ->
``lora/ddp/*`` -> ``lora/*/*`` -> ``*/*/*``); each was checked on runs held out by source, and one
that could not hold 90% of them at a useful width is marked approximate. An estimate from
approximate model facts widens the interval it finds (docs/estimator.md §9.1).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from ..swift import SftArgs
from .fsdp import fsdp_of
from .model import ModelSpec

RANGES = Path(__file__).with_name("ranges.json")
ANY = "*"


class Range(NamedTuple):
    low: int  # bytes per GPU
    high: int
    regime: str  # the regime whose residuals gave the interval (after any fallback)


def regime_of(spec: ModelSpec, args: SftArgs, gpus: int) -> tuple[str, str, str]:
    """(method, parallelism, family) of a run: what its estimate's error depends on most."""
    tuner = (args.tuner_type or "lora").lower()
    if tuner in ("full", "lisa", "galore", "q-galore"):
        method = "full"
    else:
        # a quantized base, loaded so (bnb, HQQ) or pre-quantized (AWQ, GPTQ, FP8 checkpoints)
        method = "qlora" if args.quantized_bits or spec.quant_bits else "lora"
    stage, offload = args.deepspeed_stage
    if not stage and fsdp_of(args) is not None:  # as the estimate reads it: no_shard is DDP, DeepSpeed wins
        parallelism = "fsdp"
    elif offload:
        parallelism = "offload"
    elif stage:
        parallelism = "zero3" if stage == 3 else "zero2"  # ZeRO-1 keeps ZeRO-2's buckets and states
    elif max(1, args.sequence_parallel_size) > 1:
        parallelism = "sp"
    else:
        parallelism = "ddp" if gpus > 1 else "single"
    family = "vision" if spec.vision_params else "moe" if spec.is_moe else "dense"
    return method, parallelism, family


def fallbacks(key: tuple[str, str, str]) -> list[str]:
    """The regimes tried for ``key``, most specific first."""
    method, parallelism, family = key
    return [
        f"{method}/{parallelism}/{family}",
        f"{method}/{parallelism}/{ANY}",
        f"{method}/{ANY}/{ANY}",
        f"{ANY}/{ANY}/{ANY}",
    ]


@lru_cache(maxsize=1)
def table() -> dict:
    """ranges.json, read once per process."""
    return json.loads(RANGES.read_text(encoding="utf-8"))


def interval(peak: int, key: tuple[str, str, str], approximate: bool, data: dict | None = None) -> Range:
    """The range around ``peak`` from the first regime of ``fallbacks(key)`` that has one."""
    data = data or table()
    regimes = data["regimes"]
    name = next(n for n in fallbacks(key) if n in regimes)
    low, high = regimes[name]["low"], regimes[name]["high"]
    if approximate:
        widen = data["approximate"]["widen"]
        low, high = low - widen, high + widen
    # a regime whose range could not hold 90% of runs held out by source at a useful width says so
    if approximate or regimes[name].get("approximate"):
        name = f"approximate ({name})"
    return Range(max(0, int(peak * (1 + low))), int(peak * (1 + high)) + 1, name)
