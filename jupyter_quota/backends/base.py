"""The backend interface both backends implement: balance, submit, jobs, logs, cancel.

A backend speaks Kubernetes shapes: a profile's ResourceQuota and LimitRange objects come from
``profiles.TeamProfile``, a job to submit is the batch/v1 Job that :meth:`Backend.build_job` made
(``jobspec.build_job`` with the backend's ``JobSettings``),
and admission is ``quota.admit_job`` on both sides, so a refusal reads the same everywhere.

A job, as the REST API returns it, is a dict:
    {"name", "namespace", "team", "owner", "phase": "Pending"|"Running"|"Succeeded"|"Failed",
     "args": [...], "priority": "high"|"normal"|"best-effort", "gpus": int, "gpuIndices": [...] (local only),
     "resources": {"requests", "limits"}, "createdAt", "startedAt"?, "finishedAt"?, "exitCode"?,
     "reason"?, "message"?, "borrowed"? (local, Running), "history"? (local: elastic events)}
Times are RFC 3339 UTC strings (``2026-11-29T08:30:00Z``, ``times.rfc3339``).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from .. import limitrange, quota
from ..jobspec import JobRequest, JobSettings, build_job
from ..paging import MAX_LIMIT, Page

if TYPE_CHECKING:  # pragma: no cover
    from ..profiles import TeamProfile
    from ..usage import Span


class Backend(abc.ABC):
    """What the REST layer needs from a place that runs jobs under a team's quota."""

    #: "local" or "kube": shown in the API so a user knows where jobs run.
    name: str = ""
    #: The server's part of every Job this backend runs (see ``jobspec.JobSettings``).
    job_settings: JobSettings = JobSettings()

    def build_job(self, profile: TeamProfile, request: JobRequest, owner: str, command: list[str]) -> dict:
        """The batch/v1 Job to :meth:`submit` for ``request``: the one builder, with this backend's settings."""
        return build_job(profile, request, owner, command, self.job_settings)

    def start(self) -> None:  # noqa: B027 - optional: a backend without background work
        """Begin background work (reapers, watches). Called once, on the server's IO loop thread."""

    def close(self) -> None:  # noqa: B027 - optional, as start
        """Stop background work; running jobs keep running."""

    def use_profiles(  # noqa: B027 - optional
        self, profiles: Callable[[], list[TeamProfile]], clock: Callable[[], datetime] | None = None
    ) -> None:
        """Where the teams' current profiles (with their effective hard quota: the service's
        ``_effective``) and the time are read from, for a backend that schedules across teams: the
        local backend's elastic quota (``elastic``). The kube backend leaves that to the cluster."""

    def apply_profile(self, profile: TeamProfile) -> None:  # noqa: B027 - optional: see below
        """Make the place jobs run hold ``profile``'s quota, before an admin's change is stored.

        The local backend reads the registry on every balance and admission: nothing to do. The
        kube backend writes the namespace's ResourceQuota and LimitRange objects.
        """

    @abc.abstractmethod
    def balance(self, profile: TeamProfile) -> dict:
        """``{"namespace", "team", "resources", "quotas", "warnings", "limitRange", "observedAt", "stale"}``.

        Must not scan: served from a cache the backend keeps current.
        """

    def balance_version(self, profile: TeamProfile) -> str | None:
        """What :meth:`balance` of ``profile``'s namespace reads, named without computing it: a
        string that changes whenever that state may have (``observedAt`` aside), for the ETag
        of ``GET .../balance`` (``service/validators.py``). None: the backend has none, and the
        ETag is the answer's hash. Read before the balance, so a change between the two makes
        the next conditional read a 200, never a 304 of old content."""
        return None

    @abc.abstractmethod
    def submit(self, profile: TeamProfile, job: dict, owner: str) -> dict:
        """Admit and start the batch/v1 Job ``job`` (from :meth:`build_job`) as it is; return the job.

        Raises ``errors.AdmissionDenied`` (quota/LimitRange text), ``errors.Invalid``,
        ``errors.Conflict`` when the name is taken in the namespace.
        """

    @abc.abstractmethod
    def page_jobs(self, profile: TeamProfile, limit: int, start: str | None = None) -> Page:
        """At most ``limit`` jobs of the namespace, newest first, after the position ``start``.

        ``start`` is a ``Page.next_start`` this backend returned; one it cannot use raises
        ``paging.invalid_start``. See ``paging`` for the semantics.
        """

    def list_jobs(self, profile: TeamProfile) -> list[dict]:
        """Every job of the namespace, newest first (all pages)."""
        jobs, start = [], None
        while True:
            page = self.page_jobs(profile, MAX_LIMIT, start)
            jobs += page.items
            if page.next_start is None:
                return jobs
            start = page.next_start

    @abc.abstractmethod
    def get_job(self, profile: TeamProfile, name: str) -> dict:
        """One job, or ``errors.NotFound``."""

    @abc.abstractmethod
    def logs(self, profile: TeamProfile, name: str, tail_lines: int = 200) -> str:
        """The last ``tail_lines`` lines of the job's output."""

    @abc.abstractmethod
    def cancel(self, profile: TeamProfile, name: str, by: str) -> dict:
        """Stop the job and release what it holds; return the job. ``NotFound`` if unknown."""

    def job_changes(self, profiles: list[TeamProfile], cursor=None) -> JobChanges:
        """Jobs changed since ``cursor`` (a ``JobChanges.cursor`` this backend returned), for the
        metrics (``metrics/tracker.py``). This default answers a snapshot of every job of
        ``profiles`` each time; a backend that can tell what changed answers only that."""
        return JobChanges([job for p in profiles for job in self.list_jobs(p)], None, snapshot=True)

    def stalled(self) -> list[dict]:
        """Running jobs flagged as stalled now: ``{"namespace", "team", "name", "stalled"}``
        (``stall.py``). Default: none (a backend that cannot tell)."""
        return []

    def track(self, namespaces) -> None:  # noqa: B027 - optional: the local ledger sees every job
        """Record usage in these team namespaces from now on (kube: watch them)."""

    @abc.abstractmethod
    def usage_spans(self, since: int, until: int, namespaces=None) -> list[Span]:
        """Every job (or pod) of ``namespaces`` (None: all) that held requested resources at some
        time in ``[since, until)`` (epoch seconds), for ``usage.integrate``: durable, so a restart
        loses and repeats nothing."""

    def inventory(self) -> dict:
        """What the jobs run on: ``{"source": "nvidia-smi"|"declared"|"cluster", "gpus": [...], ...}``."""
        return {"source": self.name}


def balance_json(profile: TeamProfile, quotas: list[dict], limit_ranges: list[dict]) -> dict:
    """A balance as both backends return it, less ``observedAt`` and ``stale``: ``quotas`` (with
    their status) summed, and the namespace's LimitRanges."""
    summary = quota.balance(quotas)
    return {
        "namespace": profile.namespace,
        "team": profile.team,
        "resources": summary["resources"],
        "quotas": summary["quotas"],
        "warnings": summary["warnings"],
        "limitRange": limitrange.limit_range_spec(limit_ranges),
    }


@dataclass(frozen=True)
class JobChanges:
    """What :meth:`Backend.job_changes` answers: jobs as the API shows them, the cursor to ask
    from next time, and whether ``jobs`` holds every live job there is (a snapshot: a live job
    not in it has ended or gone) or only the jobs that changed."""

    jobs: list[dict]
    cursor: object
    snapshot: bool
