"""The local backend's usage spans, read from its ledger (see ``jupyter_quota/usage.py``).

A job held its admitted requests from ``started_at`` to ``finished_at`` (a Running job: to now).
Live and recently finished jobs are in ``jobs``; pruned ones in ``job_history`` (``retention``),
which keeps the same times and the same quota usage. A prune moves a row in one transaction and
both tables are read in one snapshot, so no job is counted twice or missed. A job that never
started (cancelled while Pending, refused) held nothing.
"""

from __future__ import annotations

import functools
import json
from datetime import datetime

from ... import usage
from . import ledger

_COLUMNS = "namespace, team, owner, name, usage, gpus, started_at, finished_at"
# RFC 3339 UTC strings with whole seconds sort as times (as ``retention`` compares them).
# Only the namespaces asked for (a JSON list; NULL: every one), filtered on the index entries.
_IN = " AND (?3 IS NULL OR namespace IN (SELECT value FROM json_each(?3)))"
_RUNNING = f"SELECT {_COLUMNS} FROM jobs WHERE phase = 'Running' AND started_at IS NOT NULL AND started_at < ?2" + _IN
# The covering indexes ``jobs_usage`` and ``job_history_usage`` (``ledger._SCHEMA``) hold every column read.
_FINISHED = (
    f"SELECT {_COLUMNS} FROM jobs INDEXED BY jobs_usage WHERE finished_at IS NOT NULL AND finished_at > ?1"
    " AND phase IN ('Succeeded', 'Failed') AND started_at IS NOT NULL AND started_at < ?2" + _IN
)
_PRUNED = (
    f"SELECT {_COLUMNS} FROM job_history INDEXED BY job_history_usage WHERE finished_at > ?1"
    " AND started_at IS NOT NULL AND started_at < ?2" + _IN
)


def spans(book: ledger.Ledger, since: int, until: int, namespaces=None) -> list[usage.Span]:
    """Every job (of ``namespaces``, when given) that held resources at some time in ``[since, until)``."""
    args = (
        usage.format_time(since),
        usage.format_time(until),
        None if namespaces is None else json.dumps(sorted(namespaces)),
    )
    with book.read() as con:
        cursor = con.cursor()
        cursor.row_factory = None  # plain tuples: a third of the time of sqlite3.Row at 100,000 rows
        rows = [*cursor.execute(_RUNNING, args), *cursor.execute(_FINISHED, args), *cursor.execute(_PRUNED, args)]
    return [span(*row) for row in rows]


def span(namespace, team, owner, name, used, gpus, started_at, finished_at) -> usage.Span:
    """A row of ``_COLUMNS`` as a span."""
    _, cpu, memory = _requested(used)
    end = _epoch(finished_at) if finished_at else None
    # GPUs: those the job was given, as the ledger counts them
    return usage.Span(namespace, team, owner, name, _epoch(started_at), end, 1000 * gpus, cpu, memory)


@functools.lru_cache(maxsize=4096)
def _requested(text: str) -> tuple[int, int, int]:
    """The requests in a ``usage`` column; jobs of one shape have the same text, parsed once."""
    return usage.requested(usage.request_pairs(ledger.loads(text, {})))


def _epoch(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())
