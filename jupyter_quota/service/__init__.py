"""The API's use cases, with access rules applied: what a REST handler (or a benchmark) calls.

Handlers stay thin: they parse HTTP and call one method here. Each method takes the caller's
:class:`~jupyter_quota.identity.Identity` and checks it against the team registry before the
backend is touched, so a foreign namespace never yields data.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import audit, paging
from ..access import TeamRegistry
from ..backends.base import Backend
from ..errors import Forbidden
from ..estimator.learning import shared_corrections
from ..identity import Identity
from ..increases import PENDING
from ..jobmemory import JobMemory
from ..metrics import QuotaMetrics
from ..profiles import TeamProfile
from ..ticker import Ticker
from ..times import Clock, system_clock
from . import validators
from .effective import EffectiveQuota
from .endpoints import Endpoints
from .events import EventHub
from .increases import PAGE_SIZE, Increases
from .jobs import Jobs
from .planning import Planning
from .recommendations import Recommendations
from .stall import StalledJobs
from .usage import UsageReports
from .verifications import Verifications
from .windows import window_ticker

if TYPE_CHECKING:  # pragma: no cover - the config imports the service's settings
    from ..config import JupyterQuota


class QuotaService:
    """The façade: one method per REST use case, each a call or two into the managers beside it
    (``effective``, ``increases``, ``stalled``, ``reports``, the window ticker) or the backend.
    ``app.build_service`` builds it; :meth:`start` and :meth:`close` run its managers in order."""

    def __init__(self, config: JupyterQuota, registry: TeamRegistry, backend: Backend, clock: Clock = system_clock):
        self.config = config
        self.registry = registry
        self.backend = backend
        self.log = getattr(backend, "log", None) or logging.getLogger("jupyter_quota")
        #: the effective hard quota of every team, and the service's one clock
        self.effective = EffectiveQuota(registry, backend, config.state_dir, clock, log=self.log)
        #: estimates kept beside jobs, measured peaks, corrections (docs/estimator.md §13)
        self.memory = JobMemory(config.state_dir, backend, shared_corrections(config.shared_corrections))
        self.metrics = QuotaMetrics(registry, backend, self.memory, self.effective)
        self.increases = Increases(config, registry, self.effective, log=self.log)
        self.stalled = StalledJobs(config.stalled_job_action, registry, backend, config.state_dir, self.log)
        self.reports = UsageReports(registry, backend, config.prices, config.state_dir)
        self.recommender = Recommendations(config, registry, backend)  # GET /recommendations, POST /replay
        self.planning = Planning(registry, backend, self.memory, self.profile_for, config.plan_fit)
        #: simulated steps in child processes (POST/GET /verifications)
        self.verifications = Verifications(
            config.max_concurrent_verifications, config.verification_timeout, log=self.log
        )
        self.jobs = Jobs(
            registry,
            backend,
            self.memory,
            self.metrics,
            self.profile_for,
            job_command=list(config.job_command),
            job_list_limit=config.job_list_limit,
            log_tail_lines=config.log_tail_lines,
        )
        #: jobs that serve (``swift deploy``): readiness, models, the proxy's target, idle stop
        self.endpoints = Endpoints(
            registry,
            backend,
            self.profile_for,
            deploy_command=list(config.deploy_command),
            idle_minutes=config.endpoint_idle_minutes,
            log=self.log,
            state_dir=config.state_dir,
        )
        #: each namespace's last balance answer, by its validator (``GET .../balance``)
        self.answers = validators.AnswerCache()
        #: balance and job changes pushed to ``GET /events`` subscribers (service/events.py)
        self.events = EventHub(
            lambda team: self.balance_of(self.registry.get(team)),
            lambda teams, cursor: backend.job_changes([registry.get(t) for t in teams], cursor),
            lambda job: self.memory.decorate(self.registry.get(job["team"]), job),
            lambda cursor: self.increases.changed_since(cursor, self.clock()),
            log=self.log,
        )
        self.effective.on_write = self.events.changed  # increases decided or expired, windows, edits
        self.endpoints.on_change = self.events.endpoint_changed  # readiness is no job row change
        #: follows the profiles' time windows (service/windows.py); tests wait on its passes
        self.window_timer: Ticker | None = None
        # The local backend schedules across teams (elastic quota): it reads their effective quotas.
        backend.use_profiles(self.effective.profiles, self.effective.moment)
        backend.track([p.namespace for p in registry.all()])  # usage is recorded from the start

    @property
    def clock(self) -> Clock:
        """Epoch seconds now; tests set it to move time (expire increases, open windows)."""
        return self.effective.clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self.effective.clock = clock

    def start(self) -> None:
        """Start the backend, put right what changed while the service was down (increases that
        ended, windows that opened or closed), and expire increases and follow windows from now on."""
        self.backend.start()
        self.increases.start()
        if self.window_timer is None:  # quotas written as windows open and close
            self.window_timer = window_ticker(
                lambda: [p for p in self.registry.all() if p.windows],
                self.effective.write_profile,
                self.effective.now,
                log=self.log,
            )
            self.window_timer.start()
        try:
            self.memory.audit_shared()
        except Exception:  # the server must start (a read-only state dir); the next start records it
            self.log.exception("jupyter_quota: recording the shared estimator corrections in the audit log failed")
        self.stalled.start()
        self.endpoints.start()
        self.events.start()

    def close(self) -> None:
        """Stop in the reverse order of :meth:`start`."""
        self.verifications.close()
        self.events.close()
        self.endpoints.close()
        self.stalled.close()
        if self.window_timer is not None:
            self.window_timer.close()
            self.window_timer = None
        self.increases.close()
        self.backend.close()

    # -- the effective hard quota --------------------------------------------------------------

    def effective_hard(self, team: str, now: float | None = None) -> dict[str, str]:
        """The team's hard quota at ``now`` (epoch seconds): its profile's, plus approved unexpired
        increases, plus the extras of its windows open at ``now`` (``EffectiveQuota.hard``)."""
        return self.effective.hard(team, now)

    def apply_effective(self, team: str, now: float | None = None) -> None:
        """Write the team's effective hard quota at ``now`` where jobs run (the kube backend's
        ResourceQuota; nothing on the local backend): for a window that opens or closes."""
        self.effective.write(team, now)

    def _namespace_json(self, p: TeamProfile, balance: dict) -> dict:
        entry = {"name": p.namespace, "team": p.team, "gpuResource": p.gpuResource, "balance": balance}
        if p.team in self.effective.broken:  # held to its own hard quota (issue 25)
            entry["profileError"] = self.effective.broken[p.team]
        return entry

    def profile_for(self, who: Identity, namespace: str) -> TeamProfile:
        """The namespace's profile, if ``who`` may use it, with its effective hard quota."""
        return self.effective.of(self.registry.for_namespace(who, namespace))

    # -- namespaces and balance ------------------------------------------------------------

    def namespaces(self, who: Identity) -> dict:
        return {
            "namespaces": [
                self._namespace_json(p, self.backend.balance(self.effective.of(p))) for p in self.registry.teams_of(who)
            ]
        }

    def balance(self, who: Identity, namespace: str) -> dict:
        return self.backend.balance(self.profile_for(who, namespace))

    def balance_read(self, who: Identity, namespace: str) -> tuple[str | None, Callable[[], dict]]:
        """``GET .../balance`` in two steps: a validator of the balance, made without computing it
        (``validators``; None where the backend has none), and a call that computes it. Access is
        checked and the effective profile read once; the validator is read first, so a change
        between the two makes the next conditional read a 200, never a 304 of old content."""
        profile = self.profile_for(who, namespace)
        return self._version_of(profile), lambda: self.backend.balance(profile)

    def namespaces_read(self, who: Identity) -> tuple[str | None, Callable[[], dict]]:
        """As :meth:`balance_read`, for :meth:`namespaces` (each team's, and its ``profileError``)."""
        profiles = [self.effective.of(p) for p in self.registry.teams_of(who)]
        versions = [self._version_of(p) for p in profiles]
        version = (
            None
            if None in versions
            else "|".join(
                f"{p.namespace}:{v}:{self.effective.broken.get(p.team, '')}"
                for p, v in zip(profiles, versions, strict=True)
            )
        )
        return version, lambda: {"namespaces": [self._namespace_json(p, self.backend.balance(p)) for p in profiles]}

    def _version_of(self, profile: TeamProfile) -> str | None:
        state = self.backend.balance_version(profile)
        return None if state is None else f"{validators.BOOT}.{validators.serial(profile)}.{state}"

    def subscribe(self, who: Identity, send, loop):
        """``GET /events``: ``who``'s teams (as ``GET /namespaces`` lists them) and their balances
        now; ``send(frame)`` then gets each change of those teams (``EventHub``) until
        ``events.unsubscribe``."""
        profiles = self.registry.teams_of(who)
        subscription = self.events.subscribe([p.team for p in profiles], send, loop)
        return subscription, [self.balance_of(p) for p in profiles]

    def identity(self, who: Identity) -> dict:
        return {
            **who.to_json(),
            "namespaces": [p.namespace for p in self.registry.teams_of(who)],
            "backend": self.backend.name,
        }

    def inventory(self, who: Identity) -> dict:
        return self.backend.inventory()

    # -- estimate and plan (``service/planning.py``) ---------------------------------------------

    def models(self, who: Identity) -> dict:
        return self.planning.models(who)

    def estimate(self, who: Identity, body) -> dict:
        return self.planning.estimate(who, body)

    def estimate_serve(self, who: Identity, body) -> dict:
        return self.planning.estimate_serve(who, body)

    def plan_serve(self, who: Identity, namespace: str, body) -> dict:
        return self.planning.plan_serve(who, namespace, body)

    def plan(self, who: Identity, namespace: str, body) -> dict:
        return self.planning.plan(who, namespace, body)

    def replan(self, who: Identity, namespace: str, name: str) -> dict:
        return self.planning.replan(who, namespace, name)

    def recommendations(self, who: Identity, series: bool = False) -> dict:
        return self.recommender.recommendations(who, series=series)

    def replay(self, who: Identity, body) -> dict:
        return self.recommender.replay(who, body)

    def start_verification(self, who: Identity, body) -> dict:
        return self.verifications.start(who, body)

    def verification(self, who: Identity, vid: str) -> dict:
        return self.verifications.get(who, vid)

    def estimator_errors(self, who: Identity) -> dict:
        return self.planning.estimator_errors(who)

    # -- jobs (``service/jobs.py``) -------------------------------------------------------------------

    def submit(self, who: Identity, namespace: str, body) -> dict:
        job = self.jobs.submit(who, namespace, body)
        self.events.job_changed(job)
        return job

    def list_jobs(self, who: Identity, namespace: str, limit=None, token=None) -> dict:
        return self.jobs.list_jobs(who, namespace, limit, token)

    def get_job(self, who: Identity, namespace: str, name: str) -> dict:
        return self.jobs.get_job(who, namespace, name)

    def logs(self, who: Identity, namespace: str, name: str, tail_lines=None) -> dict:
        return self.jobs.logs(who, namespace, name, tail_lines)

    def cancel(self, who: Identity, namespace: str, name: str) -> dict:
        job = self.jobs.cancel(who, namespace, name)
        self.events.job_changed(job)
        return job

    # -- endpoints (``service/endpoints.py``) ----------------------------------------------------

    def create_endpoint(self, who: Identity, namespace: str, body) -> dict:
        return self.endpoints.create(who, namespace, body)

    def list_endpoints(self, who: Identity, namespace: str) -> dict:
        return self.endpoints.list(who, namespace)

    def get_endpoint(self, who: Identity, namespace: str, name: str) -> dict:
        return self.endpoints.get(who, namespace, name)

    def delete_endpoint(self, who: Identity, namespace: str, name: str) -> dict:
        return self.endpoints.delete(who, namespace, name)

    def endpoint_target(self, who: Identity, namespace: str, name: str) -> str:
        """Where the proxy sends a request to the endpoint's API (409 unless it is Ready)."""
        return self.endpoints.target(who, namespace, name)

    def endpoint_served(self, namespace: str, name: str, status: int, seconds: float) -> None:
        """One request the proxy forwarded to the endpoint: its status and latency, for the
        endpoint's ``requests``, usage and the metrics (called on the IO loop: memory only)."""
        team = self.endpoints.observe(namespace, name, status, seconds)
        if team is not None:
            self.metrics.endpoint_request(namespace, team, name, status, seconds)

    # -- metrics ------------------------------------------------------------------------------

    def scrape(self, who: Identity | None) -> bytes:
        """Prometheus text: for an admin, or for ``who=None``, a caller that sent the scrape token
        (``handlers.MetricsHandler`` checks it)."""
        if who is not None:
            self._require_admin(who, "metrics are")
        return self.metrics.scrape()

    def balance_of(self, profile: TeamProfile) -> dict:
        """A team's balance, against its effective hard quota."""
        return self.backend.balance(self.effective.of(profile))

    # -- stalled jobs ---------------------------------------------------------------------------

    def cancel_stalled(self) -> list[dict]:
        """Apply ``JupyterQuota.stalled_job_action`` once (``StalledJobs.cancel_stalled``)."""
        return self.stalled.cancel_stalled()

    # -- usage and chargeback --------------------------------------------------------------------

    def usage(self, who: Identity, since=None, until=None, by=None, namespace=None, step=None) -> dict:
        """Requested resources integrated over the window, per team, user or job (``usage.py``):
        an admin sees every team, a user their teams (a ``namespace`` not theirs: 403)."""
        return self.reports.usage(who, since, until, by, namespace, step)

    def chargeback(self, who: Identity, month=None) -> dict:
        """A month's usage and cost per team, with a totals row that adds up (admins)."""
        self._require_admin(who, "the chargeback is")
        return self.reports.chargeback(month)

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
        if isinstance(body, dict):  # the answer's warnings, sent back with the profile, are not a field
            body = {k: v for k, v in body.items() if k != "warnings"}
        if isinstance(body, dict) and team not in {p.team for p in self.registry.all()}:
            body = {**copy.deepcopy(self.config.new_team_defaults), **body}

        def before_store(p: TeamProfile) -> None:
            # refused if its windows and the increases in force could pass 2^63-1 (issue 25)
            p.check_raised(("an increase in force", extra) for extra in self.increases.extras(team, self.clock()))
            # the cluster gets the new profile with the team's increases in force on top
            self.effective.write_profile(p)

        before = next((dict(p.hard) for p in self.registry.all() if p.team == team), {})
        profile = self.registry.put(team, body, before_store=before_store)
        self.backend.track([profile.namespace])  # usage is recorded from the team's first day
        self.events.changed(profile.team)  # now stored: the next balance reads it
        audit.record(
            self.config.state_dir,
            who.name,
            audit.PROFILE_REPLACED,
            f"profile/{team}",
            _hard_change(before, profile.hard),
        )
        # stored, not refused (overcommitting can be deliberate), but the admin is told, as the
        # approver of an increase is, when the teams' GPU quotas now pass the inventory
        return {**profile.to_json(), "warnings": self.increases.overcommit(team, {}, "this profile")}

    # -- temporary increases and the audit log ---------------------------------------------------

    def request_increase(self, who: Identity, namespace: str, body) -> dict:
        return self.increases.request(who, namespace, body, self.clock())

    def list_increases(self, who: Identity, limit=None, token=None) -> dict:
        listed = self.increases.list(who, self.clock(), limit, token)
        if who.admin:  # the approver sees, before approving, whether the quotas would pass the inventory
            for item in listed["increases"]:
                if item["phase"] == PENDING:
                    item["warnings"] = self.increases.overcommit(item["team"], item["resources"])
        return listed

    def increases_version(self, who: Identity) -> str:
        """Changes when ``who``'s increases list may have (the list's ETag, with its query)."""
        return f"{who.name}.{int(who.admin)}.{self.increases.version(self.clock())}"

    def decide_increase(self, who: Identity, name: str, body, approve: bool) -> dict:
        decided = self.increases.decide(who, name, body, approve, self.clock())
        if approve:
            decided["warnings"] = self.increases.overcommit(decided["team"], {})  # the quotas include it now
        return decided

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


def _hard_change(before: dict, after: dict) -> str:
    """The ``hard`` keys a profile edit changed, in words: ``hard requests.nvidia.com/gpu 2 -> 3``."""
    changed = [
        f"{k} {before.get(k, 'none')} -> {after.get(k, 'none')}"
        for k in sorted(set(before) | set(after))
        if str(before.get(k)) != str(after.get(k))
    ]
    return "hard " + ", ".join(changed) if changed else "hard unchanged"
