"""The formulas: peak memory per device of one ms-swift training step.

Peak = model states (weights, gradients, optimizer) + the larger of (activations + logits path,
optimizer-step buffers) + overhead. Each term follows what the code paths ms-swift uses do
(HF transformers modelling, PEFT LoRA, bitsandbytes, torch AdamW, DeepSpeed ZeRO); the sources
are in ``../shared/research/estimator-methods.md``. Where a choice is uncertain it leans high:
a quota tool must not approve a job that then runs out of memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from ..swift import SftArgs
from .model import ModelSpec

GIB = 1024**3
DEFAULT_TOKENS = 2048

_FULL_TYPES = {"full", "lisa", "galore", "q-galore"}
_LORA_ROLES = {
    # role: names that select it (HF, Qwen-1, ChatGLM, InternLM2 spellings)
    "q": {"q_proj", "query", "wq"},
    "k": {"k_proj", "key", "wk"},
    "v": {"v_proj", "value", "wv"},
    "qkv": {"c_attn", "query_key_value", "wqkv", "qkv_proj", "qkv"},
    "o": {"o_proj", "c_proj", "dense", "wo", "out_proj"},  # Qwen-1/GPT-2 c_proj: see _roles_of
    "gate": {"gate_proj", "w1", "w3"},
    "up": {"up_proj"},
    "gateup": {"dense_h_to_4h", "gate_up_proj"},
    "down": {"down_proj", "w2", "dense_4h_to_h"},
}
_ALL_ROLES = ("q", "k", "v", "o", "gate", "up", "down")


@dataclass
class Terms:
    weights: float = 0.0
    gradients: float = 0.0
    optimizer: float = 0.0
    activations: float = 0.0
    logits: float = 0.0
    step_buffers: float = 0.0
    overhead: float = 0.0


def compute(spec: ModelSpec, args: SftArgs, gpus: int, device: str) -> tuple[dict, list[str]]:
    """Breakdown (bytes, ints) and assumptions for ``args`` on ``gpus`` devices of kind ``device``."""
    notes: list[str] = []
    cpu = device == "cpu"
    dtype = args.torch_dtype or spec.torch_dtype
    if args.torch_dtype is None:
        notes.append(f"torch_dtype from the model's config: {dtype}")
    a = 4 if dtype == "float32" else 2
    h, L, V = spec.hidden_size, spec.num_layers, spec.vocab_size
    qd, kvd = spec.num_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim

    # -- tokens per micro-batch on one device ---------------------------------------------------
    seq = args.max_length
    if seq is None:
        seq = DEFAULT_TOKENS
        notes.append(
            f"--max_length not given: ms-swift truncates at the model's maximum "
            f"({spec.max_position_embeddings}); estimated for {DEFAULT_TOKENS}-token "
            "samples (memory follows the longest sample; pass --max_length to bound it)"
        )
    seq = max(1, math.ceil(seq / max(1, args.sequence_parallel_size)))
    b = args.per_device_train_batch_size
    tokens = b * seq
    if args.packing:
        notes.append(f"packing: every micro-batch is {b} x {seq} tokens")
    elif args.padding_free:
        notes.append(f"padding_free: at most {tokens} real tokens per micro-batch (upper bound)")
    else:
        notes.append(f"{b} sample(s) x {seq} tokens per micro-batch (padded to the longest)")

    # -- what is trained ------------------------------------------------------------------------
    tuner = (args.tuner_type or "lora").lower()
    full = tuner in _FULL_TYPES
    bits = args.quantized_bits
    if bits and full:
        notes.append("a quantized model cannot be fully fine-tuned; estimated without quantization")
        bits = None
    train_vit = not args.freeze_vit and spec.vision_params > 0
    llm_frozen = spec.llm_params
    t = Terms()
    lora_params = 0
    save_params = 0
    new_block_params = 0
    if full:
        trainable = spec.llm_params + (spec.vision_params if train_vit else 0)
        if tuner != "full":
            notes.append(f"tuner_type {tuner}: estimated as a full fine-tune (upper bound)")
        notes.append(
            f"full fine-tune: {trainable / 1e9:.2f}B trainable parameters in {dtype}, "
            "AdamW states in the parameter dtype (no fp32 master copy, as in HF Trainer)"
        )
    else:
        roles = _lora_roles(args.target_modules, notes)
        lora_params = _lora_param_count(spec, roles, args.lora_rank)
        if tuner == "llamapro":
            new_block_params = args.llamapro_num_new_blocks * spec.layer_params[0]
            notes.append(f"llamapro: {args.llamapro_num_new_blocks} new decoder blocks trained in full")
            lora_params = 0
        elif tuner not in ("lora", "longlora", "adalora", "dora"):
            notes.append(f"tuner_type {tuner}: estimated as LoRA of the same rank")
        for module in args.modules_to_save:
            low = module.lower()
            if "embed" in low or low == "wte":
                save_params += spec.embed_params
            elif "lm_head" in low or low == "output":
                save_params += spec.lm_head_params or spec.embed_params
        if save_params:
            notes.append(
                f"modules_to_save: {save_params / 1e6:.0f}M parameters trained in full "
                "(PEFT keeps a trainable copy beside the frozen original)"
            )
        trainable = lora_params + save_params + new_block_params
        notes.append(
            f"{tuner}: rank {args.lora_rank} on {', '.join(args.target_modules)}: "
            f"{lora_params / 1e6:.1f}M adapter parameters in float32 (PEFT upcasts adapters "
            "of 16-bit models)"
        )

    # -- weights --------------------------------------------------------------------------------
    linear = spec.linear_params
    rest = spec.llm_params - linear
    if bits:
        vision_16 = spec.vision_params - (spec.vision_linear_params if spec.vision_quantized else 0)
        stays = (
            "embeddings, lm_head and norms stay 16-bit, and the vision tower's linears are quantized too "
            "(ms-swift's Qwen-VL loader skips only lm_head and attn_pool.attn)"
            if spec.vision_quantized
            else "embeddings, lm_head, norms and the vision tower stay 16-bit"
        )
        if bits == 4:
            per = 0.5 + (1 / 64 + 4 / (64 * 256) if args.bnb_4bit_use_double_quant else 4 / 64)
            notes.append(
                f"bnb 4-bit {args.bnb_4bit_quant_type}"
                f"{' with double quantization' if args.bnb_4bit_use_double_quant else ''}: "
                f"{per:.3f} bytes per decoder linear weight; {stays}"
            )
        else:
            per = bits / 8 + 4 / h
            notes.append(f"bnb {bits}-bit: {per:.3f} bytes per decoder linear weight; {stays}")
        base = (linear + spec.vision_params - vision_16) * per + rest * a + vision_16 * a
    else:
        base = (spec.llm_params + spec.vision_params) * a
    param_bytes = a if full else 4  # trainable parameters' dtype
    train_bytes_each = a if full else None

    # -- gradients and optimizer, per parallelism ------------------------------------------------
    stage, offload = args.deepspeed_stage
    optim = (args.optim or "").lower()
    state_bytes = 2 * (a if full else 4)  # AdamW exp_avg + exp_avg_sq in the parameter dtype
    if "8bit" in optim or "8_bit" in optim:
        state_bytes = 2
        notes.append(f"{args.optim}: 8-bit optimizer states")
    # trainable tensors, in bytes per param class
    lora_w = lora_params * 4
    save_w = (save_params + new_block_params) * a
    full_w = trainable * a if full else 0
    grads_local = full_w if full else lora_w + save_w
    states_local = trainable * state_bytes if full else (lora_params * 8 + (save_params + new_block_params) * 2 * a)
    if state_bytes == 2:
        states_local = trainable * 2
    weights_local = base + (0 if full else lora_w + save_w)
    n = max(1, gpus)
    if stage == 0:
        t.weights, t.gradients, t.optimizer = weights_local, grads_local, states_local
        if gpus > 1:
            t.gradients += grads_local
            notes.append(
                f"DDP over {gpus} GPUs: every GPU holds the whole model, gradients and "
                "optimizer, plus DDP's gradient buckets (one more gradient copy)"
            )
    elif stage in (1, 2):
        t.weights = weights_local
        if offload:
            t.gradients = min(trainable, 5e8) * a
            t.optimizer = 0
            notes.append(
                f"DeepSpeed ZeRO-{stage} with optimizer offload: optimizer states and fp32 master weights in CPU memory"
            )
        else:
            t.gradients = grads_local + 4 * trainable / n * (1 if stage == 2 else n)
            t.optimizer = 12 * trainable / n
            notes.append(
                f"DeepSpeed ZeRO-{stage} over {gpus} GPU(s): fp32 master weights and AdamW "
                f"states (12 bytes/param) split {n} ways, as DeepSpeed's own estimate "
                "(estimate_zero2_model_states_mem_needs)"
            )
        # ms-swift's zero2.json: contiguous_gradients with reduce_bucket_size 2e8, so DeepSpeed
        # allocates its whole reduce (ipg) bucket in the 16-bit dtype whatever the model's size
        # (stage_1_and_2.py ``ipg_buffer``); allgather_bucket_size 2e8 caps the gather buffer.
        t.overhead += (2e8 + min(2e8, trainable)) * a
    else:  # ZeRO-3
        largest = spec.largest_layer_params
        if offload:
            t.weights = 2 * largest * a
            t.gradients = 2 * largest * a
            t.optimizer = 0
            notes.append(
                "DeepSpeed ZeRO-3 with parameter and optimizer offload: the GPU holds only "
                "gathered layers (4 x largest layer, DeepSpeed's estimate)"
            )
        else:
            if full:
                t.weights = weights_local / n + 2 * largest * a
            else:
                # the frozen base stays gathered (see below): the gathered layers *are* those
                # weights, so no separate prefetch/gather buffers on top
                t.weights = weights_local
                notes.append(
                    "ZeRO-3 with a frozen base: the base weights are counted whole, since "
                    "DeepSpeed keeps gathered parameters live (ms-swift's zero3.json sets "
                    "stage3_max_live_parameters and max_reuse_distance to 1e9); measured "
                    "LoRA runs save little under ZeRO-3"
                )
            # one gathered layer's gradient before it is reduce-scattered: the largest layer for a
            # full fine-tune, the trainable parameters (at most) otherwise
            t.gradients = (2 + 4) * trainable / n + (largest if full else min(largest, trainable)) * a
            t.optimizer = 12 * trainable / n
            notes.append(
                f"DeepSpeed ZeRO-3 over {gpus} GPU(s): parameters, gradients and optimizer "
                f"states split {n} ways, plus gathered layers (DeepSpeed's "
                "estimate_zero3_model_states_mem_needs)"
            )
        # ms-swift's zero3.json leaves reduce_bucket_size and stage3_prefetch_bucket_size "auto",
        # which the transformers DeepSpeed integration fills with hidden_size^2 and
        # 0.9 * hidden_size^2: the reduce and prefetch buckets
        t.overhead += 1.9 * h * h * a
    del train_bytes_each, param_bytes

    # -- activations ----------------------------------------------------------------------------
    attn = (args.attn_impl or "sdpa").lower()
    if spec.eager_attention_only:
        attn = "eager"
        notes.append(
            f"attention: {spec.name}'s own modeling code computes it with matmul and softmax "
            "(eager) whatever --attn_impl says"
        )
    elif args.attn_impl is None:
        notes.append("attn_impl not given: sdpa assumed (ms-swift reads it from config.json)")
    flash = "flash" in attn
    eager = attn == "eager"
    liger = args.use_liger_kernel
    per_layer = _layer_activation_bytes(spec, a, full, args, eager, flash, liger, seq, bits)
    ckpt = args.gradient_checkpointing
    inter = (
        spec.intermediate_size
        if not spec.is_moe
        else spec.moe_intermediate_size * max(1, spec.num_experts_per_tok) + spec.shared_expert_intermediate_size
    )
    transient = tokens * a * (2 * inter + 2 * h)
    logits = _logits_bytes(tokens, V, h, a, liger)
    if ckpt:
        # The loss backward finishes (logits freed) before the first layer is recomputed, so the
        # recomputed layer and the logits path do not coexist: count the larger of the two.
        layer_branch = per_layer * tokens + transient
        acts = L * tokens * h * a + max(0, layer_branch - logits)
        notes.append(
            "gradient checkpointing on (ms-swift default): one saved input per layer plus "
            "one layer recomputed at a time (after the logits path is freed)"
        )
    else:
        acts = L * per_layer * tokens + transient + tokens * h * a
        notes.append("gradient checkpointing off: every layer keeps its activations")
    if spec.vision_params:
        patches = 1024 * b
        vis = patches * a * (4 * spec.vision_hidden + 2 * spec.vision_intermediate)
        if train_vit:
            vis *= spec.vision_layers if not args.gradient_checkpointing else 2
        acts += vis
        notes.append(
            "vision tower: one image of 1024 patches per sample"
            + ("; trained (freeze_vit false)" if train_vit else "; frozen (ms-swift default)")
        )
    t.activations = acts

    # -- logits and loss ------------------------------------------------------------------------
    t.logits = logits
    if liger:
        notes.append("use_liger_kernel: fused linear cross-entropy, logits computed in chunks")
    else:
        notes.append(
            f"logits and loss: {tokens} x {V} logits ({logits / (tokens * V):.0f} bytes per "
            "logit: the logits, their float32 log-softmax and its gradient"
            + (", the float32 upcast and the 16-bit gradient)" if a < 4 else ")")
        )
        if not spec.vision_params:
            # swift/trainers/mixin.py prepare_logits_to_keep: on by default for text models
            notes.append(
                "ms-swift computes logits only for the tokens that carry a label "
                "(use_logits_to_keep), so counting every token is an upper bound when "
                "prompts are not trained on"
            )

    # -- optimizer step ---------------------------------------------------------------------------
    if stage == 0 or (stage in (1, 2) and not offload):
        local_params = trainable if stage == 0 else trainable / n
        t.step_buffers = local_params * (a if full else 4)
        if t.step_buffers > t.activations + t.logits:
            notes.append(
                "peak at the optimizer step: one parameter-sized buffer for AdamW "
                "(torch's foreach path; the fused kernel needs none, so this keeps a margin)"
            )
    if bits:
        t.overhead += h * inter * a  # one dequantized weight at a time
        notes.append(
            "bitsandbytes keeps each quantized linear's input for its backward pass "
            "(a frozen 16-bit linear keeps none): counted in the activations"
        )
    if not cpu:
        dynamic = t.activations + t.logits
        t.overhead += 0.35 * GIB + 0.10 * dynamic + 0.02 * (t.weights + t.gradients + t.optimizer)
        if gpus > 1:
            t.overhead += 0.25 * GIB
        notes.append(
            "overhead: cuBLAS/NCCL workspaces and caching-allocator fragmentation "
            "(reserved memory, as ms-swift logs it; the CUDA context is not included)"
        )
    return _breakdown(t), notes


def _logits_bytes(tokens: int, V: int, h: int, a: int, liger: bool) -> float:
    if liger:
        chunk = 2 ** math.ceil(math.log2(max(1, math.ceil(tokens / math.ceil(V / h)))))
        return chunk * V * (4 + a) * 2 + tokens * h * 4
    # logits (a) + log-softmax output (4) + its gradient (4); 16-bit models add the float32
    # upcast (4) and the 16-bit gradient of the logits (a).
    return tokens * V * (a + 8 + (4 + a if a < 4 else 0))


def _breakdown(t: Terms) -> dict:
    transient = t.activations + t.logits
    extra_step = max(0.0, t.step_buffers - transient)
    parts = {
        "weights": t.weights,
        "gradients": t.gradients,
        "optimizer": t.optimizer + extra_step,
        "activations": t.activations,
        "logits": t.logits,
        "overhead": t.overhead,
    }
    return {k: int(math.ceil(v)) for k, v in parts.items()}


def _lora_roles(targets: tuple[str, ...], notes: list[str]) -> frozenset[str]:
    roles, unknown = _lora_roles_cached(tuple(targets))
    for target in unknown:
        notes.append(f"target module {target!r} not recognised: counted as all-linear (upper bound)")
    return roles


@lru_cache(maxsize=256)
def _lora_roles_cached(targets: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    roles: set[str] = set()
    unknown: list[str] = []
    for target in targets:
        low = target.lower()
        if low in ("all-linear", "all", "all_linear"):
            roles.update(_ALL_ROLES)
            continue
        found = _roles_of(low)
        if not found:
            unknown.append(target)
            roles.update(_ALL_ROLES)
        roles.update(found)  # a fused qkv / gate-up linear gets one adapter: counted as such
    return frozenset(roles), tuple(unknown)


def _roles_of(name: str) -> list[str]:
    """Roles a target selects. PEFT matches a name as a suffix of module paths, so ``c_proj`` (Qwen-1,
    GPT-2) selects the attention output and the MLP's down projection; ``attn.c_proj`` only the first."""
    prefix, _, last = name.rpartition(".")
    found = [role for role, names in _LORA_ROLES.items() if last in names]
    if last == "c_proj":
        found = ["o"] if "attn" in prefix else ["down"] if "mlp" in prefix else ["o", "down"]
    return found


