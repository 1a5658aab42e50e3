"""The serving estimator (``estimator/serving.py``, ``estimator/kvcache.py``) against the engines'
own arithmetic: KV bytes per token, vLLM v1's blocks, tokens and concurrency
(``vllm/v1/core/kv_cache_utils.py``), SGLang's ``profile_max_num_token``; and the refusals.

The expected figures are worked by hand from each model's config.json in the comments, the way
the engines compute them (docs/serving-estimate.md), not read back from the code under test.
"""

from __future__ import annotations

import pytest

from jupyter_quota.deploy import parse_deploy_args
from jupyter_quota.errors import InvalidRequest
from jupyter_quota.estimator.kvcache import KvLayout, kv_layout, vllm_cache
from jupyter_quota.estimator.model import resolve_model
from jupyter_quota.estimator.serving import SERVE_KEYS, estimate_serve

GIB = 1024**3


@pytest.mark.parametrize(
    "model, tp, expected",
    [
        # dense GQA: 36 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes (bf16) = 147,456 B
        ("Qwen/Qwen3-8B", 1, 36 * 8 * 128 * 2 * 2),
        ("Qwen/Qwen3-8B", 2, 36 * 4 * 128 * 2 * 2),
        # 8 KV heads over 16 ranks: vLLM replicates, at least one head per rank
        ("meta-llama/Llama-3.1-70B", 16, 80 * 1 * 128 * 2 * 2),
        # MoE: 48 layers x 4 KV heads x 128 x 2 x 2
        ("Qwen/Qwen3-30B-A3B", 1, 48 * 4 * 128 * 2 * 2),
        # sliding window (every layer counted per token): 34 layers x 4 x 256 x 2 x 2
        ("google/gemma-3-4b-it", 1, 34 * 4 * 256 * 2 * 2),
        # VL: the language model's 28 layers x 4 x 128 x 2 x 2
        ("Qwen/Qwen2.5-VL-7B-Instruct", 1, 28 * 4 * 128 * 2 * 2),
        # hybrid linear attention: only 12 of 48 layers (every 4th) cache K and V: 12 x 2 x 256 x 2 x 2
        ("Qwen/Qwen3-Next-80B-A3B-Instruct", 1, 12 * 2 * 256 * 2 * 2),
    ],
)
def test_kv_bytes_per_token_follow_layers_kv_heads_head_dim_two_and_dtype(model, tp, expected):
    assert kv_layout(resolve_model(model), 2, tp).bytes_per_token == expected


def test_sliding_window_layers_come_from_each_family_pattern():
    gemma3 = resolve_model("google/gemma-3-4b-it")
    assert (gemma3.sliding_window, gemma3.sliding_window_layers) == (1024, 29)  # one full layer in six
    gemma2 = resolve_model("google/gemma-2-9b")
    assert (gemma2.sliding_window, gemma2.sliding_window_layers) == (4096, 21)  # alternating
    oss = resolve_model("openai/gpt-oss-20b")
    assert (oss.sliding_window, oss.sliding_window_layers) == (128, 12)
    assert resolve_model("Qwen/Qwen3-8B").sliding_window_layers == 0


def test_vllm_blocks_tokens_and_concurrency_of_a_dense_model():
    layout = kv_layout(resolve_model("Qwen/Qwen3-8B"), 2)
    kv = 20 * GIB
    cache = vllm_cache(layout, kv, 8192, 8192)
    # get_num_blocks: memory // page // layers, page = 16 tokens x 2 x 8 x 128 x 2 bytes = 65,536
    assert cache.num_blocks == 20 * GIB // 65536 // 36 == 9102
    assert cache.tokens == 9102 * 16
    # get_max_concurrency_for_kv_cache_config: blocks / cdiv(8192, 16)
    assert cache.blocks_per_request == 512
    assert cache.max_concurrency == pytest.approx(9102 / 512)


