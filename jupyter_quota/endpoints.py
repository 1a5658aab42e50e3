"""Endpoints, a kind of job that serves: the request, the argv, and the endpoint as the API shows it.

Pure, no I/O. An endpoint is a job (``jobspec``) labelled ``labels.KIND_ENDPOINT`` whose command
is ``swift deploy`` with the user's arguments, then the loopback address and the port the service
picked (``--host 127.0.0.1 --port N``): it is admitted, counted, scheduled, reaped and cancelled as
any job is. What a job cannot say, whether its server answers (``/health``) and the models it
serves (``/v1/models``), the service adds from its probes (``service/endpoints.py``).

Phases: ``Pending`` (admitted, waiting for resources), ``Starting`` (running, ``/health`` not yet
answering), ``Ready``, ``Stopped`` (deleted, stopped for idleness, or exited cleanly) and
``Failed``.
"""

from __future__ import annotations

from dataclasses import replace

from . import labels, reasons
from .deploy import parse_deploy_args
from .errors import InvalidRequest
from .jobspec import JobRequest, parse_job_request
from .profiles import TeamProfile

#: the body of ``POST /namespaces/{ns}/endpoints``
REQUEST_FIELDS = ("name", "generateName", "args", "job", "gpus", "priority")
DEFAULT_GENERATE_NAME = "serve-"
#: where a local endpoint's server listens: the proxy is its only door
HOST = "127.0.0.1"
#: arguments the service sets itself
_RESERVED = ("port", "host", "api_key")
_EXAMPLE = '{"args": ["--model", "Qwen/Qwen2.5-0.5B-Instruct", "--infer_backend", "transformers"]}'

PENDING, STARTING, READY, STOPPED, FAILED = "Pending", "Starting", "Ready", "Stopped", "Failed"
PHASES = (PENDING, STARTING, READY, STOPPED, FAILED)


def parse_endpoint_request(body, profile: TeamProfile) -> JobRequest:
    """Validate a ``POST .../endpoints`` body; raise :class:`InvalidRequest` naming what to fix.

    ``args`` are ``swift deploy``'s (checked by ``deploy.parse_deploy_args``: numbers, fractions,
    backends) and must name ``--model``; ``--port``, ``--host`` and ``--api_key`` are the service's.
    """
    if not isinstance(body, dict):
        raise InvalidRequest(f"the body must be a JSON object like {_EXAMPLE}")
    unknown = sorted(set(body) - set(REQUEST_FIELDS))
    if unknown:
        raise InvalidRequest(
            f"unknown field(s) {', '.join(map(repr, unknown))}; an endpoint takes {', '.join(REQUEST_FIELDS)}"
        )
    if "args" not in body:
        raise InvalidRequest(
            f'"args" is required: the swift deploy arguments as a list, e.g. {_EXAMPLE}; or "job": the '
            "name of a finished fine-tune to serve"
        )
    if not body.get("name") and not body.get("generateName"):
        body = {**body, "generateName": DEFAULT_GENERATE_NAME}
    request = parse_job_request(body, profile)
    args = list(request.args)
    while args and args[0] in ("swift", "deploy"):
        args.pop(0)
    parsed = parse_deploy_args(args)
    if not parsed.model:
        raise InvalidRequest(
            f'"args" must name the model to serve with --model (a path or a model id), e.g. {_EXAMPLE}'
        )
    for flag in args:
        name = flag[2:].split("=", 1)[0].replace("-", "_") if flag.startswith("--") else ""
        if name in _RESERVED:
            raise InvalidRequest(
                f"--{name} is set by the service (it picks a free port on {HOST} and proxies it); leave it out"
            )
    return replace(request, args=args, kind=labels.KIND_ENDPOINT)


def served_args(args: list[str], port: int, host: str = HOST) -> list[str]:
    """The argv ``swift deploy`` runs with: the user's, then where to listen (``host``: the
    loopback address locally; every address of its pod on Kubernetes, ``endpointspec.HOST``)."""
    return [*args, "--host", host, "--port", str(port)]


def port_of(job: dict) -> int | None:
    """The port an endpoint's job listens on (its last ``--port``), or None."""
    args = job.get("args") or []
    for i in range(len(args) - 2, -1, -1):
        if args[i] == "--port" and args[i + 1].isdigit():
            return int(args[i + 1])
    return None


def is_endpoint(job: dict) -> bool:
    return job.get("kind") == labels.KIND_ENDPOINT


def run_of(job: dict) -> tuple:
    """Which run of its job a server is: a preempted job is requeued and started again keeping its
    first ``startedAt``, but each preemption adds events to its ``history``, so readiness learnt
    of one process is never taken for the next."""
    return job.get("startedAt"), len(job.get("history") or [])


def phase_of(job: dict, ready: bool) -> str:
    """The endpoint's phase from its job's and whether its server answered ``/health``."""
    if job["phase"] == "Pending":
        return PENDING
    if job["phase"] == "Running":
        return READY if ready else STARTING
    if job["phase"] == "Succeeded" or job.get("reason") in (reasons.CANCELLED, reasons.IDLE):
        return STOPPED
    return FAILED


def endpoint_json(job: dict, probe: dict | None) -> dict:
    """An endpoint as the API returns it (``url`` is added by the handler, which knows the base URL).

    ``probe``: what the service learnt from the server, ``{"models", "readyAt", "lastRequestAt"}``.
    """
    probe = (probe or {}) if job["phase"] == "Running" else {}  # what a server that ended said is gone
    endpoint = {
        "name": job["name"],
        "namespace": job["namespace"],
        "team": job["team"],
        "owner": job["owner"],
        "phase": phase_of(job, bool(probe.get("readyAt"))),
        "models": list(probe.get("models") or []),
        "args": job["args"],
        "gpus": job["gpus"],
        "priority": job["priority"],
        "resources": job["resources"],
        "createdAt": job["createdAt"],
    }
    for key in ("startedAt", "finishedAt", "reason", "message"):
        if job.get(key):
            endpoint[key] = job[key]
    for key in ("readyAt", "lastRequestAt"):
        if probe.get(key):
            endpoint[key] = probe[key]
    return endpoint


def idle_message(minutes: float) -> str:
    return (
        f"no request reached the endpoint for {minutes:g} minutes (JupyterQuota.endpoint_idle_minutes), "
        "so it was stopped and its quota returned; create it again to serve"
    )
