"""The local backend's job history for recommendations and replays (``jupyter_quota/history.py``).

Unlike usage spans, a record keeps when the job was *submitted* (``created_at``), so waits and
the demand of jobs that never started (cancelled while Pending) count. Live and finished jobs
are in ``jobs``, pruned ones in ``job_history`` (which keeps no priority: normal), read in one
snapshot.
"""

from __future__ import annotations

import json
from datetime import datetime

from ... import usage
from ...history import JobRecord
from . import ledger, usagespans

_COLUMNS = "team, owner, created_at, started_at, finished_at, gpus, usage"
_IN = " AND (?3 IS NULL OR namespace IN (SELECT value FROM json_each(?3)))"
_LIVE = (
    f"SELECT {_COLUMNS}, priority FROM jobs WHERE created_at < ?2 AND (finished_at IS NULL OR finished_at > ?1)" + _IN
)
_PRUNED = f"SELECT {_COLUMNS}, 'normal' FROM job_history WHERE created_at < ?2 AND finished_at > ?1" + _IN


def records(book: ledger.Ledger, since: int, until: int, namespaces=None) -> list[JobRecord]:
    """Every job (of ``namespaces``, when given) submitted before ``until`` and not finished by ``since``."""
    args = (_time(since), _time(until), None if namespaces is None else json.dumps(sorted(namespaces)))
    with book.read() as con:
        cursor = con.cursor()
        cursor.row_factory = None
        rows = [*cursor.execute(_LIVE, args), *cursor.execute(_PRUNED, args)]
    return [_record(*row) for row in rows]


def _record(team, owner, created_at, started_at, finished_at, gpus, used, level) -> JobRecord:
    _, cpu, memory = usagespans._requested(used)
    return JobRecord(
        team,
        owner,
        _epoch(created_at),
        _epoch(started_at) if started_at else None,
        _epoch(finished_at) if finished_at else None,
        float(gpus),
        cpu / 1000,
        memory / 1000,
        level,
    )


def _time(epoch: int) -> str:
    return usage.format_time(epoch)


def _epoch(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())
