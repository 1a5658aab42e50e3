"""The analytic estimate against simulated training steps (docs/estimator.md §14).

The simulated steps are cached in tests/data/simstep_cache.json (benchmarks/estimator_simstep.py
--regenerate writes it); these tests read the cache and run the analytic estimator only, so they
take seconds. One test runs a real (tiny) simulated step when torch is installed.
"""

import json
import statistics

import pytest

from jupyter_quota.estimator.simcheck import CACHE, REGIMES, compare, load_cache, reduced, regime_of, text_facts

GIB = 1024**3

# The analytic estimate (device="cpu": tensor memory) may differ from the simulated step's peak of
# live tensors by at most this much on any cached case, and by at most MEDIAN_BOUND in the median.
BOUND = 0.28
MEDIAN_BOUND = 0.05
# Per category (simcheck.CATEGORY_PAIRS): the analytic term less the simulated one, as a share of the
# simulated peak, on every cached case. The model states are counted exactly; the dynamic part (what
# a step allocates and frees) is where the formulas approximate.
CATEGORY_BOUNDS = {"parameters": 0.01, "optimizer": 0.02}


@pytest.fixture(scope="module")
def rows():
    cache = load_cache()
    assert cache["cases"], f"{CACHE} is empty: run benchmarks/estimator_simstep.py --regenerate catalog"
    return compare(cache)


def test_cache_covers_every_catalog_architecture():
    from jupyter_quota.estimator import catalog

    cache = load_cache()
    assert cache["versions"].get("torch") and cache["versions"].get("transformers")
    cached = {c["facts"].get("model_type") for c in cache["cases"]}
    wanted = {text_facts(m["config"]).get("model_type") for m in catalog._data()["models"]}
    missing = wanted - cached
    assert not missing, (
        f"no simulated case for {sorted(missing)}: run benchmarks/estimator_simstep.py --regenerate catalog"
    )
    assert REGIMES[0].key in {regime_of(c["regime"]).key for c in cache["cases"] if "result" in c}
    # every case ran the facts it names: the language model of a catalog entry, cut to the stated layers
    for case in cache["cases"]:
        assert case["facts"].get("num_hidden_layers", 0) <= cache["layers"]


def test_analytic_within_bound_of_simulated_step(rows):
    worst = max(rows, key=lambda r: abs(r["diff"]))
    outside = [f"{r['model']} {r['regime']}: {r['diff']:+.1%}" for r in rows if abs(r["diff"]) > BOUND]
    assert not outside, f"{len(outside)} of {len(rows)} cases beyond ±{BOUND:.0%}: {outside[:10]}"
    assert statistics.median(abs(r["diff"]) for r in rows) <= MEDIAN_BOUND, worst


def test_each_category_within_bound_of_simulated_step(rows):
    for name, bound in CATEGORY_BOUNDS.items():
        outside = [
            f"{r['model']} {r['regime']}: {r['categoryDiff'][name]:+.1%}"
            for r in rows
            if abs(r["categoryDiff"][name]) > bound
        ]
        assert not outside, f"{name}: {len(outside)} of {len(rows)} cases beyond ±{bound:.0%}: {outside[:8]}"


def test_tied_embedding_full_fine_tunes_count_the_backward_tail(rows):
    # A tied embedding's two gradients (lm_head's, held from the loss on, and the embedding's) and
    # their sum are alive together at the end of the backward pass: the peak of a full fine-tune of a
    # model with a large vocabulary (Llama 3.2 1B, Gemma 2B, Gemma 2 2B, Phi-4-mini)
    tied = [r for r in rows if r["regime"].startswith("full/") and r["model"] in TIED_LARGE_VOCABULARY]
    assert len(tied) >= 8
    outside = [f"{r['model']} {r['regime']}: {r['diff']:+.1%}" for r in tied if abs(r["diff"]) > 0.05]
    assert not outside, outside