def test_vllm_hybrid_grouping_of_sliding_and_full_layers():
    """Gemma 3 4B: 5 full + 29 sliding layers; groups of 5 (29 > 1.5 x 5): 1 full group and
    6 sliding ones (the last padded), blocks = memory // page // 5."""
    layout = kv_layout(resolve_model("google/gemma-3-4b-it"), 2)
    page = 16 * 2 * 4 * 256 * 2
    cache = vllm_cache(layout, 10 * GIB, 32768, 8192)
    assert cache.num_blocks == 10 * GIB // page // 5
    assert cache.tokens == cache.num_blocks // 7 * 16
    # full: cdiv(32768, 16) = 2048; sliding: cdiv(min(1023 + 8192, 32768), 16) + 1 = 577 each
    assert cache.blocks_per_request == 2048 + 6 * 577
    # the window saves: the same memory as plain full attention would hold fewer sequences
    plain = vllm_cache(KvLayout(34, 0, 0, layout.layer_bytes_per_token), 10 * GIB, 32768, 8192)
    assert cache.max_concurrency > plain.max_concurrency


def test_vllm_takes_its_fraction_and_gives_the_kv_cache_the_rest():
    est = estimate_serve(
        [
            "--model",
            "Qwen/Qwen3-8B",
            "--infer_backend",
            "vllm",
            "--vllm_gpu_memory_utilization",
            "0.5",
            "--vllm_max_model_len",
            "8192",
        ],
        gpu_memory=80 * GIB,
    )
    assert set(est.breakdown) == set(SERVE_KEYS)
    assert est.peak_bytes_per_gpu == sum(est.breakdown.values()) == int(0.5 * 80 * GIB)
    assert est.kv_cache_bytes_per_token == 147456
    # blocks from the KV share by vLLM's own rule
    assert est.kv_cache_blocks == est.breakdown["kvCache"] // 65536 // 36
    assert est.max_concurrent_sequences == int(est.kv_cache_blocks / 512)
    assert est.refusal is None


def test_vllm_refuses_when_one_sequence_does_not_fit():
    est = estimate_serve(
        ["--model", "Qwen/Qwen3-8B", "--infer_backend", "vllm", "--vllm_gpu_memory_utilization", "0.75"],
        gpu_memory=24 * GIB,
    )
    # 18 GiB less 16.4 GB of weights leaves under a GiB; 40,960 tokens need 5.6 GiB
    assert est.max_concurrent_sequences == 0 and "lower --vllm_max_model_len" in est.refusal


def test_sglang_tokens_are_kv_memory_over_the_cell_size():
    est = estimate_serve(
        [
            "--model",
            "Qwen/Qwen3-8B",
            "--infer_backend",
            "sglang",
            "--sglang_mem_fraction_static",
            "0.8",
            "--sglang_context_length",
            "16384",
        ],
        gpu_memory=80 * GIB,
    )
    kv = int(0.8 * 80 * GIB) - est.breakdown["weights"] - est.breakdown["reserve"]
    assert est.breakdown["kvCache"] == kv
    assert est.kv_cache_tokens == kv // 147456
    assert est.max_concurrent_sequences == est.kv_cache_tokens // 16384


def test_transformers_preallocates_nothing_and_grows_with_the_batch():
    one = estimate_serve(["--model", "Qwen/Qwen2.5-0.5B-Instruct", "--max_length", "2048"])
    four = estimate_serve(["--model", "Qwen/Qwen2.5-0.5B-Instruct", "--max_length", "2048", "--max_batch_size", "4"])
    assert one.backend == "transformers" and one.max_concurrent_sequences == 1
    assert one.breakdown["kvCache"] == 12288 * 2048
    assert four.breakdown["kvCache"] == 4 * one.breakdown["kvCache"]
    assert one.peak_bytes_per_gpu < 2 * GIB


