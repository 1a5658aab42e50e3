"""FSDP in the estimator (docs/estimator.md §4.6): what ``--fsdp`` shards, what it gathers, what
``offload`` moves to the CPU, and how ms-swift 4.x's ``--fsdp`` values are read."""

from __future__ import annotations

import json

import pytest

from jupyter_quota.estimator import estimate, resolve_model
from jupyter_quota.estimator.fsdp import Fsdp, fsdp_of, states
from jupyter_quota.planner.options import strategies_for
from jupyter_quota.swift import parse_sft_args

MODEL = "Qwen/Qwen2.5-7B-Instruct"
FULL_SHARD = Fsdp(reshard=True, offload=False, activation_checkpointing=True, activation_offload=False, source="t")


def _fsdp(options: str = "full_shard auto_wrap", **config) -> str:
    return json.dumps({"fsdp": options, "fsdp_config": config})


def _gathered(spec) -> float:
    """Two decoder layers and the unresharded lm_head, in bfloat16."""
    return 2 * max(spec.layer_params) * 2 + (spec.lm_head_params or spec.embed_params) * 2


def test_full_shard_keeps_zero3s_sixteen_bytes_per_parameter_split_n_ways():
    params = 7_000_000_000
    for gpus in (1, 2, 4, 8):
        s = states(
            gpus=gpus,
            trained_params=params,
            trained_bytes=4 * params,  # float32 after accelerate's upcast
            frozen_bytes=0,
            whole_bytes=0,
            layer_bytes=1e9,
            tail_bytes=5e8,
            compute_bytes=2 * params,
            layer_gradient_bytes=1e9,
            fsdp=FULL_SHARD,
        )
        # DeepSpeed ZeRO-3's model states: 2 (16-bit weight) + 2 (16-bit gradient) + 12 (fp32 master
        # and AdamW moments) bytes; FSDP: 4 (fp32 weight) + 4 (fp32 gradient) + 8 (moments)
        assert s.weights + s.gradients + s.optimizer == pytest.approx(16 * params / gpus)
        assert s.weights + s.optimizer == pytest.approx(12 * params / gpus)  # ZeRO-3's optimizer partition
        assert s.gathered == 2 * 1e9 + 5e8


def test_full_fine_tune_fsdp_weights_and_moments_equal_zero3s_master_and_moments():
    spec = resolve_model(MODEL)
    # one micro-batch a step: no accumulated unsharded gradients (see the test below)
    base = ["--model", MODEL, "--tuner_type", "full", "--max_length", "8192", "--gradient_accumulation_steps", "1"]
    for gpus in (4, 8):
        fsdp = estimate([*base, "--fsdp", "fsdp2"], gpus).breakdown
        zero3 = estimate([*base, "--deepspeed", "zero3"], gpus).breakdown
        sharded = fsdp["weights"] - _gathered(spec) + fsdp["optimizer"]
        assert sharded == pytest.approx(zero3["optimizer"], abs=4)
        assert sharded == pytest.approx(12 * spec.params / gpus, abs=4)
        # gradients: the float32 shard, plus one whole layer's bfloat16 gradient before its reduce-scatter
        assert fsdp["gradients"] == pytest.approx(4 * spec.params / gpus + 2 * max(spec.layer_params), abs=4)
        assert fsdp["buckets"] == 0  # no DDP reducer: each layer's gradient is reduce-scattered as it is made


def test_gradient_accumulation_keeps_every_trained_parameter_s_unsharded_gradient():
    # HF Trainer runs every micro-batch but a step's last under accelerator.no_sync, which for FSDP2
    # is set_requires_gradient_sync(False): each FSDPParam keeps its unsharded gradient, in the
    # compute dtype, until the step's last backward reduce-scatters it (torch _fsdp_param_group.py
    # post_backward, _fsdp_param.py accumulate_unsharded_grad_if_needed)
    spec = resolve_model(MODEL)
    base = ["--model", MODEL, "--max_length", "2048", "--fsdp", "fsdp2"]
    for tuner, trained in (("full", spec.params), ("lora", None)):
        one = estimate([*base, "--tuner_type", tuner, "--gradient_accumulation_steps", "1"], 8)
        four = estimate([*base, "--tuner_type", tuner, "--gradient_accumulation_steps", "4"], 8)
        if trained is None:  # LoRA: the adapters (float32, 4 bytes each beside the bfloat16 base on one GPU)
            single = estimate(["--model", MODEL, "--max_length", "2048", "--tuner_type", "lora"])
            trained = (single.breakdown["weights"] - spec.params * 2) / 4
        extra = four.breakdown["gradients"] - one.breakdown["gradients"]
        assert extra == pytest.approx(2 * trained, rel=0.01, abs=2**20)
        assert any("unsharded gradient" in n for n in four.assumptions)
        assert not any("unsharded gradient" in n for n in one.assumptions)


