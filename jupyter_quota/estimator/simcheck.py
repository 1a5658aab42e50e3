"""The analytic estimate against the simulated step (``simstep``), from a cache of simulated steps.

A simulated step takes seconds to minutes, so its results are cached in
``tests/data/simstep_cache.json`` (written by ``benchmarks/estimator_simstep.py --regenerate``),
each with the exact ``config.json`` facts and regime it ran, and the torch/transformers/peft
versions. The check estimates those same facts analytically (``estimate(..., device="cpu")``:
tensor memory, no CUDA workspaces or fragmentation) and compares. Pure arithmetic: no torch.

Which facts: each catalog entry's language model (the nested ``text_config``/``llm_config`` of a
multimodal model, under the decoder's plain ``model_type``), cut to ``LAYERS`` decoder layers so
that every architecture simulates in seconds. Every per-layer term and the embeddings, logits and
loss are still exercised; the layer count only multiplies them (the parameters exactly; the
checkpointed inputs exactly; the peak's place in the step may move with it, which the full-size
rows of the benchmark show).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from . import estimate
from .simstep import Regime, with_layers

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "tests" / "data" / "simstep_cache.json"
LAYERS = 2
TOKENS = 512
#: the regimes every architecture is simulated under
REGIMES = (
    Regime("full", TOKENS, 1, True, "sdpa"),
    Regime("full", TOKENS, 1, False, "sdpa"),
    Regime("lora", TOKENS, 1, True, "sdpa"),
    Regime("lora", TOKENS, 1, False, "sdpa"),
    Regime("full", TOKENS, 1, True, "eager"),
    Regime("lora", TOKENS, 1, False, "eager"),
    # no gradient accumulation (one micro-batch a step): the gradients are made during the backward
    # pass, after a peak at the loss
    Regime("full", TOKENS, 1, True, "sdpa", accumulate=False),
    Regime("lora", TOKENS, 1, True, "sdpa", accumulate=False),
)
#: the simulated step's categories against the analytic breakdown's keys: the model states one to one;
#: what the step allocates and frees (which it files by phase: forward-made activations, backward- and
#: update-made temporaries) against the analytic activations, logits and the rest of the dynamic part
CATEGORY_PAIRS = (
    ("parameters", ("parameters",), ("weights",)),
    ("gradients", ("gradients",), ("gradients",)),
    ("optimizer", ("optimizer",), ("optimizer",)),
    ("dynamic", ("activations", "temporaries"), ("activations", "logits", "vision", "parallel", "evaluation")),
)
#: a multimodal model's language model, under the model_type of the plain decoder transformers builds
TEXT_TYPES = {
    "qwen2_vl_text": "qwen2",
    "qwen2_5_vl_text": "qwen2",
    "qwen3_vl_text": "qwen3",
    "qwen3_vl_moe_text": "qwen3_moe",
    "qwen2_5_omni_thinker": "qwen2",
    "qwen2_5_omni_text": "qwen2",
    "qwen3_omni_moe_text": "qwen3_moe",
    "glm4v_text": "glm4",
    "glm4v_moe_text": "glm4_moe",
    "gemma3": "gemma3_text",
    "qwen3_5_text": "qwen3_next",
    "qwen3_5_moe_text": "qwen3_next",
    "mistral3": "mistral",
    "qwen2_vl": "qwen2",
    "qwen2_5_vl": "qwen2",
    "qwen3_vl": "qwen3",
    "qwen3_vl_moe": "qwen3_moe",
    "glm4v": "glm4",
    "glm4v_moe": "glm4_moe",
    "deepseek_vl_v2": "deepseek_v2",
    "qwen2_5_omni": "qwen2",
    "qwen3_omni_moe": "qwen3_moe",
}


def text_facts(config: dict) -> dict:
    """The language model's ``config.json`` facts of a catalog entry (a decoder transformers can build)."""
    top = {k: v for k, v in config.items() if not isinstance(v, dict)}
    if isinstance(config.get("thinker_config"), dict):
        config = config["thinker_config"]
    sub = None
    for nest in ("text_config", "llm_config", "language_config"):
        if isinstance(config.get(nest), dict):
            sub = config[nest]
            break
    facts = dict(top)
    if sub is not None:
        facts.update({k: v for k, v in sub.items() if not isinstance(v, dict)})
        facts["model_type"] = sub.get("model_type") or top.get("model_type")
    facts["model_type"] = TEXT_TYPES.get(facts.get("model_type"), facts.get("model_type"))
    for key in ("architectures", "auto_map", "vision_config", "quantization_config"):
        facts.pop(key, None)
    return facts


def reduced(facts: dict, layers: int = LAYERS) -> dict:
    """The same facts with ``layers`` decoder layers (per-layer lists cut to match)."""
    return with_layers(facts, layers)


def analytic(facts: dict, regime: Regime, *, device: str = "cpu"):
    """The estimator's answer for these facts and regime (a folder holding them as config.json)."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(facts))
        return estimate(["--model", tmp, *regime.argv()], 1, device=device)


def regime_of(data: dict) -> Regime:
    """A ``Regime`` from its JSON form (the cache's)."""
    return Regime(**{**data, "targets": tuple(data.get("targets", ("all-linear",)))})


def load_cache(path: Path = CACHE) -> dict:
    if not path.exists():
        return {"versions": {}, "cases": []}
    return json.loads(path.read_text())


def compare(cache: dict) -> list[dict]:
    """One row per simulated case: the analytic and simulated peaks and the relative difference."""
    rows = []
    for case in cache.get("cases", []):
        if "result" not in case:
            continue
        regime = regime_of(case["regime"])
        est = analytic(case["facts"], regime)
        sim = case["result"]["peak_bytes"]
        states = sum(case["result"]["breakdown"][k] for k in ("parameters", "gradients", "optimizer"))
        ana_states = sum(est.breakdown[k] for k in ("weights", "gradients", "optimizer"))
        rows.append(
            {
                "model": case["model"],
                "regime": regime.key,
                "simulated": sim,
                "analytic": est.peak_bytes_per_gpu,
                "diff": est.peak_bytes_per_gpu / sim - 1,
                # the part above the model states: activations, logits, temporaries
                "dynamicDiff": (est.peak_bytes_per_gpu - ana_states) / max(1, sim - states) - 1,
                # per category: analytic less simulated, as a share of the simulated peak (they add up
                # to ``diff``)
                "categoryDiff": {
                    name: (
                        sum(est.breakdown[k] for k in ana_keys) - sum(case["result"]["breakdown"][k] for k in sim_keys)
                    )
                    / sim
                    for name, sim_keys, ana_keys in CATEGORY_PAIRS
                },
                "breakdown": case["result"]["breakdown"],
                "analyticBreakdown": est.breakdown,
            }
        )
    return rows