def test_moe_full_fine_tunes_count_the_new_gradient_of_stacked_experts(rows):
    # transformers 5 stacks a layer's experts in one tensor per projection (gate_up_proj: E x 2I x h);
    # under gradient accumulation its new gradient is one temporary before it is added into .grad
    moe = [
        r
        for r in rows
        if r["regime"].startswith("full/") and not r["regime"].endswith("/noaccum") and r["model"] in WIDE_EXPERTS
    ]
    assert len(moe) >= 8
    outside = [f"{r['model']} {r['regime']}: {r['diff']:+.1%}" for r in moe if abs(r["diff"]) > 0.02]
    assert not outside, outside


#: MoE models whose stacked expert weights outweigh the logits at 512 tokens
WIDE_EXPERTS = {
    "mistralai/Mixtral-8x7B-v0.1",
    "microsoft/Phi-3.5-MoE-instruct",
    "zai-org/GLM-4.5-Air",
    "MiniMaxAI/MiniMax-M2",
    "Qwen/Qwen3-Next-80B-A3B-Instruct",
}

TIED_LARGE_VOCABULARY = {
    "meta-llama/Llama-3.2-1B",
    "google/gemma-2b",
    "google/gemma-2-2b",
    "microsoft/Phi-4-mini-instruct",
}


def test_text_facts_and_reduction():
    vl = {
        "model_type": "qwen2_5_vl",
        "tie_word_embeddings": False,
        "vision_config": {"depth": 32},
        "text_config": {"model_type": "qwen2_5_vl_text", "hidden_size": 64, "num_hidden_layers": 8},
    }
    facts = text_facts(vl)
    assert facts["model_type"] == "qwen2" and facts["hidden_size"] == 64 and "vision_config" not in facts
    cut = reduced({**facts, "layer_types": ["full_attention"] * 8, "first_k_dense_replace": 3}, 2)
    assert cut["num_hidden_layers"] == 2 and cut["layer_types"] == ["full_attention"] * 2
    assert cut["first_k_dense_replace"] == 1


