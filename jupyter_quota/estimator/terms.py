"""The terms ms-swift adds beside the model states and the decoder's activations: the vision tower,
sequence-parallel buffers, gradient buckets, the eval phase and the caching allocator's reserve
(docs/estimator.md §5.3-§5.5, §8). Each appends its assumption to ``notes``; ``memory.compute``
calls them in order and puts each under its own key of the breakdown.
"""

from __future__ import annotations

from .run import Run

GIB = 1024**3
#: the caching allocator's reserve on top of allocated memory, as a share of what changes shape
#: from step to step (docs/estimator.md §8): variable-length batches leave cached blocks of earlier
#: shapes that later ones cannot reuse whole; packed batches have one shape
RESERVE_VARIABLE = 0.10
RESERVE_FIXED = 0.05
#: ... and of the model states, which are allocated once
RESERVE_STATES = 0.02


def vision(run: Run, notes: list[str]) -> int:
    """The vision tower's activations for one image per sample: one layer's worth when frozen, every
    layer (or two with checkpointing) when trained (docs/estimator.md §5.3)."""
    spec = run.spec
    if not spec.vision_params:
        return 0
    patches = run.image_patches * run.batch
    total = patches * run.dtype_bytes * (4 * spec.vision_hidden + 2 * spec.vision_intermediate)
    if run.train_vit:
        total *= spec.vision_layers if not run.args.gradient_checkpointing else 2
    notes.append(
        f"vision tower: one image of {run.image_patches} patches per sample ({patches} per micro-batch); "
        + ("trained (freeze_vit false)" if run.train_vit else "frozen (ms-swift default): one layer at a time")
    )
    return total


def parallel(run: Run, notes: list[str]) -> int:
    """Sequence parallel's buffers for the attention of one layer (docs/estimator.md §5.4):
    Ulysses' all-to-all copies of q, k, v and the output; ring attention's next k/v chunk, its
    float32 output and logsumexp accumulators, and float32 dk/dv in the backward pass."""
    if run.ulysses * run.ring == 1:
        return 0
    spec, tokens, a = run.spec, run.tokens, run.dtype_bytes
    q_width, kv_width = spec.num_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
    total = 0
    if run.ulysses > 1:
        layers = 1 if run.args.gradient_checkpointing else spec.num_layers
        total += layers * tokens * a * (2 * q_width + 2 * kv_width)
    if run.ring > 1:
        total += tokens * (2 * kv_width * a * 2 + 4 * q_width + 4 * spec.num_heads + 2 * kv_width * 4)
    notes.append(
        "sequence parallel buffers: "
        + ", ".join(
            part
            for part in (
                "Ulysses all-to-all copies of q, k, v and the attention output" if run.ulysses > 1 else "",
                "ring attention's next k/v chunk and float32 accumulators" if run.ring > 1 else "",
            )
            if part
        )
    )
    return total


def buckets(run: Run, gradient_bytes: float, notes: list[str]) -> float:
    """Gradient communication buffers (docs/estimator.md §8): DDP's reducer buckets (one more copy
    of the gradients whatever ``--ddp_bucket_cap_mb``, which sets only how they are split), or the
    reduce and gather (ZeRO-1/2) or reduce and prefetch (ZeRO-3) buckets of ms-swift's configs."""
    if run.fsdp:
        return 0.0  # FSDP reduce-scatters each layer's gradient as the backward pass makes it (in gradients)
    if run.zero_stage == 0:
        if run.gpus <= 1:
            return 0.0
        notes.append(
            f"DDP over {run.gpus} GPUs: every GPU holds the whole model, gradients and "
            "optimizer, plus DDP's gradient buckets (one more gradient copy)"
        )
        return gradient_bytes
    if run.zero_stage in (1, 2):
        notes.append("DeepSpeed buckets: reduce_bucket_size and allgather_bucket_size 2e8 (ms-swift's zero2.json)")
        return (2e8 + min(2e8, run.trainable)) * run.dtype_bytes
    hidden = run.spec.hidden_size
    notes.append("DeepSpeed ZeRO-3 buckets: reduce and prefetch buckets 'auto' (h^2 and 0.9 h^2)")
    return 1.9 * hidden * hidden * run.dtype_bytes


def evaluation(run: Run, training_dynamic: float, notes: list[str]) -> int:
    """What the eval phase's forward pass needs beyond the training step's activations and logits:
    one layer's working set, the logits in the model dtype, their float32 upcast and log-softmax,
    no gradients (docs/estimator.md §5.5). Zero without a validation split."""
    tokens = run.eval_tokens
    if not tokens:
        return 0
    spec, a = run.spec, run.dtype_bytes
    need = tokens * spec.vocab_size * (a + 8) + tokens * a * (2 * run.mlp_width + 3 * spec.hidden_size)
    extra = max(0, need - training_dynamic)
    if extra:
        notes.append("the eval step's logits exceed the training step's activations: the peak is at evaluation")
    return extra


def allocator(run: Run, dynamic: float, states: float, notes: list[str]) -> float:
    """The caching allocator's reserve on top of allocated memory (docs/estimator.md §8)."""
    if not run.cuda:
        return 0.0
    share = RESERVE_FIXED if run.fixed_shapes else RESERVE_VARIABLE
    notes.append(
        f"allocator reserve: {share:.0%} of the activations and logits "
        + ("(packed batches: one shape)" if run.fixed_shapes else "(variable-length batches)")
        + f" and {RESERVE_STATES:.0%} of the model states (torch's caching allocator: reserved "
        "memory, as ms-swift logs it)"
    )
    return share * dynamic + RESERVE_STATES * states
