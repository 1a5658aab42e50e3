"""The ``swift deploy`` argument language: parse, translate older names, print back.

Pure and free of I/O, as :mod:`.swift` is for ``swift sft``: ``parse_deploy_args`` reads an argv
(ms-swift 4.x names, or the 2.x/3.x names blog posts still use) and returns ``DeployArgs``: typed
fields for what decides serving memory, with ms-swift 4.x's defaults where an argument is absent
(``swift/arguments/infer_args.py``, ``deploy_args.py``, ``rlhf_trainers/args_mixin.py``
``VllmArguments``: infer_backend transformers, vllm_gpu_memory_utilization 0.9,
vllm_tensor_parallel_size 1, vllm_max_num_seqs 256, vllm_max_lora_rank 16, max_batch_size 1;
vllm_max_model_len, sglang_mem_fraction_static and sglang_context_length unset: the engine
decides), plus every other argument passed through unchanged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from . import bounds
from .errors import InvalidRequest
from .swift import _check_token, _split_pairs  # the sft parser's token checks, shared

__all__ = ["BACKENDS", "DeployArgs", "parse_deploy_args"]

#: ms-swift 4.x's ``--infer_backend`` choices that serve with a GPU engine or plain transformers
#: (``pt`` is 3.x's name for transformers; ms-swift 4 still accepts it with a warning).
BACKENDS = ("vllm", "sglang", "transformers")

_KINDS: dict[str, str] = {
    "model": "str",
    "adapters": "list",
    "infer_backend": "str",
    "torch_dtype": "str",
    "merge_lora": "bool",
    "quant_method": "str",
    "quant_bits": "int",
    "max_batch_size": "int",
    "max_length": "int",
    "max_new_tokens": "int",
    "vllm_gpu_memory_utilization": "float",
    "vllm_tensor_parallel_size": "int",
    "vllm_max_num_seqs": "int",
    "vllm_max_model_len": "int",
    "vllm_max_lora_rank": "int",
    "vllm_enforce_eager": "bool",
    "vllm_quantization": "str",
    "sglang_mem_fraction_static": "float",
    "sglang_tp_size": "int",
    "sglang_context_length": "int",
    "sglang_disable_cuda_graph": "bool",
    "sglang_kv_cache_dtype": "str",
    "sglang_quantization": "str",
}
_POSITIVE = {
    "max_batch_size",
    "max_length",
    "max_new_tokens",
    "vllm_tensor_parallel_size",
    "vllm_max_num_seqs",
    "vllm_max_model_len",
    "vllm_max_lora_rank",
    "sglang_tp_size",
    "sglang_context_length",
}
#: ms-swift 2.x/3.x names -> 4.x names (a note says so, as ``swift.parse_sft_args`` does)
_RENAMES = {
    "gpu_memory_utilization": "vllm_gpu_memory_utilization",
    "tensor_parallel_size": "vllm_tensor_parallel_size",
    "max_model_len": "vllm_max_model_len",
    "max_num_seqs": "vllm_max_num_seqs",
    "max_lora_rank": "vllm_max_lora_rank",
    "enforce_eager": "vllm_enforce_eager",
    "model_id_or_path": "model",
    "ckpt_dir": "adapters",
    "dtype": "torch_dtype",
    "quantization_bit": "quant_bits",
}
_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
_BOOL = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


@dataclass(frozen=True)
class DeployArgs:
    """What decides serving memory, with ms-swift 4.x's defaults; the rest in ``extra``."""

    model: str | None = None
    adapters: tuple = ()
    infer_backend: str = "transformers"
    torch_dtype: str | None = None
    merge_lora: bool = False
    quant_method: str | None = None
    quant_bits: int | None = None
    max_batch_size: int = 1
    max_length: int | None = None
    max_new_tokens: int | None = None
    vllm_gpu_memory_utilization: float = 0.9
    vllm_tensor_parallel_size: int = 1
    vllm_max_num_seqs: int = 256
    vllm_max_model_len: int | None = None
    vllm_max_lora_rank: int = 16
    vllm_enforce_eager: bool = False
    vllm_quantization: str | None = None
    sglang_mem_fraction_static: float | None = None
    sglang_tp_size: int = 1
    sglang_context_length: int | None = None
    sglang_disable_cuda_graph: bool = False
    sglang_kv_cache_dtype: str = "auto"
    sglang_quantization: str | None = None
    extra: tuple = ()
    notes: tuple = ()
    explicit: frozenset = field(default_factory=frozenset)

    @property
    def tensor_parallel(self) -> int:
        """The engine's tensor-parallel size (vLLM's or SGLang's argument; 1 for transformers)."""
        if self.infer_backend == "vllm":
            return self.vllm_tensor_parallel_size
        if self.infer_backend == "sglang":
            return self.sglang_tp_size
        return 1

    @property
    def max_model_len(self) -> int | None:
        """The context length asked for, in the backend's own argument (None: the model's)."""
        if self.infer_backend == "vllm":
            return self.vllm_max_model_len
        if self.infer_backend == "sglang":
            return self.sglang_context_length
        return self.max_length

    def to_argv(self) -> list[str]:
        """The ms-swift 4.x argv: the explicit fields, then the passed-through ones."""
        out: list[str] = []
        for f in dataclasses.fields(self):
            if f.name not in self.explicit:
                continue
            value = getattr(self, f.name)
            if value is None:
                continue
            out.append("--" + f.name)
            if isinstance(value, tuple):
                out.extend(str(v) for v in value)
            elif isinstance(value, bool):
                out.append("true" if value else "false")
            else:
                out.append(f"{value:g}" if isinstance(value, float) else str(value))
        for name, raw in self.extra:
            out.append("--" + name)
            out.extend(raw)
        return out

    def replace(self, **changes: Any) -> DeployArgs:
        """A copy with ``changes`` set (and counted as explicit, so ``to_argv`` prints them)."""
        return dataclasses.replace(self, **changes, explicit=self.explicit | frozenset(changes))


