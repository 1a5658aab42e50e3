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


# the plain renames (swift._RENAMED): old name, values, the 4.x name, and what it holds after parsing
RENAMES = [
    ("model_id_or_path", ["Qwen/Qwen2.5-7B"], "model", "Qwen/Qwen2.5-7B"),
    ("batch_size", ["4"], "per_device_train_batch_size", 4),
    ("eval_batch_size", ["8"], "per_device_eval_batch_size", ("8",)),  # untyped: passed through
    ("lora_modules_to_save", ["embed_tokens", "lm_head"], "modules_to_save", ("embed_tokens", "lm_head")),
    ("use_liger", ["true"], "use_liger_kernel", True),
    ("use_liger", [], "use_liger_kernel", True),  # a bare flag
    ("use_liger", ["false"], "use_liger_kernel", False),
]


@pytest.mark.parametrize("old,values,new,expected", RENAMES)
@pytest.mark.parametrize("dashes", [False, True])
def test_plain_renames_keep_their_values_under_the_new_name(old, values, new, expected, dashes):
    spelled = old.replace("_", "-") if dashes else old
    args = parse_sft_args(
        ["--model", "m", f"--{spelled}", *values] if old != "model_id_or_path" else [f"--{spelled}", *values]
    )
    held = dict(args.extra)[new] if new not in SftArgs.__dataclass_fields__ else getattr(args, new)
    assert held == expected
    assert f"--{old} -> --{new}: renamed in ms-swift 3.x" in args.notes
    argv = args.to_argv()
    assert f"--{new}" in argv and f"--{old}" not in argv and f"--{spelled}" not in argv
    assert parse_sft_args(argv).to_argv() == argv


def test_every_plain_rename_has_a_case():
    from jupyter_quota.swift import _RENAMED

    assert {(old, new) for old, _, new, _ in RENAMES} == set(_RENAMED.items())


@pytest.mark.parametrize(
    "argv,words",
    [
        (["--model_id_or_path"], "--model_id_or_path takes one value, got 0"),
        (["--batch_size", "2", "4"], "--batch_size takes one value, got 2: 2 4"),
        (["--batch-size", "0"], "--batch-size 0: must be at least 1"),
        (["--eval_batch_size"], "--eval_batch_size takes one value, got 0"),
        (["--lora_modules_to_save"], "--lora_modules_to_save needs at least one value"),
        (["--use_liger", "maybe"], "--use_liger 'maybe': expected true or false"),
        (["--use_liger", "true", "false"], "--use_liger takes one value, got 2"),
    ],
)
def test_plain_renames_check_values_as_the_new_name_does(argv, words):
    with pytest.raises(InvalidRequest) as info:
        parse_sft_args(argv)
    assert words in info.value.message


@pytest.mark.parametrize(
    "old,field,note,current",
    [
        (["--lora_dtype", "AUTO"], "lora_dtype", "--lora_dtype AUTO dropped: 4.x default", "float32"),
        (["--lora_dtype", "auto"], "lora_dtype", "--lora_dtype AUTO dropped: 4.x default", "float32"),
        (["--max_length", "-1"], "max_length", "--max_length -1 dropped: 'no limit' is the 4.x default", "512"),
    ],
)
def test_older_values_that_4x_no_longer_takes_are_dropped_with_a_note(old, field, note, current):
    args = parse_sft_args(["--model", "m", *old])
    assert getattr(args, field) is None and old[0] not in args.to_argv()
    assert len(args.notes) == 1 and args.notes[0].startswith(note)
    kept = parse_sft_args(["--model", "m", old[0], current])
    assert kept.notes == () and str(getattr(kept, field)) == current


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
