"""What a plan is fitted to: a namespace's GPUs, their memory, its quotas and its LimitRange.

A :class:`PlanContext` is built from the balance a backend reports (``GET .../balance``) and the
team's profile. It keeps the ResourceQuota objects *with their status*, so every candidate's pod
is checked by the real admission code (``quota.admit_job``), never by a re-implementation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import InvalidRequest
from ..profiles import TeamProfile
from ..quantity import Quantity

#: Share of a GPU's memory a plan leaves free: allocator fragmentation, CUDA context growth,
#: NCCL buffers and estimation error. A plan fits when its peak <= memory x (1 - margin).
DEFAULT_MARGIN = 0.10
#: The most GPUs one plan spreads over (one node's worth); more are never enumerated.
MAX_PLAN_GPUS = 8
#: What a plan must fit: "upper", the upper end of its estimate's range (docs/estimator.md §9.1),
#: or "estimate", the point estimate. Config: ``JupyterQuota.plan_fit``.
FIT_CHOICES = ("upper", "estimate")
#: A plan that fits with less headroom than this share of the GPU's memory is marginal: it is
#: said so, and ranked after a sibling that fits with more (a 14B plan at 71.7 of 72 usable GiB).
MARGINAL_SHARE = 0.02

GIB = 1024**3


@dataclass(frozen=True)
class PlanContext:
    """A namespace as the planner sees it. Quantities are canonical strings, memory in bytes."""

    namespace: str
    team: str
    profile: TeamProfile
    gpu_memory: int
    gpus_remaining: int
    quotas: tuple = ()
    limit_ranges: tuple = ()
    remaining: dict = field(default_factory=dict)
    margin: float = DEFAULT_MARGIN
    #: the most GPUs a job could get here at all (machine size, quota hard, MAX_PLAN_GPUS)
    gpu_ceiling: int = MAX_PLAN_GPUS
    assumptions: tuple = ()
    fit: str = "upper"

    @property
    def usable_bytes(self) -> int:
        return int(self.gpu_memory * (1 - self.margin))

    def is_marginal(self, need: int) -> bool:
        """It fits, with less headroom than MARGINAL_SHARE of the GPU's memory."""
        return self.usable_bytes - self.gpu_memory * MARGINAL_SHARE < need <= self.usable_bytes

    def need_phrase(self, estimate) -> str:
        """``23.5 GiB (the upper end of its range 17.5-23.5; estimate 20.7)``, or the estimate when fitting it."""
        point = estimate.peak_bytes_per_gpu
        span = getattr(estimate, "range", None)
        if span is None:
            return f"{gib(point)} GiB"
        if self.fit == "upper":
            span_text = f"{gib(span.low)}-{gib(span.high)}"
            return f"{gib(span.high)} GiB (the upper end of its range {span_text}; estimate {gib(point)})"
        return f"{gib(point)} GiB (the estimate; range {gib(span.low)}-{gib(span.high)})"

    @property
    def gpu_resource(self) -> str:
        return self.profile.gpuResource

    def memory_phrase(self) -> str:
        """``a GPU has 80 GiB (72 GiB with the 10% margin)``."""
        return (
            f"a GPU has {gib(self.gpu_memory)} GiB ({gib(self.usable_bytes)} GiB with the "
            f"{self.margin * 100:g}% margin)"
        )

    def remaining_phrase(self) -> str:
        """``team-alpha has 1 GPU left`` (the UI's word for what the quota has remaining)."""
        return f"{self.namespace} has {self.gpus_remaining} GPU{'' if self.gpus_remaining == 1 else 's'} left"


