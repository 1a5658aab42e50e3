"""The kube backend's usage records: each pod's requests, start and finish, kept by the service.

A cluster forgets a pod once it is deleted (a cancel, ``ttlSecondsAfterFinished``, the garbage
collector), so the service writes down what usage needs while it sees the pod
(``usagerecorder.py``), in a SQLite file of its state directory (``usage.sqlite3``): one row per
pod uid, the pod's requests (``usage.requested`` of the admitted pod, LimitRange defaults
included) and its start (``status.startTime``) and finish (the latest ``finishedAt`` of its
terminated containers). Writes are idempotent per uid: seeing a pod again, after a restart or a
re-list, changes nothing, and a finish its containers reported is never moved. A pod missing from
the cache is finished at that moment (``finish``: it was deleted); should it be seen again, what it
says (its containers' finish, or that it still runs) replaces that guess. So a restart of the service
neither counts a pod twice nor loses one (the next list finds every pod still there).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from ... import labels, usage
from ...podresources import pod_requests
from ...statedir import make_private_dir

FILE = "usage.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pods (
    uid         TEXT PRIMARY KEY,
    namespace   TEXT NOT NULL,
    team        TEXT NOT NULL,
    user        TEXT NOT NULL,
    job         TEXT NOT NULL,
    gpus_milli   INTEGER NOT NULL,  -- thousandths of a GPU requested (MilliValue, as usage.py counts)
    cpu_milli    INTEGER NOT NULL,  -- thousandths of a core
    memory_milli INTEGER NOT NULL,  -- thousandths of a byte
    started_at  INTEGER NOT NULL,   -- epoch seconds
    finished_at INTEGER,            -- epoch seconds; NULL while the pod runs
    -- 1: finished_at is when the pod was missing from the cache (deleted, or a re-list in flight),
    -- not its containers' finish; the pod's own word replaces it if it is seen again
    finish_inferred INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS pods_by_finish ON pods (finished_at);
"""
_UPSERT = (
    "INSERT INTO pods (uid, namespace, team, user, job, gpus_milli, cpu_milli, memory_milli, started_at, finished_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (uid) DO UPDATE SET finished_at = excluded.finished_at, finish_inferred = 0"
    " WHERE (pods.finished_at IS NULL AND excluded.finished_at IS NOT NULL) OR pods.finish_inferred = 1"
)


@dataclass(frozen=True)
class PodRecord:
    uid: str
    span: usage.Span


def pod_record(pod: dict, owner: str = "") -> PodRecord | None:
    """What usage needs of a pod, or None before it started. ``owner``: its Job's submitting user."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    if not meta.get("uid") or not status.get("startTime"):
        return None
    pod_labels = meta.get("labels") or {}
    gpus, cpu, memory = usage.requested(usage.request_pairs(pod_requests(pod)))
    finished = None
    if status.get("phase") in ("Succeeded", "Failed"):
        ends = [
            terminated["finishedAt"]
            for cs in status.get("containerStatuses") or []
            if (terminated := (cs.get("state") or {}).get("terminated")) and terminated.get("finishedAt")
        ]
        finished = _epoch(max(ends)) if ends else None
    return PodRecord(
        meta["uid"],
        usage.Span(
            namespace=meta.get("namespace", ""),
            team=pod_labels.get(labels.TEAM, ""),
            user=owner or pod_labels.get(labels.USER, ""),
            job=pod_labels.get(labels.JOB) or pod_labels.get(labels.JOB_NAME, ""),
            start=_epoch(status["startTime"]),
            end=finished,
            gpus_milli=gpus,
            cpu_milli=cpu,
            memory_milli=memory,
        ),
    )


class UsageStore:
    """The records, in one SQLite file (``":memory:"`` keeps them for this process only)."""

    def __init__(self, path: str):
        self.path = path
        if path != ":memory:":
            make_private_dir(os.path.dirname(os.path.abspath(path)))
        self._lock = threading.Lock()  # one connection, used by the recorder and by readers
        self._con = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._con.execute("PRAGMA journal_mode = WAL")
        self._con.execute("PRAGMA synchronous = FULL")  # a recorded finish survives a power cut
        with self._lock:
            self._con.executescript(_SCHEMA)
            columns = {row[1] for row in self._con.execute("PRAGMA table_info(pods)")}
            if "finish_inferred" not in columns:  # a file written before the column existed
                self._con.execute("ALTER TABLE pods ADD COLUMN finish_inferred INTEGER NOT NULL DEFAULT 0")

    def record(self, records: Iterable[PodRecord]) -> None:
        """Add new pods and the finish of pods that finished; anything already known stays."""
        rows = [(r.uid, *_columns(r.span)) for r in records]
        if rows:
            with self._lock, self._transaction():
                self._con.executemany(_UPSERT, rows)

    def running(self) -> dict[str, str]:
        """uid -> namespace of every pod recorded as started and not finished."""
        with self._lock:
            return dict(self._con.execute("SELECT uid, namespace FROM pods WHERE finished_at IS NULL"))

    def finish(self, uids: Iterable[str], at: int) -> None:
        """Pods gone without a recorded finish (deleted): they held their requests until ``at``."""
        with self._lock, self._transaction():
            self._con.executemany(
                "UPDATE pods SET finished_at = max(started_at, ?), finish_inferred = 1"
                " WHERE uid = ? AND finished_at IS NULL",
                [(at, uid) for uid in uids],
            )

    def spans(self, since: int, until: int, namespaces=None) -> list[usage.Span]:
        """Every recorded pod (of ``namespaces``, when given) that held its requests in ``[since, until)``."""
        args = (since, until, None if namespaces is None else json.dumps(sorted(namespaces)))
        where = " AND started_at < ?2 AND (?3 IS NULL OR namespace IN (SELECT value FROM json_each(?3)))"
        with self._lock:
            rows = [
                *self._con.execute("SELECT * FROM pods WHERE finished_at IS NULL" + where, args),
                *self._con.execute("SELECT * FROM pods WHERE finished_at > ?1" + where, args),
            ]
        return [_span(row) for row in rows]

    def close(self) -> None:
        with self._lock:
            self._con.close()

    def _transaction(self):
        return _begun(self._con)


@contextmanager
def _begun(con: sqlite3.Connection) -> Iterator[None]:
    """A write transaction: committed whole, or rolled back."""
    con.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def _columns(span: usage.Span) -> tuple:
    return (
        span.namespace,
        span.team,
        span.user,
        span.job,
        span.gpus_milli,
        span.cpu_milli,
        span.memory_milli,
        span.start,
        span.end,
    )


def _span(row: tuple) -> usage.Span:
    _, namespace, team, user, job, gpus, cpu, memory, started, finished = row[:10]  # not finish_inferred
    return usage.Span(namespace, team, user, job, started, finished, gpus, cpu, memory)


def _epoch(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())
