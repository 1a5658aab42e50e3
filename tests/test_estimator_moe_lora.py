"""LoRA on MoE models as ms-swift 4.x sets it up on transformers 5: which linears get adapters.

transformers 5 stacks each layer's routed experts in one parameter per projection (``gate_up_proj``,
``down_proj``). ms-swift's ``all-linear`` is its ``find_all_linears`` (modules whose class name holds
"linear", lm_head left out), and PEFT wraps those modules: attention, shared experts and dense
layers, never the stacked experts. Except where PEFT converts transformers 4's target names to the
stacked layout (GLM-4.5, Qwen3-Next, ...): the MLP names then move to the experts' parameters, and
PEFT's ``ParamWrapper`` refuses ms-swift's default ``lora_dropout`` 0.05.

Each case builds a 2-layer model of a catalog MoE architecture from a small config with the
installed transformers, applies ms-swift's own target resolution and PEFT, and holds the
estimator's adapter count (``lora.adapter_params``, fed by ``configjson``) to the parameters PEFT
made. docs/estimator.md §2.3.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

pytest.importorskip("swift", reason="ms-swift is installed by scripts/install-swift.sh")
torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

from swift.utils.transformers_utils import find_all_linears  # noqa: E402

from jupyter_quota.estimator import estimate  # noqa: E402
from jupyter_quota.estimator.configjson import spec_from_config  # noqa: E402
from jupyter_quota.estimator.lora import ALL_LINEAR, adapter_params  # noqa: E402

SMALL = {
    "hidden_size": 64,
    "intermediate_size": 96,
    "moe_intermediate_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 128,
    "max_position_embeddings": 256,
    "num_experts_per_tok": 2,
}
#: catalog MoE architectures transformers implements: the keys that keep each small, and whether
#: PEFT converts its MLP names to the stacked experts (a dense first layer or shared experts)
CASES = {
    "qwen3_moe": ({"num_experts": 4}, False),
    "qwen2_moe": ({"num_experts": 4, "shared_expert_intermediate_size": 48}, False),
    "mixtral": ({"num_local_experts": 4, "intermediate_size": 32}, False),
    "minimax_m2": ({"num_local_experts": 4, "intermediate_size": 32}, False),
    "phimoe": ({"num_local_experts": 4, "intermediate_size": 32}, False),
    "gpt_oss": ({"num_local_experts": 4, "intermediate_size": 32, "layer_types": ["full_attention"] * 2}, False),
    "qwen3_5_moe_text": (
        {"num_experts": 4, "shared_expert_intermediate_size": 48, "layer_types": ["full_attention"] * 2},
        False,
    ),
    "glm4_moe": ({"n_routed_experts": 4, "n_shared_experts": 1, "first_k_dense_replace": 1}, True),
    "glm4_moe_lite": (
        {
            "n_routed_experts": 4,
            "n_shared_experts": 1,
            "first_k_dense_replace": 1,
            "kv_lora_rank": 16,
            "q_lora_rank": 16,
        },
        True,
    ),
    "qwen3_next": (
        {"num_experts": 4, "shared_expert_intermediate_size": 48, "layer_types": ["full_attention"] * 2},
        True,
    ),
}
#: qwen2_moe's and qwen3_next's ``shared_expert_gate`` (h -> 1) gets an adapter the estimator leaves
#: out: rank * (h + 1) a layer, 12 MB of adapter, gradient and AdamW states for Qwen3-Next
UNCOUNTED = ("shared_expert_gate",)
#: attention the estimator shapes as multi-head attention (docs/estimator.md §3): GLM-4.7-Flash's
#: MLA (low-rank q and kv projections) and Qwen3-Next's and Qwen3.5's gated query (q_proj twice as
#: wide); their
#: attention adapters are not held to PEFT's, their MLP and expert adapters are
APPROXIMATE_ATTENTION = ("glm4_moe_lite", "qwen3_next", "qwen3_5_moe_text")
MLP, ATTENTION = frozenset({"gate", "up", "down"}), frozenset({"q", "k", "v", "o"})


def _model(model_type: str):
    keys, _ = CASES[model_type]
    config = transformers.AutoConfig.for_model(model_type, **{**SMALL, **keys})
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    stacked = [name for name, p in model.named_parameters() if "experts" in name and p.dim() == 3]
    assert stacked, f"transformers {transformers.__version__} no longer stacks {model_type}'s experts"
    return model, config.to_dict()


def _lora(model, dropout: float):
    # swift/utils/transformers_utils.py find_all_linears, as ms-swift's tuner setup calls it for
    # --target_modules all-linear (the model's arch names lm_head, left out)
    targets = find_all_linears(model, model_arch=SimpleNamespace(lm_head="lm_head"))
    lora = peft.LoraConfig(r=8, lora_alpha=32, lora_dropout=dropout, target_modules=sorted(targets))
    return peft.get_peft_model(model, lora)


@pytest.mark.parametrize("model_type", sorted(CASES))
def test_the_estimators_adapters_are_the_ones_ms_swift_and_peft_make(model_type):
    model, config = _model(model_type)
    spec = spec_from_config(config, name=model_type, source="config.json")
    converted = CASES[model_type][1]

    made = _lora(model, dropout=0.0 if converted else 0.05)
    adapters = {"mlp": 0, "attention": 0}
    for name, p in made.named_parameters():
        if p.requires_grad and not any(u in name for u in UNCOUNTED):
            adapters["attention" if ".self_attn." in name else "mlp"] += p.numel()
    experts_adapted = any("lora_A" in name and ".experts." in name for name, _ in made.named_parameters())

    assert (spec.fused_experts, spec.converted_experts, experts_adapted) == (True, converted, converted)
    assert adapter_params(spec, MLP, 8) == adapters["mlp"]
    if model_type not in APPROXIMATE_ATTENTION:
        assert adapter_params(spec, ATTENTION, 8) == adapters["attention"]
        assert adapter_params(spec, frozenset(ALL_LINEAR), 8) == sum(adapters.values())


#: a catalog model of each architecture PEFT converts
CONVERTED_MODELS = {
    "glm4_moe": "zai-org/GLM-4.5-Air",
    "glm4_moe_lite": "zai-org/GLM-4.7-Flash",
    "qwen3_next": "Qwen/Qwen3-Next-80B-A3B-Instruct",
}


@pytest.mark.parametrize("model_type", sorted(CONVERTED_MODELS))
def test_where_peft_converts_to_the_experts_the_default_dropout_stops_the_run_and_the_estimate_says_so(model_type):
    model, _ = _model(model_type)
    with pytest.raises(ValueError, match="does not work with lora_dropout != 0"):
        _lora(model, dropout=0.05)

    lora = ["--model", CONVERTED_MODELS[model_type], "--tuner_type", "lora"]
    assert "pass --lora_dropout 0" in " ".join(estimate(lora).assumptions)
    notes = " ".join(estimate([*lora, "--lora_dropout", "0"]).assumptions)
    assert "stacked experts" in notes and "--lora_dropout 0" not in notes


def test_a_checkpoint_with_its_own_code_keeps_one_linear_per_expert():
    # DeepSeek-V3's config.json names its modeling_deepseek.py (auto_map); ms-swift loads it with
    # trust_remote_code, whose experts are a ModuleList of MLPs of nn.Linear
    config = {**SMALL, "model_type": "deepseek_v3", "n_routed_experts": 4}
    own = spec_from_config({**config, "auto_map": {"AutoModelForCausalLM": "m.M"}}, name="x", source="config.json")
    native = spec_from_config(config, name="x", source="config.json")

    assert (own.fused_experts, native.fused_experts) == (False, True)
    experts = 4 * 3 * 8 * (64 + 32)  # every expert's gate, up and down projections, rank 8, a layer
    assert (
        adapter_params(own, frozenset(ALL_LINEAR), 8) - adapter_params(native, frozenset(ALL_LINEAR), 8) == 2 * experts
    )


@pytest.mark.parametrize("model_type", sorted(CASES))
def test_the_simulated_step_wraps_the_modules_ms_swift_wraps(model_type):
    from jupyter_quota.estimator.simstep import all_linear_targets

    wrapped = []
    for targets in (find_all_linears(_model(model_type)[0], model_arch=SimpleNamespace(lm_head="lm_head")), None):
        model = _model(model_type)[0]
        targets = targets if targets is not None else all_linear_targets(model)
        made = peft.get_peft_model(model, peft.LoraConfig(r=8, lora_dropout=0.0, target_modules=sorted(targets)))
        wrapped.append(sorted(name for name, _ in made.named_parameters() if "lora_A" in name))

    assert wrapped[0] and wrapped[0] == wrapped[1]


def test_quantizing_on_load_leaves_the_stacked_experts_in_16_bit(tmp_path):
    # transformers 5's bitsandbytes and HQQ integrations replace nn.Linear modules only; a real
    # `swift sft --quant_method bnb --quant_bits 4` on a tiny Qwen3-MoE (bitsandbytes 0.50.2, CPU)
    # made Linear4bit of the attention and left Qwen3MoeExperts in its dtype (docs/estimator.md §3)
    config = {**SMALL, "num_hidden_layers": 4, "hidden_size": 256, "model_type": "qwen3_moe", "num_experts": 8}
    stacked = 4 * 8 * 3 * 256 * 32  # layers x experts x (gate, up, down) x h x I
    # adapters on attention only, the same in both: the weights then differ by the experts' bytes
    qlora = [
        "--tuner_type",
        "lora",
        "--quant_method",
        "bnb",
        "--quant_bits",
        "4",
        "--target_modules",
        "q_proj",
        "v_proj",
    ]

    def weights(facts: dict, name: str) -> int:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(facts))
        return estimate(["--model", str(folder), *qlora]).breakdown["weights"]

    assert spec_from_config(config, name="x", source="config.json").routed_expert_params == stacked
    own_code = {**config, "auto_map": {"AutoModelForCausalLM": "m.M"}}
    # the experts at 2 bytes instead of bnb 4-bit's with ms-swift's default double quantization
    nf4 = 0.5 + 1 / 64 + 4 / (64 * 256)
    assert weights(config, "native") - weights(own_code, "own") == pytest.approx(stacked * (2 - nf4))


def test_the_converted_model_types_are_the_ones_peft_converts():
    # the estimator is pure and keeps PEFT's list as a literal (configjson._PEFT_CONVERTED_MOE): held
    # here to the installed PEFT's own map, for the catalog's MoE model types
    from peft.utils.transformers_weight_conversion import _MODEL_TO_CONVERSION_PATTERN

    from jupyter_quota.estimator import catalog
    from jupyter_quota.estimator.configjson import _PEFT_CONVERTED_MOE

    moe_types = set()
    for entry in catalog._data()["models"]:
        config = entry["config"]
        text = next((config[k] for k in ("text_config", "llm_config", "language_config") if k in config), config)
        if any(k in text for k in ("num_experts", "num_local_experts", "n_routed_experts")):
            moe_types.add(config.get("model_type"))
    converted = {t for t in moe_types if _MODEL_TO_CONVERSION_PATTERN.get(t) == "qwen2_moe"}
    assert converted == _PEFT_CONVERTED_MOE