def test_tensor_parallel_splits_weights_and_kv_heads():
    one = estimate_serve(["--model", "Qwen/Qwen3-8B", "--infer_backend", "vllm"])
    two = estimate_serve(["--model", "Qwen/Qwen3-8B", "--infer_backend", "vllm", "--vllm_tensor_parallel_size", "2"])
    assert two.gpus == 2 and two.kv_cache_bytes_per_token == one.kv_cache_bytes_per_token // 2
    assert two.breakdown["weights"] < 0.55 * one.breakdown["weights"]
    assert two.max_concurrent_sequences > one.max_concurrent_sequences


def test_unmerged_adapters_cost_rank_sized_buffers_and_merged_ones_nothing():
    base = ["--model", "Qwen/Qwen3-8B", "--infer_backend", "vllm", "--adapters", "out/checkpoint-10"]
    r16 = estimate_serve(base)
    r64 = estimate_serve([*base, "--vllm_max_lora_rank", "64"])
    merged = estimate_serve([*base, "--merge_lora", "true"])
    assert r16.breakdown["adapters"] > 0 and r64.breakdown["adapters"] == pytest.approx(
        4 * r16.breakdown["adapters"], rel=1e-6
    )
    assert merged.breakdown["adapters"] == 0


def test_quantization_shrinks_the_weights():
    bf16 = estimate_serve(["--model", "Qwen/Qwen3-8B", "--infer_backend", "vllm"])
    fp8 = estimate_serve(["--model", "Qwen/Qwen3-8B", "--infer_backend", "vllm", "--vllm_quantization", "fp8"])
    awq = estimate_serve(["--model", "Qwen/Qwen3-8B-AWQ", "--infer_backend", "vllm"])
    assert awq.breakdown["weights"] < fp8.breakdown["weights"] < 0.65 * bf16.breakdown["weights"]
    assert fp8.breakdown["kvCache"] > bf16.breakdown["kvCache"]


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--vllm_max_model_len", "100000"], "longer than Qwen/Qwen3-8B's context of 40960"),
        (["--vllm_gpu_memory_utilization", "1.2"], "at most 1"),
        (["--vllm_gpu_memory_utilization", "0"], "above 0"),
        (["--vllm_tensor_parallel_size", "3"], "does not divide Qwen/Qwen3-8B's 32 attention heads"),
        (["--infer_backend", "lmdeploy"], "lmdeploy is not modelled"),
        (["--vllm_max_num_seqs", "0"], "at least 1"),
        (["--adapters", "a", "b"], "serves one adapter"),
    ],
)
def test_bad_deploy_arguments_are_refused_with_what_to_do(argv, words):
    with pytest.raises(InvalidRequest) as refused:
        estimate_serve(["--model", "Qwen/Qwen3-8B", "--infer_backend", "vllm", *argv])
    assert words in str(refused.value)


def test_older_names_are_translated_with_a_note():
    args = parse_deploy_args(
        ["swift", "deploy", "--model", "Qwen/Qwen3-8B", "--infer_backend", "pt", "--max_model_len", "4096"]
    )
    assert args.infer_backend == "transformers" and args.extra == ()
    assert "--vllm_max_model_len" in args.to_argv() and any("pt is deprecated" in n for n in args.notes)


# -- the serving planner (planner/serve.py) ------------------------------------------------------


def test_plan_keeps_an_asked_context_and_quantizes_to_fit_a_small_leftover():
    from jupyter_quota.planner.serve import plan_serve

    plan = plan_serve(["--model", "Qwen/Qwen3-8B", "--vllm_max_model_len", "40960"], 1, 20 * GIB)
    args = plan.recommended["args"]
    assert "--vllm_quantization" in args and args[args.index("--vllm_max_model_len") + 1] == "40960"
    assert any("fp8 weights" in n for n in plan.notes)
    assert plan.rejected[0]["plan"]["quantization"] is None and plan.rejected[0]["reason"]