# The planner calls ``estimate`` 20-100 times per plan with the same model and targets: the per-layer
# LoRA shapes and counts are cached on the (frozen, hashable) ModelSpec and role set.
@lru_cache(maxsize=256)
def _lora_dims(spec: ModelSpec, roles: frozenset[str]) -> tuple[tuple[int, int, int], ...]:
    """(in, out, count per layer) of each LoRA-wrapped attention linear in one layer."""
    h, qd, kvd = spec.hidden_size, spec.num_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
    dims = []
    for role, din, dout in (("q", h, qd), ("k", h, kvd), ("v", h, kvd), ("qkv", h, qd + 2 * kvd), ("o", qd, h)):
        if role in roles:
            dims.append((din, dout, 1))
    return tuple(dims)


@lru_cache(maxsize=512)
def _mlp_dims(spec: ModelSpec, roles: frozenset[str], moe: bool) -> tuple[tuple[int, int, int], ...]:
    h = spec.hidden_size
    dims = []
    widths = [(spec.intermediate_size, 1)]
    if moe:
        widths = [(spec.moe_intermediate_size, spec.num_experts)]
        if spec.shared_expert_intermediate_size:
            widths.append((spec.shared_expert_intermediate_size, 1))
    for i, count in widths:
        for role, din, dout in (("gate", h, i), ("up", h, i), ("gateup", h, 2 * i), ("down", i, h)):
            if role in roles:
                dims.append((din, dout, count))
    return tuple(dims)


