"""ModelSpec: the architecture facts that decide training memory, from any HF config.json.

``resolve_model`` takes a local folder holding a ``config.json``, a catalog name (hub ids users
type, case-insensitive, with or without the organisation, also quantized checkpoints and variants
of a catalog model, see :mod:`.catalog`), or any other hub id whose ``config.json`` is in the local
Hugging Face or ModelScope cache, or on the hub when lookups are enabled (see :mod:`.hub`). Any
other id is estimated from its size, in the name or given as ``model_size``, with a guessed
architecture (:mod:`.approx`), and says so (``approximate``). Everything but the hub works offline.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from functools import lru_cache

from ..errors import InvalidRequest
from . import approx, catalog, hub

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


# ------------------------------------------------------------------------------------------------
def resolve_model(name_or_path: str | None, model_size: str | None = None) -> ModelSpec:
    """A ``ModelSpec`` for a catalog name, a local folder (or file) with ``config.json``, a hub id
    with a cached ``config.json``, or else a guess from ``model_size`` or the size in the name."""
    if not name_or_path or not isinstance(name_or_path, str):
        raise InvalidRequest(
            "--model is missing: give a model name (e.g. Qwen/Qwen2.5-7B-Instruct) or a local folder with a config.json"
        )
    size = approx.parse_model_size(model_size) if model_size is not None else None
    if os.path.isdir(name_or_path) or name_or_path.endswith("config.json"):
        path = name_or_path
        if os.path.isdir(path):
            path = os.path.join(path, "config.json")
        if not os.path.isfile(path):
            raise InvalidRequest(
                f"{name_or_path}: no config.json there; give a folder that holds the model's Hugging Face config.json"
            )
        return _spec_from_file(path, name_or_path, "config.json")
    match = catalog.resolve(name_or_path)
    if match is not None:
        return _catalog_spec(match.entry["names"][0], name_or_path if match.quantization else None)
    if hub.is_repo_id(name_or_path):
        path = hub.cached_config(name_or_path)
        if path is not None:
            return _spec_from_file(path, name_or_path, "config.json in the local hub cache")
        if hub.lookup_enabled():
            return _spec_from_file(hub.fetch_config(name_or_path), name_or_path, "config.json from the hub")
    sized = catalog.resolve_size(name_or_path)
    if size is None and sized is not None:
        size, where = approx.parse_model_size(sized.entry["size"]), sized.entry["source"]
    else:
        where = "--model_size" if size is not None else "the name"
        size = size or approx.size_in_name(name_or_path)
    if size is not None:
        return _approximate_spec(name_or_path, size, where)
    raise InvalidRequest(
        f"unknown model {name_or_path!r}: it is not in the catalog, not a local folder, not in the "
        "local hub caches, and its name states no size. Give its size with --model_size (e.g. 8B, "
        "or 30B-A3B for a mixture of experts; the estimate is then approximate), a local folder "
        "holding the model's config.json (only config.json is needed), one of the catalog names, "
        f"e.g. {', '.join(catalog.examples())}, or set {hub.LOOKUP_ENV}=1 on the server to fetch "
        "config.json from the Hugging Face hub"
    )


def _approximate_spec(name: str, size: approx.Size, where: str) -> ModelSpec:
    """A guessed architecture of ``size`` parameters (approx.py), marked approximate, with the
    quantization a checkpoint suffix states (``-AWQ``, ``-FP8``)."""
    spec, anchor = approx.guess(name, size, catalog.approximate_anchors(), _catalog_spec)
    active = f", {size.active / 1e9:.3g}B active" if size.active else ""
    experts = f" and {spec.num_experts_per_tok} of {spec.num_experts} experts per token" if spec.is_moe else ""
    quant = catalog.quantization_suffix(name)
    return replace(
        spec,
        name=name,
        source=(
            f"approximate: {size.total / 1e9:.3g}B{active} from {where}; the architecture of {anchor} "
            f"with {spec.num_layers} layers{experts}" + (f"; {quant[1]}" if quant else "")
        ),
        approximate=True,
        **(_quantization({"quantization_config": quant[0]}, {}) if quant else {}),
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
def _catalog_spec(name: str, quantized_as: str | None = None) -> ModelSpec:
    """Catalog entries never change while the process runs: build each ModelSpec once.
    ``quantized_as``: a quantized checkpoint's hub id, whose suffix adds a ``quantization_config``."""
    if quantized_as is None:
        entry = catalog.lookup(name)
        return spec_from_config(entry["config"], name=entry["names"][0], source="catalog")
    match = catalog.resolve(quantized_as)
    config = {**match.entry["config"], "quantization_config": match.quantization}
    source = f"catalog: {match.entry['names'][0]} with {match.quantization_source}"
    return spec_from_config(config, name=quantized_as, source=source)


def _first(cfg: dict, *keys: str):
    for key in keys:
        if cfg.get(key) is not None:
            return cfg[key]
    return None


