"""Estimates and plans as use cases: the estimator and planner (pure domain code, imported on
first use) over a namespace's live balance and the jobs' memory (``jobmemory``)."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import Conflict
from ..identity import Identity
from ..profiles import TeamProfile


class Planning:
    def __init__(self, registry, backend, memory, profile_for: Callable[[Identity, str], TeamProfile], plan_fit: str):
        """``profile_for(who, namespace)``: the namespace's profile with its effective hard quota,
        if ``who`` may use it (``QuotaService.profile_for``); ``plan_fit``: ``JupyterQuota.plan_fit``."""
        self.registry = registry
        self.backend = backend
        self.memory = memory
        self.profile_for = profile_for
        self.plan_fit = plan_fit

    def models(self, who: Identity) -> dict:
        """The estimator's catalog: the hub ids it knows offline; any signed-in user may ask."""
        from ..estimator.model import catalog_models

        return {"models": [dict(m) for m in catalog_models()]}

    def estimate(self, who: Identity, body) -> dict:
        """Peak GPU memory of a ``swift sft`` argv on ``gpus`` GPUs; any signed-in user may ask."""
        from ..planner.request import parse_estimate_request

        request = parse_estimate_request(body)
        teams = self._learning_teams(who)
        return self.memory.estimate(request.args, request.gpus, model_size=request.model_size, teams=teams).to_json()

    def estimate_serve(self, who: Identity, body) -> dict:
        """GPU memory of a ``swift deploy`` argv and what its KV cache holds; any signed-in user may ask."""
        from ..estimator.serving import DEFAULT_GPU_MEMORY, estimate_serve
        from ..planner.request import parse_serve_request

        request = parse_serve_request(body)
        return estimate_serve(request.args, request.gpus, request.gpu_memory or DEFAULT_GPU_MEMORY).to_json()

    def plan_serve(self, who: Identity, namespace: str, body) -> dict:
        """The best ``swift deploy`` for what the namespace has left: its free GPUs (at most
        ``gpus``, when given) of its profile's GPU memory."""
        from ..planner import context_from_balance
        from ..planner.request import SERVE_PLAN_FIELDS, parse_serve_request
        from ..planner.serve import plan_serve

        profile = self.profile_for(who, namespace)
        request = parse_serve_request(body, SERVE_PLAN_FIELDS)
        context = context_from_balance(
            self.backend.balance(profile), profile, inventory=self.backend.inventory(), fit=self.plan_fit
        )
        gpus = context.gpus_remaining if request.gpus is None else min(request.gpus, context.gpus_remaining)
        result = plan_serve(request.args, gpus, context.gpu_memory)
        return {
            "namespace": context.namespace,
            "gpuMemory": f"{context.gpu_memory / 2**30:g}Gi",
            "gpusFree": context.gpus_remaining,
            **result.to_json(),
        }

    def _learning_teams(self, who: Identity) -> frozenset[str]:
        """Whose measured jobs correct ``who``'s estimates: their own teams' (an admin's too: the
        teams they are a member of), never another team's (issue 25)."""
        mine = [p for p in self.registry.all() if p.has_member(who.name, who.groups)]
        if not mine and not who.admin:
            mine = self.registry.teams_of(who)  # the default team
        return frozenset(p.team for p in mine)

    def plan(self, who: Identity, namespace: str, body) -> dict:
        """The best configuration of a ``swift sft`` argv that fits the namespace's live balance."""
        from ..planner import context_from_balance, plan
        from ..planner.request import parse_plan_request

        profile = self.profile_for(who, namespace)
        request = parse_plan_request(body)
        context = context_from_balance(
            self.backend.balance(profile), profile, inventory=self.backend.inventory(), fit=self.plan_fit
        )
        return plan(
            request.args,
            context,
            gpus=request.gpus,
            estimate=lambda args, gpus: self.memory.estimate(
                args, gpus, model_size=request.model_size, teams=frozenset({profile.team})
            ),
        ).to_json()

    def replan(self, who: Identity, namespace: str, name: str) -> dict:
        """The plan for an out-of-memory job again, its own configuration known not to fit: the
        next plan down. 409 for a job that did not run out of memory."""
        from ..planner import context_from_balance, plan
        from ..quantity import parse_quantity

        profile = self.profile_for(who, namespace)
        job = self.memory.decorate(profile, self.backend.get_job(profile, name))
        memory = job.get("memory") or {}
        if not memory.get("outOfMemory"):
            raise Conflict(
                f'job "{name}" did not run out of GPU memory (phase {job["phase"]}); '
                "re-plan its arguments with POST plan instead"
            )
        context = context_from_balance(
            self.backend.balance(profile), profile, inventory=self.backend.inventory(), fit=self.plan_fit
        )
        card = parse_quantity(profile.gpuMemory).value() if profile.gpuMemory else int(memory["estimatedGib"] * 2**30)
        estimate = self.memory.replan_estimate(job, card, frozenset({profile.team}))
        return plan(job["args"], context, gpus=job["gpus"], estimate=estimate).to_json()

    def estimator_errors(self, who: Identity) -> dict:
        """How far estimates were from measured peaks, per model family and regime: every team's
        jobs for an admin, else the caller's teams' jobs."""
        teams = None if who.admin else {p.team for p in self.registry.teams_of(who)}
        return {"rows": self.memory.error_table(teams)}