@lru_cache(maxsize=512)
def _lora_param_count(spec: ModelSpec, roles: frozenset[str], rank: int) -> int:
    attn = sum(count * (din + dout) for din, dout, count in _lora_dims(spec, roles))
    dense = sum(count * (din + dout) for din, dout, count in _mlp_dims(spec, roles, False))
    moe = sum(count * (din + dout) for din, dout, count in _mlp_dims(spec, roles, True)) if spec.is_moe else 0
    n_moe = max(0, spec.num_layers - spec.num_dense_layers) if spec.is_moe else 0
    return rank * (spec.num_layers * attn + (spec.num_layers - n_moe) * dense + n_moe * moe)


def _layer_activation_bytes(
    spec: ModelSpec,
    a: int,
    full: bool,
    args: SftArgs,
    eager: bool,
    flash: bool,
    liger: bool,
    seq: int,
    bits: int | None = None,
) -> float:
    """Bytes one decoder layer keeps per token for its backward pass."""
    h = spec.hidden_size
    qd, kvd = spec.num_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
    norm = (a * h + 4) if liger else (4 * h + (a * h if full else 0))
    if a == 4 and not liger:
        norm = 4 * h + (4 * h if full else 0)
    kv_saved = qd if (not flash and kvd < qd) else kvd  # repeat_kv copies outside flash kernels
    attention = a * (2 * qd + 2 * kv_saved) + 4 * spec.num_heads
    if eager:
        attention += (4 + 1 + a) * spec.num_heads * seq  # scores: fp32 softmax, dropout mask, probs
    moe = spec.is_moe
    if moe:
        k = max(1, spec.num_experts_per_tok)
        i = spec.moe_intermediate_size
        mlp = k * (4 * a * i + 2 * a * h) + 8 * spec.num_experts + 4 * a * spec.shared_expert_intermediate_size
    else:
        i = spec.intermediate_size
        mlp = (3 if liger else 4) * a * i if full else 3 * a * i
    total = 2 * norm + attention + mlp
    if bits and not full:
        # bitsandbytes' MatMul4Bit / MatMul8bitLt keep their input for the backward pass
        # (``ctx.tensors = (A, B)`` whenever an input needs a gradient), where a frozen 16-bit
        # ``F.linear`` saves no input (its weight needs no gradient). The quantized linears' inputs
        # that nothing else keeps: both normed hidden states, the attention output (o_proj's input)
        # and the gated product (down_proj's input). LitGPT's QLoRA rows measure this.
        i_eff = (
            (max(1, spec.num_experts_per_tok) * spec.moe_intermediate_size + spec.shared_expert_intermediate_size)
            if moe
            else spec.intermediate_size
        )
        total += a * (2 * h + qd + i_eff)
    if not full and args.tuner_type != "llamapro":
        roles = _lora_roles(args.target_modules, [])
        per_in = 5 if args.lora_dropout > 0 else 4
        for din, _dout, _count in _lora_dims(spec, roles):
            total += per_in * din + 8 * args.lora_rank
        for din, _dout, count in _mlp_dims(spec, roles, moe):
            share = max(1, spec.num_experts_per_tok) if (moe and count > 1) else 1
            total += share * (per_in * din + 8 * args.lora_rank)
    return total
