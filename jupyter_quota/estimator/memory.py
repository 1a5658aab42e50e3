"""The formulas: peak memory per device of one ms-swift training step.

Peak = weights + gradients + optimizer states + activations + logits + overhead. Each term has
its own function (activations and logits in ``activations.py``), and each cites the section of
``docs/estimator.md`` that derives it from the code paths ms-swift uses (HF transformers
modelling, PEFT LoRA, bitsandbytes, torch AdamW, DeepSpeed ZeRO). Where a choice is uncertain it
leans high: a quota tool must not approve a job that then runs out of memory (docs/estimator.md §1).

``compute`` calls the terms in a fixed order because each appends its assumptions (``notes``) as
it goes, and the assumptions read in that order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

from ..swift import SftArgs
from . import fsdp as sharding
from . import terms as extra
from .activations import Tail, activations, backward_tail, logits
from .features import extra_value
from .model import ModelSpec
from .run import Run, describe_run

GIB = 1024**3
#: torch's fused AdamW (the HF Trainer's default with torch >= 2.8, when asked for by name here: an
#: unset --optim keeps the foreach path's buffer, the measured rows' stacks and the higher answer)
FUSED_ADAMW = "adamw_torch_fused"


class ModelStates(NamedTuple):
    """Bytes of one whole replica's weights, gradients and optimizer states, before any sharding."""

    weights: float
    gradients: int
    optimizer: int


@dataclass
class Terms:
    """Bytes per device of each term; ``step_buffers`` folds into the optimizer in ``_breakdown``."""

    weights: float = 0.0
    gradients: float = 0.0
    optimizer: float = 0.0
    activations: float = 0.0
    logits: float = 0.0
    vision: float = 0.0
    parallel: float = 0.0
    buckets: float = 0.0
    evaluation: float = 0.0
    allocator: float = 0.0
    step_buffers: float = 0.0
    #: near the backward pass's end: vocabulary-sized gradients (``activations.backward_tail``)
    tail: Tail = field(default_factory=lambda: Tail(0, 0))
    overhead: float = 0.0
    #: one micro-batch a step on one GPU: the gradients are made during the backward pass, so the
    #: peak at the loss holds none (``_breakdown``)
    fresh_gradients: bool = False

    @property
    def dynamic(self) -> float:
        """What a training step allocates and frees: activations, logits, vision, SP buffers."""
        return self.activations + self.logits + self.vision + self.parallel

    @property
    def states(self) -> float:
        return self.weights + self.gradients + self.optimizer


def compute(spec: ModelSpec, args: SftArgs, gpus: int, device: str) -> tuple[dict, list[str]]:
    """Breakdown (bytes, ints) and assumptions for ``args`` on ``gpus`` devices of kind ``device``."""
    notes: list[str] = []
    run = describe_run(spec, args, gpus, device, notes)
    replica = _replica_states(run, notes)
    terms = Terms()
    if run.fsdp:
        terms.weights, terms.gradients, terms.optimizer = _fsdp_states(run, replica, notes)
    else:
        terms.weights = _weights(run, replica, notes)
        terms.gradients = _gradients(run, replica, notes)
        terms.optimizer = _optimizer_states(run, replica, notes)
    terms.activations = activations(run, notes)
    terms.logits = logits(run, notes)
    terms.tail = backward_tail(run, terms.activations, notes)
    terms.vision = extra.vision(run, notes)
    terms.parallel = extra.parallel(run, notes)
    terms.buckets = extra.buckets(run, replica.gradients, notes)
    terms.evaluation = extra.evaluation(run, terms.dynamic, notes)
    terms.step_buffers = _step_buffers(run, terms, notes)
    terms.fresh_gradients = _fresh_gradients(run, terms, notes)
    terms.allocator = extra.allocator(run, terms.dynamic, terms.states + terms.buckets, notes)
    terms.overhead = _overhead(run, terms, notes)
    return _breakdown(terms), notes


# -- weights, gradients, optimizer states -------------------------------------------------------


