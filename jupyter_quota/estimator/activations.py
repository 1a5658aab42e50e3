"""Activations and the logits path: what the backward pass keeps alive (docs/estimator.md §5, §6)."""

from __future__ import annotations

import math
from typing import NamedTuple

from .lora import attention_dims, mlp_dims
from .run import Run


def activations(run: Run, notes: list[str]) -> int:
    """What the backward pass keeps: every layer's activations, or with gradient checkpointing one
    saved input per layer and one recomputed layer (docs/estimator.md §5.2); the vision tower is
    ``terms.vision``."""
    spec, tokens, dtype_bytes = run.spec, run.tokens, run.dtype_bytes
    hidden = spec.hidden_size
    kernel = _attention_kernel(run, notes)
    layer_per_token = _layer_activation_bytes(run, kernel)
    # the MLP's intermediates and hidden-size temporaries alive while one layer runs its backward
    transient = tokens * dtype_bytes * (2 * run.mlp_width + 2 * hidden)
    if kernel == "eager":
        # eager attention's backward materializes the full score matrix twice more while the saved
        # probabilities are still alive: the gradient of the probabilities (matmul backward, in the
        # model dtype) and of the scores (softmax backward, float32) (docs/estimator.md §5.1)
        transient += tokens * spec.num_heads * run.seq_len * (dtype_bytes + 4)
    # ms-swift's activation_cpu_offload (--fsdp's fsdp_config) keeps two layers' saved tensors on the GPU
    kept_layers = min(2, spec.num_layers) if run.fsdp and run.fsdp.activation_offload else spec.num_layers
    if kept_layers < spec.num_layers:
        notes.append("activation_cpu_offload: saved activations in CPU memory, two layers' worth on the GPU")
    if run.args.gradient_checkpointing:
        # The loss backward finishes (logits freed) before the first layer is recomputed, so the
        # recomputed layer and the logits path do not coexist: count the larger of the two.
        recomputed_layer = layer_per_token * tokens + transient
        total = kept_layers * tokens * hidden * dtype_bytes + max(0, recomputed_layer - _logits_bytes(run))
        notes.append(
            "gradient checkpointing on (ms-swift default): one saved input per layer plus "
            "one layer recomputed at a time (after the logits path is freed)"
        )
    else:
        total = kept_layers * layer_per_token * tokens + transient + tokens * hidden * dtype_bytes
        notes.append("gradient checkpointing off: every layer keeps its activations")
    return total


def _attention_kernel(run: Run, notes: list[str]) -> str:
    """The attention implementation that runs: --attn_impl, sdpa by default, eager where the model's
    own code knows no other (docs/estimator.md §5.1)."""
    if run.spec.eager_attention_only:
        notes.append(
            f"attention: {run.spec.name}'s own modeling code computes it with matmul and softmax "
            "(eager) whatever --attn_impl says"
        )
        return "eager"
    if run.args.attn_impl is None:
        notes.append("attn_impl not given: sdpa assumed (ms-swift reads it from config.json)")
    return (run.args.attn_impl or "sdpa").lower()


def _layer_activation_bytes(run: Run, kernel: str) -> int:
    """Bytes one decoder layer keeps per token for its backward pass (docs/estimator.md §5.1)."""
    spec, dtype_bytes, full, liger = run.spec, run.dtype_bytes, run.full, run.args.use_liger_kernel
    hidden = spec.hidden_size
    q_width, kv_width = spec.num_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
    # each RMSNorm keeps its float32 input (Liger: the input and a float32 rstd); a full fine-tune
    # also keeps the normed output for the norm weight's gradient
    norm = (dtype_bytes * hidden + 4) if liger else (4 * hidden + (dtype_bytes * hidden if full else 0))
    kv_saved = q_width if ("flash" not in kernel and kv_width < q_width) else kv_width  # repeat_kv copies
    attention = dtype_bytes * (2 * q_width + 2 * kv_saved) + 4 * spec.num_heads
    if kernel == "eager":
        attention += (4 + 1 + dtype_bytes) * spec.num_heads * run.seq_len  # float32 softmax, dropout mask, probs
    if spec.is_moe:
        top_k = max(1, spec.num_experts_per_tok)
        mlp = (
            top_k * (4 * dtype_bytes * spec.moe_intermediate_size + 2 * dtype_bytes * hidden)
            + 8 * spec.num_experts
            + 4 * dtype_bytes * spec.shared_expert_intermediate_size
        )
    else:
        mlp = ((3 if liger else 4) if full else 3) * dtype_bytes * spec.intermediate_size
    total = 2 * norm + attention + mlp
    if run.quant_bits:
        # the inputs bitsandbytes' matmuls keep and a frozen 16-bit linear would not: both normed
        # hidden states, o_proj's input and down_proj's input
        total += dtype_bytes * (2 * hidden + q_width + run.mlp_width)
    if not full and run.args.tuner_type != "llamapro":  # as spelled (run.tuner is lowercased)
        total += _adapter_activation_bytes(run)
    return total


