"""GaLore (ms-swift 4.x --use_galore): projected AdamW states, whole gradients, the SVD buffer at a
projection update; what it does not model is a full fine-tune, said so (docs/estimator.md §4.7)."""

import sys
from pathlib import Path

import pytest

from jupyter_quota.estimator import estimate, resolve_model
from jupyter_quota.estimator.simstep import UnsupportedStep
from jupyter_quota.estimator.verify import regime_for
from jupyter_quota.swift import parse_sft_args

GIB = 1024**3
ROOT = Path(__file__).resolve().parents[1]
FULL = ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "full", "--max_length", "256"]
GALORE = FULL + ["--use_galore", "true"]


def _projected_states(spec, rank: int) -> tuple[int, int, int]:
    """By hand from swift/optimizers/galore/galore_projector.py (proj_type std): a tall m x n gradient
    is projected on the right (m x r kept, projection r x n), a wide one on the left (r x n kept,
    projection m x r); AdamW keeps two moments of what is kept. Returns (weights, moments, projections)."""
    h, q, kv, i = (
        spec.hidden_size,
        spec.num_heads * spec.head_dim,
        spec.num_kv_heads * spec.head_dim,
        spec.intermediate_size,
    )
    shapes = [(q, h), (kv, h), (kv, h), (h, q), (i, h), (i, h), (h, i)]  # q, k, v, o, gate, up, down as (out, in)
    weights = sum(m * n for m, n in shapes)
    kept = sum((m if m >= n else n) * min(rank, m, n) for m, n in shapes)
    projection = sum(min(rank, m, n) * (n if m >= n else m) for m, n in shapes)
    layers = spec.num_layers
    return weights * layers, 2 * kept * layers, projection * layers


def test_galore_keeps_projected_moments_of_the_linears_and_whole_states_of_the_rest():
    full, galore = estimate(FULL), estimate(GALORE)
    spec = resolve_model("Qwen/Qwen2.5-7B-Instruct")
    weights, moments, projections = _projected_states(spec, 128)
    rest = spec.llm_params - weights  # embeddings, lm_head, norms, biases: whole AdamW states
    # at a projection update: a float32 copy of the largest gradient (gate/up/down) and its U factor,
    # counted where it exceeds what the step's activations and logits had freed (docs/estimator.md §7)
    step = 2 * spec.intermediate_size * spec.hidden_size * 4
    b = galore.breakdown
    dynamic = b["activations"] + b["logits"] + b["vision"] + b["parallel"]
    expected = (moments + projections + 2 * rest) * 2 + max(0, step - dynamic)
    assert b["optimizer"] == pytest.approx(expected, abs=4)
    # weights and gradients are those of the full fine-tune: GaLore projects only the optimizer
    assert galore.breakdown["weights"] == full.breakdown["weights"]
    assert galore.breakdown["gradients"] == full.breakdown["gradients"]
    assert galore.peak_bytes_per_gpu < 0.55 * full.peak_bytes_per_gpu
    assert any(a.startswith("GaLore rank 128 on every decoder linear") for a in galore.assumptions)
    # ms-swift reads these arguments: they are not "not modelled (passed through)"
    assert not any("not modelled (passed through)" in a for a in galore.assumptions)


def test_a_higher_galore_rank_keeps_more_state():
    low = estimate(GALORE + ["--galore_rank", "64"]).breakdown["optimizer"]
    default = estimate(GALORE).breakdown["optimizer"]
    high = estimate(GALORE + ["--galore_rank", "512"]).breakdown["optimizer"]
    assert low < default < high


@pytest.mark.parametrize(
    "galore_extra, common, gpus, why",
    [
        (["--galore_proj_quant", "true"], [], 1, "galore_proj_quant"),
        (["--galore_proj_type", "reverse_std"], [], 1, "galore_proj_type"),
        (["--galore_target_modules", "q_proj"], [], 1, "targets"),
        ([], ["--optim", "adamw_bnb_8bit"], 1, "--optim adamw_bnb_8bit"),
        ([], ["--deepspeed", "zero2"], 2, "DeepSpeed"),
    ],
)
def test_what_galore_does_not_model_is_a_full_fine_tune_and_says_so(galore_extra, common, gpus, why):
    plain = estimate(FULL + common, gpus)
    asked = estimate(GALORE + galore_extra + common, gpus)
    assert asked.peak_bytes_per_gpu == plain.peak_bytes_per_gpu
    assert any(why in a and "estimated as a full fine-tune (upper bound)" in a for a in asked.assumptions), (
        asked.assumptions
    )


def test_galore_on_an_moe_model_is_a_full_fine_tune():
    moe = ["--model", "Qwen/Qwen3-30B-A3B", "--tuner_type", "full", "--max_length", "256"]
    assert estimate(moe + ["--use_galore", "true"]).peak_bytes_per_gpu == estimate(moe).peak_bytes_per_gpu


def test_verify_refuses_galore():
    with pytest.raises(UnsupportedStep, match="use_galore"):
        regime_for(parse_sft_args(GALORE), 1)


def test_ms_swift_galore_example_is_estimated_within_ten_percent():
    """examples/train/tuners/galore/train_galore.sh ("# 38GiB"), a calibration row: no longer an
    unmodelled full fine-tune estimate (+91%), but GaLore's."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import estimator_calibration as cal

    rows = [r for r in cal.load_rows(cal.DEFAULT_TSV) if r["train_type"] == "full(galore)"]
    assert len(rows) == 1
    argv, gpus, tags = cal.row_to_argv(rows[0])
    assert argv[argv.index("--use_galore") + 1] == "true" and "unmodelled" not in tags
    measured = float(rows[0]["measured_gib_per_gpu"]) * GIB
    assert abs(estimate(argv, gpus).peak_bytes_per_gpu / measured - 1) <= 0.10


def test_q_galore_in_ms_swift_is_galore_with_8_bit_moments():
    """ms-swift's --galore_quantization swaps only the optimizer (QGaLoreAdamW8bit): one byte per
    AdamW moment, projections and weights as GaLore's; its example ("# 35GiB") within 10%."""
    spec = resolve_model("Qwen/Qwen2.5-7B-Instruct")
    weights, moments, projections = _projected_states(spec, 128)
    rest = spec.llm_params - weights
    galore, q = estimate(GALORE), estimate(GALORE + ["--galore_quantization", "true"])
    assert q.breakdown["weights"] == galore.breakdown["weights"]
    assert q.breakdown["gradients"] == galore.breakdown["gradients"]
    b = q.breakdown
    step = 2 * spec.intermediate_size * spec.hidden_size * 4
    dynamic = b["activations"] + b["logits"] + b["vision"] + b["parallel"]
    expected = (moments + 2 * rest) * 1 + projections * 2 + max(0, step - dynamic)
    assert b["optimizer"] == pytest.approx(expected, abs=4)
    assert any(a.startswith("Q-GaLore (--galore_quantization)") for a in q.assumptions)

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import estimator_calibration as cal

    row = next(r for r in cal.load_rows(cal.DEFAULT_TSV) if r["train_type"] == "full(q-galore)")
    argv, gpus, tags = cal.row_to_argv(row)
    assert argv[argv.index("--galore_quantization") + 1] == "true" and "unmodelled" not in tags
    measured = float(row["measured_gib_per_gpu"]) * GIB
    assert abs(estimate(argv, gpus).peak_bytes_per_gpu / measured - 1) <= 0.10