def _replica_states(run: Run, notes: list[str]) -> ModelStates:
    """One whole replica's weights, gradients and optimizer states (docs/estimator.md §3, §4.1):
    what DDP holds on every GPU, and what ZeRO splits."""
    weights = _base_weight_bytes(run, notes)
    if run.full:
        trained_bytes = run.gradient_params * run.dtype_bytes  # LISA: the active layers' only
    else:
        trained_bytes = run.lora_params * 4 + (run.saved_params + run.new_block_params) * run.dtype_bytes
        weights = weights + trained_bytes  # the adapters and trainable copies sit beside the base
    return ModelStates(weights, trained_bytes, _adam_state_bytes(run, notes))


def _base_weight_bytes(run: Run, notes: list[str]) -> float:
    """The model's own weights: 16/32-bit, or bitsandbytes-quantized decoder linears (docs/estimator.md §3)."""
    spec, dtype_bytes, bits = run.spec, run.dtype_bytes, run.quant_bits
    if not bits:
        return spec.params * dtype_bytes
    linear = spec.linear_params
    rest = spec.llm_params - linear + spec.audio_params  # embeddings, lm_head, norms, biases, audio tower
    if not run.args.quantized_bits:  # a pre-quantized checkpoint (AWQ, GPTQ, FP8): its quantization_config
        per_weight = spec.quant_bytes_per_weight
        group = f", groups of {spec.quant_group_size}" if spec.quant_group_size else ""
        notes.append(
            f"{spec.quant_method.upper()} {spec.quant_bits}-bit checkpoint{group}: {per_weight:.3f} bytes per "
            "decoder linear weight; embeddings, lm_head, norms and the vision and audio towers stay 16-bit"
        )
        return linear * per_weight + (rest + spec.vision_params) * dtype_bytes
    # quantizing on load replaces nn.Linear modules only: transformers 5's stacked experts stay 16-bit
    stacked = _stacked_experts(run)
    if stacked:
        notes.append(
            f"{(run.args.quant_method or 'bnb')} quantizes nn.Linear modules only: transformers 5 stacks the "
            f"routed experts in parameters, so their {stacked / 1e6:,.0f}M weights stay in the model dtype"
        )
        linear -= stacked
        rest += stacked
    vision_16 = spec.vision_params - (spec.vision_linear_params if spec.vision_quantized else 0)
    stays = (
        "embeddings, lm_head and norms stay 16-bit, and the vision tower's linears are quantized too "
        "(ms-swift's Qwen-VL loader skips only lm_head and attn_pool.attn)"
        if spec.vision_quantized
        else "embeddings, lm_head, norms and the vision tower stay 16-bit"
    )
    if (run.args.quant_method or "").lower() == "hqq":
        # transformers' HqqConfig (ms-swift passes nbits and axis): every linear but lm_head, packed
        # bits (3-bit: 10 to an int32) plus a scale and a zero in the compute dtype per group of 64
        per_weight = (0.4 if bits == 3 else bits / 8) + 2 * dtype_bytes / 64
        notes.append(
            f"HQQ {bits}-bit, groups of 64: {per_weight:.3f} bytes per linear weight, the vision tower's too "
            "(HqqConfig skips only lm_head); embeddings, lm_head and norms stay 16-bit"
        )
        return (linear + spec.vision_linear_params) * per_weight + (
            rest + spec.vision_params - spec.vision_linear_params
        ) * dtype_bytes
    double = run.args.bnb_4bit_use_double_quant
    if bits == 4:
        per_weight = 0.5 + (1 / 64 + 4 / (64 * 256) if double else 4 / 64)
        notes.append(
            f"bnb 4-bit {run.args.bnb_4bit_quant_type}{' with double quantization' if double else ''}: "
            f"{per_weight:.3f} bytes per decoder linear weight; {stays}"
        )
    else:
        per_weight = bits / 8 + 4 / spec.hidden_size
        notes.append(f"bnb {bits}-bit: {per_weight:.3f} bytes per decoder linear weight; {stays}")
    return (linear + spec.vision_params - vision_16) * per_weight + rest * dtype_bytes + vision_16 * dtype_bytes


def _stacked_experts(run: Run) -> int:
    """Routed-expert weights that quantizing on load (``--quant_method bnb`` or ``hqq``) leaves in the
    compute dtype: transformers 5's stacked expert parameters are no ``nn.Linear``, the only modules
    transformers' bitsandbytes and HQQ integrations replace (docs/estimator.md §3)."""
    spec = run.spec
    return spec.routed_expert_params if run.args.quantized_bits and spec.fused_experts else 0


