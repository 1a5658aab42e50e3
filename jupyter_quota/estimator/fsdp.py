"""What ``--fsdp`` asks of PyTorch FSDP, and what each GPU then holds (docs/estimator.md §4.6).

ms-swift 4.x reads ``--fsdp`` as its preset ``fsdp2`` (swift/config/fsdp2.json: ``full_shard
auto_wrap``, ``reshard_after_forward`` and ``activation_checkpointing`` true), or as a JSON file or
string with an ``fsdp`` option string (``full_shard`` / ``shard_grad_op`` / ``offload``) and an
``fsdp_config`` (swift/arguments/sft_args.py ``_init_fsdp``). accelerate then wraps every decoder
layer in ``fully_shard`` (accelerate/utils/fsdp_utils.py ``fsdp2_prepare_model``):

* every parameter, frozen or trained, is split N ways; trained parameters that are not float32 are
  first upcast to float32 (mixed precision keeps a float32 master), so a trained parameter costs
  4 bytes of weight, 4 of gradient and 8 of AdamW moments, all split N ways: 16/N bytes, what
  DeepSpeed ZeRO-3 keeps per parameter (16-bit copy and gradient, 12 bytes of fp32 master and
  moments); bitsandbytes 4-bit weights stored as uint8 (ms-swift's default
  ``bnb_4bit_quant_storage``) are left out of sharding and stay whole on every GPU;
* a layer is gathered whole in the compute dtype while it runs, the next one is prefetched, and
  its gradient is whole until it is reduce-scattered; the tail (final norm, lm_head, and the
  embeddings when tied) is not resharded after the forward pass;
* ``offload`` (``CPUOffloadPolicy``) keeps the sharded parameters and gradients in CPU memory and
  runs the optimizer step there: the GPU holds only what is gathered;
* ``fsdp_config.activation_cpu_offload`` adds ms-swift's callback (swift/callbacks/
  activation_cpu_offload.py) that moves each decoder layer's saved activations to CPU memory,
  double-buffered: two layers' worth stay on the GPU.

This module is pure: it reads the argument, it never opens a file (a config file named by path is
read by its name only, and the estimate says so).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..swift import SftArgs
from .features import extra_value

#: ms-swift 4.x's shipped preset (swift/config/fsdp2.json)
PRESETS = {"fsdp2": {"fsdp": "full_shard auto_wrap", "fsdp_config": {"activation_checkpointing": True}}}
_OPTION_WORDS = ("full_shard", "shard_grad_op", "hybrid_shard", "no_shard", "offload", "auto_wrap")


@dataclass(frozen=True)
class Fsdp:
    """The FSDP settings that decide memory."""

    reshard: bool  # full_shard (ZeRO-3 like); False: shard_grad_op (params stay gathered until backward ends)
    offload: bool  # CPUOffloadPolicy: sharded parameters, gradients and the optimizer step on the CPU
    activation_checkpointing: bool  # fsdp_config.activation_checkpointing (ms-swift then drops gradient_checkpointing)
    activation_offload: bool  # fsdp_config.activation_cpu_offload: ms-swift's callback moves saved activations to CPU
    source: str  # how the settings were read, for the note


@dataclass(frozen=True)
class States:
    """Bytes per GPU of the model states under FSDP, split into what is sharded and what is gathered."""

    weights: float  # the GPU's shard of every parameter (0 with offload)
    gradients: float  # its shard of the trained parameters' float32 gradients (0 with offload)
    optimizer: float  # its shard of the AdamW moments (0 with offload)
    gathered: float  # layers gathered whole in the compute dtype: two in flight, plus the unresharded tail
    layer_gradient: float  # one layer's whole gradient before it is reduce-scattered


def fsdp_of(args: SftArgs) -> Fsdp | None:
    """The run's FSDP settings, or None without ``--fsdp`` (or with ``no_shard``, which is DDP)."""
    value = extra_value(args, "fsdp")
    if value is None or value.strip().lower() in ("", "false", "none", "[]"):
        return None
    text = value.strip()
    if text.lower() in PRESETS:
        config, source = PRESETS[text.lower()], f"ms-swift's preset {text.lower()} (swift/config/fsdp2.json)"
    elif text.startswith("{"):
        try:
            config, source = json.loads(text), "the JSON given to --fsdp"
        except ValueError:
            config, source = {}, "--fsdp (JSON that does not parse: full_shard assumed)"
    elif any(word in text.lower().split() for word in _OPTION_WORDS):
        config, source = {"fsdp": text.lower()}, "the option words given to --fsdp"
    else:
        # a config file: the estimator does not open files, so its name decides (as for --deepspeed)
        words = "full_shard auto_wrap" + (" offload" if "offload" in text.lower() else "")
        config = {"fsdp": words, "fsdp_config": {"activation_checkpointing": True}}
        source = f"the file name {text} (not read: full_shard{', offload' if 'offload' in words else ''} assumed)"
    if not isinstance(config, dict):
        config = {}
    options = str(config.get("fsdp", "full_shard auto_wrap")).lower().split()
    given = config.get("fsdp_config") if isinstance(config.get("fsdp_config"), dict) else {}
    # accelerate's config files spell the keys fsdp_offload_params, fsdp_reshard_after_forward, ...
    settings = {key.removeprefix("fsdp_"): value for key, value in given.items()}
    if "no_shard" in options:
        return None
    reshard = settings.get("reshard_after_forward", "shard_grad_op" not in options)
    return Fsdp(
        reshard=bool(reshard),
        offload="offload" in options or bool(settings.get("offload_params")),
        activation_checkpointing=bool(settings.get("activation_checkpointing", False)),
        activation_offload=bool(settings.get("activation_cpu_offload", False)),
        source=source,
    )


def states(
    *,
    gpus: int,
    trained_params: int,
    trained_bytes: float,
    frozen_bytes: float,
    whole_bytes: float,
    layer_bytes: float,
    tail_bytes: float,
    compute_bytes: float,
    layer_gradient_bytes: float,
    fsdp: Fsdp,
) -> States:
    """Per-GPU bytes of the model states under ``fsdp`` on ``gpus`` GPUs.

    ``trained_bytes``: the trained parameters as FSDP keeps them (float32 after accelerate's
    upcast); ``frozen_bytes``: the frozen parameters FSDP shards; ``whole_bytes``: what it does not
    shard (bitsandbytes uint8 weights); ``layer_bytes``: the largest layer in the compute dtype;
    ``tail_bytes``: the unresharded tail in the compute dtype; ``compute_bytes``: the whole model in
    the compute dtype (what ``shard_grad_op`` keeps gathered)."""
    shards = max(1, gpus)
    if fsdp.offload:
        sharded = States(0.0, 0.0, 0.0, 0.0, 0.0)
    else:
        sharded = States(
            weights=(trained_bytes + frozen_bytes) / shards,
            gradients=trained_bytes / shards,  # float32 gradients of float32 parameters
            optimizer=8 * trained_params / shards,  # AdamW's two float32 moments
            gathered=0.0,
            layer_gradient=0.0,
        )
    # full_shard: the running layer and the prefetched one; shard_grad_op keeps every gathered
    # layer until the backward pass ends: the whole model in the compute dtype
    gathered = 2 * layer_bytes + tail_bytes if fsdp.reshard else compute_bytes
    return States(
        weights=sharded.weights + whole_bytes,
        gradients=sharded.gradients,
        optimizer=sharded.optimizer,
        gathered=gathered,
        layer_gradient=layer_gradient_bytes,
    )