def test_more_gpus_shard_more_and_ddp_does_not():
    # one micro-batch a step: with accumulation FSDP also keeps the unsharded gradients (test above)
    base = ["--model", MODEL, "--tuner_type", "full", "--gradient_accumulation_steps", "1"]
    fsdp = [estimate([*base, "--fsdp", "fsdp2"], g).peak_bytes_per_gpu for g in (2, 4, 8)]
    ddp = [estimate(base, g).peak_bytes_per_gpu for g in (2, 4, 8)]
    assert fsdp[0] > fsdp[1] > fsdp[2]
    assert ddp[0] == ddp[1] == ddp[2]
    assert fsdp[0] < ddp[0]


def test_lora_under_fsdp_shards_the_frozen_base_too():
    spec = resolve_model(MODEL)
    two = estimate(["--model", MODEL, "--fsdp", "fsdp2"], 2)
    four = estimate(["--model", MODEL, "--fsdp", "fsdp2"], 4)
    single = estimate(["--model", MODEL], 1)
    lora_bytes = single.breakdown["weights"] - spec.params * 2  # float32 adapters beside the base
    assert two.breakdown["weights"] == pytest.approx((spec.params * 2 + lora_bytes) / 2 + _gathered(spec), abs=4)
    assert two.breakdown["weights"] - four.breakdown["weights"] == pytest.approx(
        (spec.params * 2 + lora_bytes) / 4, abs=4
    )
    assert two.breakdown["weights"] < single.breakdown["weights"]


def test_offload_leaves_only_gathered_layers_on_the_gpu():
    spec = resolve_model(MODEL)
    base = ["--model", MODEL, "--tuner_type", "full", "--gradient_accumulation_steps", "1"]
    offload = {g: estimate([*base, "--fsdp", _fsdp("full_shard auto_wrap offload")], g) for g in (2, 8)}
    for e in offload.values():
        assert e.breakdown["weights"] == pytest.approx(_gathered(spec), abs=4)
        assert e.breakdown["gradients"] == pytest.approx(2 * max(spec.layer_params), abs=4)
        assert e.breakdown["optimizer"] == 0
        assert any("CPUOffloadPolicy" in a for a in e.assumptions)
    assert offload[2].peak_bytes_per_gpu == offload[8].peak_bytes_per_gpu  # nothing sharded stays on the GPU
    assert offload[8].peak_bytes_per_gpu < estimate([*base, "--fsdp", "fsdp2"], 8).peak_bytes_per_gpu


def test_shard_grad_op_keeps_the_whole_model_gathered():
    spec = resolve_model(MODEL)
    e = estimate(["--model", MODEL, "--tuner_type", "full", "--fsdp", _fsdp("shard_grad_op auto_wrap")], 4)
    assert e.breakdown["weights"] == pytest.approx(4 * spec.params / 4 + 2 * spec.params, abs=4)


def test_fsdp2_preset_checkpoints_even_with_gradient_checkpointing_false():
    off = ["--gradient_checkpointing", "false", "--max_length", "4096"]
    preset = estimate(["--model", MODEL, *off, "--fsdp", "fsdp2"], 2)
    plain = estimate(["--model", MODEL, *off, "--fsdp", _fsdp(activation_checkpointing=False)], 2)
    assert preset.breakdown["activations"] < plain.breakdown["activations"] / 5
    assert any("activation_checkpointing" in a for a in preset.assumptions)


def test_activation_cpu_offload_keeps_two_layers_of_saved_activations():
    base = ["--model", MODEL, "--max_length", "8192"]
    kept = estimate([*base, "--fsdp", _fsdp(activation_checkpointing=True)], 2)
    moved = estimate([*base, "--fsdp", _fsdp(activation_checkpointing=True, activation_cpu_offload=True)], 2)
    assert moved.breakdown["activations"] < kept.breakdown["activations"]
    assert any("activation_cpu_offload" in a for a in moved.assumptions)


