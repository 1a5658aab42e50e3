"""The dimensions a plan may change, and how each candidate compares with what the user asked.

Methods are ranked by quality: full > LoRA > QLoRA, where QLoRA 8-bit and 4-bit share one tier (the
QLoRA paper, Dettmers et al. 2023, tables 3 and 4: 4-bit NF4 with double quantization matches
16-bit adapters, and Int8 does no better), so between them the faster and leaner 4-bit wins unless
the user asked for 8 bits. Execution choices (GPU
count, DDP or ZeRO, micro-batch with gradient accumulation, gradient checkpointing, attention
kernel) leave the trained model the same in expectation; they trade memory for speed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from ..estimator.fsdp import fsdp_of

#: method classes, best first
QUALITY_LABELS = ("full fine-tune", "LoRA", "QLoRA 8-bit", "QLoRA 4-bit")
#: the quality tier of each class: the two QLoRA classes train to the same quality (see above)
QUALITY_TIERS = (0, 1, 2, 2)
STANDARD_METHODS = ("full", "lora", "qlora8", "qlora4")
#: ms-swift: gradient_accumulation_steps defaults to ceil(16 / per-device batch / world size)
SWIFT_TARGET_BATCH = 16
#: attention kernels tried, in order of preference when they tie (sdpa needs no extra package)
ATTENTION = ("sdpa", "flash_attn")
#: the strategies beside plain DDP, for two GPUs or more
ZERO = ("zero2", "zero3")
#: ms-swift 4.x's shipped CPU-offload configs (``swift/config/zero2_offload.json``: optimizer
#: offload; ``zero3_offload.json``: parameters and optimizer), tried on 1 GPU and more for a full
#: fine-tune when no plain strategy fits the GPUs
OFFLOAD = ("zero2_offload", "zero3_offload")


@dataclass(frozen=True)
class Method:
    """A tuner choice: the SftArgs fields it sets, its quality class and its label."""

    name: str
    changes: tuple  # ((field, value), ...) applied with SftArgs.replace
    quality: int
    label: str

    @property
    def tier(self) -> int:
        return QUALITY_TIERS[self.quality]


def quality_of(args) -> int:
    """0 full, 1 LoRA-like (any unquantized PEFT), 2 quantized 8-bit, 3 quantized 4-bit or other."""
    if args.quant_method or args.quant_bits:
        return 2 if args.quant_bits == 8 else 3
    return 0 if args.tuner_type == "full" else 1


def label_of(args) -> str:
    q = quality_of(args)
    if q == 1 and args.tuner_type not in ("lora", None):
        return str(args.tuner_type)
    if q >= 2 and args.quant_method not in ("bnb", None):
        return f"{args.tuner_type} on {args.quant_method} {args.quant_bits or ''}-bit".replace(" -bit", "")
    return QUALITY_LABELS[q]


def methods_for(asked) -> list[Method]:
    """The user's own method first, then the standard four not already covered."""
    peft = asked.tuner_type if asked.tuner_type not in ("full", None) else "lora"
    standard = {
        "full": (("tuner_type", "full"), ("quant_method", None), ("quant_bits", None)),
        "lora": (("tuner_type", peft), ("quant_method", None), ("quant_bits", None)),
        "qlora8": (("tuner_type", peft), ("quant_method", "bnb"), ("quant_bits", 8)),
        "qlora4": (("tuner_type", peft), ("quant_method", "bnb"), ("quant_bits", 4)),
    }
    own = (asked.tuner_type, asked.quant_method, asked.quant_bits)
    out = [Method("asked", (), quality_of(asked), label_of(asked))]
    for quality, name in enumerate(STANDARD_METHODS):
        changes = standard[name]
        if tuple(v for _, v in changes) == own:
            out[0] = Method(name, (), quality, label_of(asked))
            continue
        out.append(Method(name, changes, quality, QUALITY_LABELS[quality]))
    return out


def strategies_for(gpus: int, method: Method, asked_deepspeed, fsdp: bool = False) -> list:
    """DeepSpeed settings for ``gpus``: the user's, plain DDP (None), then ZeRO-2/3 on 2+ GPUs.

    QLoRA skips ZeRO-3 unless asked: sharding bitsandbytes weights needs a matching quant storage
    dtype that a plan cannot check. A request with ``--fsdp`` keeps its FSDP (None: no DeepSpeed),
    since ms-swift refuses FSDP and DeepSpeed together.
    """
    if fsdp:
        return [None]
    options = [asked_deepspeed, None]
    if gpus > 1:
        options += [z for z in ZERO if not (z == "zero3" and method.quality >= 2)]
    out = []
    for o in options:
        if o not in out:
            out.append(o)
    return out