def spec_from_config(config: dict, *, name: str, source: str) -> ModelSpec:
    """Read the keys that matter from an HF config (nested ``text_config`` / ``llm_config`` too)."""
    if isinstance(config.get("thinker_config"), dict):  # Omni: the thinker is the language model
        config = {**config, **config["thinker_config"]}
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
    vis = _vision(config, h)
    quant = _quantization(config, text)
    hybrid = _linear_attention(text, h)
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
        audio_params=_audio(config),
        **hybrid,
        **quant,
        **vis,
    )


def _linear_attention(text: dict, hidden: int) -> dict:
    """Qwen3-Next/Qwen3.5's Gated DeltaNet layers: q, k from the key heads, v and the output gate z
    from the value heads (``in_proj_qkvz``), the two gates a and b (``in_proj_ba``), the causal
    convolution over q, k and v, and ``out_proj``."""
    kh, vh = text.get("linear_num_key_heads"), text.get("linear_num_value_heads")
    if not kh or not vh:
        return {}
    kd, vd = int(text.get("linear_key_head_dim") or 128), int(text.get("linear_value_head_dim") or 128)
    keys, values = int(kh) * kd, int(vh) * vd
    conv = (2 * keys + values) * int(text.get("linear_conv_kernel_dim") or 4)
    params = hidden * (2 * keys + 2 * values) + hidden * 2 * int(vh) + conv + values * hidden + 2 * int(vh) + vd
    types = text.get("layer_types")
    every = int(text.get("full_attention_interval") or 0)
    if not every and isinstance(types, list) and "full_attention" in types:
        every = types.index("full_attention") + 1
    return {"full_attention_interval": every, "linear_attention_params": params} if every > 1 else {}


def _quantization(config: dict, text: dict) -> dict:
    """A pre-quantized checkpoint's ``quantization_config``: method, bits, group size."""
    q = config.get("quantization_config") or text.get("quantization_config")
    if not isinstance(q, dict):
        return {}
    method = str(q.get("quant_method") or "").lower()
    if method in ("awq", "gptq"):
        bits = int(q.get("bits") or q.get("w_bit") or 4)
        group = int(q.get("group_size") or q.get("q_group_size") or 128)
        return {"quant_method": method, "quant_bits": bits, "quant_group_size": max(group, 0)}
    if method == "fp8" or "fp8" in str(q.get("fmt") or q.get("quant_method") or "").lower():
        block = q.get("weight_block_size") or [128, 128]
        return {"quant_method": "fp8", "quant_bits": 8, "quant_group_size": int(block[0])}
    if method == "bitsandbytes":
        bits = 4 if q.get("load_in_4bit") else 8 if q.get("load_in_8bit") else 0
        return {"quant_method": "bnb", "quant_bits": bits, "quant_group_size": 64} if bits else {}
    return {}


def _audio(config: dict) -> int:
    """Parameters of a Whisper-style audio encoder (``audio_config``) and, when the model loads it,
    the speech talker (``talker_config``) of Qwen2.5/3-Omni: resident, trained only with the towers."""
    root = config.get("thinker_config") if isinstance(config.get("thinker_config"), dict) else config
    a = root.get("audio_config")
    total = 0
    if isinstance(a, dict) and a.get("d_model") and a.get("encoder_layers"):
        d, layers = int(a["d_model"]), int(a["encoder_layers"])
        ffn = int(a.get("encoder_ffn_dim") or 4 * d)
        total += layers * (4 * d * d + 2 * d * ffn + 9 * d) + d * int(a.get("output_dim") or d)
        total += 2 * 3 * int(a.get("num_mel_bins") or 128) * d + 3 * d * d  # two conv front-ends
    talker = config.get("talker_config")
    if isinstance(talker, dict) and config.get("enable_audio_output", True):
        # the decoder that turns the thinker's states into speech codes (its codec vocabulary small):
        # loaded and resident unless ENABLE_AUDIO_OUTPUT=0 (ms-swift's Omni loaders)
        try:
            total += spec_from_config(talker, name="talker", source="talker_config").llm_params
        except InvalidRequest:
            pass  # a talker config without decoder sizes: not counted
    return total


def _vision(config: dict, text_hidden: int = 0) -> dict:
    """Vision tower size (parameters, width, depth) from ``vision_config`` or Qwen-VL's ``visual``."""
    root = config.get("thinker_config") if isinstance(config.get("thinker_config"), dict) else config
    v = root.get("vision_config") or root.get("visual")
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
        or text_hidden
    )
    merge = int(v.get("spatial_merge_size") or 1)
    patch = int(v.get("patch_size") or 14)
    shuffle = round(1 / float(root.get("downsample_ratio") or 1))
    if shuffle > 1:  # InternVL: pixel shuffle, then an MLP from shuffle^2 patches' features to the LLM width
        projector = width * shuffle * shuffle * out_dim + out_dim * out_dim
    elif merge > 1:  # Qwen2-VL style patch merger: MLP over merge^2 concatenated patches
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
