"""The table of docs/serving-estimate.md §6: the serving estimate on seven catalog models (dense,
GQA, MoE, sliding window, VL, hybrid linear attention), by each engine's own arithmetic.

    PYTHONPATH=. .venv/bin/python benchmarks/serving_table.py

Part 1 holds the KV budget fixed (20 GiB on one GPU, bf16 KV, max_model_len 32768, vLLM's
max_num_batched_tokens 8192) so only the models' KV layouts differ: bytes per token, vLLM's blocks,
tokens and 'Maximum concurrency', SGLang's max_total_num_tokens. Part 2 is the whole estimate of
``swift deploy --infer_backend vllm --vllm_max_model_len 32768`` on an 80 GiB GPU at the default
gpu_memory_utilization 0.9.
"""

from __future__ import annotations

from jupyter_quota.estimator.kvcache import kv_layout, sglang_tokens, vllm_cache
from jupyter_quota.estimator.model import resolve_model
from jupyter_quota.estimator.serving import estimate_serve

GIB = 1024**3
MODELS = [
    ("Qwen/Qwen3-8B", "dense, GQA 32/8"),
    ("meta-llama/Llama-3.1-8B", "dense, GQA 32/8"),
    ("Qwen/Qwen3-30B-A3B", "MoE, GQA 32/4"),
    ("google/gemma-3-4b-it", "sliding window 1024 (5:1), VL"),
    ("openai/gpt-oss-20b", "sliding window 128 (1:1), MoE"),
    ("Qwen/Qwen2.5-VL-7B-Instruct", "VL, GQA 28/4"),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", "hybrid linear (1 in 4 full), MoE"),
]
KV_BUDGET, MAX_LEN, BATCHED = 20 * GIB, 32768, 8192


def main() -> None:
    print(f"KV budget {KV_BUDGET / GIB:g} GiB, max_model_len {MAX_LEN}, batched tokens {BATCHED}, bf16 KV")
    print(
        "| model | kind | full+window layers | KV B/token | vLLM blocks | vLLM tokens | vLLM concurrency "
        "| SGLang tokens |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for name, kind in MODELS:
        layout = kv_layout(resolve_model(name), 2)
        cache = vllm_cache(layout, KV_BUDGET, MAX_LEN, BATCHED)
        print(
            f"| {name} | {kind} | {layout.full_layers}+{layout.sliding_layers} | {layout.bytes_per_token:,} | "
            f"{cache.num_blocks:,} | {cache.tokens:,} | {cache.max_concurrency:.2f} | "
            f"{sglang_tokens(layout, KV_BUDGET):,} |"
        )
    print()
    print("swift deploy --infer_backend vllm --vllm_max_model_len 32768 on one 80 GiB GPU (utilization 0.9)")
    print("| model | weights GiB | activations GiB | KV cache GiB | KV tokens | sequences of 32768 |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, _ in MODELS[:6]:
        est = estimate_serve(
            ["--model", name, "--infer_backend", "vllm", "--vllm_max_model_len", str(MAX_LEN)], gpu_memory=80 * GIB
        )
        b = est.breakdown
        print(
            f"| {name} | {b['weights'] / GIB:.2f} | {b['activations'] / GIB:.2f} | {b['kvCache'] / GIB:.2f} | "
            f"{est.kv_cache_tokens:,} | {est.max_concurrent_sequences} |"
        )


if __name__ == "__main__":
    main()
