"""Moving jobs through their phases on this machine: start what fits, record what ended.

``schedule`` starts Pending jobs (oldest first) where the inventory has room; ``reap``
finds Running jobs whose supervisor is gone, records Succeeded or Failed from its exit record
once no process of the job is left (a job whose supervisor was killed keeps its GPUs, reason
``Terminating``, until the orphans it left are killed and gone), enforces cancel deadlines,
and schedules again. Both are safe to run from several threads and several server processes on
one ledger: every state change is a conditional update inside a ``BEGIN IMMEDIATE`` transaction.

A job's process is "ours" when this process started it (we hold its ``Popen`` and reap it) and
otherwise found by ``/proc`` (after a server restart, or started by another server process).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import datetime

from ... import audit, elastic, jobfields, reasons
from . import (
    account,
    clock,
    command,
    elasticpass,
    jobview,
    ledger,
    livejobs,
    logtail,
    procfs,
    quotausage,
    runner,
    scheduler,
    tracking,
)


class Lifecycle:
    """Starts pending jobs on the machine and records how running ones end."""

    def __init__(
        self,
        book: ledger.Ledger,
        state_dir: str,
        inventory: dict,
        accounts: account.Policy,
        log: logging.Logger,
        settings: runner.Settings,
    ):
        self._ledger = book
        self._settings = settings
        self._state_dir = state_dir
        self._inventory = inventory
        self.accounts = accounts  # as whom and where each job runs
        self._log = log
        self._children: dict[procfs.ProcessId, subprocess.Popen] = {}  # supervisors we started
        self._lock = threading.RLock()  # one schedule/reap pass at a time in this process
        self._live = livejobs.LiveJobs()  # the scheduler's copy of the live jobs
        #: the admissions' copy of each namespace's usage, for ``admit`` to read (see ``schedule``)
        self.usage = quotausage.QuotaUsage()
        self._queue: list[_Admission] = []  # admissions waiting for the next transaction
        self._queue_lock = threading.Lock()
        #: the team profiles, when the service gave them: scheduling then follows the elastic
        #: policy (``elastic``, ``elasticpass``); without, every job is normal and fits by node only
        self.profiles: Callable[[], list] | None = None
        self.clock: Callable[[], datetime] = elasticpass.now  # the service's, for windows
        self.grace_period = 10.0  # seconds a preempted job has between SIGTERM and SIGKILL
        self._signature: tuple | None = None  # the teams' elastic quotas at the last pass
        self._terminations: list[procfs.ProcessId] = []  # preempted in the open transaction
        self._audits: list[tuple[str, str]] = []  # window-close preemptions to record after commit

    def schedule(self, admit: Callable[[sqlite3.Connection], object] | None = None):
        """Start every Pending job that fits now; note why the others wait.

        ``admit(con)``, when given, runs first in the same write transaction and its result is
        returned (its error raised): a job and its scheduling decision are committed together.
        ``admit`` may read the namespace's usage from ``self.usage`` (under this object's lock, in
        the transaction, which drops the copy if it is rolled back).
        Admissions that arrive while a transaction runs wait and then share the next one (group
        commit: one fsync for all of them); each runs in a savepoint, so one refused rolls back
        alone, and a pass that fails rolls back alone (logged), so the admissions stand and the
        reaper's next pass decides.

        A pass costs what changed since the last one (see ``livejobs``). With no job changed and
        nothing left to try it is skipped: an idle server does not take the write lock every poll.
        """
        if admit is None:
            with self._lock:
                if self._live.has_work() or self._ledger.generation() != self._live.generation or self._elastic_due():
                    self._transact([])
            return None
        ticket = _Admission(admit)
        with self._queue_lock:
            self._queue.append(ticket)
        with self._lock:
            if not ticket.done:  # no transaction took it yet: this thread runs the next one
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                self._transact(batch)
        if ticket.error is not None:
            raise ticket.error
        return ticket.result

    def reap(self) -> None:
        """Record the end of every Running job of which no process is left, then schedule."""
        with self._lock:
            with self._ledger.read() as con:
                running = ledger.in_phase(con, "Running")
            now = time.time()
            gone = []
            for row in running:
                if not self.is_running(row):
                    gone.append(row)
                elif row["kill_after"] is not None and now >= row["kill_after"]:
                    self._log.info("job %s/%s: grace period over, SIGKILL", row["namespace"], row["name"])
                    tracking.kill_processes(process_of(row), self.job_dir(row))
            # A supervisor exits only after every process of its job; one that was killed leaves
            # orphans, which keep the job (and its GPUs) until they are gone.
            left = tracking.reap_leftovers({process_of(r): self.job_dir(r) for r in gone}) if gone else {}
            ended = [r for r in gone if process_of(r) not in left]
            holding = [r for r in gone if process_of(r) in left and r["reason"] != reasons.TERMINATING]
            if ended or holding:
                with self._ledger.write() as con:
                    for row in ended:
                        if row["preempted"] and not row["cancelled_by"]:  # back to the queue
                            values = elasticpass.requeue_values(row, self.job_dir(row))
                            self._log.info("job %s/%s preempted: %s", row["namespace"], row["name"], values["message"])
                            ledger.update(con, row["id"], "Running", **values)
                            continue
                        phase, values = self._outcome(row)
                        ledger.update(con, row["id"], "Running", phase=phase, **values)
                    for row in holding:
                        self._log.warning(
                            "job %s/%s: its supervisor is gone, killing %d processes it left",
                            row["namespace"],
                            row["name"],
                            left[process_of(row)],
                        )
                        ledger.update(
                            con,
                            row["id"],
                            "Running",
                            reason=reasons.TERMINATING,
                            message=_orphans_message(left[process_of(row)]),
                        )
            ended_ids = {r["id"] for r in ended}
            self._forget_children(keep={process_of(r) for r in running if r["id"] not in ended_ids})
            self.schedule()

    def is_running(self, row: sqlite3.Row) -> bool:
        """Whether the Running job's supervisor still runs (it outlives every process of the job)."""
        child = self._children.get(process_of(row))
        if child is not None:
            return child.poll() is None  # our child: poll() also reaps it
        return procfs.is_running(process_of(row))

    def job_dir(self, row: sqlite3.Row) -> str:
        return runner.job_dir(self._state_dir, row["namespace"], row["name"])

    def _transact(self, batch: list[_Admission]) -> None:
        """One write transaction: the admissions of ``batch``, then a scheduling pass.

        With admissions, an error of the transaction itself is given to each of them (none was
        admitted); without, it is raised.
        """
        launches: list[runner.Launch] = []
        self._terminations, self._audits = [], []
        passing = False
        try:
            with self._ledger.write() as con:
                before = con.total_changes
                for ticket in batch:
                    ticket.run(con)
                passing = True
                seen = self._guarded_pass(con, launches) if batch else self._schedule_in(con, launches)
                changed = con.total_changes != before
        except BaseException as e:
            for launch in launches:  # the ledger did not record them: they must not run
                runner.abort(launch)
            if passing:
                self._live = livejobs.LiveJobs()  # it may hold what was rolled back: read anew
            if batch:
                self.usage = quotausage.QuotaUsage()  # the same
            for ticket in batch:
                ticket.fail(e)
            if not batch or not isinstance(e, Exception):
                raise
            return
        finally:
            for ticket in batch:
                ticket.done = True
        for launch in launches:
            self._children[launch.proc] = launch.popen
            runner.release(launch)
        for proc in self._terminations:  # preempted: SIGTERM now that the ledger says so
            tracking.terminate(proc)
        for target, detail in self._audits:
            try:
                audit.record(self._state_dir, audit.SYSTEM, audit.WINDOW_PREEMPTED, target, detail)
            except Exception:  # noqa: BLE001 - the preemption stands; the log keeps what the audit lost
                self._log.exception("jupyter_quota: could not record %s in the audit log: %s", target, detail)
        if seen is not None:
            # The copy holds every change of this transaction; ``write`` commits it as the next
            # generation, and a change by anyone else comes later and is read then.
            self._live.generation = seen + 1 if changed else seen

    def _guarded_pass(self, con: sqlite3.Connection, launches: list) -> int | None:
        """``_schedule_in`` after an admission: on failure, roll back the pass only (logged)."""
        con.execute("SAVEPOINT pass")
        try:
            seen = self._schedule_in(con, launches)
        except Exception:  # noqa: BLE001 - any fault: undo the pass, keep the admission, log it
            con.execute("ROLLBACK TO pass")
            for launch in launches:
                runner.abort(launch)
            launches.clear()
            self._live = livejobs.LiveJobs()
            self._log.exception("local backend: the scheduling pass after an admission failed")
            return None
        finally:
            con.execute("RELEASE pass")
        return seen

    def _schedule_in(self, con: sqlite3.Connection, launches: list) -> int:
        """Decide and start inside the write transaction; launched supervisors wait at their gate.

        Returns the generation the pass read the ledger at (before its own changes).
        """
        live = self._live
        seen = live.refresh(con, self._held)
        for job_id, (job, error) in list(live.invalid.items()):
            self._fail_invalid(con, job_id, job, error)
            live.ended(job_id)
        profiles = self.profiles() if self.profiles is not None else []
        if elasticpass.active(profiles, live.elastic.values()):
            self._elastic_pass(con, launches, profiles)
            return seen
        decisions = scheduler.schedule(self._inventory, list(live.running.values()), live.candidates())
        live.tried()
        for decision in decisions:
            if not decision.start:
                self._wait(con, decision.key, decision.reason, decision.message)
                continue
            self._start(con, decision.key, decision.gpu_indices, launches)
        return seen

    def _elastic_due(self) -> bool:
        """Whether the teams' elastic quotas changed since the last pass (a window opened or closed)."""
        if self.profiles is None:
            return False
        return elasticpass.signature(self.profiles(), self.clock()) != self._signature

    def _elastic_pass(self, con: sqlite3.Connection, launches: list, profiles: list) -> None:
        """The elastic policy's pass: preemptions, then starts where the machine fits them (kube-scheduler's
        fit, on GPU indices), then every waiting job's reason. It decides every live job, so it runs
        only while elastic quota is in play (``elasticpass.active``); otherwise passes stay incremental."""
        live, now = self._live, self.clock()
        self._signature = elasticpass.signature(profiles, now)
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
                self._start(con, fit.key, fit.gpu_indices, launches, borrowed=decision.borrowed)
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
        """Mark a Running job as being preempted; SIGTERM follows the commit (``_transact``)."""
        row = ledger.find_id(con, decision.key.id)
        if row is None or row["phase"] != "Running" or row["cancelled_by"] or row["preempted"]:
            return
        values = elasticpass.preempt_values(row, decision, self.job_dir(row), self.grace_period)
        self._log.info("job %s/%s: %s", row["namespace"], row["name"], values["message"])
        ledger.update(con, row["id"], "Running", **values)
        self._terminations.append(process_of(row))
        if decision.reason == reasons.WINDOW_CLOSED:
            self._audits.append((f"job/{row['namespace']}/{row['name']}", values["message"]))

    def _wait(self, con: sqlite3.Connection, job_id: int, reason: str, message: str) -> None:
        """A Pending job stays: its reason and message updated when they changed."""
        job = self._live.pending[job_id]
        if (job.reason, job.message) != (reason, message):
            ledger.update(con, job_id, "Pending", reason=reason, message=message)
        self._live.decided(job_id, reason, message)

    def _start(
        self, con: sqlite3.Connection, job_id: int, gpu_indices: list[int], launches: list, borrowed: bool = False
    ) -> None:
        """Launch a Pending job on ``gpu_indices`` (its supervisor waits at its gate until commit)."""
        live = self._live
        row = ledger.find_id(con, job_id)
        if row is None or row["phase"] != "Pending":  # deleted behind the ledger's back
            live.ended(job_id, freed=True)
            return
        resume = elasticpass.resume_args(row, ledger.loads(row["args"], []), self.job_dir(row))
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
        launches.append(launch)
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
            started_at=row["started_at"] or clock.now(),
            **elasticpass.start_values(row, borrowed, resume),
        )
        live.started(job_id, scheduler.Running(live.pending[job_id].requests, gpu_indices, borrowed))

    def _fail_invalid(self, con: sqlite3.Connection, job_id: int, job: str, error: Exception) -> None:
        """Fail a Pending job whose requests cannot be read (``reasons.INVALID_JOB``)."""
        message = scheduler.invalid_message(error)
        self._log.warning("job %s failed: %s", job, message)
        ledger.update(
            con, job_id, "Pending", phase="Failed", reason=reasons.INVALID_JOB, message=message, finished_at=clock.now()
        )

    def _held(self, row: sqlite3.Row) -> scheduler.Running:
        """What a Running job holds; requests that cannot be read count as none (logged)."""
        gpu_indices = ledger.loads(row["gpu_indices"], [])
        try:
            return scheduler.Running(livejobs.exact_requests(row), gpu_indices, bool(row["borrowed"]))
        except Exception as e:  # noqa: BLE001 - it runs already: keep its GPUs, go on
            self._log.warning("job %s/%s: %s; counted as holding only its GPUs", row["namespace"], row["name"], e)
            return scheduler.Running({scheduler.GPU: len(gpu_indices)}, gpu_indices)

    def _launch(self, row: sqlite3.Row, gpu_indices: list[int], resume: list[str]) -> runner.Launch:
        # Placed again at start, not only at submit: the account or its directory may be gone.
        try:
            place = self.accounts.place(row["owner"])
        except account.Refused as e:
            raise OSError(str(e)) from None  # a StartError, as any other start failure
        container = jobfields.train_container(ledger.loads(row["pod"]))
        env = runner.job_environment(os.environ, container, row["namespace"], row["name"], gpu_indices)
        env = command.job_path(account.job_environment(env, place.account))
        # Found before the ledger says Running: CommandNotFound makes the job StartError at once.
        argv = command.resolve(jobview.command_of(container), env["PATH"], place.workdir) + resume
        return runner.launch(
            self.job_dir(row),
            argv,
            env,
            place.workdir,
            self._settings,
            place.account.run_as() if place.account else None,
            keep_log=elasticpass.was_preempted(row),  # a requeued job's log goes on
        )

    def _outcome(self, row: sqlite3.Row) -> tuple[str, dict]:
        """The phase and fields of a Running job whose process is gone."""
        directory = self.job_dir(row)
        record = runner.read_exit(directory)
        code = record.get("exitCode") if record else None
        values = {
            "exit_code": code,
            "finished_at": (record or {}).get("finishedAt") or clock.now(),
            "kill_after": None,
        }
        if row["cancelled_by"]:
            return "Failed", dict(values, reason=reasons.CANCELLED, message=f"cancelled by {row['cancelled_by']}")
        if record is None:
            return "Failed", dict(values, reason=reasons.LOST, message=self._lost_message(row))
        if record.get("error"):
            return "Failed", dict(values, reason=reasons.START_ERROR, message=record["error"])
        if code == 0:
            return "Succeeded", dict(values, reason=None, message=None)
        message = f"exit code {code}"
        if record.get("signal"):
            message += f" ({record['signal']})"
        last = logtail.last_line(os.path.join(directory, runner.LOG_FILE))
        if last:
            message += f": {last}"
        return "Failed", dict(values, reason=reasons.ERROR, message=message)

    def _lost_message(self, row: sqlite3.Row) -> str:
        child = self._children.get(process_of(row))
        if child is not None and child.returncode is not None:
            if child.returncode < 0:
                how = runner.signal_name(-child.returncode)
                return f"the job's processes (pid {row['pid']}) were killed ({how}) before recording an exit code"
            return (
                f"the job's supervisor (pid {row['pid']}) exited with code {child.returncode}"
                " without recording the job's exit code; see the job's log"
            )
        return (
            f"the job's process (pid {row['pid']}) disappeared while the server was not watching;"
            " no exit code was recorded"
        )

    def _forget_children(self, keep: set) -> None:
        """Drop supervisors that exited (``poll`` reaped them) and whose end is recorded."""
        for proc, child in list(self._children.items()):
            if proc not in keep and child.poll() is not None:
                del self._children[proc]


def _orphans_message(count: int) -> str:
    return (
        f"the job's supervisor is gone but {count} of its processes still ran; they were sent"
        " SIGKILL and the job keeps its GPUs until they have exited"
    )


class _Admission:
    """An admission waiting for a transaction: what to run, then how it went."""

    def __init__(self, admit: Callable[[sqlite3.Connection], object]):
        self.admit = admit
        self.done = False  # set under the lifecycle's lock
        self.result = None
        self.error: BaseException | None = None

    def run(self, con: sqlite3.Connection) -> None:
        """Run in a savepoint: a refusal (any ``Exception``) rolls back this admission only."""
        con.execute("SAVEPOINT admission")
        try:
            self.result = self.admit(con)
        except Exception as e:  # noqa: BLE001 - given to the submitting thread, raised there
            con.execute("ROLLBACK TO admission")
            self.error = e
        finally:
            con.execute("RELEASE admission")

    def fail(self, error: BaseException) -> None:
        """The transaction was rolled back: nothing of this admission stands."""
        self.result = None
        self.error = self.error or error


def process_of(row: sqlite3.Row) -> procfs.ProcessId:
    return procfs.ProcessId(row["pid"], row["pid_start"], row["boot_id"])
