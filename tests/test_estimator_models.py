"""Model resolution: the catalog's families, quantized checkpoints, towers, and the approximate path
for a model known only by its size (jupyter_quota.estimator.model, catalog, approx)."""

import json

import pytest

from jupyter_quota.errors import InvalidRequest
from jupyter_quota.estimator import catalog as cat
from jupyter_quota.estimator import estimate, resolve_model
from jupyter_quota.estimator.approx import parse_model_size, size_in_name
from jupyter_quota.estimator.model import spec_from_config

GIB = 1024**3


@pytest.fixture(autouse=True)
def no_hub_cache(tmp_path, monkeypatch):
    """Resolve from the catalog and names only, whatever this machine downloaded."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "ms"))
    monkeypatch.delenv("JUPYTER_QUOTA_HUB_LOOKUP", raising=False)


# -- the catalog as data -------------------------------------------------------------------------
def test_every_catalog_entry_cites_its_source_and_resolves_to_real_facts():
    data = cat._data()
    seen = set()
    for entry in data["models"]:
        assert entry["source"].strip() and "config.json" in entry["source"], entry["names"]
        for name in entry["names"]:
            assert name.lower() not in seen, f"{name} is listed twice"
            seen.add(name.lower())
            spec = resolve_model(name)
            assert not spec.approximate and spec.source == "catalog" and spec.params > 0
        spec = resolve_model(entry["names"][0])
        if "num_experts_per_tok" in entry["config"]:  # MoE: every expert resident, top-k for activations
            assert spec.num_experts > spec.num_experts_per_tok > 0
    for entry in data["sizes"]:
        size = parse_model_size(entry["size"])
        assert entry["source"].strip() and size.total > 0
        for name in entry["names"]:
            assert name.lower() not in seen, f"{name} has facts in the catalog and a size in sizes"


@pytest.mark.parametrize(
    "name, family",
    [
        ("Qwen/Qwen3-8B", "qwen3"),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3_moe"),
        ("Qwen/Qwen3-VL-8B-Instruct", "qwen3_vl"),
        ("Qwen/Qwen3-VL-30B-A3B-Instruct", "qwen3_vl_moe"),
        ("Qwen/Qwen3-Omni-30B-A3B-Instruct", "qwen3_omni_moe"),
        ("Qwen/Qwen3-Next-80B-A3B-Instruct", "qwen3_next"),
        ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen2_5_vl"),
        ("Qwen/Qwen2.5-Omni-7B", "qwen2_5_omni"),
        ("OpenGVLab/InternVL3-8B", "internvl_chat"),
        ("openbmb/MiniCPM-V-4_5", "minicpmv"),
        ("zai-org/GLM-4.5-Air", "glm4_moe"),
        ("THUDM/GLM-4-9B-0414", "glm4"),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "qwen2"),
        ("deepseek-ai/DeepSeek-V2-Lite-Chat", "deepseek_v2"),
        ("deepseek-ai/deepseek-vl2-small", "deepseek_vl_v2"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama"),
        ("google/gemma-3-27b-it", "gemma3"),
        ("mistralai/Mistral-Small-24B-Instruct-2501", "mistral"),
        ("mistralai/Mixtral-8x22B-Instruct-v0.1", "mixtral"),
        ("microsoft/phi-4", "phi3"),
        ("openai/gpt-oss-20b", "gpt_oss"),
    ],
)
def test_the_families_people_fine_tune_have_real_facts(name, family):
    spec = resolve_model(name)
    assert (spec.model_type, spec.approximate, spec.source) == (family, False, "catalog")


def test_published_sizes_come_out_of_the_facts():
    """Parameter counts the model cards state, within 3% (MoE totals count every expert)."""
    for name, billions in [
        ("Qwen/Qwen3-30B-A3B", 30.5),
        ("Qwen/Qwen3-VL-8B-Instruct", 8.77),
        ("zai-org/GLM-4.5-Air", 106.9),
        ("openai/gpt-oss-20b", 20.9),
        ("openai/gpt-oss-120b", 116.8),
        ("mistralai/Mixtral-8x22B-v0.1", 140.6),
        ("google/gemma-3-27b-it", 27.4),
        ("OpenGVLab/InternVL3-8B", 7.94),
        ("deepseek-ai/DeepSeek-V2-Lite", 15.7),
        ("microsoft/phi-4", 14.7),
    ]:
        params = resolve_model(name).params / 1e9
        assert abs(params / billions - 1) < 0.03, (name, params, billions)


def test_vision_and_audio_towers_count():
    omni = resolve_model("Qwen/Qwen2.5-Omni-7B")
    assert omni.vision_params > 0.5e9 and omni.audio_params > 0.5e9
    assert omni.params == omni.llm_params + omni.vision_params + omni.audio_params
    argv = ["--model", "Qwen/Qwen2.5-Omni-7B", "--max_length", "1024"]
    lora = estimate(argv).breakdown
    assert lora["weights"] >= omni.params * 2  # every tower resident in bfloat16
    frozen = estimate([*argv, "--tuner_type", "full"]).breakdown["gradients"]
    towers = estimate([*argv, "--tuner_type", "full", "--freeze_vit", "false"]).breakdown["gradients"]
    assert frozen == omni.llm_params * 2 and towers == omni.params * 2
    thinking = resolve_model("Qwen/Qwen3-Omni-30B-A3B-Thinking")  # no talker: less audio
    assert 0 < thinking.audio_params < resolve_model("Qwen/Qwen3-Omni-30B-A3B-Instruct").audio_params


def test_an_omni_config_json_nests_its_thinker(tmp_path):
    text = {"hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000}
    config = {
        "model_type": "qwen2_5_omni",
        "thinker_config": {
            "text_config": {**text, "intermediate_size": 512},
            "vision_config": {"depth": 2, "hidden_size": 64, "intermediate_size": 128, "out_hidden_size": 256},
            "audio_config": {"d_model": 64, "encoder_layers": 2, "encoder_ffn_dim": 128, "output_dim": 256},
        },
        "talker_config": {**text, "intermediate_size": 256},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = resolve_model(str(tmp_path))
    assert (spec.hidden_size, spec.intermediate_size, spec.vision_hidden) == (256, 512, 64)
    talker = spec_from_config(config["talker_config"], name="t", source="t").llm_params
    assert spec.audio_params > talker > 0
    no_talker = spec_from_config({**config, "enable_audio_output": False}, name="x", source="x")
    assert no_talker.audio_params == spec.audio_params - talker


# -- quantized checkpoints -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "suffix, method, bits, per_weight",
    [
        ("-AWQ", "awq", 4, 0.5 + 2.5 / 128),
        ("-GPTQ-Int4", "gptq", 4, 0.5 + 2.5 / 128),
        ("-GPTQ-Int8", "gptq", 8, 1 + 3 / 128),
        ("-FP8", "fp8", 8, 1 + 4 / 128**2),
    ],
)
def test_a_quantized_checkpoint_is_its_model_with_the_publishers_quantization(suffix, method, bits, per_weight):
    base = resolve_model("Qwen/Qwen2.5-7B-Instruct")
    spec = resolve_model("Qwen/Qwen2.5-7B-Instruct" + suffix)
    assert (spec.quant_method, spec.quant_bits, spec.approximate) == (method, bits, False)
    assert spec.params == base.params and spec.quant_bytes_per_weight == pytest.approx(per_weight)
    argv = ["--max_length", "1024"]
    quant = estimate(["--model", spec.name, *argv])
    plain = estimate(["--model", base.name, *argv])
    extras = plain.breakdown["weights"] - base.params * 2  # the LoRA adapters, the same on both
    expected = base.linear_params * per_weight + (base.params - base.linear_params) * 2 + extras
    assert quant.breakdown["weights"] == pytest.approx(expected)
    assert any(f"{method.upper()} {bits}-bit checkpoint" in a for a in quant.assumptions)
    full = estimate(["--model", spec.name, "--tuner_type", "full", *argv])
    assert any("cannot be fully fine-tuned" in a for a in full.assumptions)
    assert full.breakdown["weights"] == plain.breakdown["weights"] - extras


def test_a_config_json_with_a_quantization_config(tmp_path):
    config = {
        "model_type": "llama",
        "hidden_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "intermediate_size": 1024,
        "vocab_size": 1000,
        "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": -1},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = resolve_model(str(tmp_path))
    assert (spec.quant_method, spec.quant_bits, spec.quant_group_size) == ("gptq", 4, 0)
    assert spec.quant_bytes_per_weight == pytest.approx(0.5 + 2.5 / 512)  # one group per row


def test_variant_tags_and_other_organisations_find_the_entry():
    for name, entry in [
        ("Qwen/Qwen2.5-Coder-14B", "Qwen/Qwen2.5-14B"),
        ("LLM-Research/Meta-Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B"),
        ("unsloth/DeepSeek-R1-0528-BF16", "deepseek-ai/DeepSeek-V3"),
        ("01-ai/Yi-1.5-9B-Chat-16K", "01-ai/Yi-9B"),
        ("OpenGVLab/InternVL3-8B-Pretrained", "OpenGVLab/InternVL3-8B"),
    ]:
        assert cat.resolve(name).entry["names"][0] == entry, name
    assert cat.resolve("Qwen/Qwen2.5-7B-Instruct-AWQ").quantization["quant_method"] == "awq"


# -- a model known only by its size -----------------------------------------------------------------
@pytest.mark.parametrize(
    "text, total, active",
    [
        ("acme/Foo-8B", 8e9, None),
        ("acme/foo-0.5b-chat", 0.5e9, None),
        ("acme/bar-1.5B-Instruct-1M", 1.5e9, None),
        ("acme/Qwen-1_8B-Thing", 1.8e9, None),
        ("acme/Baz-30B-A3B", 30e9, 3e9),
        ("acme/Big-2.4T-A95B", 2.4e12, 95e9),
        ("acme/SmolThing-135M", 135e6, None),
        ("acme/v2-7b-v0.1", 7e9, None),
    ],
)
def test_the_size_in_a_name(text, total, active):
    size = size_in_name(text)
    assert size.total == pytest.approx(total) and (size.active == pytest.approx(active) if active else not size.active)


def test_no_size_in_these_names():
    for name in ("acme/model", "acme/Phi-3-mini-4k-instruct", "acme/gemma-3n-E2B", "acme/bge-base-v1.5"):
        assert size_in_name(name) is None, name


def test_an_unknown_id_is_estimated_from_its_size_and_says_so():
    est = estimate(["--model", "acme/Foo-8B-Instruct", "--max_length", "2048"])
    spec = est.model
    assert est.approximate and est.to_json()["approximate"] is True and spec.approximate
    assert abs(spec.params / 8e9 - 1) < 0.05 and "from the name" in spec.source and "Qwen/Qwen3-8B" in spec.source
    assert any(a.startswith("approximate:") for a in est.assumptions)
    real = estimate(["--model", "Qwen/Qwen3-8B", "--max_length", "2048"])
    assert not real.approximate and real.to_json()["approximate"] is False


def test_an_moe_size_sets_experts_per_token_from_the_active_parameters():
    spec = resolve_model("acme/Thing-30B-A3B")
    assert spec.is_moe and spec.approximate and abs(spec.params / 30e9 - 1) < 0.05
    active = (
        spec.llm_params
        - (spec.num_layers - spec.num_dense_layers)
        * (spec.num_experts - spec.num_experts_per_tok)
        * 3
        * spec.hidden_size
        * spec.moe_intermediate_size
    )
    assert abs(active / 3e9 - 1) < 0.25
    mixtral = resolve_model("acme/Mixtral-8x7B-tuned")  # the mistral family's anchor
    assert mixtral.num_experts == 8 and mixtral.num_experts_per_tok == 2 and "Mixtral-8x7B" in mixtral.source


def test_the_family_in_the_name_picks_the_anchor():
    assert "meta-llama/Llama-3.1-8B" in resolve_model("acme/llama-3-tuned-8B").source
    assert "google/gemma-2-9b" in resolve_model("acme/gemma-tuned-9b").source
    assert resolve_model("acme/llama-3-tuned-8B").vocab_size == 128256


def test_model_size_sizes_an_unknown_model_and_never_overrides_facts():
    spec = resolve_model("acme/custom", "13B")
    assert spec.approximate and "--model_size" in spec.source and abs(spec.params / 13e9 - 1) < 0.05
    assert resolve_model("acme/custom-7B", "70B").params > 60e9  # the explicit size wins over the name's
    assert resolve_model("Qwen/Qwen3-8B", "70B") == resolve_model("Qwen/Qwen3-8B")
    published = resolve_model("zai-org/GLM-4.6V")  # a size from the catalog's sizes, with its source
    assert published.approximate and "106B total" in published.source and published.is_moe


@pytest.mark.parametrize("bad", ["", "8", "B8", "eight billion", "8B-A9B", "0B", "8B 8B", "1e20B", "30B-A"])
def test_a_malformed_model_size_is_refused_with_an_example(bad):
    with pytest.raises(InvalidRequest) as info:
        resolve_model("acme/custom", bad)
    assert "--model_size" in info.value.message


def test_a_name_without_a_size_asks_for_one():
    with pytest.raises(InvalidRequest) as info:
        resolve_model("acme/custom")
    assert "--model_size" in info.value.message and "config.json" in info.value.message


def test_a_quantized_unknown_model_is_approximate_and_quantized():
    spec = resolve_model("acme/Foo-14B-Instruct-AWQ")
    assert spec.approximate and spec.quant_method == "awq" and "AWQ 4-bit" in spec.source
    assert estimate(["--model", spec.name]).breakdown["weights"] < 0.4 * spec.params * 2


def test_hybrid_linear_attention_layers_count_as_gated_deltanet():
    """Qwen3-Next and Qwen3.5: three of four layers are Gated DeltaNet, whose projections are wider
    than the full-attention layers' (Qwen3.8-27B comes to 27B only with them)."""
    spec = resolve_model("Qwen/Qwen3.8-27B")
    assert spec.full_attention_interval == 4 and spec.linear_attention_params > spec.attn_params
    layers = spec.layer_params
    assert layers[3] < layers[0] == layers[1] == layers[2] and layers[7] == layers[3]
    assert abs(spec.params / 27e9 - 1) < 0.03
    as_full = spec.params - 48 * (spec.linear_attention_params - spec.attn_params)
    assert spec.params - as_full > 1.5e9
