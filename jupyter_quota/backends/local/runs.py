"""The runs of the local backend's jobs: one ``job_runs`` row per time a job held its admitted
requests, from its start to its end, a requeue (elastic preemption) or, while it runs, now.

A preempted job goes back to Pending and starts again later, so its life is not one span: usage
(``usagespans``) charges its runs, not the time it waited requeued, as the kube backend charges
each pod of a requeued Job. A run keeps what the job held (namespace, team, owner, name, GPUs and
charged usage), so usage reads runs alone, and a run outlives its job's pruning (``retention``).
The writes happen in the transaction of the phase change that causes them.
"""

from __future__ import annotations

import sqlite3

#: What ``begin`` copies from the job's row.
_HELD = "namespace, team, owner, name, gpus, usage"
_BEGIN = (
    f"INSERT INTO job_runs (job_id, run, {_HELD}, started_at)"
    f" SELECT id, (SELECT count(*) + 1 FROM job_runs WHERE job_id = :id), {_HELD}, :at FROM jobs WHERE id = :id"
)
_END = "UPDATE job_runs SET ended_at = max(started_at, :at) WHERE job_id = :id AND ended_at IS NULL"


def begin(con: sqlite3.Connection, job_id: int, at: str) -> None:
    """The job (now Running) starts a run at ``at`` (RFC 3339 UTC)."""
    con.execute(_BEGIN, {"id": job_id, "at": at})


def end(con: sqlite3.Connection, job_id: int, at: str) -> None:
    """The job's run ends at ``at`` (not before it began: an exit record's clock may lag)."""
    con.execute(_END, {"id": job_id, "at": at})


def from_history(phase: str, ran_again: bool, started_at, finished_at, history: list) -> list[tuple]:
    """The runs, ``(started_at, ended_at or None)``, of a job an older ledger kept as one start,
    one finish and its elastic events (the upgrade to version 4: ``ledger._MIGRATIONS``).

    A ``Requeued`` event ends a run; the next ``Resumed`` or ``Borrowed`` event begins one. A job
    that ran again without either (it restarted from the beginning, on its own quota) left no
    time for the restart: its run is counted from the requeue, as that version did. ``ran_again``:
    whether it started after its last requeue (Running, or ended with a process).
    """
    if not started_at:
        return []
    runs, start, requeued = [], started_at, None
    for event in history or []:
        kind, at = event.get("event"), event.get("at")
        if kind == "Requeued" and start is not None and at:
            runs.append((start, max(start, at)))
            start, requeued = None, at
        elif kind in ("Resumed", "Borrowed") and start is None and at:
            start = at
    if start is None and ran_again:
        start = requeued
    if start is not None:
        runs.append((start, None if phase == "Running" else max(start, finished_at or start)))
    return runs