def _adam_state_bytes(run: Run, notes: list[str]) -> int:
    """AdamW's two moments of every trained parameter, without DeepSpeed (docs/estimator.md §4.1)."""
    optim = (run.args.optim or "").lower()
    if "8bit" in optim or "8_bit" in optim:
        notes.append(f"{run.args.optim}: 8-bit optimizer states")
        return run.trainable * 2
    if run.galore:  # projected moments and projections of the linears, whole states of the rest
        galore = run.galore
        moment_bytes = galore.moment_bytes or run.dtype_bytes  # Q-GaLore: bitsandbytes 8-bit moments
        moments = (galore.state_elements + 2 * (run.trainable - galore.params)) * moment_bytes
        return moments + galore.projector_elements * run.dtype_bytes
    if run.full:
        return run.trainable * (2 * run.dtype_bytes)  # in the parameter dtype
    return run.lora_params * 8 + (run.saved_params + run.new_block_params) * 2 * run.dtype_bytes


def _weights(run: Run, replica: ModelStates, notes: list[str]) -> float:
    """Weights on one GPU: the whole replica, or ZeRO-3's share and gathered layers (docs/estimator.md §4.4, §4.5)."""
    if run.zero_stage < 3:
        return replica.weights
    largest = run.spec.largest_layer_params
    if run.offload:
        notes.append(
            "DeepSpeed ZeRO-3 with parameter and optimizer offload: the GPU holds only "
            "gathered layers (4 x largest layer, DeepSpeed's estimate)"
        )
        return 2 * largest * run.dtype_bytes
    if run.full:
        return replica.weights / run.shards + 2 * largest * run.dtype_bytes
    notes.append(
        "ZeRO-3 with a frozen base: the base weights are counted whole, since "
        "DeepSpeed keeps gathered parameters live (ms-swift's zero3.json sets "
        "stage3_max_live_parameters and max_reuse_distance to 1e9); measured "
        "LoRA runs save little under ZeRO-3"
    )
    return replica.weights


def _gradients(run: Run, replica: ModelStates, notes: list[str]) -> float:
    """Gradients on one GPU, per strategy (docs/estimator.md §4.2-§4.5)."""
    trainable, dtype_bytes, shards = run.trainable, run.dtype_bytes, run.shards
    if run.zero_stage == 0:
        return replica.gradients  # DDP's buckets: terms.buckets
    if run.zero_stage in (1, 2):
        if run.offload:
            return min(trainable, 5e8) * dtype_bytes
        # the 16-bit gradients, plus float32 gradients: ZeRO-2's partition, ZeRO-1's whole copy
        return replica.gradients + 4 * trainable / shards * (1 if run.zero_stage == 2 else shards)
    largest = run.spec.largest_layer_params
    if run.offload:
        return 2 * largest * dtype_bytes
    # 16-bit and float32 partitions, plus one gathered layer's gradient before it is reduce-scattered:
    # the largest layer for a full fine-tune, the trainable parameters (at most) otherwise
    return (2 + 4) * trainable / shards + (largest if run.full else min(largest, trainable)) * dtype_bytes


def _optimizer_states(run: Run, replica: ModelStates, notes: list[str]) -> float:
    """Optimizer states on one GPU, per strategy (docs/estimator.md §4.1, §4.3-§4.5)."""
    if run.zero_stage == 0:
        return replica.optimizer
    shards = run.shards
    if run.zero_stage in (1, 2):
        if run.offload:
            notes.append(
                f"DeepSpeed ZeRO-{run.zero_stage} with optimizer offload: optimizer states and fp32 "
                "master weights in CPU memory"
            )
            return 0
        notes.append(
            f"DeepSpeed ZeRO-{run.zero_stage} over {run.gpus} GPU(s): fp32 master weights and AdamW "
            f"states (12 bytes/param) split {shards} ways, as DeepSpeed's own estimate "
            "(estimate_zero2_model_states_mem_needs)"
        )
        return 12 * run.trainable / shards
    if run.offload:
        return 0
    notes.append(
        f"DeepSpeed ZeRO-3 over {run.gpus} GPU(s): parameters, gradients and optimizer "
        f"states split {shards} ways, plus gathered layers (DeepSpeed's "
        "estimate_zero3_model_states_mem_needs)"
    )
    return 12 * run.trainable / shards


