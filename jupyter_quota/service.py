"""The API's use cases, with access rules applied: what a REST handler (or a benchmark) calls.

Handlers stay thin: they parse HTTP and call one method here. Each method takes the caller's
:class:`~jupyter_quota.identity.Identity` and checks it against the team registry before the
backend is touched, so a foreign namespace never yields data.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from . import audit, paging
from .access import TeamRegistry
from .backends.base import Backend
from .config import JupyterQuota
from .effectivequota import effective_hard
from .errors import Forbidden, InvalidRequest
from .identity import Identity
from .increaseservice import ExpiryTimer, Increases
from .jobspec import create_named, parse_job_request
from .profiles import TeamProfile
from .windows import window_extra

MAX_TAIL_LINES = 10_000


class QuotaService:
    def __init__(
        self,
        config: JupyterQuota,
        registry: TeamRegistry,
        backend: Backend,
        clock: Callable[[], float] = time.time,
    ):
        self.config = config
        self.registry = registry
        self.backend = backend
        #: epoch seconds now; tests drive it to expire increases without waiting
        self.clock = clock
        self.increases = Increases(config, registry, self._apply_effective, log=getattr(backend, "log", None))
        self._raised: dict[str, tuple] = {}  # team -> (profile, effective hard, effective profile)
        self._effective_lock = threading.Lock()
        self._timer: ExpiryTimer | None = None
        # The local backend schedules across teams (elastic quota): it reads their effective quotas.
        backend.use_profiles(
            lambda: [self._effective(p) for p in registry.all()],
            lambda: datetime.fromtimestamp(self.clock(), UTC),
        )

    def start(self) -> None:
        """Start the backend, put right what changed while the service was down (increases that
        ended), and expire increases at their end from now on."""
        self.backend.start()
        try:
            self.increases.reconcile(self.clock())
        except Exception:  # the server must start (a read-only state dir); the timer retries
            self.increases.log.exception("jupyter_quota: reconciling increases at start failed")
        if self._timer is None:
            self._timer = ExpiryTimer(self.increases, lambda: self.clock())  # a test may drive self.clock
            self._timer.start()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.close()
            self._timer = None
        self.backend.close()

    # -- the effective hard quota --------------------------------------------------------------

    def effective_hard(self, team: str, now: float | None = None) -> dict[str, str]:
        """The team's hard quota at ``now`` (epoch seconds): its profile's, plus approved unexpired
        increases, plus the extras of its windows open at ``now``.

        The one place that composes it; every balance and admission reads it (``_effective``).
        """
        now = self.clock() if now is None else now
        profile = self.registry.get(team)
        return self._compose(profile, self.increases.extras(team, now), _opened(profile, now))

    @staticmethod
    def _compose(profile: TeamProfile, increase_extras: list[dict], opened: dict[str, str]) -> dict[str, str]:
        return effective_hard(profile.hard, *increase_extras, opened)

    def _effective(self, profile: TeamProfile, now: float | None = None, extras: list | None = None) -> TeamProfile:
        """``profile`` with its effective hard quota; the same object while that does not change
        (the local backend caches a balance per profile object)."""
        now = self.clock() if now is None else now
        extras = self.increases.extras(profile.team, now) if extras is None else extras
        if not extras and not profile.windows:
            return profile  # the common case, without arithmetic
        # the same extras are the same objects (``Increases._approved`` caches them), so a read
        # between changes costs a lookup, not the sums
        opened = _opened(profile, now)
        key = (tuple(map(id, extras)), tuple(sorted(opened.items())))
        with self._effective_lock:
            cached = self._raised.get(profile.team)
            if cached is not None and cached[0] is profile and cached[1] == key:
                return cached[2]
        hard = self._compose(profile, extras, opened)
        raised = profile if hard == {k: str(v) for k, v in profile.hard.items()} else _with_hard(profile, hard)
        with self._effective_lock:
            self._raised[profile.team] = (profile, key, raised, extras)  # extras: their ids stay theirs
        return raised

    def apply_effective(self, team: str, now: float | None = None) -> None:
        """Write the team's effective hard quota at ``now`` where jobs run (the kube backend's
        ResourceQuota; nothing on the local backend): for a window that opens or closes."""
        now = self.clock() if now is None else now
        self._apply_effective(team, now, self.increases.extras(team, now))

    def _apply_effective(self, team: str, now: float, increase_extras: list[dict]) -> None:
        """Write the team's effective quota where jobs run (the kube backend's ResourceQuota)."""
        self.backend.apply_profile(self._effective(self.registry.get(team), now, increase_extras))
        if self._timer is not None:
            self._timer.wake()

    def profile_for(self, who: Identity, namespace: str) -> TeamProfile:
        """The namespace's profile, if ``who`` may use it, with its effective hard quota."""
        return self._effective(self.registry.for_namespace(who, namespace))

    # -- namespaces and balance ------------------------------------------------------------

    def namespaces(self, who: Identity) -> dict:
        return {
            "namespaces": [
                {
                    "name": p.namespace,
                    "team": p.team,
                    "gpuResource": p.gpuResource,
                    "balance": self.backend.balance(self._effective(p)),
                }
                for p in self.registry.teams_of(who)
            ]
        }

    def balance(self, who: Identity, namespace: str) -> dict:
        return self.backend.balance(self.profile_for(who, namespace))

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

        profile = self.profile_for(who, namespace)
        request = parse_plan_request(body)
        context = context_from_balance(self.backend.balance(profile), profile, inventory=self.backend.inventory())
        return plan(request.args, context, gpus=request.gpus).to_json()

    # -- jobs -------------------------------------------------------------------------------

    def submit(self, who: Identity, namespace: str, body) -> dict:
        profile = self.profile_for(who, namespace)
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
        # the cluster gets the new profile with the team's increases in force on top
        return self.registry.put(
            team, body, before_store=lambda p: self.backend.apply_profile(self._effective(p))
        ).to_json()

    # -- temporary increases and the audit log ---------------------------------------------------

    def request_increase(self, who: Identity, namespace: str, body) -> dict:
        return self.increases.request(who, namespace, body, self.clock())

    def list_increases(self, who: Identity) -> dict:
        return self.increases.list(who, self.clock())

    def decide_increase(self, who: Identity, name: str, body, approve: bool) -> dict:
        return self.increases.decide(who, name, body, approve, self.clock())

    def expire_increases(self) -> list[str]:
        """Expire what ended by now (the timer does this at each end; tests drive ``clock``)."""
        return self.increases.expire_due(self.clock())

    def audit_log(self, who: Identity) -> list[dict]:
        self._require_admin(who, "the audit log is")
        return audit.entries(self.config.state_dir)

    @staticmethod
    def _require_admin(who: Identity, what: str = "profiles are") -> None:
        if not who.admin:
            raise Forbidden(
                f'user "{who.name}" is not a quota admin: {what} for JupyterHub admins '
                "and the users in JupyterQuota.admin_users"
            )


def _opened(profile: TeamProfile, now: float) -> dict[str, str]:
    """What the profile's windows open at ``now`` add (``windows.window_extra``)."""
    return window_extra(profile, datetime.fromtimestamp(now, UTC)) if profile.windows else {}


def _with_hard(profile: TeamProfile, hard: dict[str, str]) -> TeamProfile:
    return TeamProfile(**{**profile.to_json(), "hard": hard})
