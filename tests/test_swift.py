"""jupyter_quota.swift: the swift sft argument language (pure; no ms-swift needed)."""

import dataclasses

import pytest

from jupyter_quota.errors import InvalidRequest
from jupyter_quota.swift import SftArgs, check_with_ms_swift, parse_sft_args

TUTORIAL = [
    "swift",
    "sft",
    "--model_type",
    "qwen-vl-chat",
    "--sft_type",
    "qlora",
    "--dtype",
    "bnb_nf4",
    "--dataset",
    "my_custom_data",
    "--batch_size",
    "2",
    "--use_flash_attn",
    "true",
    "--output_dir",
    "./finetuned-model",
]


@pytest.mark.parametrize("argv", [TUTORIAL, TUTORIAL[2:]])
def test_tutorial_command_is_translated(argv):
    args = parse_sft_args(argv)
    assert args.model == "Qwen/Qwen-VL-Chat"
    assert args.tuner_type == "lora"
    assert (args.quant_method, args.quant_bits, args.bnb_4bit_quant_type) == ("bnb", 4, "nf4")
    assert args.per_device_train_batch_size == 2
    assert args.attn_impl == "flash_attn"
    assert dict(args.extra) == {"dataset": ("my_custom_data",), "output_dir": ("./finetuned-model",)}
    assert args.unknown == ()
    joined = "\n".join(args.notes)
    for old in ("--model_type qwen-vl-chat", "--sft_type qlora", "--dtype bnb_nf4", "--batch_size", "--use_flash_attn"):
        assert old in joined
    argv_out = args.to_argv()
    assert argv_out[:2] == ["--model", "Qwen/Qwen-VL-Chat"]
    for gone in ("--sft_type", "--dtype", "--batch_size", "--use_flash_attn", "--model_type"):
        assert gone not in argv_out


def test_defaults_are_ms_swift_4():
    args = parse_sft_args(["--model", "Qwen/Qwen2.5-7B-Instruct"])
    assert args.tuner_type == "lora" and args.lora_rank == 8 and args.lora_alpha == 32
    assert args.target_modules == ("all-linear",)
    assert args.gradient_checkpointing is True
    assert args.per_device_train_batch_size == 1
    assert args.bnb_4bit_use_double_quant is True and args.freeze_vit is True
    assert args.max_length is None and args.torch_dtype is None and args.quant_method is None
    assert args.gradient_accumulation() == 16
    assert args.to_argv() == ["--model", "Qwen/Qwen2.5-7B-Instruct"]


def test_forms_of_values_and_flags():
    args = parse_sft_args(
        [
            "--model=m",
            "--max-length",
            "1024",
            "--gradient_checkpointing",
            "--packing",
            "false",
            "--target_modules",
            "q_proj",
            "v_proj",
            "--dataset",
            "a",
            "b",
            "--deepspeed",
            "default-zero3",
        ]
    )
    assert args.max_length == 1024
    assert args.gradient_checkpointing is True and args.packing is False
    assert args.target_modules == ("q_proj", "v_proj")
    assert dict(args.extra)["dataset"] == ("a", "b")
    assert args.deepspeed == "zero3" and args.deepspeed_stage == (3, False)


@pytest.mark.parametrize(
    "old,check",
    [
        (["--model_id_or_path", "x/y"], lambda a: a.model == "x/y"),
        (["--train_type", "full"], lambda a: a.tuner_type == "full"),
        (["--dtype", "bf16"], lambda a: a.torch_dtype == "bfloat16"),
        (["--dtype", "bnb_int8"], lambda a: (a.quant_method, a.quant_bits) == ("bnb", 8)),
        (["--quantization_bit", "4"], lambda a: (a.quant_method, a.quant_bits) == ("bnb", 4)),
        (["--lora_target_modules", "ALL"], lambda a: a.target_modules == ("all-linear",)),
        (["--lora_modules_to_save", "embed_tokens"], lambda a: a.modules_to_save == ("embed_tokens",)),
        (["--use_flash_attn", "false"], lambda a: a.attn_impl is None),
        (["--eval_batch_size", "4"], lambda a: dict(a.extra) == {"per_device_eval_batch_size": ("4",)}),
    ],
)
def test_older_names(old, check):
    args = parse_sft_args(["--model", "m"] + old)
    assert check(args)
    assert args.notes, "every translation leaves a note"
    assert old[0] not in args.to_argv()


def test_unknown_arguments_pass_through_and_are_listed():
    args = parse_sft_args(["--model", "m", "--my_flag", "1", "2", "--learning_rate", "1e-4"])
    assert args.unknown == ("my_flag",)
    assert args.to_argv() == ["--model", "m", "--my_flag", "1", "2", "--learning_rate", "1e-4"]


def test_round_trip_and_replace():
    args = parse_sft_args(TUTORIAL)
    again = parse_sft_args(args.to_argv())
    assert again.to_argv() == args.to_argv()
    assert again.notes == ()
    changed = args.replace(
        per_device_train_batch_size=1, gradient_accumulation_steps=2, gradient_checkpointing=False, quant_bits=8
    )
    assert changed.quant_bits == 8 and changed.gradient_checkpointing is False
    out = changed.to_argv()
    assert out[out.index("--gradient_accumulation_steps") + 1] == "2"
    assert parse_sft_args(out).to_argv() == out
    with pytest.raises(InvalidRequest):
        args.replace(max_length="long")
    with pytest.raises(InvalidRequest):
        args.replace(no_such_field=1)


@pytest.mark.parametrize(
    "argv,words",
    [
        (["--max_length"], "needs"),
        (["--max_length", "abc"], "whole number"),
        (["--max_length", "0"], "at least 1"),
        (["--lora_rank", "8", "16"], "one value"),
        (["--quant_bits", "5"], "expected one of"),
        (["--torch_dtype", "float64"], "expected one of"),
        (["--gradient_checkpointing", "maybe"], "true or false"),
        (["--model", "a\x00b"], "control character"),
        (["--model", "x" * 5000], "characters long"),
        (["stray", "--model", "m"], "before any --option"),
        (["-m", "x"], "before any --option"),
        (["--model", "m", "-x"], "single-dash"),
        (["--=3"], "not an option name"),
    ],
)
def test_malformed_input_is_refused_with_a_message(argv, words):
    with pytest.raises(InvalidRequest) as info:
        parse_sft_args(argv)
    assert words in info.value.message


def test_not_a_list():
    with pytest.raises(InvalidRequest):
        parse_sft_args("--model m")
    with pytest.raises(InvalidRequest):
        parse_sft_args(["--max_length", 3])


def test_sftargs_is_frozen():
    args = SftArgs()
    with pytest.raises(dataclasses.FrozenInstanceError):
        args.model = "x"


def test_check_with_ms_swift_is_none_or_text():
    result = check_with_ms_swift(["--model", "m", "--tuner_type", "lora"])
    assert result is None or isinstance(result, str)