def _fsdp_states(run: Run, replica: ModelStates, notes: list[str]) -> tuple[float, float, float]:
    """Weights, gradients and optimizer states on one GPU under ``--fsdp`` (docs/estimator.md §4.6):
    every parameter split N ways, trained ones upcast to float32 first, plus the gathered layers."""
    spec, a, fsdp = run.spec, run.dtype_bytes, run.fsdp
    assert fsdp is not None
    base = _base_weight_bytes(run, [])
    bnb = bool(run.args.quantized_bits)
    storage = (extra_value(run.args, "bnb_4bit_quant_storage") or "uint8").lower()
    # accelerate upcasts trained parameters to float32 unless the model holds bnb 4-bit weights
    trained_bytes = replica.gradients if bnb else run.trainable * 4.0
    frozen = base - (run.trainable * a if run.full else 0)
    whole = 0.0
    if bnb and not (run.quant_bits == 4 and storage in ("bfloat16", "bf16", "float16", "fp16", "float32")):
        # the quantized linears, left unsharded (the stacked experts stay 16-bit and are sharded)
        whole = base - (spec.params - spec.linear_params + _stacked_experts(run)) * a
        frozen -= whole
    layer = max(spec.layer_params) * base / max(1, spec.params)  # in the stored form, as gathered
    tail = (spec.lm_head_params or spec.embed_params) * a
    layer_gradient = max(spec.layer_params) * a if run.full else run.trainable / max(1, spec.num_layers) * 4
    states = sharding.states(
        gpus=run.gpus,
        trained_params=run.trainable,
        trained_bytes=trained_bytes,
        frozen_bytes=frozen,
        whole_bytes=whole,
        layer_bytes=layer,
        tail_bytes=tail,
        compute_bytes=replica.weights,
        layer_gradient_bytes=layer_gradient,
        fsdp=fsdp,
    )
    how = "full_shard" if fsdp.reshard else "shard_grad_op (layers stay gathered until the backward pass ends)"
    notes.append(
        f"FSDP {how} over {run.gpus} GPU(s), from {fsdp.source}: every parameter split {run.shards} ways, "
        "trained ones upcast to float32 (accelerate's fsdp2_prepare_model): 16 bytes per trained parameter "
        "split N ways (float32 weight, gradient and two AdamW moments), as ZeRO-3's 16; plus two gathered "
        "decoder layers, the unresharded lm_head and one layer's gradient before its reduce-scatter"
    )
    if fsdp.offload:
        notes.append(
            "FSDP offload (CPUOffloadPolicy): sharded parameters and gradients in CPU memory and the "
            "optimizer step on the CPU; the GPU holds only what is gathered"
        )
    if whole:
        notes.append(
            "bnb 4-bit weights stored as uint8 are left out of FSDP's sharding (accelerate): every GPU holds "
            "them whole; --bnb_4bit_quant_storage bfloat16 lets FSDP split them"
        )
    # HF Trainer runs a step's earlier micro-batches under accelerator.no_sync: FSDP2's
    # set_requires_gradient_sync(False) keeps every trained parameter's unsharded gradient, in the
    # compute dtype, until the step's last backward reduce-scatters them (docs/estimator.md §4.6)
    accumulated = run.trainable * a if run.args.gradient_accumulation(run.gpus) > 1 else 0
    if accumulated:
        notes.append(
            f"gradient accumulation under FSDP ({run.args.gradient_accumulation(run.gpus)} micro-batches a step): "
            "the earlier micro-batches run without gradient sync, so every GPU keeps each trained parameter's "
            "unsharded gradient until the step's last backward"
        )
    gradients = states.gradients + states.layer_gradient + accumulated
    return states.weights + states.gathered, gradients, states.optimizer


# -- the optimizer step and overhead ------------------------------------------------------------


