"""The ``swift sft`` argument language: parse, translate older names, print back.

Pure and free of I/O. ``parse_sft_args`` reads an argv as people write it (current ms-swift 4.x
names, or the ms-swift 1.x/2.x/3.x names still found in blog posts) and returns ``SftArgs``: typed
fields for what decides GPU memory, with ms-swift 4.x's own defaults where an argument is absent,
plus every other argument passed through unchanged. ``SftArgs.to_argv()`` prints the current-name
argv ms-swift 4 accepts. ``check_with_ms_swift`` lets ms-swift's own parser judge, where installed.

Defaults below are those of ms-swift 4.x (``swift/arguments/base_args/*.py``,
``swift/arguments/tuner_args.py``, ``swift/trainers/arguments.py`` at modelscope/ms-swift
3602360a5): tuner_type lora, lora_rank 8, lora_alpha 32, lora_dropout 0.05, target_modules
[all-linear], bnb_4bit_quant_type nf4, bnb_4bit_use_double_quant true, per_device_train_batch_size
1, gradient_accumulation_steps auto (ceil(16 / batch / world size)), gradient_checkpointing true,
freeze_vit true, freeze_aligner true, packing/padding_free/use_liger_kernel false; torch_dtype,
attn_impl and max_length unset (ms-swift reads them from the model's config.json).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from . import bounds
from .errors import InvalidRequest

__all__ = ["OLD_MODEL_TYPES", "SftArgs", "check_with_ms_swift", "parse_sft_args"]

#: ms-swift 1.x/2.x ``--model_type`` names (hyphenated) -> the hub id ``--model`` takes in 4.x.
OLD_MODEL_TYPES: dict[str, str] = {
    "qwen-vl-chat": "Qwen/Qwen-VL-Chat",
    "qwen-vl": "Qwen/Qwen-VL",
    "qwen-1_8b-chat": "Qwen/Qwen-1_8B-Chat",
    "qwen-7b-chat": "Qwen/Qwen-7B-Chat",
    "qwen-7b": "Qwen/Qwen-7B",
    "qwen-14b-chat": "Qwen/Qwen-14B-Chat",
    "qwen-72b-chat": "Qwen/Qwen-72B-Chat",
    "qwen1half-7b-chat": "Qwen/Qwen1.5-7B-Chat",
    "qwen2-7b-instruct": "Qwen/Qwen2-7B-Instruct",
    "qwen2-vl-7b-instruct": "Qwen/Qwen2-VL-7B-Instruct",
    "qwen2_5-0_5b-instruct": "Qwen/Qwen2.5-0.5B-Instruct",
    "qwen2_5-1_5b-instruct": "Qwen/Qwen2.5-1.5B-Instruct",
    "qwen2_5-3b-instruct": "Qwen/Qwen2.5-3B-Instruct",
    "qwen2_5-7b-instruct": "Qwen/Qwen2.5-7B-Instruct",
    "qwen2_5-14b-instruct": "Qwen/Qwen2.5-14B-Instruct",
    "qwen2_5-32b-instruct": "Qwen/Qwen2.5-32B-Instruct",
    "qwen2_5-72b-instruct": "Qwen/Qwen2.5-72B-Instruct",
    "llama2-7b-chat": "meta-llama/Llama-2-7b-chat-hf",
    "llama2-13b-chat": "meta-llama/Llama-2-13b-chat-hf",
    "llama3-8b-instruct": "meta-llama/Meta-Llama-3-8B-Instruct",
    "llama3_1-8b-instruct": "meta-llama/Llama-3.1-8B-Instruct",
    "llama3_2-1b-instruct": "meta-llama/Llama-3.2-1B-Instruct",
    "llama3_2-3b-instruct": "meta-llama/Llama-3.2-3B-Instruct",
    "mistral-7b-instruct": "mistralai/Mistral-7B-Instruct-v0.1",
    "mistral-7b-instruct-v2": "mistralai/Mistral-7B-Instruct-v0.2",
    "chatglm3-6b": "THUDM/chatglm3-6b",
    "glm4-9b-chat": "THUDM/glm-4-9b-chat",
    "internlm2_5-7b-chat": "internlm/internlm2_5-7b-chat",
    "gemma-2b-instruct": "google/gemma-2b-it",
    "gemma-7b-instruct": "google/gemma-7b-it",
    "yi-6b-chat": "01ai/Yi-6B-Chat",
    "baichuan2-7b-chat": "baichuan-inc/Baichuan2-7B-Chat",
}

# Typed fields: name -> kind. Order here is the order of ``to_argv``.
_KINDS: dict[str, str] = {
    "model": "str",
    "model_type": "str",
    "tuner_type": "str",
    "quant_method": "str",
    "quant_bits": "quant_bits",
    "bnb_4bit_quant_type": "str",
    "bnb_4bit_use_double_quant": "bool",
    "bnb_4bit_compute_dtype": "str",
    "torch_dtype": "str",
    "max_length": "int",
    "per_device_train_batch_size": "int",
    "gradient_accumulation_steps": "int",
    "gradient_checkpointing": "bool",
    "vit_gradient_checkpointing": "bool",
    "attn_impl": "str",
    "deepspeed": "str",
    "lora_rank": "int",
    "lora_alpha": "int",
    "lora_dropout": "float",
    "lora_dtype": "str",
    "use_dora": "bool",
    "target_modules": "list",
    "modules_to_save": "list",
    "packing": "bool",
    "padding_free": "bool",
    "use_liger_kernel": "bool",
    "freeze_vit": "bool",
    "freeze_llm": "bool",
    "freeze_aligner": "bool",
    "optim": "str",
    "sequence_parallel_size": "int",
    "llamapro_num_new_blocks": "int",
}

_CHOICES: dict[str, tuple] = {
    "quant_method": ("bnb", "hqq", "eetq", "quanto", "fp8"),
    "quant_bits": (1, 2, 3, 4, 8, "float8"),
    "bnb_4bit_quant_type": ("fp4", "nf4"),
    "torch_dtype": ("bfloat16", "float16", "float32"),
    "bnb_4bit_compute_dtype": ("bfloat16", "float16", "float32"),
    "lora_dtype": ("bfloat16", "float16", "float32"),
}

_POSITIVE = {
    "max_length",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "lora_rank",
    "lora_alpha",
    "sequence_parallel_size",
    "llamapro_num_new_blocks",
}

# ms-swift 4.x argument names we know but do not type (dataset, output_dir, ...): passed through,
# not reported as unknown. Names outside this set and ``_KINDS`` are kept too, and listed.
_KNOWN_OTHER = frozenset(
    [
        "dataset",
        "val_dataset",
        "split_dataset_ratio",
        "output_dir",
        "add_version",
        "template",
        "system",
        "num_train_epochs",
        "max_steps",
        "learning_rate",
        "weight_decay",
        "warmup_ratio",
        "lr_scheduler_type",
        "save_steps",
        "eval_steps",
        "logging_steps",
        "save_total_limit",
        "report_to",
        "dataloader_num_workers",
        "dataset_num_proc",
        "seed",
        "model_revision",
        "model_author",
        "model_name",
        "use_hf",
        "check_model",
        "ignore_args_error",
        "per_device_eval_batch_size",
        "fp16",
        "bf16",
        "max_grad_norm",
        "truncation_strategy",
        "max_pixels",
        "streaming",
        "lazy_tokenize",
        "load_from_cache_file",
        "columns",
        "strict",
        "remove_unused_columns",
        "logging_first_step",
        "save_only_model",
        "save_strategy",
        "eval_strategy",
        "tuner_backend",
        # GaLore: read by estimator/galore.py from the passed-through arguments
        "use_galore",
        "galore_rank",
        "galore_optim_per_parameter",
        "galore_quantization",
        "galore_proj_quant",
        "galore_proj_type",
        "galore_target_modules",
        "galore_with_embedding",
        # LISA: read by estimator/lisa.py
        "lisa_activated_layers",
        "lisa_step_interval",
        "lora_bias",
        "use_rslora",
        "init_weights",
        "target_regex",
        "freeze_parameters",
        "trainable_parameters",
        "freeze_parameters_ratio",
        "loss_scale",
        "new_special_tokens",
        "task_type",
        "num_labels",
        "device_map",
        "max_memory",
        "rope_scaling",
        "bnb_4bit_quant_storage",
        "hub_token",
        "push_to_hub",
        "gradient_checkpointing_kwargs",
        "ddp_timeout",
        "ddp_backend",
        "ddp_bucket_cap_mb",
        "deepspeed_autotp_size",
        "zero_hpz_partition_size",
        "packing_length",
        "router_aux_loss_coef",
        "enable_thinking",
        "padding_side",
        "resume_from_checkpoint",
        "adam_beta1",
        "adam_beta2",
        "neftune_noise_alpha",
        "acc_strategy",
        "experts_impl",
        "agent_template",
        "response_prefix",
        "fsdp",
    ]
)

_BOOL_TRUE = {"true", "t", "yes", "y", "1", "on"}
_BOOL_FALSE = {"false", "f", "no", "n", "0", "off"}
_MAX_TOKEN = 4096
_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f]")
_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]*$")

_TORCH_DTYPE_ALIASES = {
    "bf16": "bfloat16",
    "fp16": "float16",
    "fp32": "float32",
    "half": "float16",
    "float": "float32",
    "bfloat16": "bfloat16",
    "float16": "float16",
    "float32": "float32",
}
_DEEPSPEED_ALIASES = {
    "default-zero2": "zero2",
    "default-zero3": "zero3",
    "zero2-offload": "zero2_offload",
    "zero3-offload": "zero3_offload",
    "default-zero3-offload": "zero3_offload",
}
_ATTN_ALIASES = {"flash_attention_2": "flash_attn", "fa2": "flash_attn", "flash_attn2": "flash_attn"}

#: what an older name becomes: (4.x name, raw values) pairs, or None when the name is not an old one
_Translation = list[tuple[str, list[str]]] | None

#: ms-swift 1.x-3.x names that only changed name (old -> 4.x): their values pass as they are. The
#: names whose values change too are translated by the ``_old_*`` functions (``_OLD_SPELLINGS``).
_RENAMED = {
    "model_id_or_path": "model",
    "batch_size": "per_device_train_batch_size",
    "eval_batch_size": "per_device_eval_batch_size",
    "lora_modules_to_save": "modules_to_save",
    "use_liger": "use_liger_kernel",
}
#: 4.x names with a 1.x-3.x value that 4.x no longer takes: (name, value) -> why it is dropped
_DROPPED = {
    ("lora_dtype", "auto"): "--lora_dtype AUTO dropped: 4.x default",
    ("max_length", "-1"): "--max_length -1 dropped: 'no limit' is the 4.x default (the model's max length)",
}


@dataclass(frozen=True)
class SftArgs:
    """A ``swift sft`` command in ms-swift 4.x terms.

    Typed fields hold ms-swift 4.x's defaults where the argv did not set them (``None`` means
    "ms-swift decides from the model's config.json"). ``extra`` keeps every other argument as
    ``(name, values)`` in argv order; ``unknown`` names those ms-swift 4.x is not known to accept;
    ``notes`` says what was translated from older names and why.
    """

    model: str | None = None
    model_type: str | None = None
    tuner_type: str = "lora"
    quant_method: str | None = None
    quant_bits: int | str | None = None
    bnb_4bit_quant_type: str = "nf4"
    bnb_4bit_use_double_quant: bool = True
    bnb_4bit_compute_dtype: str | None = None
    torch_dtype: str | None = None
    max_length: int | None = None
    per_device_train_batch_size: int = 1
    gradient_accumulation_steps: int | None = None
    gradient_checkpointing: bool = True
    vit_gradient_checkpointing: bool | None = None
    attn_impl: str | None = None
    deepspeed: str | None = None
    lora_rank: int = 8
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_dtype: str | None = None
    use_dora: bool = False
    target_modules: tuple[str, ...] = ("all-linear",)
    modules_to_save: tuple[str, ...] = ()
    packing: bool = False
    padding_free: bool = False
    use_liger_kernel: bool = False
    freeze_vit: bool = True
    freeze_llm: bool = False
    freeze_aligner: bool = True
    optim: str | None = None
    sequence_parallel_size: int = 1
    llamapro_num_new_blocks: int = 4
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
    unknown: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    explicit: frozenset[str] = field(default_factory=frozenset, repr=False)

    # -- derived views --------------------------------------------------------------------------
    @property
    def quantized_bits(self) -> int | None:
        """4 or 8 for bitsandbytes QLoRA-style loading, else None."""
        if self.quant_method and isinstance(self.quant_bits, int):
            return self.quant_bits
        return None

    @property
    def deepspeed_stage(self) -> tuple[int, bool]:
        """(ZeRO stage, offload) of ``--deepspeed``; (0, False) without DeepSpeed."""
        return _deepspeed_stage((self.deepspeed or "").lower())

    def gradient_accumulation(self, world_size: int = 1) -> int:
        """ms-swift's effective gradient accumulation (``ceil(16 / batch / world)`` when unset)."""
        if self.gradient_accumulation_steps is not None:
            return self.gradient_accumulation_steps
        return max(1, -(-16 // (self.per_device_train_batch_size * max(1, world_size))))

    # -- printing -------------------------------------------------------------------------------
    def to_argv(self) -> list[str]:
        """The current-name argv ms-swift 4.x accepts: explicit or changed options, fixed order."""
        argv: list[str] = []
        for name, kind in _KINDS.items():
            if name not in self.explicit:
                continue
            value = getattr(self, name)
            if value is None:
                continue
            argv.append(f"--{name}")
            if kind == "list":
                argv.extend(value)
            elif kind == "bool":
                argv.append("true" if value else "false")
            else:
                argv.append(str(value))
        for name, values in self.extra:
            argv.append(f"--{name}")
            argv.extend(values)
        return argv

    def replace(self, **changes: Any) -> SftArgs:
        """A copy with ``changes`` applied (typed fields, validated); they count as explicit."""
        clean: dict[str, Any] = {}
        for name, value in changes.items():
            if name not in _KINDS:
                raise InvalidRequest(f"replace(): {name!r} is not a typed ms-swift argument")
            if value is None:
                clean[name] = None
            elif _KINDS[name] == "list":
                clean[name] = tuple([value] if isinstance(value, str) else value)
            elif isinstance(value, str) or _KINDS[name] == "quant_bits":
                clean[name] = _convert(
                    name, str(value) if not isinstance(value, bool) else ("true" if value else "false")
                )
            else:
                clean[name] = _convert(name, _render(value))
        return dataclasses.replace(self, explicit=self.explicit | frozenset(clean), **clean)

    def to_json(self) -> dict:
        return {"argv": self.to_argv(), "notes": list(self.notes), "unknown": list(self.unknown)}


@lru_cache(maxsize=64)
def _deepspeed_stage(ds: str) -> tuple[int, bool]:
    """(stage, offload) of a lowercased ``--deepspeed`` value; cached: the planner asks 100s of times."""
    if not ds:
        return 0, False
    match = re.search(r"zero[_\-]?([0-3])", ds) or re.search(r"stage[\"':\s]*([0-3])", ds)
    stage = int(match.group(1)) if match else 2
    return stage, "offload" in ds


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ------------------------------------------------------------------------------------------------
def parse_sft_args(argv: list[str] | tuple[str, ...]) -> SftArgs:
    """Parse a ``swift sft`` argv (a leading ``swift sft`` is dropped) into ``SftArgs``.

    Accepts ``--key value``, ``--key=value``, multi-value keys (``--dataset a b``), bare boolean
    flags, dashes for underscores, and older ms-swift names (translated, with a note). Raises
    ``InvalidRequest`` on a missing value, a non-number for a number, a bad choice, or a hostile
    string (control characters, overlong tokens).
    """
    if isinstance(argv, str):
        raise InvalidRequest("arguments must be a list of strings, not one string; split it first")
    tokens = [_check_token(t) for t in argv]
    while tokens and tokens[0] in ("swift", "sft"):
        tokens.pop(0)
    pairs = _split_pairs(tokens)

    values: dict[str, Any] = {}
    extra: list[tuple[str, tuple[str, ...]]] = []
    unknown: list[str] = []
    notes: list[str] = []
    pending_model_type: str | None = None

    def put(name: str, raw: list[str], original: str) -> None:
        kind = _KINDS[name]
        if kind == "list":
            if not raw:
                raise InvalidRequest(f"--{original} needs at least one value")
            values[name] = tuple(raw)
            return
        if kind == "bool" and not raw:
            values[name] = True
            return
        if not raw:
            raise InvalidRequest(f"--{original} needs a value")
        if len(raw) != 1:
            raise InvalidRequest(f"--{original} takes one value, got {len(raw)}: {' '.join(raw)}")
        values[name] = _convert(name, raw[0], original)

    for key, raw in pairs:
        name = key.replace("-", "_")
        translated = _translate(name, raw, values, notes)
        if translated is not None:
            for new_name, new_raw in translated:
                if new_name == "__model_type_old__":
                    pending_model_type = new_raw[0]
                elif new_name in _KINDS:
                    put(new_name, new_raw, key)
                else:
                    extra.append((new_name, tuple(new_raw)))
            continue
        if name in _KINDS:
            if name == "deepspeed" and len(raw) == 1 and raw[0] in _DEEPSPEED_ALIASES:
                notes.append(
                    f"--deepspeed {raw[0]} -> --deepspeed {_DEEPSPEED_ALIASES[raw[0]]}: "
                    "ms-swift 4.x names its shipped DeepSpeed configs zero2, zero3, *_offload"
                )
                raw = [_DEEPSPEED_ALIASES[raw[0]]]
            if name == "torch_dtype" and len(raw) == 1 and raw[0] in ("bf16", "fp16", "fp32"):
                notes.append(
                    f"--torch_dtype {raw[0]} -> --torch_dtype {_TORCH_DTYPE_ALIASES[raw[0]]}: "
                    "ms-swift 4.x spells dtypes out"
                )
                raw = [_TORCH_DTYPE_ALIASES[raw[0]]]
            put(name, raw, key)
        else:
            extra.append((name, tuple(raw)))
            if name not in _KNOWN_OTHER:
                unknown.append(name)

    if pending_model_type is not None:
        old = pending_model_type
        if "model" in values:
            notes.append(
                f"--model_type {old} dropped: it is an ms-swift 1.x/2.x model type and "
                f"--model {values['model']} already names the model"
            )
        else:
            values["model"] = OLD_MODEL_TYPES[old.lower()]
            notes.append(
                f"--model_type {old} -> --model {values['model']}: ms-swift 1.x/2.x "
                "model_type names became hub ids in --model (4.x --model_type is a "
                "different, architecture-level name)"
            )

    if values.get("attn_impl") in _ATTN_ALIASES:
        values["attn_impl"] = _ATTN_ALIASES[values["attn_impl"]]
    if values.get("quant_bits") is not None and "quant_method" not in values:
        values["quant_method"] = "bnb"
        notes.append("--quant_bits without --quant_method: assumed --quant_method bnb (ms-swift needs both for QLoRA)")
    return SftArgs(**values, extra=tuple(extra), unknown=tuple(unknown), notes=tuple(notes), explicit=frozenset(values))


def _translate(name: str, raw: list[str], values: dict, notes: list[str]) -> _Translation:
    """Older ms-swift names -> current ones (list of (name, raw values)); None if not old."""
    if name in _RENAMED:
        return _rename(name, raw, notes)
    if len(raw) == 1 and (name, raw[0].lower()) in _DROPPED:
        notes.append(_DROPPED[name, raw[0].lower()])
        return []
    special = _OLD_SPELLINGS.get(name)
    return special(name, raw, values, notes) if special else None


def _rename(name: str, raw: list[str], notes: list[str]) -> _Translation:
    """A plain rename: the values pass as they are, in the form the new name takes."""
    new = _RENAMED[name]
    notes.append(f"--{name} -> --{new}: renamed in ms-swift 3.x")
    kind = _KINDS.get(new)
    if kind == "list":
        return [(new, raw)]  # at least one value: checked under the new name's kind
    if kind == "bool":
        return [(new, raw or ["true"])]  # a bare flag means true
    return [(new, [_one_value(name, raw)])]


def _one_value(name: str, raw: list[str]) -> str:
    if len(raw) != 1:
        raise InvalidRequest(f"--{name} takes one value, got {len(raw)}" + (f": {' '.join(raw)}" if raw else ""))
    return raw[0]


def _old_model_type(name: str, raw: list[str], values: dict, notes: list[str]) -> _Translation:
    value = _one_value(name, raw)
    if value.lower() in OLD_MODEL_TYPES:
        return [("__model_type_old__", [value])]  # resolved after every argument is read
    return None  # a 4.x model_type such as qwen2: typed, kept


def _old_train_type(name: str, raw: list[str], values: dict, notes: list[str]) -> _Translation:
    value = _one_value(name, raw).lower()
    if value != "qlora":
        notes.append(
            f"--{name} {value} -> --tuner_type {value}: renamed in ms-swift 4.x (--train_type is rejected there)"
        )
        return [("tuner_type", [value])]
    out = [("tuner_type", ["lora"])]  # and bnb 4-bit, unless the argv already chose otherwise
    out += [(key, [setting]) for key, setting in (("quant_method", "bnb"), ("quant_bits", "4")) if key not in values]
    notes.append(
        f"--{name} qlora -> --tuner_type lora --quant_method bnb --quant_bits 4: "
        "ms-swift 4.x has no qlora type; QLoRA is LoRA on a bnb-quantized model"
    )
    return out


def _old_dtype(name: str, raw: list[str], values: dict, notes: list[str]) -> _Translation:
    given = _one_value(name, raw)
    value = given.lower()
    if value in ("bnb_nf4", "bnb_fp4", "nf4", "fp4", "bnb_int4", "int4"):
        qtype = "fp4" if "fp4" in value else "nf4"
        notes.append(
            f"--dtype {given} -> --quant_method bnb --quant_bits 4 --bnb_4bit_quant_type "
            f"{qtype}: 4-bit bitsandbytes loading is a quantization, not a dtype, in 4.x"
        )
        return [("quant_method", ["bnb"]), ("quant_bits", ["4"]), ("bnb_4bit_quant_type", [qtype])]
    if value in ("bnb_int8", "int8", "bnb_8bit"):
        notes.append(
            f"--dtype {given} -> --quant_method bnb --quant_bits 8: 8-bit bitsandbytes "
            "loading is a quantization, not a dtype, in 4.x"
        )
        return [("quant_method", ["bnb"]), ("quant_bits", ["8"])]
    if value == "auto":
        notes.append("--dtype AUTO dropped: ms-swift 4.x reads torch_dtype from config.json by default")
        return []
    if value in _TORCH_DTYPE_ALIASES:
        new = _TORCH_DTYPE_ALIASES[value]
        notes.append(f"--dtype {given} -> --torch_dtype {new}: renamed in ms-swift 3.x")
        return [("torch_dtype", [new])]
    raise InvalidRequest(f"--dtype {given}: expected one of bf16, fp16, fp32, AUTO, bnb_nf4, bnb_int8")


def _old_quantization_bit(name: str, raw: list[str], values: dict, notes: list[str]) -> _Translation:
    value = _one_value(name, raw)
    if value == "0":
        notes.append("--quantization_bit 0 dropped: no quantization (the default)")
        return []
    notes.append(f"--quantization_bit {value} -> --quant_method bnb --quant_bits {value}: renamed in ms-swift 3.x")
    return ([] if "quant_method" in values else [("quant_method", ["bnb"])]) + [("quant_bits", [value])]


def _old_bnb_4bit_comp_dtype(name: str, raw: list[str], values: dict, notes: list[str]) -> _Translation:
    value = _one_value(name, raw)
    if value.lower() == "auto":
        notes.append("--bnb_4bit_comp_dtype AUTO dropped: 4.x follows torch_dtype by default")
        return []
    new = _TORCH_DTYPE_ALIASES.get(value.lower(), value)
    notes.append(f"--bnb_4bit_comp_dtype {value} -> --bnb_4bit_compute_dtype {new}: renamed")
    return [("bnb_4bit_compute_dtype", [new])]


def _old_use_flash_attn(name: str, raw: list[str], values: dict, notes: list[str]) -> _Translation:
    if _to_bool(name, (raw[0] if len(raw) == 1 else None) if raw else "true"):
        notes.append("--use_flash_attn true -> --attn_impl flash_attn: renamed in ms-swift 3.x")
        return [("attn_impl", ["flash_attn"])]
    notes.append("--use_flash_attn false dropped: ms-swift 4.x picks sdpa or eager from config.json")
    return []


def _old_lora_target_modules(name: str, raw: list[str], values: dict, notes: list[str]) -> _Translation:
    if not raw:
        raise InvalidRequest("--lora_target_modules needs at least one value")
    mapped = list(
        dict.fromkeys(
            "all-linear" if value.upper() in ("ALL", "ALL-LINEAR", "DEFAULT", "AUTO") else value for value in raw
        )
    )
    notes.append(
        f"--lora_target_modules {' '.join(raw)} -> --target_modules {' '.join(mapped)}: "
        "renamed in ms-swift 3.x (ALL/DEFAULT/AUTO became all-linear, the 4.x default)"
    )
    return [("target_modules", mapped)]


def _old_template_type(name: str, raw: list[str], values: dict, notes: list[str]) -> _Translation:
    value = _one_value(name, raw)
    notes.append(f"--template_type -> --template: renamed in ms-swift 3.x (check the 4.x template name for {value})")
    return [("template", [value])]


_OLD_SPELLINGS = {
    "model_type": _old_model_type,
    "sft_type": _old_train_type,
    "train_type": _old_train_type,
    "dtype": _old_dtype,
    "quantization_bit": _old_quantization_bit,
    "bnb_4bit_comp_dtype": _old_bnb_4bit_comp_dtype,
    "use_flash_attn": _old_use_flash_attn,
    "lora_target_modules": _old_lora_target_modules,
    "template_type": _old_template_type,
}


def _split_pairs(tokens: list[str]) -> list[tuple[str, list[str]]]:
    pairs: list[tuple[str, list[str]]] = []
    for token in tokens:
        if token.startswith("--"):
            body = token[2:]
            key, eq, value = body.partition("=")
            if not key or not _KEY.match(key):
                raise InvalidRequest(f"{token!r} is not an option name (expected --name or --name=value)")
            pairs.append((key, [value] if eq else []))
        elif not pairs:
            raise InvalidRequest(
                f"unexpected value {token!r} before any --option; write swift sft arguments as --name value"
            )
        elif token.startswith("-") and len(token) > 1 and not _is_number(token):
            raise InvalidRequest(f"{token!r}: single-dash options are not swift sft arguments; use --name value")
        else:
            pairs[-1][1].append(token)
    return pairs


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _check_token(token: Any) -> str:
    if not isinstance(token, str):
        raise InvalidRequest(f"every argument must be a string, got {type(token).__name__}")
    if _FORBIDDEN.search(token):
        raise InvalidRequest("an argument contains a control character (NUL, newline, ...); remove it")
    if len(token) > _MAX_TOKEN:
        raise InvalidRequest(f"an argument is {len(token)} characters long; at most {_MAX_TOKEN}")
    return token


def _to_bool(name: str, text: str | None) -> bool:
    low = (text or "").lower()
    if low in _BOOL_TRUE:
        return True
    if low in _BOOL_FALSE:
        return False
    raise InvalidRequest(f"--{name} {text!r}: expected true or false")


def _convert(name: str, text: str, original: str | None = None) -> Any:
    kind = _KINDS[name]
    label = f"--{original or name}"
    if kind == "bool":
        return _to_bool(original or name, text)
    if kind == "int":
        value = bounds.whole_number(text, label)
        if name in _POSITIVE and value < 1:
            raise InvalidRequest(f"{label} {value}: must be at least 1")
        return value
    if kind == "float":
        try:
            return float(text)
        except ValueError:
            raise InvalidRequest(f"{label} {text!r}: expected a number") from None
    if kind == "quant_bits":
        if text == "float8":
            return text
        try:
            value = int(text)
        except ValueError:
            raise InvalidRequest(f"{label} {text!r}: expected one of 1, 2, 3, 4, 8, float8") from None
        if value not in _CHOICES["quant_bits"]:
            raise InvalidRequest(f"{label} {value}: expected one of 1, 2, 3, 4, 8, float8")
        return value
    if name in _CHOICES and text not in _CHOICES[name]:
        raise InvalidRequest(f"{label} {text!r}: expected one of {', '.join(map(str, _CHOICES[name]))}")
    if name == "attn_impl":
        return _ATTN_ALIASES.get(text, text)
    return text


# ------------------------------------------------------------------------------------------------
def check_with_ms_swift(argv: list[str]) -> str | None:
    """Let ms-swift 4.x's own parser judge ``argv``: an error text, or None when it accepts it.

    Runs ``HfArgumentParser([SftArguments]).parse_known_args`` (names, types, choices) without
    constructing ``SftArguments``, so no model is resolved or downloaded and no output folder is
    made. Where ms-swift is not installed (importing ``swift.arguments`` fails) this returns None:
    the check is skipped, not failed. Importing ms-swift takes several seconds.
    """
    try:
        from swift.arguments import SftArguments  # type: ignore
        from transformers import HfArgumentParser  # type: ignore
    except Exception:  # noqa: BLE001 - ms-swift absent or broken: skip, as documented
        return None
    import contextlib
    import io

    tokens = list(argv)
    while tokens and tokens[0] in ("swift", "sft"):
        tokens.pop(0)
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            _, remaining = HfArgumentParser([SftArguments]).parse_known_args(tokens)
    except SystemExit:
        text = stderr.getvalue().strip().splitlines()
        return text[-1] if text else "ms-swift rejected the arguments"
    if remaining:
        return f"ms-swift 4.x does not accept: {' '.join(remaining)}"
    return None
