"""One scheduling pass, inside the ledger's write transaction: which Pending jobs start, which
Running ones are preempted (elastic quota), and why the others wait.

A pass writes its decisions to the ledger and keeps what must wait for the commit: the launched
supervisors (held at their gate), the preempted jobs' processes to SIGTERM and the window-close
preemptions to audit. ``Lifecycle`` makes a new pass for every transaction, so nothing of one
transaction is left for the next; a pass that was rolled back is ``discard``-ed.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from datetime import datetime

from ... import elastic, reasons
from . import clock, elasticpass, ledger, livejobs, procfs, runner, runs, scheduler


class SchedulingPass:
    """The decisions of one pass over ``live`` (the scheduler's copy of the live jobs)."""

    def __init__(
        self,
        live: livejobs.LiveJobs,
        inventory: dict,
        launch: Callable[[sqlite3.Row, list[int], list[str]], runner.Launch],
        job_dir: Callable[[sqlite3.Row], str],
        log: logging.Logger,
        grace_period: float,
    ):
        self._live = live
        self._inventory = inventory
        self._launch = launch  # start a job's supervisor (it waits at its gate); OSError: it cannot start
        self._job_dir = job_dir
        self._log = log
        self._grace_period = grace_period  # seconds a preempted job has between SIGTERM and SIGKILL
        self.launches: list[runner.Launch] = []  # to release after commit, or abort
        self.terminations: list[procfs.ProcessId] = []  # preempted: SIGTERM after commit
        self.audits: list[tuple[str, str]] = []  # window-close preemptions to record after commit

    def discard(self) -> None:
        """The transaction (or the pass's savepoint) was rolled back: none of it may happen."""
        for launch in self.launches:  # the ledger did not record them: they must not run
            runner.abort(launch)
        self.launches, self.terminations, self.audits = [], [], []

    def fail_invalid(self, con: sqlite3.Connection) -> None:
        """Fail every Pending job whose requests cannot be read (``reasons.INVALID_JOB``)."""
        live = self._live
        for job_id, (job, error) in list(live.invalid.items()):
            message = scheduler.invalid_message(error)
            self._log.warning("job %s failed: %s", job, message)
            ledger.update(
                con,
                job_id,
                "Pending",
                phase="Failed",
                reason=reasons.INVALID_JOB,
                message=message,
                finished_at=clock.now(),
            )
            live.ended(job_id)

    def by_node(self, con: sqlite3.Connection) -> None:
        """Without elastic quota: start what fits the machine (kube-scheduler's fit), oldest first."""
        live = self._live
        decisions = scheduler.schedule(self._inventory, list(live.running.values()), live.candidates())
        live.tried()
        for decision in decisions:
            if not decision.start:
                self._wait(con, decision.key, decision.reason, decision.message)
                continue
            self._start(con, decision.key, decision.gpu_indices)

    def elastic(self, con: sqlite3.Connection, profiles: list, now: datetime) -> None:
        """The elastic policy's pass: preemptions, then starts where the machine fits them (kube-scheduler's
        fit, on GPU indices), then every waiting job's reason. It decides every live job, so it runs
        only while elastic quota is in play (``elasticpass.active``); otherwise passes stay incremental."""
        live = self._live
        running, pending = [], []
        for job_id, info in live.elastic.items():
            job = elastic.Job(info.key, info.namespace, info.priority, info.usage, job_id, info.preempting)
            job.preempted_for = info.preempted_for
            if job_id in live.running:
                running.append(job)
            elif job_id in live.pending:
                job.nominated = live.pending[job_id].reason == reasons.WAITING_FOR_PREEMPTION
                pending.append(job)
        plan = elastic.decide(elasticpass.teams(profiles, now), elasticpass.capacity(self._inventory), running, pending)
        live.tried()
        for decision in plan.of(elastic.PREEMPT):
            self._preempt(con, decision)
        starting = [d for d in plan.decisions if d.action == elastic.START]
        holding = list(live.running.values())
        fits = scheduler.schedule(
            self._inventory, holding, [scheduler.Pending(d.key.id, live.pending[d.key.id].requests) for d in starting]
        )
        for decision, fit in zip(starting, fits, strict=True):
            if fit.start:
                self._start(con, fit.key, fit.gpu_indices, borrowed=decision.borrowed)
            else:
                self._wait(con, fit.key, fit.reason, fit.message)
        for decision in plan.of(elastic.WAIT):
            job_id = decision.key.id
            reason, message = decision.reason, decision.message
            if reason == reasons.WAITING:  # kube-scheduler's words for what the machine lacks
                (fit,) = scheduler.schedule(
                    self._inventory,
                    list(live.running.values()),
                    [scheduler.Pending(job_id, live.pending[job_id].requests)],
                )
                if not fit.start:
                    reason, message = fit.reason, fit.message
            self._wait(con, job_id, reason, message)
        for key, borrowed in plan.borrowed.items():
            if key.id in live.running and live.running[key.id].borrowed != borrowed:
                ledger.update(con, key.id, "Running", borrowed=int(borrowed))
                live.running[key.id].borrowed = borrowed

    def _preempt(self, con: sqlite3.Connection, decision) -> None:
        """Mark a Running job as being preempted; SIGTERM follows the commit."""
        row = ledger.find_id(con, decision.key.id)
        if row is None or row["phase"] != "Running" or row["cancelled_by"] or row["preempted"]:
            return
        values = elasticpass.preempt_values(row, decision, self._job_dir(row), self._grace_period)
        self._log.info("job %s/%s: %s", row["namespace"], row["name"], values["message"])
        ledger.update(con, row["id"], "Running", **values)
        self.terminations.append(procfs.process_of(row))
        if decision.reason == reasons.WINDOW_CLOSED:
            self.audits.append((f"job/{row['namespace']}/{row['name']}", values["message"]))

    def _wait(self, con: sqlite3.Connection, job_id: int, reason: str, message: str) -> None:
        """A Pending job stays: its reason and message updated when they changed."""
        job = self._live.pending[job_id]
        if (job.reason, job.message) != (reason, message):
            ledger.update(con, job_id, "Pending", reason=reason, message=message)
        self._live.decided(job_id, reason, message)

    def _start(self, con: sqlite3.Connection, job_id: int, gpu_indices: list[int], borrowed: bool = False) -> None:
        """Launch a Pending job on ``gpu_indices`` (its supervisor waits at its gate until commit)."""
        live = self._live
        row = ledger.find_id(con, job_id)
        if row is None or row["phase"] != "Pending":  # deleted behind the ledger's back
            live.ended(job_id, freed=True)
            return
        resume = elasticpass.resume_args(row, ledger.loads(row["args"], []), self._job_dir(row))
        try:
            launch = self._launch(row, gpu_indices, resume)
        except OSError as e:
            self._log.warning("job %s/%s cannot start: %s", row["namespace"], row["name"], e)
            ledger.update(
                con,
                job_id,
                "Pending",
                phase="Failed",
                reason=reasons.START_ERROR,
                message=f"cannot start the job: {e}",
                finished_at=clock.now(),
            )
            live.ended(job_id, freed=True)  # the later decisions counted it as started
            return
        self.launches.append(launch)
        now = clock.now()
        ledger.update(
            con,
            job_id,
            "Pending",
            phase="Running",
            reason=None,
            message=None,
            gpu_indices=ledger.dumps(gpu_indices),
            pid=launch.proc.pid,
            pid_start=launch.proc.start,
            boot_id=launch.proc.boot,
            started_at=row["started_at"] or now,  # the first start, as a Job's startTime; usage counts runs
            **elasticpass.start_values(row, borrowed, resume),
        )
        runs.begin(con, job_id, now)
        live.started(job_id, scheduler.Running(live.pending[job_id].requests, gpu_indices, borrowed))
