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

from ... import audit, jobfields, reasons
from . import (
    account,
    clock,
    command,
    elasticpass,
    jobend,
    jobview,
    ledger,
    livejobs,
    procfs,
    quotausage,
    runner,
    runs,
    scheduler,
    tracking,
)
from .procfs import process_of
from .schedulingpass import SchedulingPass


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
        teams: elasticpass.Teams,
        grace_period: float = 10.0,
    ):
        self._ledger = book
        self._settings = settings
        self._state_dir = state_dir
        self._inventory = inventory
        self._accounts = accounts  # as whom and where each job runs
        self._log = log
        #: the team profiles and the time, once the service gives them: scheduling then follows the
        #: elastic policy (``elastic``, ``elasticpass``); without, every job is normal and fits by node only
        self._teams = teams
        self._grace_period = grace_period  # seconds a preempted job has between SIGTERM and SIGKILL
        self._children: dict[procfs.ProcessId, subprocess.Popen] = {}  # supervisors we started
        self._lock = threading.RLock()  # one schedule/reap pass at a time in this process
        self._live = livejobs.LiveJobs()  # the scheduler's copy of the live jobs
        #: the admissions' copy of each namespace's usage, for ``admit`` to read (see ``schedule``)
        self.usage = quotausage.QuotaUsage()
        self._queue: list[_Admission] = []  # admissions waiting for the next transaction
        self._queue_lock = threading.Lock()
        self._signature: tuple | None = None  # the teams' elastic quotas at the last elastic pass

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
                # SQLite's generation, published too: a writer that died before publishing is
                # seen within one poll (``changebeacon``)
                if self._live.has_work() or self._ledger.sync_beacon() != self._live.generation or self._elastic_due():
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
                            runs.end(con, row["id"], clock.now())  # it holds nothing while it waits
                            continue
                        child = self._children.get(process_of(row))
                        phase, values = jobend.outcome(row, self.job_dir(row), child)
                        ledger.update(con, row["id"], "Running", phase=phase, **values)
                        runs.end(con, row["id"], values["finished_at"])
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
                            message=jobend.orphans_message(left[process_of(row)]),
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
        step = SchedulingPass(self._live, self._inventory, self._launch, self.job_dir, self._log, self._grace_period)
        passing = False
        try:
            with self._ledger.write() as con:
                before = con.total_changes
                for ticket in batch:
                    ticket.run(con)
                passing = True
                seen = self._guarded_pass(con, step) if batch else self._schedule_in(con, step)
                changed = con.total_changes != before
        except BaseException as e:
            step.discard()
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
        self._after_commit(step)
        if seen is not None:
            # The copy holds every change of this transaction; ``write`` commits it as the next
            # generation, and a change by anyone else comes later and is read then.
            self._live.generation = seen + 1 if changed else seen

    def _after_commit(self, step: SchedulingPass) -> None:
        """What the pass left for after the commit: release the launched, SIGTERM the preempted, audit."""
        for launch in step.launches:
            self._children[launch.proc] = launch.popen
            runner.release(launch)
        for proc in step.terminations:  # preempted: SIGTERM now that the ledger says so
            tracking.terminate(proc)
        for target, detail in step.audits:
            try:
                audit.record(self._state_dir, audit.SYSTEM, audit.WINDOW_PREEMPTED, target, detail)
            except Exception:  # noqa: BLE001 - the preemption stands; the log keeps what the audit lost
                self._log.exception("jupyter_quota: could not record %s in the audit log: %s", target, detail)

    def _guarded_pass(self, con: sqlite3.Connection, step: SchedulingPass) -> int | None:
        """``_schedule_in`` after an admission: on failure, roll back the pass only (logged)."""
        con.execute("SAVEPOINT pass")
        try:
            seen = self._schedule_in(con, step)
        except Exception:  # noqa: BLE001 - any fault: undo the pass, keep the admission, log it
            con.execute("ROLLBACK TO pass")
            step.discard()
            self._live = livejobs.LiveJobs()
            self._log.exception("local backend: the scheduling pass after an admission failed")
            return None
        finally:
            con.execute("RELEASE pass")
        return seen

    def _schedule_in(self, con: sqlite3.Connection, step: SchedulingPass) -> int:
        """Decide and start inside the write transaction; launched supervisors wait at their gate.

        Returns the generation the pass read the ledger at (before its own changes).
        """
        seen = self._live.refresh(con, self._held)
        step.fail_invalid(con)
        profiles = self._teams.current()
        now = self._teams.clock()
        # what this pass decided under, in both branches: ``_elastic_due`` compares the next
        # poll's teams with it (left unset, every idle poll would run a pass)
        self._signature = elasticpass.signature(profiles, now)
        if elasticpass.active(profiles, self._live.elastic.values()):
            step.elastic(con, profiles, now)
        else:
            step.by_node(con)
        return seen

    def _elastic_due(self) -> bool:
        """Whether the teams' elastic quotas changed since the last pass (a window opened or closed)."""
        signature = self._teams.signature()
        return signature is not None and signature != self._signature

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
            place = self._accounts.place(row["owner"])
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

    def _forget_children(self, keep: set) -> None:
        """Drop supervisors that exited (``poll`` reaped them) and whose end is recorded."""
        for proc, child in list(self._children.items()):
            if proc not in keep and child.poll() is not None:
                del self._children[proc]


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
