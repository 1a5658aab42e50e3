"""What ms-swift features decide about a run before any term is computed: the sequence-parallel
split, the eval phase and the images a sample carries (docs/estimator.md §2.4-§2.6).

Each reads the ms-swift 4.x argument (typed in ``SftArgs`` or passed through in ``args.extra``)
and appends the assumption it makes to ``notes``.
"""

from __future__ import annotations

import math

from ..swift import SftArgs
from .model import ModelSpec

#: Qwen2-VL / Qwen2.5-VL: qwen_vl_utils' MAX_PIXELS (16384 tokens of 28 x 28 pixels); Qwen3-VL's
#: processor: 16384 tokens of 32 x 32 (preprocessor_config.json ``longest_edge``) (docs/estimator.md §2.6)
_PROCESSOR_MAX_PIXELS = {
    "qwen2_vl": 16384 * 28 * 28,
    "qwen2_5_vl": 16384 * 28 * 28,
    "qwen3_vl": 16384 * 32 * 32,
    "qwen3_vl_moe": 16384 * 32 * 32,
}
#: patch side and spatial merge (patches per LLM token = merge^2) per vision family
_PATCH = {"qwen2_vl": (14, 2), "qwen2_5_vl": (14, 2), "qwen3_vl": (16, 2), "qwen3_vl_moe": (16, 2)}
#: a fixed-resolution tower (Qwen-VL, InternVL tiles, LLaVA): one 448 x 448 image of 14-pixel patches
FIXED_PATCHES = 1024


def extra_value(args: SftArgs, name: str) -> str | None:
    """The (first) value of a passed-through argument, or None when it is absent."""
    for key, values in args.extra:
        if key == name:
            return values[0] if values else "true"
    return None


def sequence_parallel_degrees(spec: ModelSpec, args: SftArgs, gpus: int, notes: list[str]) -> tuple[int, int]:
    """(Ulysses, ring) degrees of ``--sequence_parallel_size``: ms-swift 4.x gives Ulysses
    gcd(attention heads, size) and ring attention the rest (swift/sequence_parallel/
    sequence_parallel.py ``_init_device_mesh``; docs/estimator.md §2.4)."""
    size = max(1, args.sequence_parallel_size)
    if size == 1:
        return 1, 1
    ulysses = math.gcd(spec.num_heads, size)
    ring = size // ulysses
    kind = f"Ulysses {ulysses}" + (f" x ring attention {ring}" if ring > 1 else "")
    notes.append(
        f"sequence parallel {size} ({kind}): each GPU holds 1/{size} of every sequence; logits are "
        "computed for its own tokens (use_logits_to_keep is off under sequence parallel)"
    )
    if gpus % size:
        notes.append(f"--sequence_parallel_size {size} needs a multiple of {size} GPUs; estimated as if it had them")
    return ulysses, ring


def eval_tokens(args: SftArgs, seq_len: int, notes: list[str]) -> int:
    """Tokens of one eval micro-batch on one device when the run has an eval phase: a
    ``--val_dataset`` or ``--split_dataset_ratio`` > 0, and ``--eval_strategy`` not ``no``
    (swift/arguments/base_args/data_args.py, sft_args.py; docs/estimator.md §2.5)."""
    strategy = (extra_value(args, "eval_strategy") or "").lower()
    try:
        ratio = float(extra_value(args, "split_dataset_ratio") or 0)
    except ValueError:
        ratio = 0.0
    if strategy == "no" or not (extra_value(args, "val_dataset") or ratio > 0):
        return 0
    try:
        batch = max(1, int(extra_value(args, "per_device_eval_batch_size") or 1))
    except ValueError:
        batch = 1
    notes.append(
        f"eval phase (a validation split exists): {batch} sample(s) x {seq_len} tokens per eval "
        "micro-batch, forward only (per_device_eval_batch_size, ms-swift default 1)"
    )
    return batch * seq_len


def image_patches(spec: ModelSpec, args: SftArgs, sample_len: int, notes: list[str]) -> int:
    """Vision-tower patches of one sample's image: ``--max_pixels`` (or the processor's default)
    over the patch area for towers of dynamic resolution, capped where the image's tokens would
    fill the sample; a fixed 448 x 448 image otherwise (docs/estimator.md §2.6)."""
    family = spec.model_type.lower()
    patch, merge = _PATCH.get(family, (0, 1))
    if not patch:
        return FIXED_PATCHES  # a fixed-resolution tower: terms.vision says so
    given = extra_value(args, "max_pixels")
    try:
        pixels = int(given) if given is not None else _PROCESSOR_MAX_PIXELS.get(family, 16384 * 28 * 28)
    except ValueError:
        pixels = _PROCESSOR_MAX_PIXELS.get(family, 16384 * 28 * 28)
    patches = max(merge * merge, pixels // (patch * patch))
    cap = sample_len * merge * merge  # the image's tokens (patches / merge^2) fit in the sample
    source = f"--max_pixels {given}" if given is not None else "the processor's default max_pixels"
    if patches > cap:
        notes.append(
            f"vision tokens: {source} allows {patches // (merge * merge)} tokens per image; capped at "
            f"the sample's {sample_len} tokens ({cap} patches)"
        )
        return cap
    notes.append(
        f"vision tokens: one image per sample at {source} ({pixels} pixels): {patches} patches of "
        f"{patch} x {patch}, {patches // (merge * merge)} LLM tokens"
    )
    return patches
