"""Retention of finished jobs on the local backend, as a cluster's TTL-after-finished controller.

A Succeeded or Failed job is deleted from ``jobs`` (its name becomes free again) and its job
directory (log, exit record) is removed once either limit passes:
- ``keep_seconds`` after it finished (``finished_at``), as a Job's ``ttlSecondsAfterFinished``;
- more than ``keep_count`` finished jobs in its namespace: the oldest submitted go first.
A negative limit is off. Live (Pending, Running) jobs are never pruned.

What accounting needs is kept, one row per pruned job, in ``job_history``: namespace, name,
team, owner, phase, reason, message, exit code, gpus and GPU indices, the train container's
requests and limits, the quota usage charged at admission, and the created, started and
finished times. The admitted pod and Job objects and the log are not kept.

``prune`` deletes at most ``batch`` jobs per call, in one transaction, so the reaper never holds
the ledger's write lock for long; it is called again while batches come back full.

Deleting a row frees its name, and a new job of that name uses the same job directory
(``runner.job_dir``). So the transaction moves each pruned job's directory aside (a rename, atomic)
to ``jobs/.pruned/<id>`` (no namespace starts with a dot), and the moved directories are removed
after the commit: a job submitted after the commit starts in a fresh directory that nothing
removes. A moved directory left by a crash before its removal is removed by the next ``prune``.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import time

from ... import jobfields, statedir
from ...times import rfc3339
from . import clock, ledger, runner

FINISHED = ("Succeeded", "Failed")
PRUNED_DIR = ".pruned"  # under state_dir/jobs: the directories of pruned jobs until they are removed


def prune(
    book: ledger.Ledger, state_dir: str, *, keep_seconds: float, keep_count: int, batch: int, log: logging.Logger
) -> int:
    """Prune up to ``batch`` finished jobs past a limit; return how many were pruned."""
    pruned_dir = os.path.join(state_dir, "jobs", PRUNED_DIR)
    moved: list[tuple[str, str]] = []  # (job directory, where it was moved)
    try:
        with book.write() as con:
            # Listed under the write lock: what is there is from prunes that committed (or crashed).
            left = [os.path.join(pruned_dir, entry) for entry in _entries(pruned_dir)]
            rows = _expired(con, keep_seconds, keep_count, batch)
            for row in rows:
                con.execute(_ARCHIVE, _record(row))
                con.execute("DELETE FROM jobs WHERE id = ? AND phase IN (?, ?)", (row["id"], *FINISHED))
                directory = runner.job_dir(state_dir, row["namespace"], row["name"])
                if os.path.isdir(directory):  # a job that never started has none
                    statedir.make_private_dir(pruned_dir)
                    aside = os.path.join(pruned_dir, str(row["id"]))  # ids are never reused
                    os.rename(directory, aside)
                    moved.append((directory, aside))
    except BaseException:
        for directory, aside in moved:  # not committed: the jobs are still there, so are their directories
            try:
                os.rename(aside, directory)
            except OSError as e:
                log.warning("local backend: cannot move %s back to %s: %s", aside, directory, e)
        raise
    for aside in (*left, *(aside for _, aside in moved)):  # after the commit: nothing refers to them
        _remove(aside, log)
    if rows:
        log.info("local backend: pruned %d finished jobs (kept in job_history)", len(rows))
    return len(rows)


def _expired(con: sqlite3.Connection, keep_seconds: float, keep_count: int, batch: int) -> list[sqlite3.Row]:
    rows: dict[int, sqlite3.Row] = {}
    if keep_seconds >= 0:
        cutoff = rfc3339(time.time() - keep_seconds)  # RFC 3339 UTC strings sort as times
        for row in con.execute(
            "SELECT * FROM jobs INDEXED BY jobs_by_finish WHERE finished_at IS NOT NULL AND finished_at < ?"
            " AND phase IN (?, ?) ORDER BY finished_at LIMIT ?",
            (cutoff, *FINISHED, batch),
        ):
            rows[row["id"]] = row
    if keep_count >= 0:
        crowded = con.execute(
            "SELECT namespace FROM jobs WHERE phase IN (?, ?) GROUP BY namespace HAVING count(*) > ?",
            (*FINISHED, keep_count),
        ).fetchall()
        for (namespace,) in crowded:
            if len(rows) >= batch:
                break
            for row in con.execute(
                "SELECT * FROM jobs WHERE namespace = ? AND phase IN (?, ?) ORDER BY id DESC LIMIT ? OFFSET ?",
                (namespace, *FINISHED, batch, keep_count),
            ):
                rows.setdefault(row["id"], row)
    return sorted(rows.values(), key=lambda row: row["id"])[:batch]


def _entries(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return []


def _remove(directory: str, log: logging.Logger) -> None:
    """Remove a pruned job's directory (moved aside); another prune may have removed it already."""
    try:
        shutil.rmtree(directory)
    except FileNotFoundError:
        pass
    except OSError as e:  # the record is gone already; say what is left behind
        log.warning("local backend: cannot remove %s: %s", directory, e)


def _record(row: sqlite3.Row) -> dict:
    """The compact record of a pruned job (see the module docstring)."""
    try:
        resources = jobfields.container_resources(jobfields.train_container(ledger.loads(row["pod"])))
    except Exception:  # noqa: BLE001 - a row an older version wrote: keep the rest of its record
        resources = {}
    return {
        **{key: row[key] for key in _KEPT},
        "resources": ledger.dumps(resources),
        "pruned_at": clock.now(),
    }


_KEPT = (
    "id",
    "namespace",
    "name",
    "team",
    "owner",
    "phase",
    "reason",
    "message",
    "exit_code",
    "gpus",
    "gpu_indices",
    "usage",
    "created_at",
    "started_at",
    "finished_at",
)
_ARCHIVE = (
    f"INSERT OR REPLACE INTO job_history ({', '.join(_KEPT)}, resources, pruned_at)"
    f" VALUES ({', '.join(':' + k for k in _KEPT)}, :resources, :pruned_at)"
)
