"""The local backend's side of elastic quota: the policy's inputs from the ledger and profiles,
and what a preemption, a requeue and a resume write (``jupyter_quota/elastic.py`` decides).

- Teams: each profile's nominal GPU quota is ``hard`` plus its open windows' ``extra``
  (``windows.window_extra``), with its ``borrowingLimit``/``lendingLimit``; the machine's
  capacity is its GPUs. Jobs: the live jobs' charged GPU usage (the ledger's ``usage``).
- Preempting a job records why, by whom and at which step (from its log: ``swiftlog``) in
  ``preempted``, and sends SIGTERM; the reaper SIGKILLs it after the grace period, as a cancel.
- When its processes are gone the job is requeued (Pending, reason ``Requeued``), keeping its
  log; when it starts again it runs with ``--resume_from_checkpoint`` and the last checkpoint its
  log names (ms-swift's own flag), appending to the same log.
- Each of these steps is an event in the job's ``history``: ``Borrowed`` (started on borrowed
  quota), ``Preempted`` (with the step), ``Requeued``, ``Resumed`` (with the checkpoint).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction

from ... import elastic, elasticteams, priority, reasons, resume, swiftlog, windows
from . import clock, ledger, logtail, runner

#: The quota key the policy shares out: the machine's GPUs (``scheduler.GPU``) as quota counts them.
GPU_KEY = "requests.nvidia.com/gpu"
#: How much of a log is read for its step and checkpoints (a training log names them often).
LOG_LINES = 5000
BORROWED = "Borrowed"
PREEMPTED, REQUEUED, RESUMED = resume.PREEMPTED, resume.REQUEUED, resume.RESUMED


@dataclass(frozen=True)
class Key:
    """A job as the policy knows it: the ledger id, and ``namespace/name`` for messages."""

    id: int
    name: str

    def __str__(self) -> str:
        return self.name


def teams(profiles, now: datetime) -> dict[str, elastic.Team]:
    """The policy's teams: nominal GPU quota (the effective hard quota the service composes: open
    windows and approved increases added), borrowing and lending limits, and whether a closed
    window of the team preempts."""
    return {
        p.namespace: elasticteams.team(p, now, GPU_KEY, add_windows=False)
        for p in profiles
        if f"requests.{p.gpuResource}" == GPU_KEY  # other GPUs than this machine's: nothing to share
    }


def active(profiles, jobs) -> bool:
    """Whether the policy has anything to decide beyond the node fit: a team may borrow or has
    windows (its jobs may be over its quota once one closes), a live job is not normal priority
    or is being preempted, or a team's jobs use more GPUs than its quota (an increase ended under
    them: they run on as borrowed, and the team whose quota they use reclaims it when it asks,
    whatever else is configured). Without, every job is normal and within its quota (admission
    saw to it), and the scheduler's incremental pass decides the same (``livejobs``)."""
    if any(p.borrowingLimit or p.windows for p in profiles):
        return True
    used: dict[str, Fraction] = {}
    for j in jobs:
        if j.priority != priority.NORMAL or j.preempting:
            return True
        used[j.namespace] = used.get(j.namespace, 0) + j.usage.get(GPU_KEY, 0)
    quotas = {p.namespace: p.hard.get(f"requests.{p.gpuResource}") for p in profiles}
    return any(quotas.get(ns) is not None and amount > elasticteams.exact(quotas[ns]) for ns, amount in used.items())


def signature(profiles, now: datetime) -> tuple:
    """What the teams' elastic quotas are now: a pass is due when it changes (a window opened or
    closed, an increase began or ended: the service then gives a new profile object)."""
    # a team without windows has none open (skipped: the idle reaper asks for every team each poll)
    return tuple(
        (p.namespace, id(p), tuple(w.name for w in windows.open_windows(p, now)) if p.windows else ()) for p in profiles
    )


def capacity(inventory: dict) -> dict[str, int]:
    return {GPU_KEY: len(inventory.get("gpus", []))}


def usage(row: sqlite3.Row) -> dict[str, Fraction]:
    """The GPUs a job was charged at admission, as the policy counts them."""
    charged = ledger.loads(row["usage"], {})
    return {GPU_KEY: elasticteams.exact(charged.get(GPU_KEY, "0"))}


def preempted_for(row: sqlite3.Row) -> Key | None:
    record = ledger.loads(row["preempted"])
    if not record or record.get("by") is None:
        return None
    return Key(record["by"], record.get("byName", ""))


