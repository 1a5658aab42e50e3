"""What the local backend's admission transaction needs around ``quota.admit_job``.

Usage is what the ledger holds inside the transaction: the admitted pod of every live (Pending
or Running) job of the namespace counts, and ``count/jobs.batch`` is the number of live jobs.
``quotas_with_status`` reads it from the rows; admission reads it from ``quotausage``'s copy,
which gives the same quotas at the cost of what changed. A finished local job counts as
deleted, as a Job with ``ttlSecondsAfterFinished: 0`` would be on a cluster: its record stays
(for its log and history, and its name stays taken), but it holds no quota.
"""

from __future__ import annotations

import re
import sqlite3

from ... import bounds, errors, priority, quota
from ...jobfields import priority_of, train_container, user_args
from ...quantity import Quantity
from . import clock, jobview, ledger

GPU = "nvidia.com/gpu"
JOB_COUNT = "count/jobs.batch"

_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SUBDOMAIN_HELP = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def validate_job(job: dict, namespace: str) -> str:
    """Check what the local backend relies on; return the Job's name. Raises ``errors.Invalid``."""
    meta = job.get("metadata") or {}
    name = meta.get("name") or ""
    if not name:
        raise errors.Invalid('Job.batch "" is invalid: metadata.name: Required value: name or generateName is required')
    prefix = f'Job.batch "{name}" is invalid: '
    if len(name) > 63:
        raise errors.Invalid(f'{prefix}metadata.name: Invalid value: "{name}": must be no more than 63 characters')
    if not _DNS1123_SUBDOMAIN.fullmatch(name):
        raise errors.Invalid(f'{prefix}metadata.name: Invalid value: "{name}": {_SUBDOMAIN_HELP}')
    if meta.get("namespace") not in (None, "", namespace):
        raise errors.Invalid("the namespace of the provided object does not match the namespace sent on the request")
    spec = job.get("spec") or {}
    for field in ("parallelism", "completions"):
        if spec.get(field) not in (None, 1):
            raise errors.Invalid(
                f"{prefix}spec.{field}: Invalid value: {spec[field]}: the local backend runs one process per job"
            )
    template = (spec.get("template") or {}).get("spec") or {}
    if not template.get("containers"):
        raise errors.Invalid(f"{prefix}spec.template.spec.containers: Required value: at least one container")
    if not jobview.command_of(train_container({"spec": template})):
        raise errors.Invalid(
            f"{prefix}spec.template.spec.containers[0].command: Required value: "
            "the local backend runs the container's command"
        )
    return name


def quotas_with_status(quotas: list[dict], live: list[sqlite3.Row]) -> list[dict]:
    """The namespace's quotas with ``status.hard``/``status.used`` as the quota controller sets them."""
    pods = live_pods(live)
    counts = {JOB_COUNT: len(live)}
    return [quota.quota_status(q, pods, counts) for q in quotas]


def effective_quotas(profile, best_effort: bool = False) -> list[dict]:
    """The namespace's quotas as admission applies them: the profile's (the service gives the
    effective one: open windows and increases added, ``QuotaService._effective``) and, for a
    best-effort job, the main quota's hard raised by the team's ``borrowingLimit`` (what it may
    run beyond its quota on others' idle GPUs; the scheduler's policy, ``elastic``, decides
    when). Only resources the quota limits are raised."""
    quotas = profile.resource_quotas()
    borrowing = getattr(profile, "borrowingLimit", {}) if best_effort else {}
    if not profile.hard or not quotas or not borrowing:
        return quotas
    hard = quotas[0]["spec"]["hard"]
    for name, value in borrowing.items():
        if name in hard:
            hard[name] = str(Quantity(str(hard[name])) + Quantity(str(value)))
    return quotas


def without_best_effort(con: sqlite3.Connection, namespace: str, quotas: list[dict]) -> list[dict]:
    """``quotas`` (with status) less what the namespace's live best-effort jobs use: a high or
    normal job is admitted against the team's quota as if they were not there, since it may
    preempt them (``elastic``)."""
    rows = con.execute(
        "SELECT usage FROM jobs WHERE namespace = ? AND phase IN (?, ?) AND priority = ?",
        (namespace, *ledger.LIVE, priority.BEST_EFFORT),
    ).fetchall()
    if not rows:
        return quotas
    total: dict[str, Quantity] = {}
    for row in rows:
        for name, value in ledger.loads(row["usage"], {}).items():
            total[name] = total.get(name, Quantity(0)) + Quantity(bounds.clamp(str(value)))
    for q in quotas:
        used = q.get("status", {}).get("used", {})
        for name in used:
            if name in total:
                used[name] = str(max(Quantity(0), Quantity(str(used[name])) - total[name]))
    return quotas


def live_pods(live: list[sqlite3.Row]) -> list[dict]:
    """The pods of live jobs, with their phase, as quota evaluates them.

    A quantity an older version admitted past today's bounds counts as the bound (``bounds.clamp``):
    the job still holds its quota, and the sums stay small enough to compute.
    """
    pods = []
    for row in live:
        pod = _clamped(ledger.loads(row["pod"]))
        pod.setdefault("status", {})["phase"] = row["phase"]
        pods.append(pod)
    return pods


def _clamped(pod: dict) -> dict:
    """``pod`` with each quantity of its spec passed through ``bounds.clamp``, in place."""
    bounds.clamp_pod_spec(pod.get("spec"))
    return pod


def job_row(profile, job: dict, owner: str, admission) -> dict:
    """The ledger row for an admitted job (phase Pending)."""
    pod = admission.pod
    gpus = quota.pod_requests(pod).get(GPU)
    return {
        "namespace": profile.namespace,
        "name": job["metadata"]["name"],
        "team": profile.team,
        "owner": owner,
        "phase": "Pending",
        "args": ledger.dumps(user_args(job)),
        "gpus": int(Quantity(str(gpus)).value()) if gpus is not None else 0,
        "pod": ledger.dumps(pod),
        "usage": ledger.dumps({k: str(v) for k, v in admission.usage.items()}),
        "job": ledger.dumps(job),
        "created_at": clock.now(),
        "priority": priority_of(job),
    }