def test_simulated_step_counts_model_states_exactly():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from jupyter_quota.estimator.simstep import Regime, simulate

    facts = {
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 512,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    params = 512 * 64 * 2 + 2 * (64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 128 + 2 * 64) + 64
    result = simulate(facts, Regime("full", 64, 1, True, "sdpa"), steps=1)
    assert result.peak_phase == "backward"
    b = result.breakdown
    assert sum(b.values()) == result.peak_bytes
    assert params * 2 <= b["parameters"] <= params * 2 + 64  # bfloat16 weights (+ the rotary buffer)
    assert b["gradients"] == params * 2  # the accumulated bfloat16 gradients are alive at the peak
    # exp_avg and exp_avg_sq in bfloat16, and a float32 step count per parameter tensor
    assert params * 4 < b["optimizer"] <= params * 4 + 4 * 32
    assert result.allocator["peakReserved"] >= result.allocator["peakAllocated"] >= result.peak_bytes
    json.dumps(result.to_json())


def test_verify_says_why_it_cannot_simulate_a_run():
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter_quota.cli",
            "estimate",
            "--json",
            "--verify",
            "--gpus",
            "2",
            "--",
            "--model",
            "Qwen/Qwen2.5-7B-Instruct",
            "--deepspeed",
            "zero2",
            "--quant_bits",
            "4",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    body = json.loads(out.stdout)
    reason = body["verification"]["unsupported"]
    assert "2 GPUs" in reason and "--deepspeed zero2" in reason and "quantized" in reason
    assert body["peakBytesPerGpu"] > 0  # the estimate itself is unchanged


def test_verify_runs_the_simulated_step_of_a_local_model(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    import subprocess
    import sys

    folder = tmp_path / "tiny"
    folder.mkdir()
    facts = {
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 512,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "max_position_embeddings": 2048,
    }
    (folder / "config.json").write_text(json.dumps(facts))
    argv = ["--model", str(folder), "--tuner_type", "lora", "--max_length", "128"]
    out = subprocess.run(
        [sys.executable, "-m", "jupyter_quota.cli", "estimate", "--json", "--verify", "--", *argv],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    v = json.loads(out.stdout)["verification"]
    assert "unsupported" not in v, v
    assert v["regime"].startswith("lora/r8/ckpt/sdpa/b1/t128")
    assert v["extrapolatedFrom"] == [2, 3]  # 4 layers from 2 and 3
    assert sum(v["breakdown"].values()) == v["liveBytes"]
    assert v["reservedBytes"] >= v["allocatedBytes"] >= v["liveBytes"] > 0
    assert v["peakBytesPerGpu"] == v["reservedBytes"] + v["foreachBytes"] + v["workspaceBytes"]


def _cached_step(model: str, tuner: str) -> dict:
    """A simulated step from the cache (its result, as ``simulate_scaled`` returns it)."""
    for case in load_cache()["cases"]:
        if case["model"] == model and case["regime"]["tuner"] == tuner and "result" in case:
            return case["result"]
    raise AssertionError(f"{model} {tuner} is not in {CACHE}")


@pytest.mark.parametrize("optim", [None, "adamw_torch"])
def test_verify_does_not_inflate_a_small_full_fine_tune(monkeypatch, optim):
    """--verify's constant for what no tensor shows must not carry one 7B row's optimizer-step
    buffer (17 GiB) onto a 0.5B full fine-tune: that buffer is the foreach AdamW step's, which
    scales with the trained parameters and is counted as its own term where the run has it."""
    from jupyter_quota.estimator import simstep, verify
    from jupyter_quota.swift import parse_sft_args

    step = _cached_step("Qwen/Qwen2.5-0.5B", "full")  # 2 layers at 512 tokens: 2.3 GiB reserved
    monkeypatch.setattr(simstep, "simulate_scaled", lambda facts, regime, steps=2: step)
    argv = ["--model", "Qwen/Qwen2.5-0.5B", "--tuner_type", "full", "--max_length", "512"]
    v = verify.verify(parse_sft_args(argv + (["--optim", optim] if optim else [])))
    reserved = step["allocator"]["peakReserved"]
    assert abs(v["workspaceBytes"]) < 2 * GIB, v
    b = step["breakdown"]
    # the foreach step holds parameters, gradients, both moments and one moment-sized buffer
    foreach = max(0, b["parameters"] + 2 * b["optimizer"] - reserved) if optim else 0
    assert v["peakBytesPerGpu"] == reserved + foreach + v["workspaceBytes"]
    assert v["peakBytesPerGpu"] < 2 * reserved


def test_gradients_at_the_peak_without_gradient_accumulation(rows):
    """One micro-batch a step (no accumulation): no gradient exists yet at the loss's backward,
    where a small model with a large vocabulary peaks; all exist at the end of the backward pass
    and at the update. Where the simulated peak holds no gradient, the analytic estimate without
    accumulation must be no further from it than with accumulation (+5 points); where it holds them
    all, the analytic peak must still count them (never below the simulated model states, less
    0.1%: the rotary buffers and AdamW's step counts it leaves out)."""
    by = {(r["model"], r["regime"]): r for r in rows}
    single = [r for r in rows if r["regime"].endswith("/noaccum") and r["regime"].startswith("full")]
    assert len(single) >= 10, "run benchmarks/estimator_simstep.py --regenerate catalog (the /noaccum regimes)"
    at_loss = [r for r in single if r["breakdown"]["gradients"] == 0]
    assert at_loss, "no simulated case peaks at the loss without accumulation"
    for r in at_loss:
        accumulated = by[(r["model"], r["regime"].removesuffix("/noaccum"))]
        assert abs(r["diff"]) <= abs(accumulated["diff"]) + 0.05, (r["model"], r["diff"], accumulated["diff"])
    for r in single:
        b = r["breakdown"]
        assert r["analytic"] >= 0.999 * (b["parameters"] + b["gradients"] + b["optimizer"]), (r["model"], r["diff"])