def context_from_balance(
    balance: dict,
    profile: TeamProfile | dict | None = None,
    *,
    inventory: dict | None = None,
    gpu_memory: str | int | None = None,
    margin: float = DEFAULT_MARGIN,
    fit: str = "upper",
) -> PlanContext:
    """The planning context of one namespace.

    ``balance`` is what ``GET /namespaces/{ns}/balance`` returns (``quotas`` with hard/used per
    key; a bare ``resources`` map also works and is read as one quota named ``team-quota``).
    ``profile`` gives the GPU memory, the LimitRange and the pod template's extras; without one,
    the balance's ``limitRange`` is used. GPU memory: ``gpu_memory`` if given, else the profile's
    ``gpuMemory``, else the smallest GPU of ``inventory``; unknown is an error. ``fit``: what a plan
    must fit, the upper end of its estimate's range ("upper") or the estimate itself ("estimate").
    """
    if not isinstance(balance, dict):
        raise InvalidRequest("a balance must be a dict shaped like GET /namespaces/{ns}/balance")
    if not 0 <= margin < 1:
        raise InvalidRequest(f"the safety margin must be from 0 to 1 (e.g. 0.1 for 10%), not {margin!r}")
    if fit not in FIT_CHOICES:
        raise InvalidRequest(f"fit must be one of {', '.join(FIT_CHOICES)}, not {fit!r}")
    profile = _profile(balance, profile)
    namespace, team = profile.namespace, profile.team
    what = (
        "the upper end of its estimate's range (where measured peaks of its regime fell)"
        if fit == "upper"
        else "its estimated peak (not the range's upper end: plan_fit is 'estimate')"
    )
    assumptions = [
        f"a plan fits when {what} is at most the GPU's memory less a {margin * 100:g}% safety margin; "
        f"one within {MARGINAL_SHARE * 100:g}% of the GPU's memory of that is marginal"
    ]
    memory, source = _gpu_memory(profile, inventory, gpu_memory)
    assumptions.append(f"GPU memory {gib(memory)} GiB per GPU ({source})")

    quotas = tuple(_quotas_with_status(balance, namespace))
    limit_ranges = tuple(profile.limit_ranges()) or tuple(_limit_ranges(balance, namespace))
    remaining = _remaining(balance)
    gpu_key = "requests." + profile.gpuResource

    ceiling, why = MAX_PLAN_GPUS, f"at most {MAX_PLAN_GPUS} GPUs per plan (one node)"
    machine = len((inventory or {}).get("gpus") or [])
    if machine and machine < ceiling:
        ceiling, why = machine, f"the machine has {machine} GPU{'s' if machine != 1 else ''}"
    hard = _hard(balance, gpu_key)
    if hard is not None and hard < ceiling:
        ceiling, why = hard, f"the quota allows {hard} GPU{'s' if hard != 1 else ''} ({gpu_key})"
    gpus = ceiling
    if gpu_key in remaining:
        gpus = min(ceiling, math.floor(remaining[gpu_key].as_fraction()))
        assumptions.append(
            f"{gpus} GPU{'s' if gpus != 1 else ''} left: {gpu_key} has {remaining[gpu_key]} remaining; {why}"
        )
    else:
        assumptions.append(f"no quota on {gpu_key}: up to {ceiling} GPUs ({why})")
    return PlanContext(
        namespace=namespace,
        team=team,
        profile=profile,
        gpu_memory=memory,
        gpus_remaining=max(0, gpus),
        quotas=quotas,
        limit_ranges=limit_ranges,
        remaining=remaining,
        margin=margin,
        gpu_ceiling=max(1, ceiling),
        assumptions=tuple(assumptions),
        fit=fit,
    )


def gib(n: float) -> float:
    """Bytes as GiB, rounded to 0.1 for messages."""
    return round(n / GIB, 1) if n % GIB else n // GIB


# -- helpers ------------------------------------------------------------------------------------------


def _profile(balance: dict, profile) -> TeamProfile:
    if isinstance(profile, TeamProfile):
        return profile
    if isinstance(profile, dict):
        return TeamProfile(**profile)
    namespace = balance.get("namespace") or ""
    if not namespace:
        raise InvalidRequest("the balance names no namespace; give the profile or a balance with 'namespace'")
    team = balance.get("team") or namespace
    limit_range = balance.get("limitRange") or {}
    return TeamProfile(team=team, namespace=namespace, limitRange=limit_range)


def _gpu_memory(profile: TeamProfile, inventory, override) -> tuple[int, str]:
    if override not in (None, ""):
        value = override if isinstance(override, int) else Quantity(str(override)).value()
        return _positive(value, "the given gpu_memory"), "as given"
    if profile.gpuMemory:
        return _positive(
            Quantity(profile.gpuMemory).value(), "gpuMemory"
        ), f"from team {profile.team}'s profile: gpuMemory {profile.gpuMemory}"
    sizes = [Quantity(g["memory"]).value() for g in (inventory or {}).get("gpus") or [] if g.get("memory")]
    if sizes:
        return _positive(min(sizes), "the inventory's GPU memory"), "the smallest GPU of the machine's inventory"
    raise InvalidRequest(
        f"the GPU memory of namespace {profile.namespace} is unknown: team {profile.team}'s profile has no "
        "gpuMemory and the inventory lists none; a hub admin sets gpuMemory (e.g. '80Gi') in the profile",
        reason="GpuMemoryUnknown",
    )


def _positive(value: int, what: str) -> int:
    if value <= 0:
        raise InvalidRequest(f"{what} must be more than 0 bytes")
    return value


def _quotas_with_status(balance: dict, namespace: str) -> list[dict]:
    """ResourceQuota objects with spec.hard and status.used, as admission reads them."""
    listed = balance.get("quotas")
    if listed is None and balance.get("resources"):
        listed = [{"name": "team-quota", "resources": balance["resources"]}]
    quotas = []
    for q in listed or []:
        rows = q.get("resources") or {}
        spec: dict = {"hard": {k: str(r["hard"]) for k, r in rows.items()}}
        if q.get("scopes"):
            spec["scopes"] = list(q["scopes"])
        if q.get("scopeSelector"):
            spec["scopeSelector"] = q["scopeSelector"]
        quotas.append(
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": q.get("name") or "team-quota", "namespace": namespace},
                "spec": spec,
                "status": {"hard": dict(spec["hard"]), "used": {k: str(r.get("used", "0")) for k, r in rows.items()}},
            }
        )
    return quotas


def _limit_ranges(balance: dict, namespace: str) -> list[dict]:
    spec = balance.get("limitRange")
    if not spec:
        return []
    return [
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": {"name": "team-limits", "namespace": namespace},
            "spec": spec,
        }
    ]


def _remaining(balance: dict) -> dict:
    return {
        k: Quantity(str(r["remaining"]))
        for k, r in (balance.get("resources") or {}).items()
        if isinstance(r, dict) and "remaining" in r
    }


def _hard(balance: dict, key: str) -> int | None:
    row = (balance.get("resources") or {}).get(key)
    if not isinstance(row, dict) or "hard" not in row:
        return None
    return math.floor(Quantity(str(row["hard"])).as_fraction())
