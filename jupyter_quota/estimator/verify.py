"""Verify an estimate with a simulated training step of the real model (``simstep``), at full size.

``verify(args)`` runs the step the estimate predicts on fake tensors (no GPU, no weights): the
language model of the catalog entry or of a local ``config.json``, the run's tuner, tokens, batch,
gradient checkpointing and attention, two optimizer steps, at 2 and 3 decoder layers, extrapolated
to the model's depth (``simstep.extrapolate``); it replays the allocations through the
caching-allocator model (``allocator``) and adds what no tensor shows (cuBLAS workspaces and the
like), the median gap of the measured rows per method (measured minus the replay's peak of the kind
the row measured: reserved, or allocated for LitGPT's rows), from the cache the benchmark writes
(``benchmarks/estimator_simstep.py``). It takes 10 to 30 seconds of CPU, so
callers run it after showing the analytic estimate.

What it refuses (``UnsupportedStep``, with the reason): more than one GPU, DeepSpeed, QLoRA and
pre-quantized models, Liger kernels, packing and padding-free batches, tuners other than full and
LoRA, GaLore's optimizer, MoE layers whose routing depends on data, architectures transformers cannot build without
remote code.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from . import catalog
from .features import extra_value
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
    """The language model's config facts: a local folder or config.json, else the catalog entry."""
    path = Path(model).expanduser()
    if path.is_dir():
        path = path / "config.json"
    if path.is_file():
        return text_facts(json.loads(path.read_text(encoding="utf-8")))
    match = catalog.resolve(model)
    if match is None or match.quantization:
        raise UnsupportedStep(f"cannot simulate {model}: no config.json facts (catalog or local folder)")
    return text_facts(match.entry["config"])


def unseen_gap(method: str, cache_path: Path = CACHE) -> float:
    """Measured minus the allocator model's peak of the same kind (reserved, or allocated where the
    row measured that), median of the cached measured rows of ``method``."""
    if not cache_path.exists():
        return 0.0
    data = json.loads(cache_path.read_text())
    gaps = [g["gap"] for g in data.get("gaps", []) if g["method"] == method] or [g["gap"] for g in data.get("gaps", [])]
    return statistics.median(gaps) if gaps else 0.0


def verify(args, gpus: int = 1, *, steps: int = 2) -> dict:
    """The simulated step of ``args`` (``SftArgs``): peaks in bytes and the breakdown at the peak."""
    from .simstep import simulate_scaled

    regime = regime_for(args, gpus)
    result = simulate_scaled(facts_for(args.model), regime, steps=steps)
    gap = unseen_gap(regime.tuner)
    reserved = result["allocator"]["peakReserved"]
    return {
        "regime": regime.key,
        "liveBytes": result["peak_bytes"],
        "allocatedBytes": result["allocator"]["peakAllocated"],
        "reservedBytes": reserved,
        "workspaceBytes": int(gap),
        "peakBytesPerGpu": int(reserved + gap),
        "breakdown": result["breakdown"],
        "peakPhase": result["peak_phase"],
        "extrapolatedFrom": result.get("extrapolatedFrom"),
        "seconds": result["seconds"],
        "versions": result["versions"],
    }
