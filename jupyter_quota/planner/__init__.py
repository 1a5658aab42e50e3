"""The quota-fitted planner: the best ``swift sft`` configuration that fits what a team has left.

Pure (no I/O): give it the user's arguments and a :class:`PlanContext` (the GPUs a namespace has left,
their memory, its quotas with their usage and its LimitRange, from
:func:`context_from_balance`), and it returns a :class:`PlanResult`::

    from jupyter_quota.planner import context_from_balance, plan
    context = context_from_balance(balance, profile)       # balance: GET /namespaces/{ns}/balance
    result = plan(["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "full"], context)
    result.to_json()   # {"recommended", "candidates", "rejected", "assumptions", "notes", ...}

Candidates cover the method (full, LoRA, QLoRA 8-bit, QLoRA 4-bit), 1 to the GPUs left, DDP or
DeepSpeed ZeRO-2/3 (and, for a full fine-tune that fits no other way, ZeRO-2/3 with CPU offload,
whose host memory must fit the pod's memory limit and the quota), the micro-batch with gradient
accumulation keeping the effective batch, gradient checkpointing and the attention kernel. A plan
fits when its estimated peak per GPU is at most the GPU's memory less the safety margin
(``DEFAULT_MARGIN``, 10%), and its pod resources pass the namespace's LimitRange and ResourceQuotas
(``quota.admit_job`` on the Job ``jobspec.build_job`` makes). See :mod:`.search` for the order of
the search and the ranking.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..estimator.fsdp import fsdp_of
from .context import DEFAULT_MARGIN, MAX_PLAN_GPUS, PlanContext, context_from_balance, gib
from .resources import OFFLOAD_HOST_ASSUMPTION, host_quantity
from .search import CANDIDATE_CAP, REJECTED_CAP, Evaluated, Search

__all__ = ["DEFAULT_MARGIN", "MAX_PLAN_GPUS", "PlanContext", "PlanResult", "context_from_balance", "plan"]


@dataclass
class PlanResult:
    """The recommended plan (or None), the alternatives, and the rejected with their reasons."""

    context: PlanContext
    request: dict
    recommended: dict | None
    candidates: list
    rejected: list
    assumptions: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    search: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        ctx = self.context
        return {
            "namespace": ctx.namespace,
            "team": ctx.team,
            "gpuMemory": f"{gib(ctx.gpu_memory)}Gi",
            "usableGpuMemory": f"{gib(ctx.usable_bytes)}Gi",
            "margin": ctx.margin,
            "fit": ctx.fit,
            "gpusFree": ctx.gpus_remaining,
            "request": self.request,
            "recommended": self.recommended,
            "candidates": self.candidates,
            "rejected": self.rejected,
            "assumptions": self.assumptions,
            "notes": self.notes,
            "search": self.search,
        }

    def __str__(self) -> str:
        from .report import plan_text

        return plan_text(self.to_json())


def _runnable(asked, estimate) -> tuple:
    """``asked`` with what its run needs to start, and that change (a plan's ``changes`` entry).

    LoRA on an MoE model whose targets PEFT converts to transformers 5's stacked experts stops at
    setup under a ``lora_dropout`` above 0 (docs/estimator.md §2.3): every plan carries
    ``--lora_dropout 0``, the value PEFT's ``ParamWrapper`` accepts."""
    if asked.tuner_type == "full" or not asked.lora_dropout:
        return asked, None
    spec = getattr(estimate(asked, 1), "model", None)
    if spec is None or not getattr(spec, "converted_experts", False):
        return asked, None
    why = (
        f"with {asked.lora_dropout:g}, LoRA on {spec.name} stops at setup: PEFT converts the MLP targets to "
        "transformers 5's stacked experts, and lora.ParamWrapper does not work with lora_dropout != 0"
    )
    change = {"field": "lora_dropout", "from": asked.lora_dropout, "to": 0.0, "why": why}
    return asked.replace(lora_dropout=0.0), change


def plan(
    args, context: PlanContext, *, gpus: int | None = None, estimate=None, model_size: str | None = None
) -> PlanResult:
    """Fit ``args`` (a ``swift sft`` argv list or parsed ``SftArgs``) to ``context``.

    ``gpus`` is the GPU count the user had in mind (default 1): it is part of "what they asked"
    and of their effective batch. ``estimate`` replaces :func:`jupyter_quota.estimator.estimate`
    (a callable ``(args, gpus) -> Estimate``), for tests. ``model_size`` (``8B``, ``30B-A3B``) sizes
    a model the estimator has no facts for (approximate estimates). Raises ``errors.InvalidRequest``
    for malformed arguments or a model it can neither find nor size.
    """
    started = time.perf_counter()
    if isinstance(args, (list, tuple)):
        from ..swift import parse_sft_args

        asked = parse_sft_args(list(args))
    else:
        asked = args
    if estimate is None:
        from ..estimator import estimate as estimate_memory

        def estimate(a, g):
            return estimate_memory(a, gpus=g, model_size=model_size)

    searched, runnable = _runnable(asked, estimate)
    search = Search(searched, 1 if gpus is None else int(gpus), context, estimate)
    search.run()
    if runnable:
        for e in {
            id(e): e for e in (*search.fitting, *search.rejected, *search.summaries, search.asked_result)
        }.values():
            e.changes = [runnable, *e.changes]

    fitting = _dedupe(search.fitting)
    candidates = [_plan_json(e, context) for e in fitting[:CANDIDATE_CAP]]
    rejected_all = _dedupe(
        [
            *([search.asked_result] if search.asked_result.reason else []),
            *search.summaries,
            *[e for e in search.rejected if e is not search.asked_result],
        ]
    )
    rejected = [{"plan": _plan_json(e, context), "reason": e.reason} for e in rejected_all[:REJECTED_CAP]]

    notes = [str(n) for n in (getattr(asked, "notes", None) or [])]
    if runnable:
        notes.append(f"--lora_dropout 0 in every plan: {runnable['why']}")
    if len(fitting) > CANDIDATE_CAP:
        notes.append(f"{len(fitting) - CANDIDATE_CAP} more fitting plans are not listed (the {CANDIDATE_CAP} best are)")
    if len(rejected_all) > REJECTED_CAP:
        notes.append(f"{len(rejected_all) - REJECTED_CAP} more rejected configurations are not listed")
    if not candidates:
        notes.append(f"nothing fits {context.namespace} now: see the rejected plans for what each would need")
    elif candidates[0]["marginal"]:
        safer = next((c["summary"] for c in candidates if not c["marginal"]), None)
        notes.append(
            f"the recommended plan is marginal: {gib(fitting[0].peak)} GiB per GPU of "
            f"{gib(context.usable_bytes)} usable; it may run out of memory if the run's longest batch or the "
            "allocator's fragmentation comes out above the range" + (f"; a safer alternative: {safer}" if safer else "")
        )
    assumptions = [
        *context.assumptions,
        search.admission.assumption(),
        "relativeStepTime is a rough heuristic for ranking (1.0 = the request as given)",
    ]
    if search.offload_tried:
        assumptions.append(
            "DeepSpeed CPU offload (zero2_offload, zero3_offload) is tried for a full fine-tune only, "
            "and only when no plain strategy fits the GPUs: it trades speed for GPU memory"
        )
    if search.offload_checked:
        assumptions.append(OFFLOAD_HOST_ASSUMPTION)
    r = search.request
    request = {
        "args": list(asked.to_argv()),
        "gpus": r.gpus,
        "effectiveBatch": r.effective_batch,
        "estimate": search.asked_result.estimate.to_json(),
    }
    stats = {"estimates": search.estimates_made, "milliseconds": round((time.perf_counter() - started) * 1000, 1)}
    return PlanResult(
        context, request, candidates[0] if candidates else None, candidates, rejected, assumptions, notes, stats
    )


def _plan_json(e: Evaluated, context: PlanContext) -> dict:
    return {
        "summary": _summary(e, context),
        "args": list(e.args.to_argv()),
        "gpus": e.gpus,
        "resources": e.resources,
        "estimate": e.estimate.to_json() if e.estimate is not None else None,
        "effectiveBatch": e.batch.per_device * e.batch.accumulation * e.gpus,
        "relativeStepTime": round(e.speed, 2) if e.estimate is not None else None,
        "hostMemory": str(host_quantity(e.host_memory)) if e.host_memory else None,
        "changes": e.changes,
        "marginal": e.estimate is not None and context.is_marginal(e.peak),
    }


def _summary(e: Evaluated, context: PlanContext) -> str:
    a = e.args
    parts = [e.method.label, f"{e.gpus} GPU{'s' if e.gpus != 1 else ''}"]
    plain = "FSDP" if fsdp_of(a) else "DDP" if e.gpus > 1 else "single GPU"
    parts.append(str(a.deepspeed) if a.deepspeed else plain)
    parts.append(f"micro-batch {e.batch.per_device} x {e.batch.accumulation} accumulation")
    if a.gradient_checkpointing is None or a.gradient_checkpointing:
        parts.append("gradient checkpointing")
    if a.attn_impl:
        parts.append(str(a.attn_impl))
    if e.estimate is not None:
        parts.append(
            f"{context.need_phrase(e.estimate)} per GPU" + (" (marginal)" if context.is_marginal(e.peak) else "")
        )
    if e.host_memory:
        parts.append(f"{gib(e.host_memory)} GiB host memory")
    return ", ".join(parts)


def _dedupe(evs: list[Evaluated]) -> list[Evaluated]:
    """One entry per configuration (argv and GPUs); the first wins, so for rejected ones the
    first reason given (the request's, then the method's) is kept."""
    seen, out = set(), []
    for e in evs:
        key = (tuple(e.args.to_argv()), e.gpus)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out
