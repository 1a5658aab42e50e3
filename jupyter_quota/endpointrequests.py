"""Endpoints and the requests they served through the proxy, kept in the service's records
(``records.py``, tables ``endpoints`` and ``endpoint_requests``) so that usage and the endpoint's
``requests`` survive a restart.

An endpoint is ``(namespace, name, createdAt)``: a name used again is another endpoint. Requests
are counted per minute and status class (``proxytraffic.Tally``); each batch is written in one
``BEGIN IMMEDIATE`` transaction, so a batch is recorded whole or not at all. A usage window
counts the minutes that begin inside it.
"""

from __future__ import annotations

import json
from collections import Counter

from .records import open_records
from .usage import format_time

_IN = " AND (? IS NULL OR namespace IN (SELECT value FROM json_each(?)))"


def remember(state_dir: str, job: dict) -> None:
    """Record an endpoint (its job as the backend shows it); a second call changes nothing."""
    with open_records(state_dir).write() as con:
        con.execute(
            "INSERT OR IGNORE INTO endpoints (namespace, name, created_at, team, owner) VALUES (?, ?, ?, ?, ?)",
            (job["namespace"], job["name"], job["createdAt"], job["team"], job["owner"]),
        )


def add(state_dir: str, batches: dict[tuple[str, str, str], dict[tuple[int, str], list]]) -> None:
    """Add ``(namespace, name, createdAt) -> {(minute, code): [count, seconds]}``, all in one transaction."""
    rows = [
        (*endpoint, minute, code, count, seconds)
        for endpoint, pending in batches.items()
        for (minute, code), (count, seconds) in pending.items()
    ]
    if not rows:
        return
    with open_records(state_dir).write() as con:
        con.executemany(
            "INSERT INTO endpoint_requests (namespace, name, created_at, minute, code, count, seconds)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (namespace, name, created_at, minute, code)"
            " DO UPDATE SET count = count + excluded.count, seconds = seconds + excluded.seconds",
            rows,
        )


def totals(state_dir: str, namespace: str) -> dict[tuple[str, str], Counter]:
    """``(name, createdAt) -> Counter(code -> count)`` of every endpoint of ``namespace``, ever."""
    store = open_records(state_dir)
    if not store.exists():
        return {}
    out: dict[tuple[str, str], Counter] = {}
    with store.read() as con:
        for name, created, code, count in con.execute(
            "SELECT name, created_at, code, sum(count) FROM endpoint_requests WHERE namespace = ?"
            " GROUP BY name, created_at, code",
            (namespace,),
        ):
            out.setdefault((name, created), Counter())[code] += count
    return out


def in_window(state_dir: str, since: int, until: int, namespaces=None) -> tuple[set, dict[tuple, Counter]]:
    """The endpoint names created before ``until`` (``{(namespace, name)}``) and their requests in
    the minutes that begin in ``[since, until)`` (``(namespace, name, minute) -> Counter(code ->
    count)``), of ``namespaces`` when given."""
    store = open_records(state_dir)
    if not store.exists():
        return set(), {}
    listed = None if namespaces is None else json.dumps(sorted(namespaces))
    counts: dict[tuple, Counter] = {}
    with store.read() as con:
        names = set(
            map(
                tuple,
                con.execute(
                    "SELECT DISTINCT namespace, name FROM endpoints WHERE created_at < ?" + _IN,
                    (format_time(until), listed, listed),
                ),
            )
        )
        for ns, name, minute, code, count in con.execute(
            "SELECT namespace, name, minute, code, sum(count) FROM endpoint_requests"
            " WHERE minute >= ? AND minute < ?" + _IN + " GROUP BY namespace, name, minute, code",
            (since, until, listed, listed),
        ):
            counts.setdefault((ns, name, minute), Counter())[code] += count
    return names, counts
