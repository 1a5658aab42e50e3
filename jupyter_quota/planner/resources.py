"""A plan's pod resources: whole GPUs, CPU and memory from the LimitRange, checked by admission.

Each plan proposes container resources in order of preference and keeps the first that the
namespace's LimitRange and ResourceQuotas admit, using the real pipeline (``jobspec.build_job``
then ``quota.admit_job``), so a plan never promises what a submit would refuse:

1. the LimitRange's container defaults scaled by the GPU count (one training process per GPU,
   each with its dataloader workers and host copy of the batch), clamped to the LimitRange's
   ``max`` and to what the quota has left;
2. the LimitRange's container defaults as they are (what a job stating only its GPUs gets).

Without a LimitRange default, a GPU's share is taken to be ``FALLBACK_REQUEST``/``FALLBACK_LIMIT``.
"""

from __future__ import annotations

from .. import quota
from ..errors import AdmissionDenied, Invalid
from ..jobspec import JobRequest, build_job
from ..limitrange import container_defaults, default_limit_range
from ..quantity import Quantity
from .context import PlanContext

FALLBACK_REQUEST = {"cpu": "2", "memory": "16Gi"}
FALLBACK_LIMIT = {"cpu": "4", "memory": "32Gi"}
COMPUTE = ("cpu", "memory")


class Admission:
    """Pod resources per GPU count, admitted once and remembered (the search asks many times)."""

    def __init__(self, context: PlanContext):
        self.context = context
        self._cache: dict[tuple, tuple[dict, str | None]] = {}
        requests, limits = {}, {}
        for lr in context.limit_ranges:
            r, lim = container_defaults(default_limit_range(lr.get("spec") or {}))
            requests.update(r)
            limits.update(lim)
        self.defaults_stated = all(k in requests or k in limits for k in COMPUTE)
        self.default_requests = {k: Quantity(str(requests.get(k) or limits.get(k) or FALLBACK_REQUEST[k]))
                                 for k in COMPUTE}
        self.default_limits = {k: Quantity(str(limits.get(k) or FALLBACK_LIMIT[k])) for k in COMPUTE}
        for k in COMPUTE:
            if self.default_limits[k] < self.default_requests[k]:
                self.default_limits[k] = self.default_requests[k]
        self.maxima = _container_max(context.limit_ranges)

    def assumption(self) -> str:
        r, lim = self.default_requests, self.default_limits
        source = "the LimitRange's container defaults" if self.defaults_stated else "assumed (no LimitRange defaults)"
        return (f"pod resources per GPU: {r['cpu']} CPU / {r['memory']} memory requested, {lim['cpu']} / "
                f"{lim['memory']} limit ({source}), scaled by the GPU count where the LimitRange and quota allow")

    def resources(self, gpus: int, host_memory: int = 0) -> tuple[dict, str | None]:
        """``({"requests", "limits"}, None)`` when admitted, else the last proposal and the refusal."""
        key = (gpus, host_memory)
        if key not in self._cache:
            self._cache[key] = self._first_admitted(gpus, host_memory)
        resources, reason = self._cache[key]
        return {k: dict(v) for k, v in resources.items()}, reason

    # -- proposals --------------------------------------------------------------------------------

    def _first_admitted(self, gpus: int, host_memory: int) -> tuple[dict, str | None]:
        proposals = []
        for scale in (max(1, gpus), 1):
            p = self._proposal(gpus, scale, host_memory)
            if p not in proposals:
                proposals.append(p)
        error = None
        for p in proposals:
            error = self._refusal(p)
            if error is None:
                return p, None
        return proposals[-1], error

    def _proposal(self, gpus: int, scale: int, host_memory: int) -> dict:
        requests, limits = {}, {}
        remaining = self.context.remaining
        for k in COMPUTE:
            req, lim = self.default_requests[k] * scale, self.default_limits[k] * scale
            if k == "memory" and host_memory:
                need = Quantity(f"{-(-host_memory // 2**30)}Gi")
                req, lim = max(req, need), max(lim, need)
            if scale > 1:  # the scaled proposal stays within what LimitRange and quota allow
                cap_lim = _least(self.maxima.get(k), remaining.get(f"limits.{k}"))
                cap_req = _least(cap_lim, remaining.get(f"requests.{k}"), remaining.get(k))
                lim = max(self.default_limits[k], _least(lim, cap_lim))
                req = max(self.default_requests[k], _least(req, cap_req, lim))
            requests[k], limits[k] = str(req), str(max(lim, req))
        gpu = self.context.gpu_resource
        requests[gpu] = limits[gpu] = str(gpus)
        return {"requests": requests, "limits": limits}

    def _refusal(self, resources: dict) -> str | None:
        """None when the namespace would admit a Job with these resources, else its message."""
        context = self.context
        request = JobRequest(name="plan", args=[], resources=resources)
        job = build_job(context.profile, request, "planner", ["swift", "sft"])
        try:
            quota.admit_job(job, list(context.quotas), list(context.limit_ranges))
        except (AdmissionDenied, Invalid) as e:
            return e.message
        return None


def _container_max(limit_ranges) -> dict:
    maxima: dict = {}
    for lr in limit_ranges:
        for item in (lr.get("spec") or {}).get("limits") or []:
            if item.get("type") in ("Container", "Pod"):
                for k, v in (item.get("max") or {}).items():
                    q = Quantity(str(v))
                    maxima[k] = min(maxima.get(k, q), q)
    return maxima


def _least(*values):
    present = [v for v in values if v is not None]
    return min(present) if present else None
