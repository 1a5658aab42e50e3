"""A ModelSpec from a Hugging Face ``config.json``: the keys that matter, under the names each family uses.

Reads nested ``text_config``, ``llm_config``, ``language_config`` and an Omni model's
``thinker_config``; the vision tower (``vision_config`` or Qwen-VL's ``visual``), the audio encoder
and talker, a pre-quantized checkpoint's ``quantization_config`` and Gated DeltaNet layers.
"""

from __future__ import annotations

from ..errors import InvalidRequest
from .spec import ModelSpec

__all__ = ["quantization_fields", "spec_from_config"]


def _first(cfg: dict, *keys: str):
    for key in keys:
        if cfg.get(key) is not None:
            return cfg[key]
    return None


def spec_from_config(config: dict, *, name: str, source: str) -> ModelSpec:
    """Read the keys that matter from an HF config (nested ``text_config`` / ``llm_config`` too)."""
    if isinstance(config.get("thinker_config"), dict):  # Omni: the thinker is the language model
        config = {**config, **config["thinker_config"]}
    text, nested = config, {}
    for nest in ("text_config", "llm_config", "language_config"):
        if isinstance(config.get(nest), dict):
            nested = config[nest]
            text = {**config, **nested}
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
    fused = bool(experts) and _fused_experts(config, nested, model_type)
    vis = _vision(config, h)
    quant = quantization_fields(config, text)
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
        fused_experts=fused,
        converted_experts=fused and model_type in _PEFT_CONVERTED_MOE and bool(shared or dense_layers),
        vision_quantized=qwen_vl and bool(vis),
        eager_attention_only=qwen_vl,
        audio_params=_audio(config),
        **hybrid,
        **_sliding_window(text, model_type, layers),
        **quant,
        **vis,
    )


#: MoE model types that transformers does not implement and whose checkpoints carry no ``auto_map``:
#: ms-swift loads them through their authors' package (deepseek-vl2: ``deepseek_vl2``), one
#: ``nn.Linear`` per expert
PACKAGE_MOE = frozenset({"deepseek_vl_v2"})
#: model types (``model.config.model_type``) whose LoRA targets PEFT 0.20 converts to transformers
#: 5's stacked experts by Qwen2-MoE's names (peft/utils/transformers_weight_conversion.py
#: ``_MODEL_TO_CONVERSION_PATTERN`` → "qwen2_moe"), among the catalog's
_PEFT_CONVERTED_MOE = frozenset(
    {
        "qwen3_moe",
        "qwen3_next",
        "qwen3_omni_moe",
        "glm4_moe",
        "glm4_moe_lite",
        "glm4v_moe",
        "deepseek_v2",
        "deepseek_v3",
    }
)


def _fused_experts(config: dict, nested: dict, model_type: str) -> bool:
    """Whether an MoE model's routed experts load as transformers 5's stacked parameters.

    Every MoE architecture transformers 5 implements stacks them (``gate_up_proj``, ``down_proj``:
    ``tests/test_estimator_moe_lora.py`` reads the installed transformers). ms-swift loads with
    ``trust_remote_code``, so a checkpoint whose language model has an ``auto_map`` (DeepSeek-V2/V3,
    Kimi-K2, MiniMax-M2, Phi-3.5-MoE) runs its own code instead, with one linear per expert. A
    multimodal wrapper's ``auto_map`` (InternVL's ``internvl_chat``) builds its language model with
    transformers' class, so the language model's config decides."""
    own_code = nested.get("auto_map") if nested else config.get("auto_map")
    return not own_code and model_type not in PACKAGE_MOE


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


def _sliding_window(text: dict, model_type: str, layers: int) -> dict:
    """Which layers attend to a window only (what serving's KV cache keeps for them): transformers'
    ``layer_types``, else each family's fixed pattern (Gemma 2 and gpt-oss alternate, starting with a
    sliding layer; Gemma 3 has one full layer in ``sliding_window_pattern``), else every layer where
    the config turns the window on (Mistral v0.1's ``sliding_window``; Qwen2's ``use_sliding_window``)."""
    window = int(text.get("sliding_window") or 0)
    if window <= 0:
        return {}
    types = text.get("layer_types")
    if isinstance(types, list) and types:
        count = sum(1 for t in types if t == "sliding_attention")
    elif model_type in ("gemma2", "gpt_oss"):
        count = (layers + 1) // 2
    elif model_type.startswith("gemma3"):
        pattern = int(text.get("sliding_window_pattern") or 6)
        count = layers - layers // pattern
    elif text.get("use_sliding_window") is False:
        count = 0
    elif model_type == "mistral" or text.get("use_sliding_window"):
        count = layers
    else:
        count = 0
    return {"sliding_window": window, "sliding_window_layers": count} if count and window < 10**7 else {}


def quantization_fields(config: dict, text: dict) -> dict:
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
    model_type = str(root.get("model_type") or config.get("model_type") or "")
    glm4v = model_type.startswith("glm4v") and bool(v.get("out_hidden_size"))
    if glm4v:  # GLM-4.1V/4.5V: each block's SwiGLU MLP is out_hidden_size wide (Glm4VisionMlp);
        merger_width, inter = inter, int(v["out_hidden_size"])  # intermediate_size is the merger's
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
    if glm4v:  # a merge x merge conv to the LLM width, then a SwiGLU merger of merger_width
        projector = width * merge * merge * out_dim + out_dim * out_dim + 3 * out_dim * merger_width
    elif model_type == "gemma3":  # Gemma3MultiModalProjector: RMSNorm + one matrix, no resampler
        projector = width * out_dim + width
    elif shuffle > 1:  # InternVL: pixel shuffle, then an MLP from shuffle^2 patches' features to the LLM width
        projector = width * shuffle * shuffle * out_dim + out_dim * out_dim
    elif merge > 1:  # Qwen2-VL style patch merger: MLP over merge^2 concatenated patches
        projector = (width * merge * merge) ** 2 + width * merge * merge * out_dim
        # Qwen3-VL's DeepStack: one more merger per tapped layer (deepstack_merger_list)
        projector *= 1 + len(v.get("deepstack_visual_indexes") or ())
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
