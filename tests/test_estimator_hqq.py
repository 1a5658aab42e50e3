"""HQQ (--quant_method hqq, docs/estimator.md §3, §5.1) as ms-swift runs it: transformers' HqqConfig
(nbits, group_size 64, axis 1) quantizes every linear but lm_head, and hqq's default PyTorch backend
keeps each linear's dequantized weight for the backward pass, not its input; and a LoRA run on a
pre-quantized checkpoint is QLoRA's regime."""

from jupyter_quota.estimator import estimate, resolve_model
from jupyter_quota.estimator.ranges import regime_of

MODEL = "Qwen/Qwen2.5-7B-Instruct"
LORA = ["--model", MODEL, "--tuner_type", "lora", "--max_length", "2048", "--torch_dtype", "bfloat16"]
HQQ = LORA + ["--quant_method", "hqq", "--quant_bits", "4"]


def test_hqq_weights_are_packed_4_bit_plus_a_16_bit_scale_and_zero_per_group_of_64():
    spec = resolve_model(MODEL)
    rest = spec.params - spec.linear_params  # embeddings, lm_head, norms, biases stay bfloat16
    hqq = estimate(HQQ)
    lora = estimate(LORA)
    adapters = lora.breakdown["weights"] - spec.params * 2
    expected = spec.linear_params * (0.5 + 2 * 2 / 64) + rest * 2 + adapters
    assert abs(hqq.breakdown["weights"] - expected) <= 1
    notes = " ".join(hqq.assumptions)
    assert "HQQ 4-bit" in notes and "bnb" not in notes


def test_hqq_keeps_each_layer_s_dequantized_weights_not_the_linears_inputs():
    # without checkpointing every layer keeps its linears' dequantized bfloat16 weights (the
    # matmul's saved operand), where a frozen 16-bit linear keeps nothing and bitsandbytes its input
    spec = resolve_model(MODEL)
    off = ["--gradient_checkpointing", "false"]
    hqq = estimate(HQQ + off).breakdown["activations"]
    lora = estimate(LORA + off).breakdown["activations"]
    assert hqq - lora == spec.linear_params * 2


def test_lora_on_a_pre_quantized_checkpoint_is_the_qlora_regime():
    est = estimate(["--model", "Qwen/Qwen2.5-7B-Instruct-AWQ", "--tuner_type", "lora"])
    assert regime_of(est.model, est.args, 1)[0] == "qlora"
    assert "qlora/" in est.range.regime  # its range comes from QLoRA's measured rows