def _step_buffers(run: Run, terms: Terms, notes: list[str]) -> float:
    """AdamW's parameter-sized buffer at the optimizer step, where the GPU runs the step
    (docs/estimator.md §7). ``_breakdown`` counts what exceeds the activations and logits."""
    if run.fsdp:
        if run.fsdp.offload:
            return 0.0
        local_params = run.trainable / run.shards
    elif run.zero_stage == 0 and (run.args.optim or "").lower() == FUSED_ADAMW and not run.galore:
        # torch's fused kernel updates every tensor in place: no buffer (the simulated step shows none)
        notes.append(f"--optim {FUSED_ADAMW}: the fused AdamW kernel needs no step buffer")
        return 0.0
    elif run.zero_stage == 0:
        local_params = run.gradient_params  # LISA's foreach step: the parameters with a gradient
    elif run.zero_stage in (1, 2) and not run.offload:
        local_params = run.trainable / run.shards
    else:
        return 0.0
    step = local_params * (run.dtype_bytes if run.full and not run.fsdp else 4)
    if run.galore:
        # GaLoreAdamW steps one parameter at a time (no foreach buffer); a projection update's SVD
        # needs a float32 copy of the largest gradient and its U factor
        step = 2 * run.galore.largest * 4
        if step > terms.dynamic:
            notes.append("peak at a GaLore projection update: torch.linalg.svd of the largest gradient in float32")
        return step
    if step > terms.dynamic:
        notes.append(
            "peak at the optimizer step: one parameter-sized buffer for AdamW "
            "(torch's foreach path; the fused kernel needs none, so this keeps a margin)"
        )
    return step


def _fresh_gradients(run: Run, terms: Terms, notes: list[str]) -> bool:
    """Whether no gradient outlives a step (docs/estimator.md §4.1): one micro-batch a step, one GPU,
    no DeepSpeed or FSDP (their buckets and partitions are allocated once)."""
    fresh = (
        run.gpus == 1
        and run.zero_stage == 0
        and not run.fsdp
        and run.args.gradient_accumulation(run.gpus) == 1
        and terms.gradients > 0
    )
    if fresh and terms.gradients + terms.step_buffers < terms.dynamic + terms.evaluation:
        notes.append(
            "no gradient accumulation: the gradients are made during the backward pass, after its peak "
            "at the loss, so only what they and the optimizer step exceed the activations and logits by counts"
        )
    return fresh


def _overhead(run: Run, terms: Terms, notes: list[str]) -> float:
    """A dequantized weight, cuBLAS and NCCL workspaces (docs/estimator.md §8); the buckets and the
    allocator's reserve are terms of their own."""
    overhead = 0.0
    if run.quant_bits:
        overhead += run.spec.hidden_size * run.mlp_width * run.dtype_bytes  # one dequantized weight at a time
        if run.hqq:
            kernel = "HQQ"
        else:
            kernel = "bitsandbytes" if run.args.quantized_bits else f"the {run.spec.quant_method.upper()} kernel"
        notes.append(
            f"{kernel} keeps each quantized linear's input for its backward pass "
            "(a frozen 16-bit linear keeps none): counted in the activations"
        )
    if run.cuda:
        overhead += 0.35 * GIB
        if run.gpus > 1:
            overhead += 0.25 * GIB
        notes.append("overhead: cuBLAS/NCCL workspaces (the CUDA context is not included)")
    return overhead


def _breakdown(terms: Terms) -> dict:
    """Whole bytes per key; the step buffer counts only where it exceeds the activations and logits
    (docs/estimator.md §7), and so do fresh gradients (§4.1): the peak is then the larger of the
    loss's backward (no gradient yet) and the update (all gradients and the step buffer)."""
    freed = terms.dynamic + terms.evaluation
    if terms.fresh_gradients:
        # the update (gradients and step buffer) or the backward's tail (gradients and vocabulary-
        # sized ones), above the loss's peak: the tail's excess under the logits
        after = max(terms.step_buffers, terms.tail.fresh)
        above = max(0.0, terms.gradients + after - freed)
        gradients = min(terms.gradients, above)
        extra_step = above - gradients if terms.step_buffers >= terms.tail.fresh else 0.0
        extra_tail = above - gradients - extra_step
    else:
        gradients = terms.gradients
        extra_tail = max(0.0, terms.tail.accumulated - freed)
        extra_step = max(0.0, terms.step_buffers - freed - extra_tail)
    parts = {
        "weights": terms.weights,
        "gradients": gradients,
        "optimizer": terms.optimizer + extra_step,
        "activations": terms.activations,
        "logits": terms.logits + extra_tail,
        "vision": terms.vision,
        "parallel": terms.parallel,
        "buckets": terms.buckets,
        "evaluation": terms.evaluation,
        "allocator": terms.allocator,
        "overhead": terms.overhead,
    }
    return {key: math.ceil(value) for key, value in parts.items()}
