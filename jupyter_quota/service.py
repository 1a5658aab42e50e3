"""The API's use cases, with access rules applied: what a REST handler (or a benchmark) calls.

Handlers stay thin: they parse HTTP and call one method here. Each method takes the caller's
:class:`~jupyter_quota.identity.Identity` and checks it against the team registry before the
backend is touched, so a foreign namespace never yields data.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from . import audit, chargeback, jobmemory, paging, usage
from .access import TeamRegistry
from .backends.base import Backend
from .config import JupyterQuota
from .effectivequota import effective_hard
from .errors import AdmissionDenied, Conflict, Forbidden, InvalidRequest, QuotaError
from .identity import Identity
from .increaseservice import PAGE_SIZE, ExpiryTimer, Increases
from .jobmemory import JobMemory
from .jobspec import create_named, parse_job_request
from .metrics import QuotaMetrics
from .profiles import TeamProfile
from .stallpolicy import POLICY, STALLED_JOB_CANCELLED, StallPolicyTimer
from .windows import window_extra
from .windowtimer import WindowTimer

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
        self.metrics = QuotaMetrics(self)
        #: estimates kept beside jobs, measured peaks, corrections (docs/estimator.md §13)
        self.memory = JobMemory(config.state_dir, backend)
        #: epoch seconds now; tests drive it to expire increases without waiting
        self.clock = clock
        self.increases = Increases(config, registry, self._apply_effective, log=getattr(backend, "log", None))
        #: team -> (profile, key of its extras, effective profile, the extras the key's ids name)
        self._raised: dict[str, tuple] = {}
        self._effective_lock = threading.Lock()
        self._timer: ExpiryTimer | None = None
        #: follows the profiles' time windows (windowtimer.py); tests wait on its passes
        self.window_timer: WindowTimer | None = None
        self._stall_timer: StallPolicyTimer | None = None
        self.log = getattr(backend, "log", None) or logging.getLogger("jupyter_quota")
        # The local backend schedules across teams (elastic quota): it reads their effective quotas.
        backend.use_profiles(
            lambda: [self._effective(p) for p in registry.all()],
            lambda: datetime.fromtimestamp(self.clock(), UTC),
        )
        backend.track([p.namespace for p in registry.all()])  # usage is recorded from the start

    def start(self) -> None:
        """Start the backend, put right what changed while the service was down (increases that
        ended, windows that opened or closed), and expire increases and follow windows from now on."""
        self.backend.start()
        try:
            self.increases.reconcile(self.clock())
        except Exception:  # the server must start (a read-only state dir); the timer retries
            self.increases.log.exception("jupyter_quota: reconciling increases at start failed")
        if self._timer is None:
            self._timer = ExpiryTimer(self.increases, lambda: self.clock())  # a test may drive self.clock
            self._timer.start()
        if self.window_timer is None:  # windowtimer.py: quotas written as windows open and close
            self.window_timer = WindowTimer(
                lambda: [p for p in self.registry.all() if p.windows],
                lambda profile, now: self.backend.apply_profile(self._effective(profile, now)),
                lambda: self.clock(),
                log=self.increases.log,
            )
            self.window_timer.start()
        if self._stall_timer is None and self.config.stalled_job_action == "cancel":
            self._stall_timer = StallPolicyTimer(self.cancel_stalled, self.log)
            self._stall_timer.start()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.close()
            self._timer = None
        if self.window_timer is not None:
            self.window_timer.close()
            self.window_timer = None
        if self._stall_timer is not None:
            self._stall_timer.close()
            self._stall_timer = None
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
        from .planner.request import parse_estimate_request

        request = parse_estimate_request(body)
        return self.memory.estimate(request.args, request.gpus, model_size=request.model_size).to_json()

    def plan(self, who: Identity, namespace: str, body) -> dict:
        """The best configuration of a ``swift sft`` argv that fits the namespace's live balance."""
        from .planner import context_from_balance, plan
        from .planner.request import parse_plan_request

        profile = self.profile_for(who, namespace)
        request = parse_plan_request(body)
        context = context_from_balance(
            self.backend.balance(profile), profile, inventory=self.backend.inventory(), fit=self.config.plan_fit
        )
        return plan(
            request.args,
            context,
            gpus=request.gpus,
            estimate=lambda args, gpus: self.memory.estimate(args, gpus, model_size=request.model_size),
        ).to_json()

    def replan(self, who: Identity, namespace: str, name: str) -> dict:
        """The plan for an out-of-memory job again, its own configuration known not to fit: the
        next plan down. 409 for a job that did not run out of memory."""
        from .planner import context_from_balance, plan
        from .quantity import parse_quantity

        profile = self.profile_for(who, namespace)
        job = self.memory.decorate(profile, self.backend.get_job(profile, name))
        memory = job.get("memory") or {}
        if not memory.get("outOfMemory"):
            raise Conflict(
                f'job "{name}" did not run out of GPU memory (phase {job["phase"]}); '
                "re-plan its arguments with POST plan instead"
            )
        context = context_from_balance(
            self.backend.balance(profile), profile, inventory=self.backend.inventory(), fit=self.config.plan_fit
        )
        card = parse_quantity(profile.gpuMemory).value() if profile.gpuMemory else int(memory["estimatedGib"] * 2**30)
        estimate = self.memory.replan_estimate(job, card)
        return plan(job["args"], context, gpus=job["gpus"], estimate=estimate).to_json()

    def estimator_errors(self, who: Identity) -> dict:
        """How far estimates were from measured peaks, per model family and regime: every team's
        jobs for an admin, else the caller's teams' jobs."""
        teams = None if who.admin else {p.team for p in self.registry.teams_of(who)}
        return {"rows": self.memory.error_table(teams)}

    # -- jobs -------------------------------------------------------------------------------

    def submit(self, who: Identity, namespace: str, body) -> dict:
        profile = self.profile_for(who, namespace)
        request = parse_job_request(body, profile)

        def create(named):
            job = self.backend.build_job(profile, named, who.name, list(self.config.job_command))
            try:
                created = self.backend.submit(profile, job, who.name)
            except AdmissionDenied as refusal:
                self.metrics.admission(profile, refusal.reason)
                raise
            self.metrics.admission(profile)
            return created

        job = create_named(request, create)
        try:
            self.memory.on_submit(profile, job)
        except Exception:  # noqa: BLE001 - the job was created and runs: a 500 would make its user submit it twice
            jobmemory.log.exception("job %s/%s: its estimate could not be recorded", namespace, job["name"])
        return self.memory.decorate(profile, job)

    def list_jobs(self, who: Identity, namespace: str, limit=None, token=None) -> dict:
        """A page of the namespace's jobs, newest first; ``limit`` and ``token`` as in ``paging``."""
        profile = self.registry.for_namespace(who, namespace)
        size = paging.parse_limit(limit, self.config.job_list_limit)
        page = self.backend.page_jobs(profile, size, paging.decode(token))
        page = dataclasses.replace(page, items=[self.memory.decorate(profile, job) for job in page.items])
        return paging.list_json("jobs", page)

    def get_job(self, who: Identity, namespace: str, name: str) -> dict:
        profile = self.registry.for_namespace(who, namespace)
        return self.memory.decorate(profile, self.backend.get_job(profile, name))

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

    # -- metrics ------------------------------------------------------------------------------

    def scrape(self, who: Identity | None) -> bytes:
        """Prometheus text: for an admin, or for ``who=None``, a caller that sent the scrape token
        (``handlers.MetricsHandler`` checks it)."""
        if who is not None:
            self._require_admin(who, "metrics are")
        return self.metrics.scrape()

    def balance_of(self, profile: TeamProfile) -> dict:
        """A team's balance, against its effective hard quota (the metrics read every team's)."""
        return self.backend.balance(self._effective(profile))

    # -- stalled jobs ---------------------------------------------------------------------------

    def cancel_stalled(self) -> list[dict]:
        """Apply ``JupyterQuota.stalled_job_action``: with ``cancel``, cancel every stalled job and
        audit each cancel; with ``flag``, nothing. The jobs cancelled."""
        if self.config.stalled_job_action != "cancel":
            return []
        cancelled = []
        for flagged in self.backend.stalled():
            target = f"job/{flagged['namespace']}/{flagged['name']}"
            try:
                job = self.backend.cancel(self.registry.get(flagged["team"]), flagged["name"], POLICY)
            except QuotaError as e:  # it ended, or its team is gone: nothing to cancel
                self.log.info("jupyter_quota: stalled %s not cancelled: %s", target, e.message)
                continue
            audit.record(
                self.config.state_dir, audit.SYSTEM, STALLED_JOB_CANCELLED, target, flagged["stalled"]["message"]
            )
            self.log.warning("jupyter_quota: cancelled stalled %s: %s", target, flagged["stalled"]["message"])
            cancelled.append(job)
        return cancelled

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
        sums = usage.integrate(spans, window, now, max_rows=usage.MAX_ROWS)  # a 400 past it
        return chargeback.usage_json(sums, window, self.prices)

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
        """Create or replace a team's profile; a new team gets ``new_team_defaults`` for the
        fields the body leaves out (issue 13: conservative defaults)."""
        self._require_admin(who)
        if isinstance(body, dict) and team not in {p.team for p in self.registry.all()}:
            body = {**copy.deepcopy(self.config.new_team_defaults), **body}
        # the cluster gets the new profile with the team's increases in force on top
        profile = self.registry.put(team, body, before_store=lambda p: self.backend.apply_profile(self._effective(p)))
        self.backend.track([profile.namespace])  # usage is recorded from the team's first day
        return profile.to_json()

    # -- temporary increases and the audit log ---------------------------------------------------

    def request_increase(self, who: Identity, namespace: str, body) -> dict:
        return self.increases.request(who, namespace, body, self.clock())

    def list_increases(self, who: Identity, limit=None, token=None) -> dict:
        return self.increases.list(who, self.clock(), limit, token)

    def increases_version(self, who: Identity) -> str:
        """Changes when ``who``'s increases list may have (the list's ETag, with its query)."""
        return f"{who.name}.{int(who.admin)}.{self.increases.version(self.clock())}"

    def decide_increase(self, who: Identity, name: str, body, approve: bool) -> dict:
        return self.increases.decide(who, name, body, approve, self.clock())

    def expire_increases(self) -> list[str]:
        """Expire what ended by now (the timer does this at each end; tests drive ``clock``)."""
        return self.increases.expire_due(self.clock())

    def audit_log(self, who: Identity) -> list[dict]:
        """Every entry, oldest first (the CSV export)."""
        self._require_admin(who, "the audit log is")
        return audit.entries(self.config.state_dir)

    def audit_page(self, who: Identity, limit=None, token=None) -> dict:
        """A page of the audit log, newest first (``paging``)."""
        self._require_admin(who, "the audit log is")
        size = paging.parse_limit(limit, PAGE_SIZE)
        return paging.list_json("entries", audit.page(self.config.state_dir, size, paging.decode(token)))

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
