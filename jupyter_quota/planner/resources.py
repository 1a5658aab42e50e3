"""A plan's pod resources: whole GPUs, CPU and memory from the LimitRange, checked by admission.

Each plan proposes container resources in order of preference and keeps the first that the
namespace's LimitRange and ResourceQuotas admit, using the real pipeline (``jobspec.build_job``
then ``quota.admit_job``), so a plan never promises what a submit would refuse:

1. the LimitRange's container defaults scaled by the GPU count (one training process per GPU,
   each with its dataloader workers and host copy of the batch), clamped to the LimitRange's
   ``max`` and to what the quota has left;
2. the LimitRange's container defaults as they are (what a job stating only its GPUs gets).

Without a LimitRange default, a GPU's share is taken to be ``FALLBACK_REQUEST``/``FALLBACK_LIMIT``.

A DeepSpeed CPU-offload plan (``zero2_offload``, ``zero3_offload``) also needs host memory for
what it moves off the GPU. The estimator reports GPU memory only, so the planner takes the host
figure from DeepSpeed's own estimate (:func:`offload_host_bytes`), raises the pod's memory request
and limit to it, and refuses the plan with numbers when the LimitRange's ``max`` or the quota's
remaining ``limits.memory``/``requests.memory`` cannot give that much (:meth:`Admission.host_refusal`);
what it proposes is then checked by admission like any other plan.
"""

from __future__ import annotations

from .. import quota
from ..errors import AdmissionDenied, Invalid
from ..estimator.fsdp import fsdp_of
from ..jobspec import JobRequest, build_job
from ..limitrange import container_defaults, default_limit_range
from ..quantity import Quantity
from .context import PlanContext, gib

GIB = 1024**3
#: DeepSpeed's ``additional_buffer_factor`` default in its host-memory estimates
OFFLOAD_BUFFER_FACTOR = 1.5

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
        self.default_requests = {
            k: Quantity(str(requests.get(k) or limits.get(k) or FALLBACK_REQUEST[k])) for k in COMPUTE
        }
        self.default_limits = {k: Quantity(str(limits.get(k) or FALLBACK_LIMIT[k])) for k in COMPUTE}
        for k in COMPUTE:
            if self.default_limits[k] < self.default_requests[k]:
                self.default_limits[k] = self.default_requests[k]
        self.maxima = _container_max(context.limit_ranges)

    def assumption(self) -> str:
        r, lim = self.default_requests, self.default_limits
        source = "the LimitRange's container defaults" if self.defaults_stated else "assumed (no LimitRange defaults)"
        return (
            f"pod resources per GPU: {r['cpu']} CPU / {r['memory']} memory requested, {lim['cpu']} / "
            f"{lim['memory']} limit ({source}), scaled by the GPU count where the LimitRange and quota allow"
        )

    def resources(self, gpus: int, host_memory: int = 0) -> tuple[dict, str | None]:
        """``({"requests", "limits"}, None)`` when admitted, else the last proposal and the refusal."""
        key = (gpus, host_memory)
        if key not in self._cache:
            self._cache[key] = self._first_admitted(gpus, host_memory)
        resources, reason = self._cache[key]
        return {k: dict(v) for k, v in resources.items()}, reason

    def host_refusal(self, need: int, what: str, formula: str = "") -> str | None:
        """None when a pod may have ``need`` bytes of memory here, else why not, in numbers.

        The container's memory request and limit must both reach ``need``: the limit within the
        LimitRange's ``max`` and the quota's remaining ``limits.memory``, the request within the
        remaining ``requests.memory`` too.
        """
        want = host_quantity(need)
        remaining = self.context.remaining
        caps = [("the LimitRange's max", self.maxima.get("memory"))]
        caps += [(k, remaining.get(k)) for k in ("limits.memory", "requests.memory", "memory")]
        if all(cap is None or want <= cap for _, cap in caps):
            return None
        said = []
        if caps[0][1] is not None:
            said.append(f"the pod may have at most {caps[0][1]} (the LimitRange's max)")
        left = [f"{cap} of {k if k != 'memory' else 'requests.memory'}" for k, cap in caps[1:] if cap is not None]
        if left:
            said.append(f"{self.context.namespace} has {' and '.join(left)} left")
        how = f" ({formula})" if formula else ""
        return f"{what} needs {gib(need)} GiB of host memory{how}; {' and '.join(said)}"

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
            if k == "memory" and host_memory:  # offload: the pinned host copy counts against the limit
                need = host_quantity(host_memory)
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