def parse_deploy_args(argv: list[str] | tuple[str, ...]) -> DeployArgs:
    """Parse a ``swift deploy`` argv (a leading ``swift deploy`` is dropped) into ``DeployArgs``.

    Raises ``InvalidRequest`` on a missing value, a non-number for a number, an unknown backend, a
    memory fraction outside (0, 1], or a hostile string (the sft parser's token checks).
    """
    if isinstance(argv, str):
        raise InvalidRequest("arguments must be a list of strings, not one string; split it first")
    tokens = [_check_token(t) for t in argv]
    while tokens and tokens[0] in ("swift", "deploy"):
        tokens.pop(0)
    values: dict[str, Any] = {}
    extra: list[tuple[str, tuple[str, ...]]] = []
    notes: list[str] = []
    for key, raw in _split_pairs(tokens):
        name = key.replace("-", "_")
        if name in _RENAMES:
            notes.append(f"--{key} -> --{_RENAMES[name]}: the ms-swift 4.x name")
            name = _RENAMES[name]
        if name not in _KINDS:
            extra.append((name, tuple(raw)))
            continue
        values[name] = _value(name, raw, key)
    backend = values.get("infer_backend")
    if backend == "pt":
        values["infer_backend"] = "transformers"
        notes.append("--infer_backend pt -> transformers: ms-swift 4.x's name (pt is deprecated)")
    elif backend is not None and backend not in BACKENDS:
        raise InvalidRequest(
            f"--infer_backend {backend!r}: the estimator knows {', '.join(BACKENDS)} (lmdeploy is not modelled)"
        )
    if values.get("torch_dtype") in _DTYPES:
        values["torch_dtype"] = _DTYPES[values["torch_dtype"]]
    for name in ("vllm_gpu_memory_utilization", "sglang_mem_fraction_static"):
        if name in values and not 0 < values[name] <= 1:
            raise InvalidRequest(
                f"--{name} {values[name]:g}: a share of the GPU's memory, above 0 and at most 1 "
                "(0.9 asks for 90%); to give memory in GiB, divide it by the GPU's memory"
            )
    if values.get("quant_bits") is not None and values["quant_bits"] not in (4, 8):
        raise InvalidRequest(f"--quant_bits {values['quant_bits']}: serving quantizes to 4 or 8 bits")
    return DeployArgs(**values, extra=tuple(extra), notes=tuple(notes), explicit=frozenset(values))


def _value(name: str, raw: list[str], key: str) -> Any:
    kind = _KINDS[name]
    if kind == "list":
        if not raw:
            raise InvalidRequest(f"--{key} needs at least one value")
        return tuple(raw)
    if kind == "bool" and not raw:
        return True
    if len(raw) != 1:
        raise InvalidRequest(f"--{key} takes one value, got {len(raw)}" + (f": {' '.join(raw)}" if raw else ""))
    text = raw[0]
    if kind == "bool":
        if text.lower() not in _BOOL:
            raise InvalidRequest(f"--{key} {text!r}: expected true or false")
        return _BOOL[text.lower()]
    if kind == "int":
        value = bounds.whole_number(text, f"--{key}")
        if name in _POSITIVE and value < 1:
            raise InvalidRequest(f"--{key} {value}: must be at least 1")
        return value
    if kind == "float":
        try:
            return float(text)
        except ValueError:
            raise InvalidRequest(f"--{key} {text!r}: expected a number") from None
    return text
