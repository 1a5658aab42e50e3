"""HQQ (--quant_method hqq, docs/estimator.md §3, §5.1) as ms-swift runs it: transformers' HqqConfig
(nbits, group_size 64, axis 1) quantizes every linear but lm_head, and hqq's default backend keeps
each quantized linear's input for the backward pass; and a LoRA run on a pre-quantized checkpoint is
QLoRA's regime."""

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


def test_hqq_keeps_each_quantized_linear_s_input_as_bitsandbytes_does():
    # hqq's default backend (HQQBackend.PYTORCH = forward_pytorch_backprop, hqq/core/quantize.py)
    # is HQQMatmulNoCacheMul: it saves the input and dequantizes the weight again in the backward
    # pass, as bitsandbytes' MatMul4Bit keeps its input; a frozen 16-bit linear keeps none
    off = ["--gradient_checkpointing", "false"]
    hqq = estimate(HQQ + off).breakdown["activations"]
    bnb = estimate(LORA + off + ["--quant_method", "bnb", "--quant_bits", "4"]).breakdown["activations"]
    lora = estimate(LORA + off).breakdown["activations"]
    assert hqq == bnb > lora
    notes = " ".join(estimate(HQQ).assumptions)
    assert "HQQ keeps each quantized linear's input" in notes


def test_lora_on_a_pre_quantized_checkpoint_is_the_qlora_regime():
    est = estimate(["--model", "Qwen/Qwen2.5-7B-Instruct-AWQ", "--tuner_type", "lora"])
    assert regime_of(est.model, est.args, 1)[0] == "qlora"
    assert "qlora/" in est.range.regime  # its range comes from QLoRA's measured rows
