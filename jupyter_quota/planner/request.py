"""The bodies of ``POST /estimate``, ``POST /namespaces/{ns}/plan`` and ``POST /verifications``, checked
before any work.

Arguments get the same checks as a job's (``jobspec``): a list of strings, bounded, no control
characters; GPUs are whole numbers from 1 (a plan or an estimate for 0 GPUs means nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import jobspec
from ..errors import InvalidRequest
from ..jobspec import _parse_args  # the job body's own checks, shared

ESTIMATE_FIELDS = ("args", "gpus", "modelSize")
PLAN_FIELDS = ("args", "gpus", "modelSize")
SERVE_FIELDS = ("args", "gpus", "gpuMemory")
SERVE_PLAN_FIELDS = ("args", "gpus")
#: a verification is of an argv on some GPUs (no ``modelSize``: an approximate model has no
#: config.json to simulate)
VERIFY_FIELDS = ("args", "gpus")
VERIFY_EXAMPLE = '{"args": ["--model", "Qwen/Qwen2.5-0.5B-Instruct", "--tuner_type", "lora"], "gpus": 1}'


@dataclass(frozen=True)
class SftRequest:
    args: list
    gpus: int | None
    #: the size of a model the estimator has no facts for (``8B``, ``30B-A3B``): an approximate estimate
    model_size: str | None = None


def parse_estimate_request(body) -> SftRequest:
    """``{"args": [...], "gpus": N, "modelSize"?: "8B"}``; ``gpus`` defaults to 1."""
    request = _parse(body, ESTIMATE_FIELDS, '{"args": ["--model", "Qwen/Qwen2.5-7B-Instruct"], "gpus": 1}')
    return SftRequest(request.args, request.gpus or 1, request.model_size)


def parse_plan_request(body) -> SftRequest:
    """``{"args": [...], "gpus"?: N, "modelSize"?: "8B"}``; ``gpus`` is the count the user had in mind (default 1)."""
    return _parse(body, PLAN_FIELDS, '{"args": ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "full"]}')


def parse_verify_request(body) -> SftRequest:
    """``{"args": [...], "gpus"?: N}`` of ``POST /verifications``; ``gpus`` defaults to 1."""
    args, gpus = _args_and_gpus(body, VERIFY_FIELDS, VERIFY_EXAMPLE, "swift sft")
    return SftRequest(args, gpus or 1)


@dataclass(frozen=True)
class ServeRequest:
    args: list
    gpus: int | None
    #: one GPU's memory in bytes (None: the estimator's default, 80 GiB)
    gpu_memory: int | None = None


def parse_serve_request(body, fields: tuple = SERVE_FIELDS) -> ServeRequest:
    """``{"args": [swift deploy args], "gpus"?: N, "gpuMemory"?: "80Gi"}`` (a plan's body takes
    ``SERVE_PLAN_FIELDS``: its GPU memory is the namespace's)."""
    example = '{"args": ["--model", "Qwen/Qwen3-8B", "--infer_backend", "vllm"], "gpus": 1}'
    args, gpus = _args_and_gpus(body, fields, example, "swift deploy")
    return ServeRequest(args, gpus, parse_gpu_memory(body.get("gpuMemory")))


def parse_gpu_memory(value) -> int | None:
    """A GPU's memory as a quantity (``80Gi``, ``24Gi``): from 1 GiB to 4 TiB."""
    if value is None:
        return None
    from ..quantity import parse_quantity

    if not isinstance(value, str):
        raise InvalidRequest(f'"gpuMemory" must be a quantity string like "80Gi", got {value!r}')
    try:
        size = parse_quantity(value).value()
    except (InvalidRequest, ValueError):
        raise InvalidRequest(f'"gpuMemory" {value!r}: expected a quantity like "80Gi" or "24Gi"') from None
    if not 2**30 <= size <= 2**42:
        raise InvalidRequest(f'"gpuMemory" {value!r}: a GPU has from 1Gi to 4Ti of memory')
    return int(size)


def parse_gpus(value, what: str = '"gpus"') -> int:
    """A whole number of GPUs from 1 to ``MAX_GPUS``: the job body's own check, with a floor of 1."""
    return jobspec.parse_gpus(value, what, minimum=1)


def _parse(body, fields: tuple, example: str) -> SftRequest:
    args, gpus = _args_and_gpus(body, fields, example, "swift sft")
    return SftRequest(args, gpus, parse_model_size(body.get("modelSize")))


def _args_and_gpus(body, fields: tuple, example: str, command: str) -> tuple:
    """The checks every estimate and plan body shares: a JSON object of ``fields`` only, with
    ``args`` (``command``'s arguments) and an optional ``gpus``."""
    if not isinstance(body, dict):
        raise InvalidRequest(f"the body must be a JSON object like {example}")
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise InvalidRequest(f"unknown field(s) {', '.join(map(repr, unknown))}; the body takes {', '.join(fields)}")
    if "args" not in body:
        raise InvalidRequest(f'"args" is required: the {command} arguments as a list, e.g. {example}')
    args = _parse_args(body["args"])
    return args, None if body.get("gpus") is None else parse_gpus(body["gpus"])


def parse_model_size(value, what: str = '"modelSize"') -> str | None:
    """``8B``, ``0.5B``, ``135M``, ``30B-A3B``: checked here so a bad one is a 400 before any work."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest(f'{what} must be a string like "8B" or "30B-A3B", got {value!r}')
    from ..estimator.approx import parse_model_size as parse

    parse(value)
    return value.strip()
