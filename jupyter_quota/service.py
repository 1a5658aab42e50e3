"""The API's use cases, with access rules applied: what a REST handler (or a benchmark) calls.

Handlers stay thin: they parse HTTP and call one method here. Each method takes the caller's
:class:`~jupyter_quota.identity.Identity` and checks it against the team registry before the
backend is touched, so a foreign namespace never yields data.
"""

from __future__ import annotations

import time

from . import chargeback, paging, usage
from .access import TeamRegistry
from .backends.base import Backend
from .config import JupyterQuota
from .errors import Forbidden, InvalidRequest
from .identity import Identity
from .jobspec import create_named, parse_job_request

MAX_TAIL_LINES = 10_000


class QuotaService:
    def __init__(self, config: JupyterQuota, registry: TeamRegistry, backend: Backend):
        self.config = config
        self.registry = registry
        self.backend = backend
        backend.track([p.namespace for p in registry.all()])  # usage is recorded from the start

    # -- namespaces and balance ------------------------------------------------------------

    def namespaces(self, who: Identity) -> dict:
        return {
            "namespaces": [
                {"name": p.namespace, "team": p.team, "gpuResource": p.gpuResource, "balance": self.backend.balance(p)}
                for p in self.registry.teams_of(who)
            ]
        }

    def balance(self, who: Identity, namespace: str) -> dict:
        return self.backend.balance(self.registry.for_namespace(who, namespace))

    def identity(self, who: Identity) -> dict:
        return {
            **who.to_json(),
            "namespaces": [p.namespace for p in self.registry.teams_of(who)],
            "backend": self.backend.name,
        }

    def inventory(self, who: Identity) -> dict:
        return self.backend.inventory()

    # -- estimate and plan (pure domain code, imported on first use) -------------------------

    def models(self, who: Identity) -> dict:
        """The estimator's catalog: the hub ids it knows offline; any signed-in user may ask."""
        from .estimator.model import catalog_models

        return {"models": [dict(m) for m in catalog_models()]}

    def estimate(self, who: Identity, body) -> dict:
        """Peak GPU memory of a ``swift sft`` argv on ``gpus`` GPUs; any signed-in user may ask."""
        from .estimator import estimate
        from .planner.request import parse_estimate_request

        request = parse_estimate_request(body)
        return estimate(request.args, gpus=request.gpus).to_json()

    def plan(self, who: Identity, namespace: str, body) -> dict:
        """The best configuration of a ``swift sft`` argv that fits the namespace's live balance."""
        from .planner import context_from_balance, plan
        from .planner.request import parse_plan_request

        profile = self.registry.for_namespace(who, namespace)
        request = parse_plan_request(body)
        context = context_from_balance(self.backend.balance(profile), profile, inventory=self.backend.inventory())
        return plan(request.args, context, gpus=request.gpus).to_json()

    # -- jobs -------------------------------------------------------------------------------

    def submit(self, who: Identity, namespace: str, body) -> dict:
        profile = self.registry.for_namespace(who, namespace)
        request = parse_job_request(body, profile)

        def create(named):
            job = self.backend.build_job(profile, named, who.name, list(self.config.job_command))
            return self.backend.submit(profile, job, who.name)

        return create_named(request, create)

    def list_jobs(self, who: Identity, namespace: str, limit=None, token=None) -> dict:
        """A page of the namespace's jobs, newest first; ``limit`` and ``token`` as in ``paging``."""
        profile = self.registry.for_namespace(who, namespace)
        size = paging.parse_limit(limit, self.config.job_list_limit)
        page = self.backend.page_jobs(profile, size, paging.decode(token))
        return paging.list_json("jobs", page)

    def get_job(self, who: Identity, namespace: str, name: str) -> dict:
        return self.backend.get_job(self.registry.for_namespace(who, namespace), name)

    def logs(self, who: Identity, namespace: str, name: str, tail_lines=None) -> dict:
        profile = self.registry.for_namespace(who, namespace)
        lines = self._tail_lines(tail_lines)
        return {
            "name": name,
            "namespace": namespace,
            "tailLines": lines,
            "logs": self.backend.logs(profile, name, lines),
        }

    def cancel(self, who: Identity, namespace: str, name: str) -> dict:
        profile = self.registry.for_namespace(who, namespace)
        job = self.backend.get_job(profile, name)
        if job["owner"] != who.name and not who.admin:
            raise Forbidden(f'job "{name}" belongs to {job["owner"]}; only its owner or an admin may cancel it')
        return self.backend.cancel(profile, name, who.name)

    def _tail_lines(self, raw) -> int:
        if raw is None or raw == "":
            return self.config.log_tail_lines
        try:
            lines = int(raw)
        except (TypeError, ValueError):
            raise InvalidRequest(
                f"tailLines must be a whole number from 1 to {MAX_TAIL_LINES}, not {str(raw)[:32]!r}"
            ) from None
        if not 1 <= lines <= MAX_TAIL_LINES:
            raise InvalidRequest(f"tailLines must be from 1 to {MAX_TAIL_LINES}, not {lines}")
        return lines

    # -- usage and chargeback --------------------------------------------------------------------

    def usage(self, who: Identity, since=None, until=None, by=None, namespace=None, step=None) -> dict:
        """Requested resources integrated over the window, per team, user or job (``usage.py``):
        an admin sees every team, a user their teams (a ``namespace`` not theirs: 403)."""
        window = usage.parse_window(since, until, by, step, namespace)
        if window.namespace is not None:
            visible = {self.registry.for_namespace(who, window.namespace).namespace}
        else:
            visible = {p.namespace for p in self.registry.teams_of(who)}
        now = int(time.time())
        everyone = who.admin and window.namespace is None
        spans = self.backend.usage_spans(window.since, window.until, None if everyone else visible)
        return chargeback.usage_json(usage.integrate(spans, window, now), window, self.prices)

    def chargeback(self, who: Identity, month=None) -> dict:
        """A month's usage and cost per team, with a totals row that adds up (admins)."""
        self._require_admin(who, "the chargeback is")
        now = int(time.time())
        month, since, until = chargeback.month_window(month, now)
        window = usage.Window(since, until, "team")
        sums = usage.integrate(self.backend.usage_spans(since, until), window, now)
        return chargeback.chargeback(sums, month, since, until, self.prices)

    @property
    def prices(self) -> dict | None:
        return chargeback.parse_prices(self.config.prices)

    # -- profiles (admins) ---------------------------------------------------------------------

    def profiles(self, who: Identity) -> dict:
        self._require_admin(who)
        return {"profiles": [p.to_json() for p in self.registry.all()]}

    def profile(self, who: Identity, team: str) -> dict:
        self._require_admin(who)
        return self.registry.get(team).to_json()

    def put_profile(self, who: Identity, team: str, body) -> dict:
        self._require_admin(who)
        profile = self.registry.put(team, body, before_store=self.backend.apply_profile)
        self.backend.track([profile.namespace])
        return profile.to_json()

    @staticmethod
    def _require_admin(who: Identity, what: str = "profiles are") -> None:
        if not who.admin:
            raise Forbidden(
                f'user "{who.name}" is not a quota admin: {what} for JupyterHub admins '
                "and the users in JupyterQuota.admin_users"
            )
