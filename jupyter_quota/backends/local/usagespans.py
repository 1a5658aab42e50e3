"""The local backend's usage spans, read from its ledger (see ``jupyter_quota/usage.py``).

A job held its admitted requests from ``started_at`` to ``finished_at`` (a Running job: to now).
Live and recently finished jobs are in ``jobs``; pruned ones in ``job_history`` (``retention``),
which keeps the same times and the same quota usage. A prune moves a row in one transaction and
both tables are read in one snapshot, so no job is counted twice or missed. A job that never
started (cancelled while Pending, refused) held nothing.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from fractions import Fraction

from ... import usage
from . import ledger

_COLUMNS = "namespace, team, owner, name, usage, gpus, started_at, finished_at"
# RFC 3339 UTC strings with whole seconds sort as times (as ``retention`` compares them).
_RUNNING = f"SELECT {_COLUMNS} FROM jobs WHERE phase = 'Running' AND started_at IS NOT NULL AND started_at < ?"
_FINISHED = (
    f"SELECT {_COLUMNS} FROM jobs INDEXED BY jobs_by_finish WHERE finished_at IS NOT NULL AND finished_at > ?"
    " AND phase IN ('Succeeded', 'Failed') AND started_at IS NOT NULL AND started_at < ?"
)
_PRUNED = (
    f"SELECT {_COLUMNS} FROM job_history INDEXED BY job_history_by_finish WHERE finished_at > ?"
    " AND started_at IS NOT NULL AND started_at < ?"
)


def spans(book: ledger.Ledger, since: int, until: int) -> list[usage.Span]:
    """Every job that held resources at some time in ``[since, until)``."""
    after, before = usage.format_time(since), usage.format_time(until)
    with book.read() as con:
        rows = [
            *con.execute(_RUNNING, (before,)),
            *con.execute(_FINISHED, (after, before)),
            *con.execute(_PRUNED, (after, before)),
        ]
    return [span(row) for row in rows]


def span(row: sqlite3.Row) -> usage.Span:
    _, cpu, memory = usage.requested(ledger.loads(row["usage"], {}))
    return usage.Span(
        namespace=row["namespace"],
        team=row["team"],
        user=row["owner"],
        job=row["name"],
        start=_epoch(row["started_at"]),
        end=_epoch(row["finished_at"]) if row["finished_at"] else None,
        gpus=Fraction(row["gpus"]),
        cpu=cpu,
        memory=memory,
    )


def _epoch(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())