def test_qlora_uint8_weights_stay_whole_and_bf16_storage_shards_them():
    q = ["--model", MODEL, "--quant_method", "bnb", "--quant_bits", "4"]
    uint8 = [estimate([*q, "--fsdp", "fsdp2"], g).breakdown["weights"] for g in (2, 4)]
    bf16 = [
        estimate([*q, "--bnb_4bit_quant_storage", "bfloat16", "--fsdp", "fsdp2"], g).breakdown["weights"]
        for g in (2, 4)
    ]
    spec = resolve_model(MODEL)
    sixteen_bit = (spec.params - spec.linear_params) * 2
    adapters = estimate(["--model", MODEL]).breakdown["weights"] - spec.params * 2  # float32 LoRA
    # doubling the GPUs halves only the 16-bit part (embeddings, lm_head, norms) and the adapters
    # when the 4-bit weights stay whole
    assert uint8[0] - uint8[1] == pytest.approx((sixteen_bit + adapters) / 4, abs=4)
    assert bf16[0] - bf16[1] > uint8[0] - uint8[1]
    assert bf16[1] < uint8[1]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("fsdp2", (True, False, True)),
        (_fsdp("full_shard auto_wrap offload"), (True, True, False)),
        (
            json.dumps({"fsdp_config": {"fsdp_offload_params": True, "fsdp_reshard_after_forward": False}}),
            (False, True, False),
        ),
        ("full_shard auto_wrap offload", (True, True, False)),
        ("/configs/fsdp2_offload.json", (True, True, True)),
    ],
)
def test_fsdp_values_as_ms_swift_reads_them(value, expected):
    fsdp = fsdp_of(parse_sft_args(["--model", MODEL, "--fsdp", value]))
    assert (fsdp.reshard, fsdp.offload, fsdp.activation_checkpointing) == expected


def test_no_shard_and_deepspeed_are_not_fsdp():
    assert fsdp_of(parse_sft_args(["--model", MODEL, "--fsdp", _fsdp("no_shard")])) is None
    with_ds = estimate(["--model", MODEL, "--fsdp", "fsdp2", "--deepspeed", "zero3"], 2)
    assert not any("FSDP full_shard" in a for a in with_ds.assumptions)


def test_a_config_file_is_read_by_name_only_and_says_so():
    e = estimate(["--model", MODEL, "--fsdp", "/configs/my_fsdp.json"], 2)
    assert any("not read: full_shard assumed" in a for a in e.assumptions)
    assert not any(a.startswith("not modelled (passed through)") and "--fsdp" in a for a in e.assumptions)


def test_planner_keeps_fsdp_and_never_adds_deepspeed_beside_it():
    from jupyter_quota.planner.options import Method

    method = Method("full", (), 0, "full")
    assert strategies_for(4, method, None, fsdp=True) == [None]
    assert "zero3" in strategies_for(4, method, None)


def test_an_fsdp_offload_plan_needs_host_memory_for_the_float32_states():
    from jupyter_quota.planner.resources import offload_host_bytes

    params = 7_000_000_000
    offload = parse_sft_args(["--model", MODEL, "--fsdp", _fsdp("full_shard auto_wrap offload")])
    need, formula = offload_host_bytes(offload, params, 4)
    assert need == int(params * 16 * 1.5) and formula.startswith("FSDP offload")
    assert offload_host_bytes(parse_sft_args(["--model", MODEL, "--fsdp", "fsdp2"]), params, 4) == (0, "")


def test_the_regime_is_fsdp_only_where_the_estimate_shards():
    from jupyter_quota.estimator.ranges import regime_of

    spec = resolve_model(MODEL)

    def parallelism(*extra):
        return regime_of(spec, parse_sft_args(["--model", MODEL, *extra]), 2)[1]

    assert parallelism("--fsdp", "fsdp2") == "fsdp"
    assert parallelism("--fsdp", _fsdp("no_shard")) == "ddp"
    assert parallelism("--fsdp", "fsdp2", "--deepspeed", "zero3") == "zero3"
