"""The API's use cases, with access rules applied: what a REST handler (or a benchmark) calls.

Handlers stay thin: they parse HTTP and call one method here. Each method takes the caller's
:class:`~jupyter_quota.identity.Identity` and checks it against the team registry before the
backend is touched, so a foreign namespace never yields data.
"""

from __future__ import annotations

from . import paging
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
        backend.use_profiles(registry.all)

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

    # -- profiles (admins) ---------------------------------------------------------------------

    def profiles(self, who: Identity) -> dict:
        self._require_admin(who)
        return {"profiles": [p.to_json() for p in self.registry.all()]}

    def profile(self, who: Identity, team: str) -> dict:
        self._require_admin(who)
        return self.registry.get(team).to_json()

    def put_profile(self, who: Identity, team: str, body) -> dict:
        self._require_admin(who)
        return self.registry.put(team, body, before_store=self.backend.apply_profile).to_json()

    @staticmethod
    def _require_admin(who: Identity) -> None:
        if not who.admin:
            raise Forbidden(
                f'user "{who.name}" is not a quota admin: profiles are for JupyterHub admins '
                "and the users in JupyterQuota.admin_users"
            )
