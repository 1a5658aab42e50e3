"""Verify an estimate with a simulated training step of the real model (``simstep``), at full size.

``verify(args)`` runs the step the estimate predicts on fake tensors (no GPU, no weights): the
language model of the catalog entry or of a local ``config.json``, the run's tuner, tokens, batch,
gradient checkpointing and attention, two optimizer steps, at 2 and 3 decoder layers, extrapolated
to the model's depth (``simstep.extrapolate``); it replays the allocations through the
caching-allocator model (``allocator``) and adds what no tensor shows (cuBLAS workspaces and the
like), the median gap of the measured rows (measured minus the step's peak of the kind the row
measured: reserved, or allocated for LitGPT's rows), from the cache the benchmark writes
(``benchmarks/estimator_simstep.py``). It takes 10 to 30 seconds of CPU, so
callers run it after showing the analytic estimate.

The step runs torch's fused AdamW (the HF Trainer's default with torch >= 2.8). The foreach path
(``--optim adamw_torch``, the default before, and the measured rows' stacks) holds one more buffer
the size of a moment at the update (docs/estimator.md §7): ``foreach_peak``, a term of its own that
scales with the trained parameters, for the run when it asks for that optimizer and for the
measured rows before their gap is taken. What is left is one constant per method where its rows
come from at least two sources, else pooled over all rows, with their spread (``workspaceRange``):
full fine-tunes have one row from one source.

What it refuses (``UnsupportedStep``, with the reason): more than one GPU, DeepSpeed, QLoRA and
pre-quantized models, Liger kernels, packing and padding-free batches, tuners other than full and
LoRA, GaLore's optimizer, MoE layers whose routing depends on data, architectures transformers cannot build without
remote code.
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

from . import catalog
from .features import extra_value
from .model import local_config
from .run import DEFAULT_TOKENS
from .simcheck import CACHE, text_facts
from .simstep import Regime, UnsupportedStep

GIB = 1024**3


def regime_for(args, gpus: int) -> Regime:
    """The simulated step of a ``swift sft`` run, or ``UnsupportedStep`` saying what it cannot run."""
    refused = []
    if gpus != 1:
        refused.append(f"{gpus} GPUs (the step runs on one device)")
    if args.deepspeed:
        refused.append(f"--deepspeed {args.deepspeed}")
    if args.quant_bits or args.quant_method:
        refused.append("quantized weights (bitsandbytes kernels need CUDA)")
    if args.use_liger_kernel:
        refused.append("--use_liger_kernel (Triton kernels need a GPU)")
    if args.packing or args.padding_free:
        refused.append("packing / padding-free batches")
    if args.tuner_type not in ("full", "lora"):
        refused.append(f"--tuner_type {args.tuner_type}")
    if args.modules_to_save:
        refused.append("--modules_to_save")
    if extra_value(args, "use_galore") not in (None, "false", "False", "0"):
        refused.append("--use_galore (the step runs torch's AdamW, not GaLore's projected optimizer)")
    if refused:
        raise UnsupportedStep("cannot simulate: " + "; ".join(refused))
    return Regime(
        tuner=args.tuner_type,
        tokens=args.max_length or DEFAULT_TOKENS,
        batch=args.per_device_train_batch_size,
        grad_ckpt=args.gradient_checkpointing,
        attn="eager" if args.attn_impl == "eager" else "sdpa",
        lora_rank=args.lora_rank,
        targets=tuple(args.target_modules),
        accumulate=args.gradient_accumulation(gpus) > 1,
    )


def facts_for(model: str) -> dict:
    """The language model's config facts: a local folder or ``config.json`` (``model.local_config``,
    the estimate's own rule), else the catalog entry."""
    local = local_config(os.path.expanduser(model))
    if local is not None:
        path = Path(local)
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UnsupportedStep(f"cannot simulate {model}: its config.json could not be read ({exc})") from None
        facts = text_facts(config) if isinstance(config, dict) else {}
        if not isinstance(facts.get("model_type"), str):
            raise UnsupportedStep(f"cannot simulate {model}: its config.json names no model_type")
        return facts
    match = catalog.resolve(model)
    if match is None or match.quantization:
        raise UnsupportedStep(f"cannot simulate {model}: no config.json facts (catalog or local folder)")
    return text_facts(match.entry["config"])


#: optimizers whose step is torch's foreach AdamW (an unset --optim is the installed trainer's default)
FOREACH = ("adamw_torch",)
MIN_SOURCES = 2


def foreach_peak(breakdown: dict) -> int:
    """Live bytes at a foreach AdamW update: the parameters, the gradients and each moment (all
    the size of the trained parameters, in their dtype), and ``sqrt(exp_avg_sq)``'s buffer."""
    return int(breakdown["parameters"] + 2 * breakdown["optimizer"])


def optimizer_step(args) -> str:
    """``foreach`` or ``fused``: how the run's AdamW updates (docs/estimator.md §7)."""
    optim = args.optim
    if optim is None:
        try:
            from transformers import TrainingArguments

            optim = str(TrainingArguments.__dataclass_fields__["optim"].default)
        except ImportError:  # pragma: no cover - verify needs transformers anyway
            optim = "adamw_torch_fused"
    return "foreach" if str(optim).lower() in FOREACH else "fused"


def workspace(method: str, cache_path: Path = CACHE) -> dict:
    """What no tensor shows: the median gap of the cached measured rows of ``method`` when they come
    from at least two sources, else of all rows (``basis`` says which), and the gaps' range."""
    data = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    rows = data.get("gaps", [])
    own = [g for g in rows if g["method"] == method]
    sources = len({g["source"] for g in own})
    if sources >= MIN_SOURCES:
        used, why = own, f"{method} rows"
    else:
        used = rows
        why = f"all methods: {method} has {len(own)} row(s) from {sources} source(s)"
    gaps = [g["gap"] for g in used]
    if not gaps:
        return {"bytes": 0, "range": [0, 0], "basis": "no measured rows cached"}
    basis = f"{len(gaps)} measured rows of {len({g['source'] for g in used})} sources; {why}"
    return {"bytes": int(statistics.median(gaps)), "range": [min(gaps), max(gaps)], "basis": basis}


def verify(args, gpus: int = 1, *, steps: int = 2) -> dict:
    """The simulated step of ``args`` (``SftArgs``): peaks in bytes and the breakdown at the peak."""
    from .simstep import simulate_scaled

    regime = regime_for(args, gpus)
    result = simulate_scaled(facts_for(args.model), regime, steps=steps)
    gap = workspace(regime.tuner)
    reserved = result["allocator"]["peakReserved"]
    step = optimizer_step(args)
    foreach = max(0, foreach_peak(result["breakdown"]) - reserved) if step == "foreach" else 0
    return {
        "regime": regime.key,
        "liveBytes": result["peak_bytes"],
        "allocatedBytes": result["allocator"]["peakAllocated"],
        "reservedBytes": reserved,
        "optimizerStep": step,
        "foreachBytes": foreach,
        "workspaceBytes": gap["bytes"],
        "workspaceRangeBytes": gap["range"],
        "workspaceBasis": gap["basis"],
        "peakBytesPerGpu": int(reserved + foreach + gap["bytes"]),
        "breakdown": result["breakdown"],
        "peakPhase": result["peak_phase"],
        "extrapolatedFrom": result.get("extrapolatedFrom"),
        "seconds": result["seconds"],
        "versions": result["versions"],
    }