def test_plan_lowers_the_context_for_an_asked_concurrency():
    from jupyter_quota.planner.serve import plan_serve

    plan = plan_serve(["--model", "Qwen/Qwen3-8B", "--vllm_max_num_seqs", "16"], 1, 24 * GIB)
    est = plan.recommended["estimate"]
    assert est["maxConcurrentSequences"] >= 16 and est["maxModelLen"] < 40960
    assert any("max_model_len lowered from 40960" in n for n in plan.notes)


def test_plan_without_gpus_serves_with_transformers_and_merges_one_adapter():
    from jupyter_quota.planner.serve import plan_serve

    cpu = plan_serve(["--model", "Qwen/Qwen2.5-0.5B-Instruct"], 0, 24 * GIB)
    assert cpu.recommended["args"][-1] == "transformers" and cpu.recommended["gpus"] == 0
    merged = plan_serve(["--model", "Qwen/Qwen3-8B", "--adapters", "out/checkpoint-10"], 1, 80 * GIB)
    assert "--merge_lora" in merged.recommended["args"]


def test_plan_says_nothing_fits_with_every_reason():
    from jupyter_quota.planner.serve import plan_serve

    plan = plan_serve(["--model", "Qwen/Qwen3-32B", "--vllm_max_num_seqs", "64"], 1, 24 * GIB)
    assert plan.recommended is None and plan.rejected and all(r["reason"] for r in plan.rejected)
    assert "nothing fits" in plan.notes[-1]


def test_sglang_splits_a_sliding_window_model_pool_by_its_token_ratio():
    """gpt-oss-20b: 12 full + 12 window layers; the full layers' tokens T solve
    T x 12 + 0.8 x T x 12 = the profiled tokens x 24 (set_num_tokens_hybrid_swa)."""
    from jupyter_quota.estimator.kvcache import sglang_tokens

    layout = kv_layout(resolve_model("openai/gpt-oss-20b"), 2)
    profiled = 10 * GIB // layout.bytes_per_token
    assert sglang_tokens(layout, 10 * GIB) == int(profiled * 24 / (12 + 0.8 * 12))
    dense = kv_layout(resolve_model("Qwen/Qwen3-8B"), 2)
    assert sglang_tokens(dense, 10 * GIB) == 10 * GIB // 147456


def test_vllm_figures_match_a_logged_start():
    """A public vLLM v1 start of Qwen2.5-7B-Instruct-AWQ (--max-model-len 32768) logged
    'Available KV cache memory: 8.0 GiB', 'GPU KV cache size: 149,712 tokens' and 'Maximum
    concurrency for 32,768 tokens per request: 4.57x' (docs/serving-estimate.md §5). From the
    same memory (8.0 GiB, rounded to 0.01 GiB in the log) the arithmetic gives the same figures,
    within that rounding."""
    layout = kv_layout(resolve_model("Qwen/Qwen2.5-7B-Instruct-AWQ"), 2)
    assert layout.bytes_per_token == 57344  # 28 layers x 4 KV heads x 128 x 2 x 2
    low, high = (vllm_cache(layout, int(gib * GIB), 32768, 2048) for gib in (7.995, 8.005))
    assert low.tokens <= 149712 <= high.tokens
    assert f"{low.max_concurrency:.2f}" <= "4.57" <= f"{high.max_concurrency:.2f}"


def test_published_kv_bytes_per_token():
    """Figures people publish: Qwen3-8B 147,456 B (the issue), Llama-3.1-8B 128 KiB, Qwen3-30B-A3B
    (and Qwen3-VL-30B-A3B) 96 KiB, Qwen3-VL-4B 144 KiB."""
    published = {
        "Qwen/Qwen3-8B": 147456,
        "meta-llama/Llama-3.1-8B-Instruct": 128 * 1024,
        "Qwen/Qwen3-30B-A3B": 96 * 1024,
        "Qwen/Qwen3-VL-30B-A3B-Instruct": 96 * 1024,
        "Qwen/Qwen3-VL-4B-Instruct": 144 * 1024,
    }
    for model, size in published.items():
        assert kv_layout(resolve_model(model), 2).bytes_per_token == size, model
