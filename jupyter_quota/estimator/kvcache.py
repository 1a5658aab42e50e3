"""KV cache arithmetic of the serving engines: bytes per token, and how many tokens, blocks and
sequences of ``max_model_len`` a KV budget holds (docs/serving-estimate.md §2-§4).

Bytes per token and layer = 2 (key and value) x kv_heads x head_dim x dtype bytes, kv_heads per
tensor-parallel rank = max(1, kv_heads // tp): vLLM replicates a KV head over ranks when there are
fewer heads than ranks (``ModelConfig.get_num_kv_heads``). A sliding-window layer keeps only its
window; a hybrid model's linear-attention layers keep a fixed state, no per-token cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from .spec import ModelSpec

#: vLLM's default tokens per KV block on CUDA (``CacheConfig.block_size``)
VLLM_BLOCK_SIZE = 16
#: SGLang's ``--swa-full-tokens-ratio`` default: a sliding-window layer's pool holds this many
#: tokens per token of a full layer's pool
SGLANG_SWA_RATIO = 0.8


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class KvLayout:
    """Per rank: attention layers by kind, and one layer's bytes per token."""

    full_layers: int
    sliding_layers: int
    window: int
    layer_bytes_per_token: int  # 2 x kv_heads per rank x head_dim x dtype bytes

    @property
    def bytes_per_token(self) -> int:
        """Every attention layer's K and V for one token (what the issue's formula gives)."""
        return (self.full_layers + self.sliding_layers) * self.layer_bytes_per_token


def kv_layout(spec: ModelSpec, dtype_bytes: float, tp: int = 1) -> KvLayout:
    """The model's KV layout on one of ``tp`` ranks at ``dtype_bytes`` per element."""
    kv_heads = max(1, spec.num_kv_heads // tp)
    layers = spec.num_layers
    if spec.full_attention_interval > 1 and spec.linear_attention_params:
        layers = spec.num_layers // spec.full_attention_interval  # only the full-attention layers cache K, V
    sliding = min(spec.sliding_window_layers, layers)
    return KvLayout(
        full_layers=layers - sliding,
        sliding_layers=sliding,
        window=spec.sliding_window if sliding else 0,
        layer_bytes_per_token=int(2 * kv_heads * spec.head_dim * dtype_bytes),
    )


@dataclass(frozen=True)
class VllmCache:
    """What vLLM v1 makes of ``kv_bytes`` (``vllm/v1/core/kv_cache_utils.py``)."""

    num_blocks: int
    tokens: int  # "GPU KV cache size: N tokens"
    blocks_per_request: int
    max_concurrency: float  # "Maximum concurrency for L tokens per request: X.XXx"


def vllm_cache(
    layout: KvLayout, kv_bytes: int, max_model_len: int, max_num_batched_tokens: int, block: int = VLLM_BLOCK_SIZE
) -> VllmCache:
    """Blocks, tokens and concurrency as vLLM computes them: one group of all layers when they are
    alike (``get_num_blocks``: memory // page // layers), else the hybrid grouping
    (``_get_kv_cache_groups_uniform_page_size``: groups of the smaller layer count, or of the larger
    when it is under 1.5 times the smaller, padded), and ``get_max_concurrency_for_kv_cache_config``."""
    page = layout.layer_bytes_per_token * block  # one layer's block
    kinds = [n for n in (layout.full_layers, layout.sliding_layers) if n]
    if not kinds or page <= 0:
        return VllmCache(0, 0, 0, 0.0)
    full_blocks = cdiv(max_model_len, block)
    sliding_tokens = min(layout.window - 1 + max_num_batched_tokens, max_model_len)
    sliding_blocks = cdiv(sliding_tokens, block) + 1  # SlidingWindowSpec.max_memory_usage_bytes
    if len(kinds) == 1:
        layers = kinds[0]
        num_blocks = max(0, kv_bytes // page // layers)
        per_request = full_blocks if layout.full_layers else sliding_blocks
        groups = 1
    else:
        small, large = min(kinds), max(kinds)
        group_size = large if large < small * 1.5 else small
        full_groups = cdiv(layout.full_layers, group_size)
        sliding_groups = cdiv(layout.sliding_layers, group_size)
        num_blocks = max(0, kv_bytes // page // group_size)
        per_request = full_groups * full_blocks + sliding_groups * sliding_blocks
        groups = full_groups + sliding_groups
    return VllmCache(
        num_blocks=num_blocks,
        tokens=num_blocks // groups * block,
        blocks_per_request=per_request,
        max_concurrency=num_blocks / per_request if per_request else 0.0,
    )


def sglang_tokens(layout: KvLayout, kv_bytes: int, swa_full_tokens_ratio: float = SGLANG_SWA_RATIO) -> int:
    """SGLang's ``max_total_num_tokens``: KV memory // cell size, the cell being every attention
    layer's K and V of one token (``ModelRunnerKVCacheMixin.profile_max_num_token`` and
    ``get_cell_size_per_token``). A model with sliding-window layers then splits that memory so the
    window layers' pool holds ``swa_full_tokens_ratio`` times the full layers' tokens
    (``set_num_tokens_hybrid_swa``): the full layers' token count is returned, as SGLang's."""
    cell = layout.bytes_per_token
    if not cell or kv_bytes <= 0:
        return 0
    tokens = kv_bytes // cell
    if not (layout.sliding_layers and layout.full_layers):
        return tokens
    per_layer = layout.layer_bytes_per_token
    denominator = per_layer * layout.full_layers + swa_full_tokens_ratio * per_layer * layout.sliding_layers
    return int(tokens * cell / denominator)