def offload_host_bytes(args, params: int, gpus: int) -> tuple[int, str]:
    """Host memory a DeepSpeed CPU-offload run needs on its node, and the formula, in words.

    ``(0, "")`` without offload. DeepSpeed's own estimates, for one node of ``gpus`` GPUs and
    ``params`` parameters, with its default ``additional_buffer_factor`` of 1.5:

    * ZeRO-1/2 with ``offload_optimizer`` (ms-swift's ``zero2_offload``):
      ``params * max(4 * gpus, 16) * 1.5`` bytes (``deepspeed/runtime/zero/stage_1_and_2.py``,
      ``estimate_zero2_model_states_mem_needs``, ``cpu_offload=True``): fp32 master weights,
      AdamW's two fp32 states and fp32 gradients, 16 bytes a parameter, or each process's copy
      of the model while it loads (4 bytes a parameter a GPU), whichever is larger;
    * ZeRO-3 with ``offload_param`` and ``offload_optimizer`` (``zero3_offload``):
      ``params * 18 * 1.5`` bytes (``deepspeed/runtime/zero/stage3.py``,
      ``estimate_zero3_model_states_mem_needs``, ``cpu_offload_params=True``, ``zero_init=True``:
      transformers builds a ZeRO-3 model under ``deepspeed.zero.Init``).

    * FSDP with ``offload`` (``CPUOffloadPolicy``, docs/estimator.md §4.6): ``params * 16 * 1.5``
      bytes: every GPU's shard of the float32 weights (accelerate upcasts trained parameters),
      their float32 gradients and AdamW's two moments, 16 bytes a parameter over the node.

    These count every parameter as trained (a full fine-tune); the buffer factor is taken to
    cover the training processes' own host memory too.
    """
    stage, offload = args.deepspeed_stage
    b = f"{params / 1e9:.2f}B"
    fsdp = None if stage else fsdp_of(args)
    if fsdp is not None and fsdp.offload and params:
        return int(params * 16 * OFFLOAD_BUFFER_FACTOR), (
            f"FSDP offload: float32 weights, gradients and AdamW moments on the host: {b} parameters x 16 bytes x 1.5"
        )
    if not offload or not params:
        return 0, ""
    if stage == 3:
        return int(
            params * 18 * OFFLOAD_BUFFER_FACTOR
        ), f"DeepSpeed's estimate for ZeRO-3 with parameter and optimizer offload: {b} parameters x 18 bytes x 1.5"
    per = max(4 * gpus, 16)
    return int(params * per * OFFLOAD_BUFFER_FACTOR), (
        f"DeepSpeed's estimate for ZeRO-{stage or 2} with optimizer offload: {b} parameters x "
        f"max(4 x {gpus} GPU{'s' if gpus != 1 else ''}, 16) = {per} bytes x 1.5"
    )


OFFLOAD_HOST_ASSUMPTION = (
    "host memory of an offload plan: DeepSpeed's own estimate for one node (the estimator reports GPU "
    "memory only): zero2_offload P x max(4 x GPUs, 16) bytes x 1.5 (deepspeed/runtime/zero/stage_1_and_2.py "
    "estimate_zero2_model_states_mem_needs), zero3_offload P x 18 bytes x 1.5 (deepspeed/runtime/zero/stage3.py "
    "estimate_zero3_model_states_mem_needs, zero_init), P the model's parameter count, 1.5 DeepSpeed's "
    "additional_buffer_factor, taken to cover the processes' own memory too; ms-swift pins that memory, so "
    "the pod's memory request and limit are raised to it, within the LimitRange's max and the quota"
)


def host_quantity(need: int) -> Quantity:
    """Bytes rounded up to whole GiB, as a pod's memory quantity."""
    return Quantity(f"{-(-need // GIB)}Gi")


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
