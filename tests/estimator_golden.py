"""The estimator's golden cases: a broad set of inputs and the exact outputs recorded for them.

``tests/data/estimator_golden.json`` holds, for every case, the breakdown (bytes), the peak and the
assumptions ``estimate`` returned when the file was written; ``tests/test_estimator_golden.py``
checks that the estimator still returns exactly those. The cases: every catalog model under each
tuner (LoRA, QLoRA 4/8-bit, full, LLaMA Pro, ...) and a range of lengths, batches, GPU counts,
DeepSpeed configs, kernels and dtypes; the argvs of ``tests/test_estimator.py``; every row of
``benchmarks/data/estimator_calibration.tsv``; a few odd spellings; and small config.json models (float32, MoE with
shared experts and dense leading layers, a vision tower) that the catalog lacks.

Regenerate only when an estimate is meant to change, and say why in the commit:
``PYTHONPATH=$PWD python tests/estimator_golden.py``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jupyter_quota.estimator import BREAKDOWN_KEYS, catalog, estimate  # noqa: E402

GOLDEN = ROOT / "tests" / "data" / "estimator_golden.json"
CALIBRATION = ROOT / "benchmarks" / "data" / "estimator_calibration.tsv"

#: tuner settings applied to every model
METHODS = {
    "lora": [],
    "qlora4": ["--quant_method", "bnb", "--quant_bits", "4"],
    "qlora4-fp4": [
        "--quant_method",
        "bnb",
        "--quant_bits",
        "4",
        "--bnb_4bit_quant_type",
        "fp4",
        "--bnb_4bit_use_double_quant",
        "false",
    ],
    "qlora8": ["--quant_method", "bnb", "--quant_bits", "8"],
    "full": ["--tuner_type", "full"],
    "llamapro": ["--tuner_type", "llamapro", "--llamapro_num_new_blocks", "2"],
    "lisa": ["--tuner_type", "lisa"],
    "vera": ["--tuner_type", "vera"],  # a tuner not modelled: estimated as LoRA
    "full-qlora4": ["--tuner_type", "full", "--quant_method", "bnb", "--quant_bits", "4"],  # quantization dropped
}

#: every catalog model is estimated under these methods and settings (indices into SETTINGS) ...
CORE_METHODS = ("lora", "qlora4", "qlora8", "full")
CORE_SETTINGS = (0, 2, 4, 6, 9)
#: ... and these (dense with GQA, MoE, VLMs, eager-only Qwen-VL, tied embeddings, ChatGLM) under all of them
REPRESENTATIVE = {
    "Qwen/Qwen2.5-7B",
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen-VL-Chat",
    "Qwen/Qwen2.5-VL-7B-Instruct",
    "mistralai/Mixtral-8x7B-v0.1",
    "google/gemma-2b",
    "THUDM/chatglm3-6b",
}

#: (extra argv, gpus, device): lengths, batches, parallelism, kernels, dtypes, trainable extras
SETTINGS = [
    ([], 1, "cuda"),  # no --max_length: the default token count and its note
    (
        [
            "--max_length",
            "4096",
            "--per_device_train_batch_size",
            "2",
            "--gradient_checkpointing",
            "false",
            "--attn_impl",
            "eager",
        ],
        1,
        "cuda",
    ),
    (
        [
            "--max_length",
            "2048",
            "--per_device_train_batch_size",
            "4",
            "--attn_impl",
            "flash_attn",
            "--use_liger_kernel",
            "true",
            "--packing",
            "true",
        ],
        2,
        "cuda",
    ),
    (["--max_length", "1024", "--deepspeed", "zero2", "--padding_free", "true"], 4, "cuda"),
    (["--max_length", "2048", "--deepspeed", "zero3"], 4, "cuda"),
    (["--max_length", "8192", "--deepspeed", "zero2_offload"], 2, "cuda"),
    (["--max_length", "2048", "--deepspeed", "zero3_offload", "--gradient_checkpointing", "false"], 8, "cuda"),
    (["--max_length", "512", "--torch_dtype", "float32"], 1, "cpu"),
    (
        [
            "--max_length",
            "2048",
            "--sequence_parallel_size",
            "2",
            "--optim",
            "adamw_bnb_8bit",
            "--lora_dropout",
            "0",
            "--lora_rank",
            "64",
            "--freeze_vit",
            "false",
            "--deepspeed",
            "zero3",
            "--gradient_checkpointing",
            "false",
        ],
        2,
        "cuda",
    ),
    (
        [
            "--max_length",
            "3000",
            "--modules_to_save",
            "embed_tokens",
            "lm_head",
            "--target_modules",
            "q_proj",
            "v_proj",
            "--attn_impl",
            "sdpa",
            "--torch_dtype",
            "float16",
        ],
        1,
        "cuda",
    ),
    # one micro-batch a step: the gradients are made during the backward pass (docs/estimator.md §4.1)
    (["--max_length", "8192", "--gradient_accumulation_steps", "1"], 1, "cuda"),
]

#: the argvs (and GPU counts) of tests/test_estimator.py
_BASE = ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max_length", "2048"]
TEST_ESTIMATOR_CASES = [
    (_BASE, 1),
    (_BASE + ["--tuner_type", "full"], 1),
    (_BASE + ["--tuner_type", "full", "--deepspeed", "zero3"], 4),
    (_BASE + ["--quant_method", "bnb", "--quant_bits", "4"], 1),
    (["--model", "Qwen/Qwen3-30B-A3B", "--use_liger_kernel", "true"], 2),
    (["--model_type", "qwen-vl-chat", "--sft_type", "qlora", "--dtype", "bnb_nf4", "--batch_size", "2"], 1),
    (_BASE + ["--max_length", "1024"], 1),
    (_BASE + ["--max_length", "4096"], 1),
    (_BASE + ["--per_device_train_batch_size", "4"], 1),
    (_BASE + ["--quant_method", "bnb", "--quant_bits", "8"], 1),
    (_BASE + ["--gradient_checkpointing", "false"], 1),
    (_BASE + ["--gradient_checkpointing", "false", "--attn_impl", "flash_attn"], 1),
    (_BASE + ["--gradient_checkpointing", "false", "--attn_impl", "eager"], 1),
    (_BASE + ["--tuner_type", "full"], 4),
    (_BASE + ["--tuner_type", "full", "--deepspeed", "zero3_offload"], 4),
    (_BASE + ["--tuner_type", "full", "--deepspeed", "zero2"], 4),
    (_BASE + ["--tuner_type", "full", "--deepspeed", "zero3"], 8),
    (_BASE + ["--use_liger_kernel", "true"], 1),
    (_BASE + ["--modules_to_save", "embed_tokens", "lm_head"], 1),
    (_BASE + ["--lora_rank", "64"], 1),
    (_BASE + ["--target_modules", "q_proj", "v_proj"], 1),
    (_BASE + ["--gradient_checkpointing", "false", "--quant_method", "bnb", "--quant_bits", "4"], 1),
    (_BASE + ["--max_length", "256"], 1),
    (_BASE + ["--max_length", "256", "--deepspeed", "zero3"], 2),
    (["--model", "Qwen/Qwen3-30B-A3B", "--max_length", "2048"], 2),
    (["--model", "Qwen/Qwen3-30B-A3B", "--tuner_type", "full", "--deepspeed", "zero3"], 8),
    (["--model", "Qwen/Qwen2.5-VL-7B-Instruct"], 1),
    (["--model", "Qwen/Qwen2.5-7B-Instruct"], 1),
    (["--model", "Qwen/Qwen-VL-Chat", "--quant_method", "bnb", "--quant_bits", "8"], 1),
    (["--model", "Qwen/Qwen-VL-Chat", "--quant_method", "bnb", "--quant_bits", "4"], 1),
    (["--model", "Qwen/Qwen-VL-Chat"], 1),
    (["--model", "Qwen/Qwen-VL-Chat", "--lora_rank", "64", "--target_modules", "c_attn", "attn.c_proj", "w1", "w2"], 1),
    (["--model", "Qwen/Qwen-VL-Chat", "--lora_rank", "64", "--target_modules", "c_proj"], 1),
    (["--model", "Qwen/Qwen-VL-Chat", "--target_modules", "mlp.c_proj", "nonsense", "query_key_value"], 1),
    (["--model", "Qwen/Qwen2.5-7B-Instruct", "--fsdp", "fsdp2"], 2),
    (["--model", "Qwen/Qwen2.5-7B-Instruct"], 2),
]

#: spellings the estimator reads case-insensitively (or not): kept as they are
EDGE_CASES = [
    (["--model", "Qwen/Qwen2.5-7B", "--tuner_type", "LlamaPro", "--max_length", "1024"], 1),
    (["--model", "Qwen/Qwen2.5-7B", "--tuner_type", "FULL", "--optim", "AdamW_8bit", "--max_length", "1024"], 2),
    (["--model", "Qwen/Qwen2.5-7B", "--target_modules", "ALL", "--attn_impl", "Eager", "--max_length", "1024"], 1),
    (["--model", "Qwen/Qwen2.5-7B", "--tuner_type", "longlora", "--deepspeed", "zero1", "--max_length", "1024"], 2),
]

_TINY = {
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
}
#: config.json models the catalog lacks: float32, MoE with shared experts and dense leading layers, a VLM
CONFIGS = {
    "tiny-fp32": _TINY,
    "tiny-moe-shared": {
        **_TINY,
        "torch_dtype": "bfloat16",
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 128,
        "n_shared_experts": 2,
        "first_k_dense_replace": 1,
    },
    "tiny-vlm-moe": {
        "model_type": "vlm",
        "text_config": {**_TINY, "num_local_experts": 4, "num_experts_per_tok": 2},
        "vision_config": {"depth": 2, "embed_dim": 64, "mlp_ratio": 4, "hidden_size": 256},
    },
}
CONFIG_PLACEHOLDER = "<config-folder>"


def cases() -> list[dict]:
    """Every golden case: ``{"argv", "gpus", "device"}``, plus ``"config"`` for a config.json model."""
    grid = []  # (model, method, setting) as indices into the tables above
    models = list(dict.fromkeys(catalog.lookup(name)["names"][0] for name in catalog.names()))  # one per entry
    for model in models:
        full_grid = model in REPRESENTATIVE
        for method in METHODS if full_grid else CORE_METHODS:
            for setting in range(len(SETTINGS)) if full_grid else CORE_SETTINGS:
                grid.append((model, method, setting, None))
    for name in CONFIGS:
        for method in METHODS:
            for setting in range(len(SETTINGS)):
                grid.append((CONFIG_PLACEHOLDER, method, setting, name))
    out = []
    for model, method, setting, config in grid:
        extra, gpus, device = SETTINGS[setting]
        case = {"argv": ["--model", model, *METHODS[method], *extra], "gpus": gpus, "device": device}
        out.append({**case, "config": config} if config else case)
    out += [{"argv": list(argv), "gpus": gpus, "device": "cuda"} for argv, gpus in TEST_ESTIMATOR_CASES]
    out += [{"argv": argv, "gpus": gpus, "device": "cuda"} for argv, gpus in _calibration_cases()]
    out += [{"argv": list(argv), "gpus": gpus, "device": "cuda"} for argv, gpus in EDGE_CASES]
    return out


def _calibration_cases() -> list[tuple[list[str], int]]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import estimator_calibration as cal

    return [cal.row_to_argv(row)[:2] for row in cal.load_rows(CALIBRATION)]


def run(case: dict, folder: Path) -> dict:
    """The estimator's output for ``case``: breakdown, peak and assumptions (config folder path masked)."""
    argv = case["argv"]
    if "config" in case:
        model_dir = folder / case["config"]
        model_dir.mkdir(exist_ok=True)
        (model_dir / "config.json").write_text(json.dumps(CONFIGS[case["config"]]))
        argv = [str(model_dir) if a == CONFIG_PLACEHOLDER else a for a in argv]
    est = estimate(argv, case["gpus"], device=case["device"])
    masked = [
        a.replace(str(folder / case["config"]), CONFIG_PLACEHOLDER) if "config" in case else a for a in est.assumptions
    ]
    assert tuple(est.breakdown) == BREAKDOWN_KEYS and sum(est.breakdown.values()) == est.peak_bytes_per_gpu
    return {"breakdown": est.breakdown, "assumptions": masked}


def main() -> None:
    notes: list[str] = []
    index: dict[str, int] = {}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases():
            result = run(case, Path(tmp))
            ids = []
            for note in result["assumptions"]:
                if note not in index:
                    index[note] = len(notes)
                    notes.append(note)
                ids.append(index[note])
            rows.append(
                {
                    "argv": " ".join(case["argv"]),
                    **{k: v for k, v in case.items() if k != "argv"},
                    "breakdown": [result["breakdown"][key] for key in BREAKDOWN_KEYS],
                    "assumptions": ids,
                }
            )
    # one case per line: a changed estimate shows as a readable diff
    lines = ",\n".join(json.dumps(row, separators=(",", ":")) for row in rows)
    note_lines = ",\n".join(json.dumps(n) for n in notes)
    GOLDEN.write_text('{"notes": [\n' + note_lines + '\n],\n"cases": [\n' + lines + "\n]}\n", encoding="utf-8")
    print(f"{GOLDEN.relative_to(ROOT)}: {len(rows)} cases, {len(notes)} distinct assumptions")


if __name__ == "__main__":
    main()
