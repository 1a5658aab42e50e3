"""The plan search: enumerate, estimate, keep what fits and is admitted, rank.

For each method (the user's, then full, LoRA, QLoRA 8-bit, QLoRA 4-bit), each GPU count from 1
to the namespace's free GPUs and each strategy (DDP, ZeRO-2, ZeRO-3), the search first estimates
the leanest variant (micro-batch 1, checkpointing, flash_attn). If even that does not fit, the
whole group is rejected with its numbers (one estimate). Otherwise the variants are tried in
order of how little they change the request, and the first that fits is the group's candidate.
DDP keeps the per-GPU memory of one GPU, so a DDP group that fails on one GPU is not retried on
more.

When no plain strategy of a full fine-tune fits the GPUs, its DeepSpeed CPU-offload variants
(``zero2_offload``, ``zero3_offload``) are tried on 1 to the free GPUs. Their host memory comes
from DeepSpeed's own estimate (``resources.offload_host_bytes``): the pod's memory request and
limit are raised to it, and a plan whose need the LimitRange's max or the quota's remaining memory
cannot give is refused with those numbers (more GPUs never need less host memory, so a refused
strategy is not retried on more).

A variant that fits with less headroom than ``context.MARGINAL_SHARE`` of the GPU's memory is
marginal: the group keeps looking for one that is not, and a marginal candidate ranks after a safer
one of the same method.

Candidates are ranked by closeness to the request (method first, then whether offload was added,
then whether it is marginal, then the effective batch, then how many other settings change), then
quality tier (full, LoRA,
QLoRA of either width: see ``options``), then speed: an
offload plan comes after every plain one of the same method, but a full fine-tune with offload
before LoRA when the user asked for a full fine-tune.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import NamedTuple

from ..errors import InvalidRequest
from .context import MAX_PLAN_GPUS, PlanContext, gib
from .options import (
    ATTENTION,
    OFFLOAD,
    BatchSplit,
    Method,
    Request,
    batch_options,
    is_offload,
    methods_for,
    offload_applies,
    relative_step_time,
    request_of,
    strategies_for,
)
from .resources import Admission, offload_host_bytes

#: at most this many fitting plans and rejected ones are listed (the rest are counted in notes)
CANDIDATE_CAP = 10
REJECTED_CAP = 12


class Rank(NamedTuple):
    """How a candidate sorts, most important first (see the module's docstring); smaller is better."""

    tier_distance: int  # how far the method's quality tier is from the one asked for
    method_changed: bool
    offload_added: bool  # DeepSpeed CPU offload the user did not ask for
    marginal: bool  # fits with less headroom than MARGINAL_SHARE of the GPU: a safer sibling first
    batch_inexact: bool  # the effective batch could not be kept exactly
    settings_changed: int  # how many settings other than the method differ from the request
    tier: int  # quality tier: full before LoRA before QLoRA
    speed: float  # relative step time (1.0 = the request as given)
    gpus: int


class VariantOrder(NamedTuple):
    """The order variants of one group are tried in: fewest changes, exact batch, faster first."""

    changes: int
    batch_inexact: bool
    step_time: float


@dataclass
class Evaluated:
    """One configuration with its estimate, resources and verdict."""

    args: object
    gpus: int
    method: Method
    batch: BatchSplit
    estimate: object
    resources: dict | None = None
    reason: str | None = None  # None: it fits and is admitted
    changes: list = field(default_factory=list)
    key: Rank | tuple = ()  # the Rank, once ``Search._finish`` has set it
    speed: float = 0.0
    host_memory: int = 0  # bytes of host memory an offload plan needs (DeepSpeed's estimate)
    host_formula: str = ""
    host_refused: bool = False  # refused because the pod cannot have host_memory
    upper: bool = True  # fit the upper end of the estimate's range (PlanContext.fit)

    @property
    def peak(self) -> int:
        """What the plan must fit per GPU: the range's upper end, or the estimate (PlanContext.fit)."""
        if self.upper:
            return getattr(self.estimate, "upper_bytes_per_gpu", self.estimate.peak_bytes_per_gpu)
        return self.estimate.peak_bytes_per_gpu


class Search:
    def __init__(self, asked, gpus: int, context: PlanContext, estimate_fn):
        self.asked = asked
        self.context = context
        self.request: Request = request_of(asked, gpus)
        self.admission = Admission(context)
        self._estimate_fn = estimate_fn
        self._estimates: dict = {}
        self.estimates_made = 0
        self.fitting: list[Evaluated] = []
        self.rejected: list[Evaluated] = []
        self.summaries: list[Evaluated] = []
        self.asked_result: Evaluated | None = None
        self.offload_tried = False
        self.offload_checked = False  # some plan's host memory was checked
        self._speed_of_asked = relative_step_time(asked, gpus, self.request.batch)
        self.attention_options = _unique([self.request.attention, *ATTENTION])
        self.lean_attention = "flash_attn"  # the leanest kernel, tried first for every group

    # -- the search -----------------------------------------------------------------------------

    def run(self) -> None:
        self.asked_result = self._evaluate_asked()
        model = getattr(self.asked_result.estimate, "model", None)
        if getattr(model, "eager_attention_only", False):
            # the model's own code ignores attn_impl (Qwen-VL): offering another kernel changes nothing
            self.attention_options = [self.request.attention]
            self.lean_attention = self.request.attention
        for method in methods_for(self.asked):
            try:
                self._search_method(method)
            except InvalidRequest as e:
                base = self._with_method(method)
                self.summaries.append(
                    Evaluated(base, 1, method, BatchSplit(1, 1, True), None, reason=f"{method.label}: {e.message}")
                )
                continue
            if not any(e.method.name == method.name for e in self.fitting):
                self.summaries.append(self._method_summary(method))
        self.fitting.sort(key=lambda e: e.key)
        self.rejected.sort(key=lambda e: e.key)

    def _evaluate_asked(self) -> Evaluated:
        """The request exactly as given; errors here (an unknown model) are the caller's 400."""
        r = self.request
        method = methods_for(self.asked)[0]
        ev = self._evaluated(self.asked, r.gpus, method, BatchSplit(r.batch, r.accumulation, True))
        refusal = self._admit(ev)
        if ev.peak > self.context.usable_bytes:
            ev.reason = f"needs {self.context.need_phrase(ev.estimate)} per GPU; {self.context.memory_phrase()}"
        elif r.gpus > self.context.gpus_remaining:
            ev.reason = f"asks for {r.gpus} GPU{'s' if r.gpus != 1 else ''}; {self.context.remaining_phrase()}" + (
                f" (the pod would be refused: {refusal})" if refusal else ""
            )
        elif refusal:
            ev.reason = refusal
        self._finish(ev)
        (self.rejected if ev.reason else self.fitting).append(ev)
        return ev

    def _search_method(self, method: Method) -> None:
        base = self._with_method(method)
        ddp_too_big = False
        plain_fits = False  # some plain strategy fits the GPUs' memory
        for gpus in range(1, self.context.gpus_remaining + 1):
            for deepspeed in strategies_for(gpus, method, self.request.deepspeed, self.request.fsdp):
                if deepspeed is None and gpus > 1 and ddp_too_big and not self.request.fsdp:
                    continue  # DDP holds a whole replica per GPU: no better on more GPUs
                ev = self._search_group(method, base.replace(deepspeed=deepspeed), gpus)
                if ev is None:
                    plain_fits = True  # the request itself, and it fits the GPU
                    continue
                if ev.peak <= self.context.usable_bytes:
                    plain_fits = True
                elif deepspeed is None:
                    ddp_too_big = True
                self._keep(ev)
        if not plain_fits and offload_applies(method, self.asked):
            self._search_offload(method, base)

    def _search_offload(self, method: Method, base) -> None:
        """ZeRO-2/3 with CPU offload, from 1 to the free GPUs, when nothing plain fits the GPUs."""
        self.offload_tried = True
        for deepspeed in OFFLOAD:
            for gpus in range(1, self.context.gpus_remaining + 1):
                ev = self._search_group(method, base.replace(deepspeed=deepspeed), gpus)
                if ev is None:
                    continue
                self._keep(ev)
                if ev.host_refused:
                    break  # short of host memory: more GPUs never need less of it

    def _keep(self, ev: Evaluated) -> None:
        self._finish(ev)
        if not ev.changes and ev.gpus == self.request.gpus:
            return  # the request itself with its defaults spelled out: already listed
        (self.rejected if ev.reason else self.fitting).append(ev)

    def _search_group(self, method: Method, base, gpus: int) -> Evaluated | None:
        """The first variant of (method, strategy, gpus) that fits, or the leanest one rejected."""
        batches = batch_options(self.request, gpus)
        lean_batch = min(batches, key=lambda b: b.per_device)
        lean = self._variant(base, lean_batch, True, self.lean_attention)
        lean_ev = self._evaluated(lean, gpus, method, lean_batch)
        if lean_ev.peak > self.context.usable_bytes:
            kernel = (
                ", gradient checkpointing and flash_attn"
                if self.lean_attention == "flash_attn"
                else " and gradient checkpointing"
            )
            lean_ev.reason = (
                f"needs {self.context.need_phrase(lean_ev.estimate)} per GPU even with a micro-batch of "
                f"{lean_batch.per_device}{kernel}; {self.context.memory_phrase()}"
            )
            lean_ev.resources, _ = self.admission.resources(gpus)
            return lean_ev
        if is_offload(base.deepspeed) or self.request.fsdp:
            # host memory does not depend on the variant: refuse the group at once when short
            short = self._host_short(lean_ev)
            if short:
                lean_ev.reason = short
                lean_ev.resources, _ = self.admission.resources(gpus)
                return lean_ev
        chosen, closest_marginal = lean_ev, None
        for args, batch in self._variants(base, batches, gpus):
            if args.to_argv() == lean.to_argv():
                break  # the lean one fits and nothing closer did without being marginal
            ev = self._evaluated(args, gpus, method, batch)
            if ev.peak <= self.context.usable_bytes:
                if self.context.is_marginal(ev.peak):
                    closest_marginal = closest_marginal or ev  # a safer variant further on wins
                    continue
                chosen = ev
                break
        if chosen is lean_ev and closest_marginal and self.context.is_marginal(lean_ev.peak):
            chosen = closest_marginal  # every variant is marginal: the closest to the request
        if chosen.args.to_argv() == self.asked.to_argv() and gpus == self.request.gpus:
            return None  # the request itself, already evaluated
        chosen.reason = self._admit(chosen)
        return chosen

    def _variants(self, base, batches, gpus):
        """Variants of one group, fewest changes to the request first, faster first among equals."""
        r = self.request
        checkpointing = _unique([r.checkpointing, True])
        attention = self.attention_options
        variants = []
        for batch, ckpt, attn in itertools.product(batches, checkpointing, attention):
            changes = (
                ((batch.per_device, batch.accumulation) != (r.batch, r.accumulation))
                + (ckpt != r.checkpointing)
                + (attn != r.attention)
            )
            args = self._variant(base, batch, ckpt, attn)
            order = VariantOrder(changes, not batch.exact, relative_step_time(args, gpus, batch.per_device))
            variants.append((order, args, batch))
        variants.sort(key=lambda variant: variant[0])
        for _, args, batch in variants:
            yield args, batch

    def _method_summary(self, method: Method) -> Evaluated:
        """Why a method has no plan here, in numbers: how many GPUs it would need, or that none do."""
        base = self._with_method(method)
        usable = self.context.usable_bytes
        first = None
        for gpus in range(1, MAX_PLAN_GPUS + 1):
            strategies = strategies_for(gpus, method, self.request.deepspeed, self.request.fsdp)
            if gpus > max(1, self.context.gpus_remaining):
                # beyond the team's GPUs, only the most sharded strategy can change the answer:
                # DDP keeps a whole replica per GPU, ZeRO-3 holds less than ZeRO-2
                strategies = [s for s in strategies if s is not None][-1:] or strategies
            lean_batch = min(batch_options(self.request, gpus))
            lean_args = [
                self._variant(base.replace(deepspeed=s), lean_batch, True, self.lean_attention) for s in strategies
            ]
            evs = [self._evaluated(a, gpus, method, lean_batch) for a in lean_args]
            best = min(evs, key=lambda e: e.peak)
            first = first or best
            if best.peak <= usable:
                if gpus <= self.context.gpus_remaining:
                    # it fits in memory on GPUs the team has: the pod itself was refused
                    refusal = self._admit(best)
                    best.reason = (
                        f"{method.label}: {refusal}"
                        if refusal
                        else f"{method.label}: no variant closer to the request fits"
                    )
                else:
                    best.resources, _ = self.admission.resources(gpus)
                    best.reason = (
                        f"{method.label} needs {gpus} GPU{'s' if gpus != 1 else ''} x "
                        f"{gib(best.peak)} GiB{_strategy_suffix(best.args)}; "
                        f"{self.context.remaining_phrase()}"
                    )
                self._finish(best)
                return best
        last = best
        first.resources, _ = self.admission.resources(1)
        first.reason = (
            f"{method.label} needs {gib(first.peak)} GiB per GPU on 1 GPU and {gib(last.peak)} GiB "
            f"even on {MAX_PLAN_GPUS} GPUs{_strategy_suffix(last.args)}; {self.context.memory_phrase()}"
        )
        self._finish(first)
        return first

    # -- helpers ----------------------------------------------------------------------------------

    def _with_method(self, method: Method):
        return self.asked.replace(**dict(method.changes)) if method.changes else self.asked

    def _variant(self, base, batch: BatchSplit, checkpointing, attention):
        return base.replace(
            per_device_train_batch_size=batch.per_device,
            gradient_accumulation_steps=batch.accumulation,
            gradient_checkpointing=checkpointing,
            attn_impl=attention,
        )

    def _host_short(self, ev: Evaluated) -> str | None:
        """For an offload plan: its host memory (DeepSpeed's estimate) and why the pod cannot have it."""
        model = getattr(ev.estimate, "model", None)
        ev.host_memory, ev.host_formula = offload_host_bytes(ev.args, getattr(model, "params", 0) or 0, ev.gpus)
        if not ev.host_memory:
            return None
        self.offload_checked = True
        what = str(ev.args.deepspeed) if ev.args.deepspeed else "FSDP offload"
        short = self.admission.host_refusal(ev.host_memory, what, ev.host_formula)
        ev.host_refused = short is not None
        return short

    def _admit(self, ev: Evaluated) -> str | None:
        """Attach the pod resources (memory raised to an offload plan's host need); None when admitted."""
        short = self._host_short(ev)
        if short:
            ev.resources, _ = self.admission.resources(ev.gpus)
            return short
        ev.resources, refusal = self.admission.resources(ev.gpus, ev.host_memory)
        return f"the pod would be refused: {refusal}" if refusal else None

    def _evaluated(self, args, gpus: int, method: Method, batch: BatchSplit) -> Evaluated:
        return Evaluated(args, gpus, method, batch, self._estimate(args, gpus), upper=self.context.fit == "upper")

    def _estimate(self, args, gpus: int):
        key = (tuple(args.to_argv()), gpus)
        if key not in self._estimates:
            self._estimates[key] = self._estimate_fn(args, gpus)
            self.estimates_made += 1
        return self._estimates[key]

    def _finish(self, ev: Evaluated) -> None:
        """Attach the changes from the request, the ranking key and the relative speed."""
        ev.changes = changes_from(self, ev)
        ev.speed = relative_step_time(ev.args, ev.gpus, ev.batch.per_device) / self._speed_of_asked
        r = self.request
        ev.key = Rank(
            tier_distance=abs(ev.method.tier - r.tier),
            method_changed=bool(ev.method.changes),
            offload_added=is_offload(ev.args.deepspeed) and not is_offload(r.deepspeed),
            marginal=self.context.is_marginal(ev.peak),
            batch_inexact=not ev.batch.exact,
            settings_changed=sum(1 for c in ev.changes if c["field"] != "method"),
            tier=ev.method.tier,
            speed=ev.speed,
            gpus=ev.gpus,
        )


def changes_from(search: Search, ev: Evaluated) -> list[dict]:
    """What differs from the request, each with why; the method change carries the refusal numbers."""
    r, a, ctx = search.request, ev.args, search.context
    out = []
    asked_label = methods_for(search.asked)[0].label
    if ev.method.changes:
        why = _why_not_asked(search) + _why_not_better(search, ev)
        out.append({"field": "method", "from": asked_label, "to": ev.method.label, "why": why})
    if ev.gpus != r.gpus:
        if ev.gpus > r.gpus:
            why = f"spreads the work{' and the memory' if a.deepspeed else ''} over {ev.gpus} GPUs"
        else:
            why = ctx.remaining_phrase()
        out.append({"field": "gpus", "from": r.gpus, "to": ev.gpus, "why": why})
    if a.deepspeed != r.deepspeed:
        host = (
            f": {gib(ev.host_memory)} GiB, pinned, so the pod's memory request and limit are raised to "
            f"it; each step waits on the CPU's optimizer, about 2-3x slower"
            if ev.host_memory
            else ""
        )
        why = {
            "zero2": "shards optimizer states and gradients over the GPUs",
            "zero3": "shards weights, gradients and optimizer states over the GPUs",
            "zero2_offload": "keeps the fp32 master weights, gradients and optimizer states in host memory" + host,
            "zero3_offload": "keeps parameters, gradients and optimizer states in host memory, the GPU only "
            "the layers in use" + host,
            None: "plain data parallel (DDP): the fastest when a replica fits",
        }.get(a.deepspeed, "")
        out.append({"field": "deepspeed", "from": r.deepspeed, "to": a.deepspeed, "why": why})
    per_device, accumulation, kept = ev.batch
    if (per_device, accumulation) != (r.batch, r.accumulation):
        effective = per_device * accumulation * ev.gpus
        why = (
            f"effective batch kept at {effective} (micro-batch x accumulation x GPUs)"
            if kept
            else f"effective batch {effective} instead of {r.effective_batch}: no split of {r.effective_batch} "
            f"over {ev.gpus} GPUs is exact"
        )
        if per_device < r.batch:
            why = "a smaller micro-batch holds fewer activations; " + why
        out.append(
            {
                "field": "batch",
                "from": f"{r.batch} x {r.accumulation}",
                "to": f"{per_device} x {accumulation}",
                "why": why,
            }
        )
    ckpt = a.gradient_checkpointing is None or bool(a.gradient_checkpointing)
    if ckpt != r.checkpointing:
        why = (
            "recomputes activations in the backward pass: less memory, about a third more compute"
            if ckpt
            else "keeps activations: faster, and they fit"
        )
        out.append({"field": "gradient_checkpointing", "from": r.checkpointing, "to": ckpt, "why": why})
    if a.attn_impl != r.attention:
        why = {
            "sdpa": "PyTorch's fused attention never holds the full attention matrix",
            "flash_attn": "FlashAttention never holds the full attention matrix (needs the flash-attn package)",
        }.get(a.attn_impl, "")
        out.append({"field": "attn_impl", "from": r.attention, "to": a.attn_impl, "why": why})
    return out


def _why_not_asked(search: Search) -> str:
    asked_method = methods_for(search.asked)[0].name
    summary = next((s for s in search.summaries if s.method.name == asked_method), None)
    if summary is not None:
        short = [e for e in search.rejected if e.host_refused and e.method.name == asked_method]
        if short:  # offload fits the GPUs but not the pod: say so with the smallest host need
            least = min(short, key=lambda e: (e.host_memory, e.gpus))
            return f"{summary.reason}; with CPU offload {least.reason}"
        return summary.reason
    if any(not e.method.changes for e in search.fitting):
        return "an alternative that trains fewer or cheaper parameters: less memory, less time"
    if search.asked_result is not None and search.asked_result.reason:
        return f"the request {search.asked_result.reason}"
    return "a different method"


def _why_not_better(search: Search, ev: Evaluated) -> str:
    """Why the plan's method and not another one the user would rank above it (their refusals), and
    a same-tier sibling that fits but loses on speed (QLoRA 8-bit beside 4-bit)."""
    asked_method = methods_for(search.asked)[0].name
    out = [
        s.reason
        for s in search.summaries
        if s.method.name != asked_method and s.method.tier < ev.method.tier and s.reason
    ]
    sibling = [
        e
        for e in search.fitting
        if e.method.tier == ev.method.tier and e.method.name != ev.method.name and e.method.quality < ev.method.quality
    ]
    if sibling:
        best = min(sibling, key=lambda e: e.key)
        out.append(
            f"{best.method.label} also fits ({gib(best.peak)} GiB per GPU) but trains to the same quality "
            f"(QLoRA paper: 4-bit NF4 matches 16-bit adapters) and more slowly"
        )
    return "".join(f"; {r}" for r in _unique(out))


def _strategy_suffix(args) -> str:
    return f" with {args.deepspeed}" if args.deepspeed else ""


def _unique(values: list) -> list:
    out = []
    for v in values:
        if v not in out:
            out.append(v)
    return out
