"""LISA (ms-swift 4.x --lisa_activated_layers): gradients and the optimizer step for the active
layers only, every parameter's AdamW states (an upper bound); under DeepSpeed a full fine-tune
(docs/estimator.md §4.8)."""

from jupyter_quota.estimator import estimate, resolve_model

FULL = ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "full", "--max_length", "256"]


def test_lisa_holds_gradients_of_its_active_layers_and_every_state():
    spec = resolve_model("Qwen/Qwen2.5-7B-Instruct")
    full, lisa = estimate(FULL), estimate(FULL + ["--lisa_activated_layers", "2"])
    # swift/callbacks/lisa.py freezes every decoder layer but 2; embeddings, lm_head and the final
    # norm stay trained: by hand, what holds a gradient is all parameters less 26 layers
    active = spec.params - (spec.num_layers - 2) * spec.layer_params[0]
    assert lisa.breakdown["gradients"] == active * 2
    assert lisa.breakdown["weights"] == full.breakdown["weights"]
    # AdamW's moments of every parameter (kept once a layer has been active), the foreach step's
    # buffer over the active parameters only
    dynamic = sum(lisa.breakdown[k] for k in ("activations", "logits", "vision", "parallel"))
    assert lisa.breakdown["optimizer"] == spec.params * 4 + max(0, active * 2 - dynamic)
    assert full.breakdown["optimizer"] > lisa.breakdown["optimizer"]
    assert any(a.startswith("LISA: 2 of 28 decoder layers") for a in lisa.assumptions)
    assert not any("not modelled (passed through)" in a for a in lisa.assumptions)


def test_more_active_layers_more_memory_and_all_layers_is_the_full_fine_tune():
    two = estimate(FULL + ["--lisa_activated_layers", "2"]).peak_bytes_per_gpu
    eight = estimate(FULL + ["--lisa_activated_layers", "8"]).peak_bytes_per_gpu
    every = estimate(FULL + ["--lisa_activated_layers", "28"]).peak_bytes_per_gpu
    assert two < eight < every == estimate(FULL).peak_bytes_per_gpu


def test_lisa_under_deepspeed_or_on_lora_is_not_modelled():
    zero = FULL + ["--deepspeed", "zero2"]
    asked = estimate(zero + ["--lisa_activated_layers", "2"], 2)
    assert asked.peak_bytes_per_gpu == estimate(zero, 2).peak_bytes_per_gpu
    assert any(a.startswith("LISA under DeepSpeed or FSDP is not modelled") for a in asked.assumptions)
    lora = ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max_length", "256"]
    assert estimate(lora + ["--lisa_activated_layers", "2"]).peak_bytes_per_gpu == estimate(lora).peak_bytes_per_gpu
