"""Job history as the recommender and the replay read it: one record a job (pure; no I/O).

A record says who asked (team, user), what (GPUs, CPU cores, memory bytes, priority) and when:
``submitted``, ``started`` and ``finished`` in epoch seconds. ``started`` is None for a job that
never started (it waited, or was refused, until ``finished`` or, without one, the history's
end); ``finished`` is None for one that still runs. The sources are the local ledger's jobs
(``backends/local/jobrecords.py``), the Kubernetes usage store (``backends/kube/usagestore.py``:
pods with their Jobs' submission, Jobs that waited, submits the quota refused), any backend's
usage spans (``from_spans``: start and end only, so no waits), and a CSV with the columns of
``COLUMNS`` (``parse_csv``), so that a history from another system (a Slurm ``sacct`` export, a
cluster's logs) can be judged.
"""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Iterable
from typing import NamedTuple

from . import priority, usage
from .errors import InvalidRequest
from .quantity import Quantity, QuantityError

#: The CSV's header, in this order (``jupyter quota recommend --history FILE``).
COLUMNS = ("team", "user", "submitted", "started", "finished", "gpus", "cpus", "memory", "priority")
#: Rows one CSV may hold: past this, split the history.
MAX_ROWS = 2_000_000


class JobRecord(NamedTuple):
    """One job of the history (a tuple: cheap to make by the 100,000)."""

    team: str
    user: str
    submitted: int
    started: int | None
    finished: int | None
    gpus: float = 0.0
    cpus: float = 0.0
    memory: float = 0.0  # bytes
    priority: str = priority.NORMAL

    def end(self, horizon: int) -> int:
        """When it stopped holding (or asking for) resources, at most ``horizon``."""
        if self.finished is not None:
            return min(self.finished, horizon)
        return horizon

    def wait(self, horizon: int) -> int:
        """Seconds from submission to start; for a job that never started, to when it stopped
        asking (cancelled, deleted, a refusal retried) or to ``horizon``."""
        start = self.started if self.started is not None else self.end(horizon)
        return max(0, start - self.submitted)


def from_spans(spans: Iterable[usage.Span]) -> list[JobRecord]:
    """Records from usage spans (``Backend.usage_spans``): each submitted when it started."""
    return [
        JobRecord(
            s.team, s.user, s.start, s.start, s.end, s.gpus_milli / 1000, s.cpu_milli / 1000, s.memory_milli / 1000
        )
        for s in spans
    ]


def parse_csv(text: str, source: str = "history") -> list[JobRecord]:
    """The records of a CSV with the header ``COLUMNS``; ``InvalidRequest`` names the line and
    the field to fix."""
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise InvalidRequest(f"{source} is empty: it needs the header {','.join(COLUMNS)}")
    if tuple(h.strip() for h in header) != COLUMNS:
        raise InvalidRequest(f"{source}: the header must be {','.join(COLUMNS)}, not {','.join(header)[:200]}")
    records = []
    for line, row in enumerate(reader, start=2):
        if not row or not any(cell.strip() for cell in row):
            continue
        if len(records) >= MAX_ROWS:
            raise InvalidRequest(f"{source}: more than {MAX_ROWS} jobs; split the history into shorter periods")
        if len(row) != len(COLUMNS):
            raise InvalidRequest(
                f"{source} line {line}: {len(row)} fields, expected {len(COLUMNS)} ({','.join(COLUMNS)})"
            )
        records.append(_record(dict(zip(COLUMNS, (c.strip() for c in row), strict=True)), f"{source} line {line}"))
    return records


def _record(cells: dict[str, str], where: str) -> JobRecord:
    if not cells["team"]:
        raise InvalidRequest(f"{where}: team is empty")
    submitted = _time(cells["submitted"], "submitted", where)
    started = _time(cells["started"], "started", where) if cells["started"] else None
    finished = _time(cells["finished"], "finished", where) if cells["finished"] else None
    if started is None and finished is not None:
        raise InvalidRequest(f"{where}: finished is set but started is empty; a job that never started has neither")
    if started is not None and started < submitted:
        raise InvalidRequest(f"{where}: started ({cells['started']}) is before submitted ({cells['submitted']})")
    if finished is not None and started is not None and finished < started:
        raise InvalidRequest(f"{where}: finished ({cells['finished']}) is before started ({cells['started']})")
    try:
        level = priority.check(cells["priority"] or None)
    except InvalidRequest as e:
        raise InvalidRequest(f"{where}: {e.message}") from None
    return JobRecord(
        cells["team"],
        cells["user"],
        submitted,
        started,
        finished,
        _amount(cells["gpus"], "gpus", where),
        _amount(cells["cpus"], "cpus", where),
        _amount(cells["memory"], "memory", where),
        level,
    )


def _time(text: str, name: str, where: str) -> int:
    try:
        return usage.parse_time(text, name)
    except InvalidRequest as e:
        raise InvalidRequest(f"{where}: {e.message}") from None


def _amount(text: str, name: str, where: str) -> float:
    """A Kubernetes quantity (``2``, ``500m``, ``64Gi``); empty is 0."""
    value = _parsed(text)
    if value is None:
        raise InvalidRequest(f"{where}: {name} {text[:40]!r} is not a quantity (e.g. 2, 500m, 64Gi)")
    if value < 0:
        raise InvalidRequest(f"{where}: {name} must not be negative, not {text[:40]}")
    return value


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> float | None:
    """A quantity's value (None: not a quantity); a history repeats a few shapes, parsed once."""
    if not text:
        return 0.0
    try:
        return float(Quantity(text).as_fraction())
    except (QuantityError, ValueError):
        return None


def to_csv(records: Iterable[JobRecord]) -> str:
    """The records as a CSV ``parse_csv`` reads back (tests, and exporting a history)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for r in records:
        writer.writerow(
            [
                r.team,
                r.user,
                usage.format_time(r.submitted),
                "" if r.started is None else usage.format_time(r.started),
                "" if r.finished is None else usage.format_time(r.finished),
                _number(r.gpus),
                _number(r.cpus),
                _number(r.memory),
                r.priority,
            ]
        )
    return out.getvalue()


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
