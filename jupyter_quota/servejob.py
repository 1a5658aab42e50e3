"""Serving a finished fine-tune: its ``swift deploy`` arguments from the job's own record, and
whose job output a model path lies in.

Pure, no I/O but ``os.path`` on the checkpoint folders a log names. ``POST .../endpoints`` with
``"job": NAME`` serves the last checkpoint of the team's Succeeded ``swift sft`` job NAME: its
adapters over the base model it was trained from (``--model BASE --adapters CKPT``), or the
checkpoint itself after a full fine-tune (``--model CKPT``). The paths come from the job's
arguments and log, never from the user; ``service/servejobs.py`` reads them and calls this.
"""

from __future__ import annotations

import os

from . import reasons
from .deploy import parse_deploy_args
from .errors import Conflict, InvalidRequest
from .podresources import DNS1123_LABEL
from .swift import parse_sft_args
from .swiftlog import TrainProgress

#: the body field naming the job to serve
JOB_FIELD = "job"
#: what a finished fine-tune carries over to ``swift deploy`` when the user did not say
_CARRIED = ("model_type", "template", "torch_dtype")


def job_name(value) -> str:
    """The ``"job"`` field: the name of a job of the endpoint's own namespace."""
    if not isinstance(value, str) or not DNS1123_LABEL.fullmatch(value):
        raise InvalidRequest(
            f'"job" must be the name of a finished fine-tune in this namespace (e.g. "tiny-lora-x7k2p"), '
            f"not {value!r}; a job of another team's namespace cannot be served here"
        )
    return value


def deploy_args_for(job: dict, checkpoint: str | None, user_args: list[str]) -> list[str]:
    """The ``swift deploy`` arguments that serve ``job``'s ``checkpoint``: the model (and adapters)
    first, then what the training used that the user did not set (``--model_type``,
    ``--template``, ``--torch_dtype``), then the user's own. Refuses, naming what to do instead,
    user arguments that name the model themselves and a job that is an endpoint (400), and one
    that did not succeed or saved no checkpoint (409)."""
    name = job["name"]
    asked = parse_deploy_args(user_args)
    if asked.model or asked.adapters:
        raise InvalidRequest(
            f'with "job", the service serves job "{name}"\'s own checkpoint: leave out --model and '
            '--adapters (or leave out "job" and give them yourself)'
        )
    if job.get("kind"):
        raise InvalidRequest(
            f'job "{name}" is itself an endpoint ({job["kind"]}), not a fine-tune; name a Succeeded '
            "swift sft job, or serve a model with --model"
        )
    if job["phase"] != "Succeeded":
        why = f" ({job['reason']})" if job.get("reason") else ""
        raise Conflict(
            f'job "{name}" is {job["phase"]}{why}, not Succeeded: only a fine-tune that finished can be '
            "served; wait until it ends, or serve one of its checkpoints with --model and --adapters",
            reason=reasons.NOT_SERVABLE,
        )
    if not checkpoint:
        raise Conflict(
            f'job "{name}" saved no checkpoint (its log names none): there is nothing to serve; train '
            "again with --save_steps at most --max_steps, or with --save_strategy epoch",
            reason=reasons.NOT_SERVABLE,
        )
    sft = parse_sft_args(job["args"])
    if not sft.model:
        raise Conflict(f'job "{name}" names no --model: its base model is unknown', reason=reasons.NOT_SERVABLE)
    served = ["--model", checkpoint] if sft.tuner_type == "full" else ["--model", sft.model, "--adapters", checkpoint]
    trained = {"model_type": sft.model_type, "torch_dtype": sft.torch_dtype}
    trained.update({key: values[0] for key, values in sft.extra if key == "template" and len(values) == 1})
    given = {key for key, _ in asked.extra} | set(asked.explicit)
    for key in _CARRIED:
        if trained.get(key) and key not in given:
            served += [f"--{key}", str(trained[key])]
    return [*served, *user_args]


def output_roots(job: dict, progress: TrainProgress) -> list[str]:
    """The folders a fine-tune wrote its model to: ``--output_dir`` when absolute, the run folder
    ms-swift logged, each checkpoint it saved and the folder holding them (real paths)."""
    roots: list[str] = []
    sft_output = _flag_value(job.get("args") or [], "output_dir")
    if sft_output and os.path.isabs(sft_output):
        roots.append(sft_output)
    if progress.output_dir:
        roots.append(progress.output_dir)
    for checkpoint in [*progress.checkpoints, progress.last_checkpoint]:
        if checkpoint:
            roots += [checkpoint, os.path.dirname(checkpoint.rstrip("/"))]
    return sorted({os.path.realpath(r) for r in roots if os.path.isabs(r)})


def model_paths(args: list[str]) -> list[str]:
    """The paths ``swift deploy`` would read a model from: ``--model`` and each of ``--adapters``."""
    parsed = parse_deploy_args(args)
    return [p for p in (parsed.model, *parsed.adapters) if p]


def inside(path: str, roots: list[str]) -> bool:
    """Whether ``path`` (resolved: links, ``..``) is one of ``roots`` or below one."""
    real = os.path.realpath(path)
    return any(real == root or real.startswith(root.rstrip("/") + "/") for root in roots)


def _flag_value(args: list[str], name: str) -> str | None:
    for i, token in enumerate(args):
        key, eq, value = token[2:].partition("=") if token.startswith("--") else ("", "", "")
        if key.replace("-", "_") == name:
            return value if eq else (args[i + 1] if i + 1 < len(args) else None)
    return None
