"""The embedded backend: one machine's GPUs shared by teams, with a SQLite ledger as authority.

Admission, scheduling and every state change are transactions on the ledger (see ``ledger``),
so threads of one server, several server processes and restarts all agree on who holds what.
Jobs are processes under ``supervise`` in their own session; they outlive the server and are
found again by the next one (see ``lifecycle``).

Every process of a job ends with it, and its GPUs are freed only when none is left. The
supervisor (see ``supervise``) is a child subreaper: it forwards a cancel's SIGTERM to all its
descendants, SIGKILLs whatever is left once the job's main process exits (a job that exits 0
leaving background workers has them killed, as a pod's processes die with it), and exits only
after all are reaped. A job stays Running, and holds its GPUs, until its supervisor is gone
and no process carrying the job's marker (``procfs.MARKER``) or in its cgroup (``cgroup``,
where the machine allows one per job, unless ``cgroups=False``) runs: a supervisor that was
itself killed leaves orphans, which the reaper SIGKILLs while the job shows reason
``Terminating`` (see ``tracking``). Phases are Kubernetes' (Pending, Running, Succeeded, Failed); a job is
Succeeded or Failed only once nothing of it runs.

Cancel semantics: ``cancel`` sends SIGTERM to the job's supervisor (which forwards it to every
process of the job) and waits at most ``CANCEL_WAIT`` seconds. A job that ended by then is
returned Failed/Cancelled; one that did not is returned Running with reason ``Terminating``,
and the reaper records Failed/Cancelled when it exits, sending SIGKILL to every process of the
job once ``grace_period`` has passed (the deadline is in the ledger, so a restart keeps it).
Cancelling a Pending job marks it Failed/Cancelled at once. Cancelling a job that already
finished, or is already terminating, returns it unchanged (and one whose process ended before
the reaper noticed is returned as it really ended).

Jobs run as their owner's OS account when the server runs as root and ``job_user`` allows it
(see ``account``), in that account's home directory or ``workdir`` (``{username}`` and ``{home}``
expanded); otherwise as the server's user, in ``workdir`` or ``server_dir``. A submit whose job
could not run so (``job_user="owner"`` and no account, a missing directory) is refused (403)
before admission.

Job output goes to ``<state_dir>/jobs/<namespace>/<name>/output.log``, rotated at
``log_max_bytes`` into ``log_backups`` older files; ``logs`` reads across them.

Finished jobs are pruned by the reaper once past ``retention_seconds`` or beyond
``retention_count`` per namespace, a compact record kept for accounting (see ``retention``).

Balance is served from a per-namespace cache of live pods, revalidated on every call by the
ledger's ``generation`` counter (one single-row read), so writes by other processes show at once.
"""

from __future__ import annotations

import copy
import logging
import marshal
import os
import threading
import time
from dataclasses import dataclass

from ... import errors, paging, priority, quota, reasons, stall, statedir
from ...jobfields import priority_of
from ...jobspec import JobSettings
from ...ticker import Ticker
from ..base import Backend, JobChanges, balance_json
from . import (
    account,
    admission,
    clock,
    elasticpass,
    jobrecords,
    jobview,
    ledger,
    lifecycle,
    logtail,
    procfs,
    retention,
    runner,
    tracking,
    usagespans,
)
from .stallwatch import StallWatch

CANCEL_WAIT = 0.25  # seconds cancel() waits for a job to exit after SIGTERM
PRUNE_INTERVAL = 60.0  # seconds between the reaper's looks for finished jobs past retention


