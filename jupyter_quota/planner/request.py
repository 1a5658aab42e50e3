"""The bodies of ``POST /estimate`` and ``POST /namespaces/{ns}/plan``, checked before any work.

Arguments get the same checks as a job's (``jobspec``): a list of strings, bounded, no control
characters; GPUs are whole numbers from 1 (a plan or an estimate for 0 GPUs means nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidRequest
from ..jobspec import MAX_GPUS, _parse_args, _shown  # the job body's own checks, shared
from ..quantity import Quantity

ESTIMATE_FIELDS = ("args", "gpus")
PLAN_FIELDS = ("args", "gpus")


@dataclass(frozen=True)
class SftRequest:
    args: list
    gpus: int | None


def parse_estimate_request(body) -> SftRequest:
    """``{"args": [...], "gpus": N}``; ``gpus`` defaults to 1."""
    request = _parse(body, ESTIMATE_FIELDS, '{"args": ["--model", "Qwen/Qwen2.5-7B-Instruct"], "gpus": 1}')
    return SftRequest(request.args, request.gpus or 1)


def parse_plan_request(body) -> SftRequest:
    """``{"args": [...], "gpus"?: N}``; ``gpus`` is the count the user had in mind (default 1)."""
    return _parse(body, PLAN_FIELDS, '{"args": ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "full"]}')


def parse_gpus(value, what: str = '"gpus"') -> int:
    """A whole number of GPUs from 1 to ``MAX_GPUS``, from JSON or a command line."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InvalidRequest(f"{what} must be a whole number like 1 or 2, not {_shown(value)}")
    try:
        q = Quantity(value) if isinstance(value, int) else Quantity(str(value))
    except (ValueError, TypeError):
        raise InvalidRequest(f"{what} {_shown(value)} is not a number; give a whole number like 1 or 2") from None
    if q.milli_value() % 1000 != 0:
        raise InvalidRequest(f"{what} {_shown(value)} is not a whole number: GPUs are whole, 1, 2, ... "
                             "never a fraction")
    n = q.value()
    if n < 1:
        raise InvalidRequest(f"{what} must be at least 1, not {n}")
    if n > MAX_GPUS:
        raise InvalidRequest(f"{what} asks for {n} GPUs; at most {MAX_GPUS} are accepted")
    return n


def _parse(body, fields: tuple, example: str) -> SftRequest:
    if not isinstance(body, dict):
        raise InvalidRequest(f"the body must be a JSON object like {example}")
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise InvalidRequest(f"unknown field(s) {', '.join(map(repr, unknown))}; the body takes "
                             f"{', '.join(fields)}")
    if "args" not in body:
        raise InvalidRequest(f'"args" is required: the swift sft arguments as a list, e.g. {example}')
    args = _parse_args(body["args"])
    gpus = None if body.get("gpus") is None else parse_gpus(body["gpus"])
    return SftRequest(args, gpus)