def is_offload(deepspeed) -> bool:
    return "offload" in str(deepspeed or "").lower()


def offload_applies(method: Method, asked) -> bool:
    """Offload variants are tried for a full fine-tune only (DeepSpeed's host-memory estimate
    counts every parameter as trained; LoRA's optimizer states are small, QLoRA's weights cannot
    be offloaded), and not when the user already chose a DeepSpeed offload config or FSDP."""
    return method.quality == 0 and not is_offload(asked.deepspeed) and fsdp_of(asked) is None


@dataclass(frozen=True)
class Request:
    """What the user asked, normalised: the numbers every candidate is compared with."""

    gpus: int
    batch: int
    accumulation: int
    checkpointing: bool
    attention: str | None
    deepspeed: str | None
    tier: int  # the quality tier of the method asked for
    fsdp: bool = False  # --fsdp asked: every candidate keeps it, and it shards across GPUs as ZeRO-3 does

    @property
    def effective_batch(self) -> int:
        return self.batch * self.accumulation * self.gpus


def request_of(asked, gpus: int) -> Request:
    batch = int(asked.per_device_train_batch_size or 1)
    accumulation = asked.gradient_accumulation_steps
    if not accumulation:
        accumulation = max(1, math.ceil(SWIFT_TARGET_BATCH / batch / gpus))
    checkpointing = True if asked.gradient_checkpointing is None else bool(asked.gradient_checkpointing)
    return Request(
        gpus=gpus,
        batch=batch,
        accumulation=int(accumulation),
        checkpointing=checkpointing,
        attention=asked.attn_impl,
        deepspeed=asked.deepspeed,
        tier=QUALITY_TIERS[quality_of(asked)],
        fsdp=fsdp_of(asked) is not None,
    )


class BatchSplit(NamedTuple):
    """How a plan makes up the effective batch on its GPUs."""

    per_device: int  # the micro-batch
    accumulation: int  # gradient accumulation steps
    exact: bool  # per_device x accumulation x GPUs is the effective batch asked for


def batch_options(request: Request, gpus: int) -> list[BatchSplit]:
    """The batch splits for ``gpus``, the user's first.

    Micro-batches are the user's halved down to 1; accumulation makes up the effective batch.
    When no split keeps it exactly (e.g. 16 over 3 GPUs), the nearest is offered and flagged.
    """
    target = request.effective_batch
    sizes = []
    b = request.batch
    while b >= 1:
        sizes.append(b)
        b //= 2
    if 1 not in sizes:
        sizes.append(1)
    exact = [BatchSplit(b, target // (b * gpus), True) for b in sizes if target % (b * gpus) == 0]
    if exact:
        return exact
    return [BatchSplit(b, max(1, round(target / (b * gpus))), False) for b in sizes]


def relative_step_time(args, gpus: int, batch: int) -> float:
    """Rough time of one optimizer step (the same effective batch), for ranking only.

    Heuristics: LoRA skips weight gradients (~0.7 of full); bitsandbytes dequantization costs
    ~30% (4-bit) to ~60% (8-bit); checkpointing recomputes the forward (~1.33x); eager attention
    ~1.15x, flash_attn ~0.95x of sdpa; micro-batches below 4 use the GPU less well; data
    parallel divides the work, ZeRO-2/3 and offload add communication.
    """
    t = (1.0, 0.7, 0.7 * 1.6, 0.7 * 1.3)[quality_of(args)]
    if args.gradient_checkpointing is None or args.gradient_checkpointing:
        t *= 1.33
    t *= {"eager": 1.15, "flash_attn": 0.95}.get(args.attn_impl, 1.0)
    t *= 1 + 0.25 / max(1, batch)
    ds = str(args.deepspeed or "")
    comm = 1.0 if gpus == 1 and not ds else 1.05
    if "zero2" in ds:
        comm = 1.1
    if "zero3" in ds:
        comm = 1.3
    if "offload" in ds:
        comm *= 2.5
    return t * comm / gpus