def _adapter_activation_bytes(run: Run) -> int:
    """Per token: each LoRA adapter's float32 input (and dropout mask) and its rank-wide
    intermediate (docs/estimator.md §5.1)."""
    spec, rank = run.spec, run.args.lora_rank
    per_input = 5 if run.args.lora_dropout > 0 else 4
    total = 0
    for fan_in, _fan_out, _count in attention_dims(spec, run.lora_roles):
        total += per_input * fan_in + 8 * rank
    for fan_in, _fan_out, count in mlp_dims(spec, run.lora_roles, spec.is_moe):
        routed = max(1, spec.num_experts_per_tok) if (spec.is_moe and count > 1) else 1  # experts a token visits
        total += routed * (per_input * fan_in + 8 * rank)
    return total


def logits(run: Run, notes: list[str]) -> int:
    """The logits and loss path (docs/estimator.md §6)."""
    logits = _logits_bytes(run)
    if run.args.use_liger_kernel:
        notes.append("use_liger_kernel: fused linear cross-entropy, logits computed in chunks")
        return logits
    tokens, vocab = run.tokens, run.spec.vocab_size
    notes.append(
        f"logits and loss: {tokens} x {vocab} logits ({logits / (tokens * vocab):.0f} bytes per "
        "logit: the logits, their float32 log-softmax and its gradient"
        + (", the float32 upcast and the 16-bit gradient)" if run.dtype_bytes < 4 else ")")
    )
    if not run.spec.vision_params:
        notes.append(
            "ms-swift computes logits only for the tokens that carry a label "
            "(use_logits_to_keep), so counting every token is an upper bound when "
            "prompts are not trained on"
        )
    return logits


class Tail(NamedTuple):
    """Bytes beside the model states near the end of a full fine-tune's backward pass."""

    accumulated: int  # where every gradient is alive already (gradient accumulation, DDP)
    fresh: int  # in a step's only micro-batch: beside the gradients made so far (all of them)


def backward_tail(run: Run, activation_bytes: int, notes: list[str]) -> Tail:
    """The vocabulary-sized gradients of a full fine-tune (docs/estimator.md §6.1): lm_head's new
    gradient beside the gradient of the logits and the kept activations, before it is added into
    ``.grad``; and at the embedding's backward, the last, its new gradient. Tied embeddings are one
    parameter: autograd holds lm_head's gradient from the loss on, and adds the embedding's to it
    (three V x h tensors alive: both and their sum; the sum is ``.grad`` in a step's only micro-batch).
    One GPU or DDP: DeepSpeed and FSDP take gradients in hooks of their own."""
    spec, a = run.spec, run.dtype_bytes
    if not run.full or run.zero_stage or run.fsdp or not spec.vocab_size:
        return Tail(0, 0)
    vocab_grad = spec.vocab_size * spec.hidden_size * a
    if run.args.gradient_checkpointing:
        kept = spec.num_layers * run.tokens * spec.hidden_size * a  # the checkpointed inputs
    else:
        kept = activation_bytes
    # Liger's fused cross-entropy makes lm_head's gradient in the forward pass, chunk by chunk, with
    # no T x V gradient of the logits
    logits_grad = 0 if run.args.use_liger_kernel else run.tokens * spec.vocab_size * a
    lm_head = vocab_grad + logits_grad + kept
    # transformers 5 stacks a layer's experts in one tensor per projection (gate_up_proj, E x 2I x h):
    # its new gradient is made while the layer's recomputed activations are alive; a checkpoint's own
    # code with one linear per expert makes small ones (spec.fused_experts)
    stacked = spec.num_experts * 2 * spec.moe_intermediate_size * spec.hidden_size * a
    experts = stacked + activation_bytes if spec.fused_experts else 0
    if spec.tie_word_embeddings:
        notes.append(
            "tied embeddings: lm_head's V x h gradient is held through the backward pass and added to "
            "the embedding's at its end (three V x h tensors alive)"
        )
        return Tail(max(lm_head, 3 * vocab_grad, experts), 2 * vocab_grad)
    return Tail(max(lm_head, experts), 0)


def _logits_bytes(run: Run) -> int:
    """Bytes of the logits path at its peak (docs/estimator.md §6)."""
    tokens, vocab, hidden, dtype_bytes = run.tokens, run.spec.vocab_size, run.spec.hidden_size, run.dtype_bytes
    if run.args.use_liger_kernel:
        chunk = 2 ** math.ceil(math.log2(max(1, math.ceil(tokens / math.ceil(vocab / hidden)))))
        return chunk * vocab * (4 + dtype_bytes) * 2 + tokens * hidden * 4
    # logits + float32 log-softmax + its gradient; 16-bit models add the float32 upcast and the
    # 16-bit gradient of the logits
    return tokens * vocab * (dtype_bytes + 8 + (4 + dtype_bytes if dtype_bytes < 4 else 0))
