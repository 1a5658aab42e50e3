"""ModelSpec: the architecture facts that decide training memory, from any HF config.json.

``resolve_model`` takes a local folder holding a ``config.json``, a catalog name (hub ids users
type, case-insensitive, with or without the organisation), or any other hub id whose
``config.json`` is in the local Hugging Face or ModelScope cache, or on the hub when lookups are
enabled (see :mod:`.hub`). Everything but the last works offline.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from functools import lru_cache

from ..errors import InvalidRequest
from . import catalog, hub

__all__ = ["ModelSpec", "catalog_models", "resolve_model", "spec_from_config"]


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
    def params(self) -> int:
        return self.llm_params + self.vision_params

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
    return (dense,) * first + (moe,) * (spec.num_layers - first)


# ------------------------------------------------------------------------------------------------
def resolve_model(name_or_path: str | None) -> ModelSpec:
    """A ``ModelSpec`` for a catalog name or a local folder (or file) with ``config.json``."""
    if not name_or_path or not isinstance(name_or_path, str):
        raise InvalidRequest(
            "--model is missing: give a model name (e.g. Qwen/Qwen2.5-7B-Instruct) or a local folder with a config.json"
        )
    if os.path.isdir(name_or_path) or name_or_path.endswith("config.json"):
        path = name_or_path
        if os.path.isdir(path):
            path = os.path.join(path, "config.json")
        if not os.path.isfile(path):
            raise InvalidRequest(
                f"{name_or_path}: no config.json there; give a folder that holds the model's Hugging Face config.json"
            )
        return _spec_from_file(path, name_or_path, "config.json")
    entry = catalog.lookup(name_or_path)
    if entry is not None:
        return _catalog_spec(entry["names"][0])
    if hub.is_repo_id(name_or_path):
        path = hub.cached_config(name_or_path)
        if path is not None:
            return _spec_from_file(path, name_or_path, "config.json in the local hub cache")
        if hub.lookup_enabled():
            return _spec_from_file(hub.fetch_config(name_or_path), name_or_path, "config.json from the hub")
    raise InvalidRequest(
        f"unknown model {name_or_path!r}: it is not in the catalog, not a local folder and not in the "
        "local hub caches. Give a local folder holding the model's config.json (only config.json is "
        f"needed), one of the catalog names, e.g. {', '.join(catalog.examples())}, or set "
        f"{hub.LOOKUP_ENV}=1 on the server to fetch config.json from the Hugging Face hub"
    )


def _spec_from_file(path: str, name: str, source: str) -> ModelSpec:
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError) as exc:
        raise InvalidRequest(f"{path}: cannot read it as JSON ({exc})") from None
    if not isinstance(config, dict):
        raise InvalidRequest(f"{path}: expected a JSON object")
    return spec_from_config(config, name=name, source=source)


@lru_cache(maxsize=1)
def catalog_models() -> tuple[dict, ...]:
    """Every hub id of the catalog with the facts a model picker shows (``GET /models``)."""
    out = []
    for name in catalog.names():
        spec = _catalog_spec(name)
        out.append(
            {
                "id": name,
                "params": spec.params,
                "layers": spec.num_layers,
                "hidden": spec.hidden_size,
                "experts": spec.num_experts,
                "vision": spec.vision_params > 0,
                "maxLength": spec.max_position_embeddings,
            }
        )
    return tuple(out)


@lru_cache(maxsize=256)
def _catalog_spec(name: str) -> ModelSpec:
    """Catalog entries never change while the process runs: build each ModelSpec once."""
    entry = catalog.lookup(name)
    return spec_from_config(entry["config"], name=entry["names"][0], source="catalog")


def _first(cfg: dict, *keys: str):
    for key in keys:
        if cfg.get(key) is not None:
            return cfg[key]
    return None


def spec_from_config(config: dict, *, name: str, source: str) -> ModelSpec:
    """Read the keys that matter from an HF config (nested ``text_config`` / ``llm_config`` too)."""
    text = config
    for nest in ("text_config", "llm_config", "language_config"):
        if isinstance(config.get(nest), dict):
            text = {**config, **config[nest]}
            break
    model_type = str(config.get("model_type") or text.get("model_type") or "unknown")
    h = _first(text, "hidden_size", "n_embd", "d_model", "hidden_dim")
    layers = _first(text, "num_hidden_layers", "num_layers", "n_layer", "n_layers")
    heads = _first(text, "num_attention_heads", "n_head", "num_heads")
    vocab = _first(text, "vocab_size", "padded_vocab_size")
    inter = _first(text, "intermediate_size", "ffn_hidden_size", "n_inner")
    moe_inter = _first(text, "moe_intermediate_size", "expert_intermediate_size")
    experts = _first(text, "num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts") or 0
    missing = [
        k
        for k, v in (
            ("hidden_size", h),
            ("num_hidden_layers", layers),
            ("num_attention_heads", heads),
            ("vocab_size", vocab),
        )
        if v is None
    ]
    if inter is None and not (experts and moe_inter):
        missing.append("intermediate_size")
    if experts and moe_inter is None and inter is None:
        missing.append("moe_intermediate_size")
    if missing:
        raise InvalidRequest(
            f"{name}: config.json (model_type {model_type}) lacks {', '.join(missing)}; the estimator "
            "needs hidden_size, num_hidden_layers, num_attention_heads, vocab_size and "
            "intermediate_size (or moe_intermediate_size with num_experts). Give the model's full "
            "Hugging Face config.json"
        )
    try:
        h, layers, heads, vocab = int(h), int(layers), int(heads), int(vocab)
        inter = int(inter) if inter is not None else 0
    except (TypeError, ValueError):
        raise InvalidRequest(f"{name}: config.json has a non-integer size field") from None
    if min(h, layers, heads, vocab) <= 0:
        raise InvalidRequest(f"{name}: config.json has a size field that is zero or negative")
    if model_type == "qwen":  # Qwen-1 lists 2x the per-projection MLP width
        inter //= 2
    kv = _first(text, "num_key_value_heads", "n_head_kv", "num_kv_heads")
    if kv is None and text.get("multi_query_attention"):
        kv = text.get("multi_query_group_num")
    kv = int(kv or heads)
    head_dim = int(_first(text, "head_dim", "kv_channels") or h // heads)
    tied = text.get("tie_word_embeddings")
    tied = bool(tied) if tied is not None else False
    qkv_bias = bool(
        _first(text, "attention_bias", "add_qkv_bias", "qkv_bias", "bias")
        or model_type in ("qwen2", "qwen2_vl", "qwen2_5_vl", "qwen")
    )
    dtype = str(
        _first(text, "torch_dtype", "dtype")
        or ("bfloat16" if text.get("bf16") else "float16" if text.get("fp16") else "bfloat16")
    )
    if dtype not in ("bfloat16", "float16", "float32"):
        dtype = "bfloat16"
    mpe = _first(text, "max_position_embeddings", "seq_length", "max_sequence_length", "n_positions")
    top_k = int(_first(text, "num_experts_per_tok", "moe_topk", "num_selected_experts") or 0)
    shared = int(text.get("shared_expert_intermediate_size") or 0)
    if not shared and text.get("n_shared_experts") and moe_inter:
        shared = int(text["n_shared_experts"]) * int(moe_inter)
    dense_layers = int(text.get("first_k_dense_replace") or 0)
    if experts and not moe_inter:
        moe_inter = inter  # Mixtral: experts have the dense width
    vis = _vision(config)
    # Qwen-VL (Qwen-1 with a ``visual`` tower, remote code): see vision_quantized, eager_attention_only
    qwen_vl = model_type == "qwen" and "visual" in config
    return ModelSpec(
        name=name,
        source=source,
        model_type=model_type,
        hidden_size=h,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=head_dim,
        intermediate_size=inter,
        vocab_size=vocab,
        tie_word_embeddings=tied,
        qkv_bias=qkv_bias,
        torch_dtype=dtype,
        max_position_embeddings=int(mpe) if mpe else None,
        num_experts=int(experts),
        num_experts_per_tok=top_k,
        moe_intermediate_size=int(moe_inter or 0),
        shared_expert_intermediate_size=shared,
        num_dense_layers=dense_layers,
        vision_quantized=qwen_vl and bool(vis),
        eager_attention_only=qwen_vl,
        **vis,
    )


def _vision(config: dict) -> dict:
    """Vision tower size (parameters, width, depth) from ``vision_config`` or Qwen-VL's ``visual``."""
    v = config.get("vision_config") or config.get("visual")
    if not isinstance(v, dict):
        return {}
    width = _first(v, "embed_dim", "width", "hidden_size")
    depth = _first(v, "depth", "layers", "num_hidden_layers")
    if not width or not depth:
        return {}
    width, depth = int(width), int(depth)
    if "embed_dim" in v or "width" in v:
        inter = int(v.get("intermediate_size") or round(float(v.get("mlp_ratio", 4)) * width))
    else:
        inter = int(v.get("intermediate_size") or 4 * width)
    gated = str(v.get("hidden_act", "")).lower() in ("silu", "swiglu") and "intermediate_size" in v
    mlp = (3 if gated else 2) * width * inter
    per_layer = 4 * width * width + mlp + 4 * width
    out_dim = int(
        _first(v, "out_hidden_size", "output_dim", "projection_dim")
        or (v.get("hidden_size") if "embed_dim" in v else 0)
        or 0
    )
    merge = int(v.get("spatial_merge_size") or 1)
    patch = int(v.get("patch_size") or 14)
    if merge > 1:  # Qwen2-VL style patch merger: MLP over merge^2 concatenated patches
        projector = (width * merge * merge) ** 2 + width * merge * merge * out_dim
    else:  # Qwen-VL resampler / simple projector
        projector = width * out_dim + 4 * out_dim * out_dim
    patch_embed = 3 * int(v.get("temporal_patch_size") or 1) * patch * patch * width
    return {
        "vision_params": depth * per_layer + projector + patch_embed,
        "vision_hidden": width,
        "vision_layers": depth,
        "vision_intermediate": inter,
        "vision_linear_params": depth * (4 * width * width + mlp),
    }
