"""Temporary quota increases: a user's request, an admin's decision, and its expiry. Pure: no I/O.

A request asks for more of resources the team's hard quota already names, for some hours, with a
reason. It is Pending until an admin approves it (it then raises the team's effective hard quota
until ``expiresAt``) or denies it; an approved request whose time is up is Expired, whether or not
the service has recorded that yet (``phase_at``), so admission never counts an increase past its end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import bounds
from .errors import InvalidRequest
from .quantity import Quantity

PENDING, APPROVED, DENIED, EXPIRED = "Pending", "Approved", "Denied", "Expired"
PHASES = (PENDING, APPROVED, DENIED, EXPIRED)
FIELDS = ("resources", "hours", "reason")
MAX_REASON_CHARS = 1000
#: The shortest increase: one minute (``5e-324`` hours raised a quota for no time at all).
MIN_HOURS = 1 / 60
#: Resources counted in whole units (a pod count, a job count), besides the team's GPUs.
_WHOLE_PREFIXES = ("count/",)
_WHOLE_NAMES = ("pods", "services", "secrets", "configmaps", "persistentvolumeclaims")


@dataclass(frozen=True)
class IncreaseRequest:
    resources: dict[str, str]  # resource -> canonical quantity string, each > 0
    hours: float
    reason: str


def parse_request(body, hard: dict, gpu_resource: str, max_hours: float) -> IncreaseRequest:
    """Validate a request body against the team's hard quota; ``InvalidRequest`` saying what to fix."""
    if not isinstance(body, dict):
        raise InvalidRequest('the body must be a JSON object: {"resources": {...}, "hours": 8, "reason": "..."}')
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise InvalidRequest(f"unknown field(s) {', '.join(unknown)}; a request has {', '.join(FIELDS)}")
    return IncreaseRequest(
        _resources(body.get("resources"), hard, gpu_resource), _hours(body.get("hours"), max_hours), _reason(body)
    )


def _resources(raw, hard: dict, gpu_resource: str) -> dict[str, str]:
    example = '{"requests.nvidia.com/gpu": "2"}'
    if not isinstance(raw, dict) or not raw:
        raise InvalidRequest(f"resources: must be an object of resource to quantity, e.g. {example}")
    named = ", ".join(sorted(hard)) or "none (the team has no hard quota to raise)"
    out = {}
    for resource, value in raw.items():
        if resource not in hard:
            raise InvalidRequest(
                f"resources: {bounds.shown(resource)} is not a resource the team's quota limits; it limits: {named}"
            )
        where = f"resources[{resource}]"
        q = bounds.quantity(value, where)
        if q.sign() <= 0:
            raise InvalidRequest(f"{where}: Invalid value: {bounds.shown(str(value))}: must be greater than zero")
        if _whole(resource, gpu_resource) and q.as_fraction().denominator != 1:
            what = "GPUs" if gpu_resource in resource else "this resource"
            raise InvalidRequest(
                f"{where}: Invalid value: {bounds.shown(str(value))}: {what} come in whole units; ask for e.g. 1 or 2"
            )
        out[resource] = str(q)
    return out


def _whole(resource: str, gpu_resource: str) -> bool:
    name = resource.removeprefix("requests.").removeprefix("limits.")
    return name == gpu_resource or resource.startswith(_WHOLE_PREFIXES) or resource in _WHOLE_NAMES


def _hours(raw, max_hours: float) -> float:
    if (
        isinstance(raw, bool)
        or not isinstance(raw, (int, float))
        or (isinstance(raw, float) and not math.isfinite(raw))
    ):
        raise InvalidRequest(
            f"hours: must be a number of hours, at least one minute ({MIN_HOURS:.4g}) and at most {max_hours:g}, e.g. 8"
        )
    if not MIN_HOURS <= raw <= max_hours:
        raise InvalidRequest(
            f"hours: {_number(raw)} is out of range: at least one minute ({MIN_HOURS:.4g}) and at most "
            f"{max_hours:g} (JupyterQuota.max_increase_hours); ask again for longer when it ends"
        )
    return float(raw)


def _number(value: int | float) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value) if abs(value) < 10**15 else "a number of more than 15 digits"


def _reason(body: dict) -> str:
    raw = body.get("reason")
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidRequest("reason: say why the team needs more, e.g. a deadline or an experiment")
    if len(raw) > MAX_REASON_CHARS:
        raise InvalidRequest(f"reason: {len(raw)} characters; at most {MAX_REASON_CHARS} are accepted")
    return raw.strip()


# -- phases and time ------------------------------------------------------------------------------


def phase_at(row, now: float) -> str:
    """The request's phase at ``now``: an Approved one past its end is Expired."""
    if row["phase"] == APPROVED and row["expires_at"] is not None and row["expires_at"] <= now:
        return EXPIRED
    return row["phase"]


def active(rows, now: float) -> list:
    """The rows in force at ``now``: approved and not yet expired."""
    return [r for r in rows if phase_at(r, now) == APPROVED]


def next_expiry(rows, now: float) -> float | None:
    """When the next increase in force at ``now`` ends (epoch seconds), or None."""
    ends = [r["expires_at"] for r in active(rows, now)]
    return min(ends) if ends else None


def overcommit_warnings(
    asked: dict, quotas: list[dict], gpu_key: str, capacity: int, what: str = "this increase"
) -> list[str]:
    """The approver's warning: with ``asked`` added, the teams' quotas (``quotas``: each team's
    effective hard quota) of ``gpu_key`` would add up to more than the ``capacity`` GPUs of the
    inventory, so not every team could use its whole quota at once. None when ``capacity`` is
    unknown (0: the Kubernetes backend does not count the cluster's GPUs). ``what`` names the
    change warned about (an increase, or a profile edit)."""
    if capacity <= 0:
        return []
    amounts = [q[gpu_key] for q in quotas if gpu_key in q] + [asked.get(gpu_key, "0")]
    total = sum(Quantity(str(a)).as_fraction() for a in amounts)
    if total <= capacity:
        return []
    shown = total.numerator if total.denominator == 1 else float(total)
    return [
        f"with {what} the teams' {gpu_key} quotas add up to {shown} GPUs, more than the {capacity} "
        "GPUs of the inventory: not every team can use its whole quota at once, and a team within its "
        "quota may wait for GPUs held by jobs within another's"
    ]


def describe(resources: dict, hours: float) -> str:
    """``+2 requests.nvidia.com/gpu for 8 h``: a request in words, for the audit log."""
    more = ", ".join(f"+{v} {k}" for k, v in sorted(resources.items()))
    return f"{more} for {hours:g} h"
