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

Recommendations (``jupyter_quota/history.py``) also need what waited or was refused, as the local
ledger keeps it: each pod row keeps its Job's submission (``submitted_at``, the Job's
``creationTimestamp``), and table ``waiting`` has one row per Job seen before any of its pods
started (its requests for all its pods, from its submission until a pod started, or it ended
or was deleted without one), and one per submit the quota refused (``refused``: no Job exists,
so it asks from the refusal until the same user's next submit in the namespace, the retry).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from ... import labels, priority, quota, usage
from ...history import JobRecord
from ...podresources import pod_requests
from ...sqlitebusy import retry_busy
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
CREATE TABLE IF NOT EXISTS waiting (
    key          TEXT PRIMARY KEY,  -- the Job's uid; a refusal's "refused/<uuid>"
    namespace    TEXT NOT NULL,
    team         TEXT NOT NULL,
    user         TEXT NOT NULL,
    job          TEXT NOT NULL,
    gpus_milli   INTEGER NOT NULL,  -- all its pods' requests, as in pods
    cpu_milli    INTEGER NOT NULL,
    memory_milli INTEGER NOT NULL,
    priority     TEXT NOT NULL,
    submitted_at INTEGER NOT NULL,  -- epoch seconds: the Job's creationTimestamp, or the refusal
    started_at   INTEGER,           -- set once a pod started: from then on the pods' rows count
    ended_at     INTEGER,           -- ended (deleted, failed, retried) without a pod started
    refused      INTEGER NOT NULL DEFAULT 0,
    -- 1: ended_at is when the Job was missing from the cache (as pods.finish_inferred): a Job
    -- seen again (a re-list was in flight) waits again, or started
    end_inferred INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS waiting_by_end ON waiting (ended_at);
"""
#: Columns added to ``pods`` after its first release: a file written before gets them, NULL
#: (a pod recorded without its submission counts as submitted when it started).
_ADDED = {
    "finish_inferred": "INTEGER NOT NULL DEFAULT 0",
    "submitted_at": "INTEGER",  # the Job's creationTimestamp
    "priority": "TEXT",
}
_UPSERT = (
    "INSERT INTO pods (uid, namespace, team, user, job, gpus_milli, cpu_milli, memory_milli, started_at, finished_at,"
    " submitted_at, priority) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (uid) DO UPDATE SET finished_at = excluded.finished_at, finish_inferred = 0"
    " WHERE (pods.finished_at IS NULL AND excluded.finished_at IS NOT NULL) OR pods.finish_inferred = 1"
)


_WAITING_COLUMNS = (
    "key, namespace, team, user, job, gpus_milli, cpu_milli, memory_milli, priority, submitted_at, ended_at, refused"
)
_PODS_IN = " AND (?3 IS NULL OR namespace IN (SELECT value FROM json_each(?3)))"


@dataclass(frozen=True)
class PodRecord:
    uid: str
    span: usage.Span
    submitted: int | None = None  # its Job's creationTimestamp (None: not known)
    priority: str = priority.NORMAL


@dataclass(frozen=True)
class Waiting:
    """A Job before any of its pods started (``key``: its uid), or a submit the quota refused."""

    key: str
    span: usage.Span  # start: submitted; end: when it stopped asking without starting (None: asks)
    priority: str = priority.NORMAL
    refused: bool = False


def job_waiting(job: dict, limit_ranges: list[dict], owner: str = "", end: int | None = None) -> Waiting | None:
    """A Job as demand that has not started: all the pods it asks for at once, LimitRange
    defaults included; ``end``: it ended without a pod started. None without a uid."""
    meta = job.get("metadata") or {}
    if not meta.get("uid") or not meta.get("creationTimestamp"):
        return None
    job_labels, created = meta.get("labels") or {}, _epoch(meta["creationTimestamp"])
    return Waiting(
        meta["uid"],
        _asked(job, limit_ranges, meta, owner or job_labels.get(labels.USER, ""), created, end),
        _priority(job_labels),
    )


def refusal(job: dict, limit_ranges: list[dict], owner: str, at: int) -> Waiting:
    """A submit of ``job`` refused by the quota at ``at``: demand the quota hid."""
    meta = job.get("metadata") or {}
    return Waiting(
        f"refused/{uuid.uuid4()}",
        _asked(job, limit_ranges, meta, owner, at, None),
        _priority(meta.get("labels") or {}),
        refused=True,
    )


def _asked(job: dict, limit_ranges: list[dict], meta: dict, user: str, at: int, end: int | None) -> usage.Span:
    pod = quota.apply_limit_ranges(quota.job_pod(job), limit_ranges)
    gpus, cpu, memory = usage.requested(usage.request_pairs(pod_requests(pod)))
    spec = job.get("spec") or {}
    parallelism = 1 if spec.get("parallelism") is None else int(spec["parallelism"])
    completions = parallelism if spec.get("completions") is None else int(spec["completions"])
    pods = max(0, min(parallelism, completions))  # at once, as admission charges them (suspended too)
    job_labels = meta.get("labels") or {}
    return usage.Span(
        namespace=meta.get("namespace", ""),
        team=job_labels.get(labels.TEAM, ""),
        user=user,
        job=meta.get("name") or meta.get("generateName") or "",
        start=at,
        end=end,
        gpus_milli=gpus * pods,
        cpu_milli=cpu * pods,
        memory_milli=memory * pods,
    )


def _priority(object_labels: dict) -> str:
    level = object_labels.get(labels.PRIORITY, "")
    return level if level in priority.PRIORITIES else priority.NORMAL


def pod_record(pod: dict, owner: str = "", submitted: int | None = None) -> PodRecord | None:
    """What usage needs of a pod, or None before it started. ``owner``: its Job's submitting
    user; ``submitted``: its Job's creationTimestamp."""
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
        submitted,
        _priority(pod_labels),
    )


class UsageStore:
    """The records, in one SQLite file (``":memory:"`` keeps them for this process only)."""

    def __init__(self, path: str):
        self.path = path
        if path != ":memory:":
            make_private_dir(os.path.dirname(os.path.abspath(path)))
        self._lock = threading.Lock()  # one connection, used by the recorder and by readers
        self._con = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        # another process opening the same new file can make the switch fail at once (sqlitebusy.py)
        retry_busy(lambda: self._con.execute("PRAGMA journal_mode = WAL").fetchone())
        self._con.execute("PRAGMA synchronous = FULL")  # a recorded finish survives a power cut
        with self._lock:
            self._con.executescript(_SCHEMA)
            columns = {row[1] for row in self._con.execute("PRAGMA table_info(pods)")}
            for name, kind in _ADDED.items():
                if name not in columns:  # a file written before the column existed
                    self._con.execute(f"ALTER TABLE pods ADD COLUMN {name} {kind}")

    def record(self, records: Iterable[PodRecord]) -> None:
        """Add new pods and the finish of pods that finished; anything already known stays."""
        rows = [(r.uid, *_columns(r.span), r.submitted, r.priority) for r in records]
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

    def wait(self, waiting: Iterable[Waiting]) -> None:
        """Jobs seen before a pod started (a row once: the first sighting's), or their end
        without a start (``span.end``); a row whose Job started or ended already stays, but an
        end inferred from the Job's absence (``end_waiting``) gives way to what is seen now."""
        rows = [(w.key, *_columns(w.span)[:-2], w.priority, w.span.start, w.span.end, int(w.refused)) for w in waiting]
        if rows:
            with self._lock, self._transaction():
                self._con.executemany(
                    f"INSERT INTO waiting ({_WAITING_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (key) DO UPDATE SET ended_at = excluded.ended_at, end_inferred = 0"
                    " WHERE waiting.started_at IS NULL AND (waiting.ended_at IS NULL OR waiting.end_inferred = 1)",
                    rows,
                )

    def started(self, keys: Iterable[str], at: int) -> None:
        """Jobs a pod of which started: their pods' rows count from now on (an end inferred
        from the Job's absence was a re-list in flight)."""
        with self._lock, self._transaction():
            self._con.executemany(
                "UPDATE waiting SET started_at = ?, ended_at = NULL, end_inferred = 0"
                " WHERE key = ? AND started_at IS NULL AND (ended_at IS NULL OR end_inferred = 1)",
                [(at, key) for key in keys],
            )

    def refused(self, refusal: Waiting) -> None:
        """A submit the quota refused; it replaces (ends) the same user's earlier open refusals
        in the namespace: a retry is the same demand, not more of it."""
        with self._lock, self._transaction():
            self._end_refusals(refusal.span.namespace, refusal.span.user, refusal.span.start)
        self.wait([refusal])

    def submitted(self, namespace: str, user: str, at: int) -> None:
        """A Job of ``user`` was created at ``at``: their open refusals in the namespace end."""
        with self._lock, self._transaction():
            self._end_refusals(namespace, user, at)

    def _end_refusals(self, namespace: str, user: str, at: int) -> None:
        self._con.execute(
            "UPDATE waiting SET ended_at = max(submitted_at, ?) WHERE refused = 1 AND ended_at IS NULL"
            " AND namespace = ? AND user = ?",
            (at, namespace, user),
        )

    def waiting(self) -> dict[str, str]:
        """key -> namespace of every Job recorded as waiting (not started, not ended)."""
        with self._lock:
            return dict(
                self._con.execute(
                    "SELECT key, namespace FROM waiting WHERE refused = 0 AND started_at IS NULL AND ended_at IS NULL"
                )
            )

    def end_waiting(self, keys: Iterable[str], at: int) -> None:
        """Jobs gone without a pod started (deleted): they asked until ``at``."""
        with self._lock, self._transaction():
            self._con.executemany(
                "UPDATE waiting SET ended_at = max(submitted_at, ?), end_inferred = 1"
                " WHERE key = ? AND started_at IS NULL AND ended_at IS NULL",
                [(at, key) for key in keys],
            )

    def records(self, since: int, until: int, namespaces=None) -> list[JobRecord]:
        """The history (``jupyter_quota/history.py``) of ``[since, until)``: every recorded pod
        submitted before ``until`` and not finished by ``since`` (one record a pod, submitted with
        its Job), and every Job or refusal that asked then without a pod started."""
        args = (since, until, None if namespaces is None else json.dumps(sorted(namespaces)))
        with self._lock:
            pods = self._con.execute(
                "SELECT team, user, coalesce(submitted_at, started_at), started_at, finished_at,"
                " gpus_milli, cpu_milli, memory_milli, coalesce(priority, 'normal') FROM pods"
                " WHERE coalesce(submitted_at, started_at) < ?2 AND (finished_at IS NULL OR finished_at > ?1)"
                + _PODS_IN,
                args,
            ).fetchall()
            waited = self._con.execute(
                "SELECT team, user, submitted_at, NULL, ended_at, gpus_milli, cpu_milli, memory_milli, priority"
                " FROM waiting WHERE started_at IS NULL AND submitted_at < ?2 AND (ended_at IS NULL OR ended_at > ?1)"
                + _PODS_IN,
                args,
            ).fetchall()
        return [
            JobRecord(team, user, submitted, started, finished, gpus / 1000, cpu / 1000, memory / 1000, level)
            for team, user, submitted, started, finished, gpus, cpu, memory, level in (*pods, *waited)
        ]

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
