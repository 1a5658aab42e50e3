"""The local backend's usage spans, read from its ledger (see ``jupyter_quota/usage.py``).

A job held its admitted requests during each of its runs (``runs``): from a start to its end or
requeue (a Running job: to now), so a preempted job is not charged the time it waited requeued.
Runs are kept when their job is pruned (``retention``) and read in one snapshot, so no run is
counted twice or missed. A job that never started (cancelled while Pending, refused) has none.
"""

from __future__ import annotations

import functools
import json
from datetime import datetime

from ... import usage
from . import ledger

_COLUMNS = "namespace, team, owner, name, usage, gpus, started_at, ended_at"
# RFC 3339 UTC strings with whole seconds sort as times (as ``retention`` compares them).
# Only the namespaces asked for (a JSON list; NULL: every one), filtered on the index entries.
_IN = " AND (?3 IS NULL OR namespace IN (SELECT value FROM json_each(?3)))"
# The covering index ``job_runs_usage`` (``ledger._RUNS``) holds every column read.
_RUNNING = f"SELECT {_COLUMNS} FROM job_runs INDEXED BY job_runs_usage WHERE ended_at IS NULL AND started_at < ?2" + _IN
_ENDED = f"SELECT {_COLUMNS} FROM job_runs INDEXED BY job_runs_usage WHERE ended_at > ?1 AND started_at < ?2" + _IN


def spans(book: ledger.Ledger, since: int, until: int, namespaces=None) -> list[usage.Span]:
    """Every run of a job (of ``namespaces``, when given) that held resources at some time in ``[since, until)``."""
    args = (
        usage.format_time(since),
        usage.format_time(until),
        None if namespaces is None else json.dumps(sorted(namespaces)),
    )
    with book.read() as con:
        cursor = con.cursor()
        cursor.row_factory = None  # plain tuples: a third of the time of sqlite3.Row at 100,000 rows
        rows = [*cursor.execute(_RUNNING, args), *cursor.execute(_ENDED, args)]
    return [span(*row) for row in rows]


def span(namespace, team, owner, name, used, gpus, started_at, ended_at) -> usage.Span:
    """A row of ``_COLUMNS`` as a span."""
    _, cpu, memory = _requested(used)
    end = _epoch(ended_at) if ended_at else None
    # GPUs: those the job was given, as the ledger counts them
    return usage.Span(namespace, team, owner, name, _epoch(started_at), end, 1000 * gpus, cpu, memory)


@functools.lru_cache(maxsize=4096)
def _requested(text: str) -> tuple[int, int, int]:
    """The requests in a ``usage`` column; jobs of one shape have the same text, parsed once."""
    return usage.requested(usage.request_pairs(ledger.loads(text, {})))


def _epoch(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())