class LocalBackend(Backend):
    """Runs quota-admitted jobs as local processes on this machine's GPUs."""

    name = "local"
    #: a balance's ``observedAt`` is when it was read (the kube backend's: the watch's last data)
    observed_at_is_read_time = True

    def __init__(
        self,
        ledger_path: str | os.PathLike,
        state_dir: str | os.PathLike,
        inventory: dict,
        grace_period: float = 10.0,
        poll_interval: float = 0.5,
        log: logging.Logger | None = None,
        workdir: str | os.PathLike | None = None,
        job_user: str = account.SERVER,
        server_dir: str | os.PathLike | None = None,
        log_max_bytes: int = runner.Settings.log_max_bytes,
        log_backups: int = runner.Settings.log_backups,
        cgroups: bool = True,
        retention_seconds: float = 86400,
        retention_count: int = 1000,
        prune_batch: int = 500,
        job_image: str = "",
        stall_policy: stall.StallPolicy | None = None,
    ):
        # The image only labels the Job (a local job runs its command as a process).
        self.job_settings = JobSettings(image=job_image)
        self.grace_period = grace_period
        self.retention_seconds = retention_seconds
        self.retention_count = retention_count
        self.prune_batch = prune_batch
        self._pruned_at = 0.0  # monotonic time of the last prune that found less than a batch
        self.poll_interval = poll_interval
        self.log = log or logging.getLogger(__name__)
        self.state_dir = os.path.abspath(state_dir)
        self._inventory = copy.deepcopy(inventory)
        self._ledger = ledger.Ledger(ledger_path)
        self._storage_warning = ""  # the last one logged, so a failing reaper does not repeat it every pass
        if self._ledger.startup_error is not None:
            self._warn_storage(self._ledger.startup_error)
        try:
            statedir.make_private_dir(self.state_dir)
        except OSError as e:
            if not self._warn_storage(e):
                raise
        self._accounts = account.Policy(job_user, str(workdir or ""), os.path.abspath(server_dir or os.getcwd()))
        self._teams = elasticpass.Teams()  # the service's, once it gives them (``use_profiles``)
        self._jobs = lifecycle.Lifecycle(
            self._ledger,
            self.state_dir,
            self._inventory,
            self._accounts,
            self.log,
            runner.Settings(log_max_bytes, log_backups, cgroups),
            self._teams,
            grace_period,
        )
        self.stall_watch = StallWatch(stall_policy or stall.StallPolicy(), self._jobs.job_dir)
        self._usage: dict[str, _Usage] = {}
        self._usage_lock = threading.Lock()
        self._ticker: Ticker | None = None

    # Background work

    def use_profiles(self, profiles, clock=None) -> None:
        """Schedule with the elastic policy over these teams (``elastic``; see ``elasticpass``)."""
        self._teams.follow(profiles, clock)

    def start(self) -> None:
        """Recover jobs left by a previous server (one reap now), then reap every ``poll_interval``.

        A first pass that fails is logged, not raised: the server must start (and let users see and
        cancel jobs) whatever the ledger holds, and a full or read-only state dir still serves
        reads; the reaper thread tries again.
        """
        try:
            self.reap()
        except Exception as e:
            if not self._warn_storage(e):
                self.log.exception("local backend: the first reaping pass failed; the server starts anyway")
        if self._ticker is None:
            self._ticker = Ticker(
                self._pass, self.poll_interval, name="jupyter-quota-reaper", log=self.log, first_pass_now=False
            )
            self._ticker.start()

    def close(self) -> None:
        """Stop the reaper thread. Running jobs keep running; the next server finds them."""
        if self._ticker is not None:
            self._ticker.close(timeout=max(5.0, 4 * self.poll_interval))
            self._ticker = None

    def reap(self) -> None:
        """Record ended jobs, enforce cancel deadlines, start what fits. Safe to call any time."""
        self._jobs.reap()

    def schedule(self) -> None:
        """Start Pending jobs that fit the machine now."""
        self._jobs.schedule()

    def prune(self) -> int:
        """Prune one batch of finished jobs past their retention (see ``retention``)."""
        return retention.prune(
            self._ledger,
            self.state_dir,
            keep_seconds=self.retention_seconds,
            keep_count=self.retention_count,
            batch=self.prune_batch,
            log=self.log,
        )

    # Backend API

    def balance(self, profile) -> dict:
        usage = self._namespace_usage(profile.namespace)
        # The summary depends only on the ledger state and the profile (a new object whenever an
        # admin changes it, or the service's effective quota changes), so a read between changes
        # is one generation check and a copy.
        if usage.summary is None or usage.summary[0] is not profile:
            quotas = [
                quota.quota_status(q, usage.pods, {admission.JOB_COUNT: usage.jobs}) for q in profile.resource_quotas()
            ]
            usage.summary = (profile, marshal.dumps(balance_json(profile, quotas, profile.limit_ranges())))
        # A copy a caller cannot change the cache through (marshal's: a fifth of deepcopy's cost,
        # for the JSON types a balance holds); the ledger was checked just now.
        return {**marshal.loads(usage.summary[1]), "observedAt": clock.now(), "stale": False}

    def balance_version(self, profile) -> str:
        """The ledger's change counter: every job written changes it (as its writers published
        it: no SQLite read, ``changebeacon``)."""
        return f"g{self._ledger.published_generation()}"

    def submit(self, profile, job: dict, owner: str) -> dict:
        """Admit ``job`` against the namespace's live usage and schedule, in one transaction."""
        namespace = profile.namespace
        name = admission.validate_job(job, namespace)
        try:  # refused before it is admitted; checked again when it starts (see ``lifecycle``)
            self._accounts.place(owner)
        except account.Refused as e:
            raise errors.Forbidden(f"cannot run jobs of {owner!r}: {e}") from None
        best_effort = priority_of(job) == priority.BEST_EFFORT
        quotas = admission.effective_quotas(profile, best_effort)
        limit_ranges = profile.limit_ranges()

        def admit(con):
            if ledger.find(con, namespace, name) is not None:
                raise errors.Conflict(f'jobs.batch "{name}" already exists')
            # From the copy of the namespace's usage: the cost is what changed, not its live jobs.
            status = self._jobs.usage.quotas_with_status(con, namespace, quotas)
            if not best_effort:
                status = admission.without_best_effort(con, namespace, status)
            admitted = quota.admit_job(job, status, limit_ranges)
            ledger.insert(con, admission.job_row(profile, job, owner, admitted))

        # A failed scheduling pass does not undo the admission: the reaper's next pass decides.
        self._jobs.schedule(admit)
        self.log.info("job %s/%s admitted for %s", namespace, name, owner)
        return self.get_job(profile, name)

    def page_jobs(self, profile, limit: int, start: str | None = None) -> paging.Page:
        """Keyset pages on the job's id (submission order), newest first; ``start`` is an id."""
        before = None
        if start is not None:
            if not (start.isascii() and start.isdigit() and len(start) < 19):
                raise paging.invalid_start(start)
            before = int(start)
        with self._ledger.read() as con:
            rows = ledger.page_in_namespace(con, profile.namespace, limit + 1, before)
            if len(rows) <= limit:
                return paging.Page([self._shown(r) for r in rows])
            rows = rows[:limit]
            remaining = ledger.count_in_namespace(con, profile.namespace, rows[-1]["id"])
        return paging.Page([self._shown(r) for r in rows], str(rows[-1]["id"]), remaining)

    def get_job(self, profile, name: str) -> dict:
        return self._shown(self._row(profile.namespace, name))

    def logs(self, profile, name: str, tail_lines: int = 200) -> str:
        row = self._row(profile.namespace, name)
        return logtail.tail(os.path.join(self._jobs.job_dir(row), runner.LOG_FILE), tail_lines)

    def cancel(self, profile, name: str, by: str, reason: str | None = None, message: str | None = None) -> dict:
        """SIGTERM the job and return; see the module docstring for the semantics.

        ``reason`` and ``message``: why, when not a person's cancel (``reasons.IDLE``: an idle
        endpoint); the job ends Failed with them instead of ``Cancelled``.
        """
        namespace = profile.namespace
        why = {"reason": reason, "message": message or f"stopped by {by}"} if reason else {}
        terminate = False
        with self._ledger.write() as con:
            row = ledger.find(con, namespace, name)
            if row is None:
                raise errors.NotFound(f'jobs.batch "{name}" not found')
            if row["phase"] == "Pending":
                ledger.update(
                    con,
                    row["id"],
                    "Pending",
                    phase="Failed",
                    **(why or {"reason": reasons.CANCELLED, "message": f"cancelled by {by}"}),
                    finished_at=clock.now(),
                )
            elif row["phase"] == "Running" and not row["cancelled_by"] and self._jobs.is_running(row):
                ledger.update(
                    con, row["id"], "Running", cancelled_by=by, kill_after=time.time() + self.grace_period, **why
                )
                terminate = True
            # Otherwise it is finished, already terminating, or ended unrecorded: unchanged.
        if terminate:
            self.log.info("job %s/%s cancelled by %s: SIGTERM", namespace, name, by)
            tracking.terminate(procfs.process_of(row))
            self._wait_for_exit(namespace, name, CANCEL_WAIT)
        elif row["phase"] == "Running":
            self.reap()  # an end the reaper has not recorded yet shows as it really was
        return self.get_job(profile, name)

    def job_changes(self, profiles, cursor=None) -> JobChanges:
        """The live jobs the first time, then the rows changed since (``rev`` above ``cursor``, a
        generation): a scrape reads what changed, never every finished job."""
        with self._ledger.read() as con:
            rows = ledger.live_rows(con) if cursor is None else ledger.rows_changed_since(con, cursor)
            current = ledger.generation(con)
        return JobChanges([self._shown(r) for r in rows], current, snapshot=cursor is None)

    def stalled(self) -> list[dict]:
        with self._ledger.read() as con:
            rows = ledger.in_phase(con, "Running")
        flagged = ((row, self.stall_watch.of(row)) for row in rows)
        return [
            {"namespace": row["namespace"], "team": row["team"], "name": row["name"], "stalled": flag}
            for row, flag in flagged
            if flag is not None
        ]

    def inventory(self) -> dict:
        return copy.deepcopy(self._inventory)

    def usage_spans(self, since: int, until: int, namespaces=None) -> list:
        """Jobs that held resources in ``[since, until)``, from the ledger (``usagespans``)."""
        return usagespans.spans(self._ledger, since, until, namespaces)

    def job_records(self, since: int, until: int, namespaces=None) -> list:
        """Jobs submitted before ``until`` and live at ``since`` or after, with their submission
        times (``jobrecords``): the history recommendations and replays read."""
        return jobrecords.records(self._ledger, since, until, namespaces)

    # Helpers

    def _shown(self, row) -> dict:
        return jobview.job_json(row, stalled=self.stall_watch.of(row))

    def _row(self, namespace: str, name: str):
        with self._ledger.read() as con:
            row = ledger.find(con, namespace, name)
        if row is None:
            raise errors.NotFound(f'jobs.batch "{name}" not found')
        return row

    def _wait_for_exit(self, namespace: str, name: str, timeout: float) -> None:
        """Poll briefly for a signalled job to end, and record it when it does."""
        deadline = time.monotonic() + timeout
        while True:
            row = self._row(namespace, name)
            if row["phase"] != "Running" or not self._jobs.is_running(row):
                self.reap()
                return
            if time.monotonic() >= deadline:
                return
            time.sleep(0.02)

    def _namespace_usage(self, namespace: str) -> _Usage:
        """Live pods and job count of a namespace, rebuilt only when the ledger changed."""
        current = self._ledger.generation()
        with self._usage_lock:
            cached = self._usage.get(namespace)
        if cached is not None and cached.generation == current:
            return cached
        with self._ledger.read() as con:
            live = ledger.live_in_namespace(con, namespace)
            usage = _Usage(ledger.generation(con), admission.live_pods(live), len(live))
        with self._usage_lock:
            self._usage[namespace] = usage
        return usage

    def _pass(self) -> None:
        """One pass of the reaper (on its Ticker): reap, sample stalls, prune what is due."""
        failed = False
        try:
            self.reap()
            self.stall_watch.sample()
        except Exception as e:  # keep reaping; a bad pass is logged, the next may succeed
            failed = True
            if not self._warn_storage(e):
                self.log.exception("local backend: reaping failed")
        if time.monotonic() - self._pruned_at >= PRUNE_INTERVAL:
            try:
                if self.prune() < self.prune_batch:  # a full batch: more may be due, go on
                    self._pruned_at = time.monotonic()
            except Exception as e:  # pruning waits for the next interval; reaping goes on
                failed = True
                self._pruned_at = time.monotonic()
                if not self._warn_storage(e):
                    self.log.exception("local backend: pruning finished jobs failed")
        if not failed:
            self._storage_warning = ""  # the outage is over: the next one is logged again

    def _warn_storage(self, e: BaseException) -> bool:
        """Log a full or read-only state dir, once rather than every pass; False for other errors."""
        error = statedir.storage_error(e, self.state_dir)
        if error is None:
            return False
        if error.message != self._storage_warning:
            self._storage_warning = error.message
            self.log.warning("jupyter_quota: %s", error.message)
        return True


@dataclass
class _Usage:
    generation: int
    pods: list
    jobs: int
    #: (profile, marshalled balance without time): filled by the first balance read at this generation
    summary: tuple | None = None
