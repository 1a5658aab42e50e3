"""The calibration rows map to the argv their runs really had (benchmarks/estimator_calibration.py
``row_to_argv``), each rule with its source: the checkpoint a run trained, the quantization method,
and a recipe's own LoRA settings."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import estimator_calibration as cal  # noqa: E402


def _rows(match) -> list[tuple[dict, list[str], list[str]]]:
    out = []
    for row in cal.load_rows(cal.DEFAULT_TSV):
        if match(row):
            argv, _, tags = cal.row_to_argv(row)
            out.append((row, argv, tags))
    assert out
    return out


def _value(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_pre_quantized_checkpoints_are_the_checkpoint_not_bitsandbytes():
    # Qwen-VL's finetune_qlora_single_gpu.sh trains Qwen/Qwen-VL-Chat-Int4 (GPTQ); ms-swift's
    # qlora/awq/train.sh trains Qwen2.5-7B-Instruct-AWQ with no --quant_method
    for row, argv, _ in _rows(lambda r: "gptq" in r["train_type"] or "awq" in r["train_type"]):
        assert "--quant_method" not in argv, argv
        suffix = "-Int4" if "gptq" in row["train_type"] else "-AWQ"
        assert _value(argv, "--model").endswith(suffix), argv


def test_hqq_row_runs_hqq():
    (_, argv, _), *_ = _rows(lambda r: "hqq" in r["train_type"])
    assert _value(argv, "--quant_method") == "hqq" and _value(argv, "--quant_bits") == "4"


def test_torchtune_ladder_rows_are_packed_and_lora_rows_use_the_recipe_config():
    # each technique of torchtune's optimization-flags table is added on top of "+ Packed Dataset"
    ladder = _rows(lambda r: "Optimization flags" in r["source"])
    assert len(ladder) == 9
    for row, argv, _ in ladder:
        assert _value(argv, "--packing") == "true", argv
        assert _value(argv, "--gradient_accumulation_steps") == "1"  # the recipes' (and the README command's)
        if row["train_type"] != "full":  # 3B_(q)lora_single_device.yaml: rank 64 on q, v, output, MLP
            assert _value(argv, "--lora_rank") == "64" and _value(argv, "--lora_dropout") == "0"
            i = argv.index("--target_modules")
            assert set(argv[i + 1 : i + 7]) == {"q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


def test_torchtune_memory_table_rows_run_without_gradient_accumulation():
    # torchtune's README "Memory and training speed": "batch size 2 (without gradient accumulation)"
    for _, argv, _ in _rows(lambda r: "Memory and training speed" in r["source"]):
        assert _value(argv, "--gradient_accumulation_steps") == "1", argv