def now() -> datetime:
    return datetime.now(UTC)


class Teams:
    """Where the policy reads the teams' current profiles and the time: the service's, once it
    gives them (``LocalBackend.use_profiles``); until then there are none, and every job is
    normal and fits by node only."""

    def __init__(self):
        self._profiles: Callable[[], list] | None = None
        self.clock: Callable[[], datetime] = now

    def follow(self, profiles: Callable[[], list], clock: Callable[[], datetime] | None = None) -> None:
        self._profiles = profiles
        self.clock = clock or now

    def current(self) -> list:
        return self._profiles() if self._profiles is not None else []

    def signature(self) -> tuple | None:
        """The teams' elastic quotas now (``signature``); None while there are no profiles."""
        return None if self._profiles is None else signature(self._profiles(), self.clock())


# -- what each step writes --------------------------------------------------------------------


def preempt_values(row: sqlite3.Row, decision: elastic.Decision, directory: str, grace: float) -> dict:
    """The update that marks a Running job as being preempted (SIGTERM is sent after commit)."""
    step = swiftlog.parse_log(_log(directory)).step
    at = f" at step {step}" if step is not None else ""
    by = decision.preemptor
    record = {
        "reason": decision.reason,
        "message": decision.message,
        "step": step,
        "at": clock.now(),
        "by": by.id if isinstance(by, Key) else None,
        "byName": str(by) if by is not None else None,
    }
    return {
        "preempted": ledger.dumps(record),
        "kill_after": time.time() + grace,
        "reason": decision.reason,
        "message": f"{decision.message}{at}; sent SIGTERM, SIGKILL in {grace:.0f}s if still running",
        "history": _append(row, PREEMPTED, step=step, reason=decision.reason, message=decision.message),
    }


def requeue_values(row: sqlite3.Row, directory: str) -> dict:
    """The update that puts a preempted job whose processes are gone back in the queue."""
    record = ledger.loads(row["preempted"], {})
    checkpoint = last_checkpoint(directory)
    step = record.get("step")
    at = f" at step {step}" if step is not None else ""
    then = (
        f"it resumes from {checkpoint} when GPUs free up"
        if checkpoint
        else "it starts again from the beginning when GPUs free up (no checkpoint was saved)"
    )
    message = f"preempted{at} ({record.get('reason')}); requeued: {then}"
    return {
        "phase": "Pending",
        "reason": reasons.REQUEUED,
        "message": message,
        "gpu_indices": None,
        "pid": None,
        "pid_start": None,
        "boot_id": None,
        "exit_code": None,
        "kill_after": None,
        "preempted": None,
        "borrowed": 0,
        "history": _append(row, REQUEUED, checkpoint=checkpoint, message=message),
    }


def start_values(row: sqlite3.Row, borrowed: bool, resume: list[str]) -> dict:
    """The elastic part of a start: the borrowed flag, and the events it adds."""
    history = ledger.loads(row["history"], [])
    if resume:
        history = [*history, _event(RESUMED, checkpoint=resume[-1])]
    if borrowed:
        history = [*history, _event(BORROWED)]
    return {"borrowed": int(borrowed), "history": ledger.dumps(history) if history else row["history"]}


def resume_args(row: sqlite3.Row, args: list[str], directory: str) -> list[str]:
    """``--resume_from_checkpoint <last checkpoint>`` for a requeued job whose log names one (and
    whose own arguments do not already say where to resume)."""
    if not was_preempted(row):
        return []
    return resume.resume_args(args, last_checkpoint(directory))


def was_preempted(row: sqlite3.Row) -> bool:
    return any(e.get("event") == PREEMPTED for e in ledger.loads(row["history"], []))


def last_checkpoint(directory: str) -> str | None:
    """The newest whole checkpoint the job's log names (``resume.last_checkpoint``)."""
    return resume.last_checkpoint(_log(directory))


def _log(directory: str) -> str:
    return logtail.tail(os.path.join(directory, runner.LOG_FILE), LOG_LINES)


def _append(row: sqlite3.Row, event: str, **fields) -> str:
    return ledger.dumps([*ledger.loads(row["history"], []), _event(event, **fields)])


def _event(event: str, **fields) -> dict:
    return {"event": event, "at": clock.now(), **{k: v for k, v in fields.items() if v is not None}}
