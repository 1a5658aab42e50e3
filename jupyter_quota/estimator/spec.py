"""ModelSpec: the architecture facts that decide training memory, and the parameter counts they give.

Built from a Hugging Face ``config.json`` (:mod:`.configjson`), a catalog entry, or a guess from the
size (:mod:`.approx`); :mod:`.model` decides which.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache

__all__ = ["ModelSpec"]


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of one decoder-only (optionally multimodal, optionally MoE) model."""

    name: str
    source: str  # "catalog" or "config.json"
    model_type: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int  # per projection of a dense gated MLP
    vocab_size: int
    tie_word_embeddings: bool
    qkv_bias: bool
    torch_dtype: str
    max_position_embeddings: int | None
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    num_dense_layers: int = 0  # MoE models: leading layers with a dense MLP
    #: MoE models: transformers 5 stacks each layer's routed experts in one parameter per projection
    #: (``gate_up_proj``, ``down_proj``), not one ``nn.Linear`` per expert, so LoRA's ``all-linear``
    #: leaves them unadapted; a checkpoint's own modelling code (``auto_map``) keeps the linears
    #: (docs/estimator.md §2.3)
    fused_experts: bool = False
    #: PEFT (0.18 on) converts LoRA targets of transformers 4's MoE layout to transformers 5's for
    #: these model types: the names gate_proj, up_proj and down_proj, which the dense layers' and
    #: shared experts' linears also carry, move to the stacked experts' parameters (``ParamWrapper``,
    #: gate_up_proj at twice the rank), and those linears get no adapter. ``ParamWrapper`` refuses a
    #: ``lora_dropout`` above 0 (docs/estimator.md §2.3)
    converted_experts: bool = False
    vision_params: int = 0
    vision_hidden: int = 0
    vision_layers: int = 0
    vision_intermediate: int = 0
    #: decoder-block linears of the vision tower (quantized with the LLM where the loader allows)
    vision_linear_params: int = 0
    #: bitsandbytes quantizes the vision tower's linears too: ms-swift's Qwen-VL loader sets
    #: ``llm_int8_skip_modules = ['lm_head', 'attn_pool.attn']`` (swift/model/models/qwen.py), where
    #: other multimodal models skip their whole vision tower and aligner (quant_args.py); docs/estimator.md §3
    vision_quantized: bool = False
    #: the model's own (remote) code computes attention with matmul + softmax whatever attn_impl
    #: says: Qwen-VL's modeling_qwen.py has no sdpa or flash-attn path (docs/estimator.md §5.1)
    eager_attention_only: bool = False
    #: audio encoder (and, for Omni models, the speech talker loaded beside the thinker): resident
    #: weights like the vision tower's, frozen with it (``--freeze_vit``)
    audio_params: int = 0
    #: a pre-quantized checkpoint (its ``quantization_config``): "awq", "gptq", "fp8", "bnb"; "" if not
    quant_method: str = ""
    quant_bits: int = 0
    #: weights sharing one scale (and zero point) along the input dimension; 0: per-tensor or per-row
    quant_group_size: int = 0
    #: the architecture is a guess from the parameter count (approx.py), not a config.json's facts
    approximate: bool = False
    #: hybrid linear-attention models (Qwen3-Next, Qwen3.5): every ``full_attention_interval``-th layer
    #: has full attention, the others a Gated DeltaNet of ``linear_attention_params`` weights
    full_attention_interval: int = 0
    linear_attention_params: int = 0
    #: sliding-window attention: the window in tokens, and how many layers use it (the others
    #: attend to the whole context); serving's KV cache keeps only the window for those layers
    sliding_window: int = 0
    sliding_window_layers: int = 0

    # -- parameter counts -----------------------------------------------------------------------
    @property
    def attn_params(self) -> int:
        """Attention linear weights of one layer (q, k, v, o), plus qkv biases."""
        h, d = self.hidden_size, self.head_dim
        q, kv = self.num_heads * d, self.num_kv_heads * d
        bias = (q + 2 * kv) if self.qkv_bias else 0
        return h * q + 2 * h * kv + q * h + bias

    @property
    def dense_mlp_params(self) -> int:
        return 3 * self.hidden_size * self.intermediate_size

    @property
    def moe_mlp_params(self) -> int:
        h = self.hidden_size
        experts = self.num_experts * 3 * h * self.moe_intermediate_size
        shared = 3 * h * self.shared_expert_intermediate_size
        return experts + shared + h * self.num_experts

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def routed_expert_params(self) -> int:
        """The routed experts' weights over all MoE layers (gate, up and down of every expert)."""
        if not self.is_moe:
            return 0
        moe_layers = self.num_layers - min(self.num_dense_layers, self.num_layers)
        return moe_layers * self.num_experts * 3 * self.hidden_size * self.moe_intermediate_size

    @property
    def layer_params(self) -> list[int]:
        """Parameters of each decoder layer (attention, MLP, two norms)."""
        return list(_layer_params(self))

    @property
    def embed_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    @property
    def llm_params(self) -> int:
        return sum(_layer_params(self)) + self.embed_params + self.lm_head_params + self.hidden_size

    @property
    def tower_params(self) -> int:
        """The encoders beside the language model: vision tower and projector, audio encoder."""
        return self.vision_params + self.audio_params

    @property
    def params(self) -> int:
        return self.llm_params + self.tower_params

    @property
    def quant_bytes_per_weight(self) -> float:
        """Bytes per decoder linear weight of a pre-quantized checkpoint (docs/estimator.md §3): the
        packed weight, plus per group of ``quant_group_size`` input weights a 16-bit scale and, for
        AWQ and GPTQ, a packed zero point of ``quant_bits`` bits (their ``qzeros``); FP8 keeps one
        float32 scale per 128 x 128 block; a bitsandbytes checkpoint is laid out as §3 says."""
        if not self.quant_bits:
            return 0.0
        weight = self.quant_bits / 8
        if self.quant_method == "bnb":  # as ms-swift's own bnb loading: NF4 double-quantized, or LLM.int8
            return weight + (1 / 64 + 4 / (64 * 256) if self.quant_bits == 4 else 4 / self.hidden_size)
        if self.quant_method == "fp8":
            return weight + 4 / (self.quant_group_size or 128) ** 2
        group = self.quant_group_size or self.hidden_size  # -1 in GPTQ: one group per row
        return weight + (2 + self.quant_bits / 8) / group

    @property
    def linear_params(self) -> int:
        """Decoder linear weights (what bnb quantizes and all-linear LoRA wraps); no embeddings."""
        bias = (self.num_heads + 2 * self.num_kv_heads) * self.head_dim if self.qkv_bias else 0
        return sum(_layer_params(self)) - self.num_layers * (2 * self.hidden_size + bias)

    @property
    def largest_layer_params(self) -> int:
        return max(max(_layer_params(self)), self.embed_params)

    def to_json(self) -> dict:
        """openapi.yaml's ``ModelSpec``: the fields in camelCase, as every REST body is."""
        data = {_camel(name): value for name, value in asdict(self).items()}
        data["params"] = self.params
        data["paramsB"] = round(self.params / 1e9, 2)
        return data


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


@lru_cache(maxsize=128)
def _layer_params(spec: ModelSpec) -> tuple[int, ...]:
    """Per-layer parameter counts, cached on the (frozen, hashable) spec: the planner estimates the
    same model 20-100 times per plan, and an MoE model has dozens of layers to sum."""
    dense = spec.attn_params + spec.dense_mlp_params + 2 * spec.hidden_size
    moe = spec.attn_params + spec.moe_mlp_params + 2 * spec.hidden_size if spec.is_moe else dense
    first = spec.num_dense_layers if spec.is_moe else spec.num_layers
    first = min(first, spec.num_layers)
    layers = (dense,) * first + (moe,) * (spec.num_layers - first)
    every = spec.full_attention_interval
    if every > 1 and spec.linear_attention_params:  # Qwen3-Next's layout: layer i is full iff (i + 1) % every == 0
        linear = spec.linear_attention_params - spec.attn_params
        layers = tuple(p if (i + 1) % every == 0 else p + linear for i, p in enumerate(layers))
    return layers
