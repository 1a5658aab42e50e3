"""The append-only audit log: who did what, when, to what, and why.

Every feature that decides something about a team's quota appends one entry through
:func:`record` (increase requests and decisions here; expiries, window preemptions and the zombie
policy elsewhere). The store (``records``) refuses to change or delete an entry.
"""

from __future__ import annotations

import csv
import io
import time

from . import paging
from .paging import Page
from .records import open_records
from .times import rfc3339

#: The service itself (an expiry, a reconcile), where no person acted.
SYSTEM = "system"

# -- actions, each named once -----------------------------------------------------------------
INCREASE_REQUESTED = "increase.requested"
INCREASE_APPROVED = "increase.approved"
INCREASE_DENIED = "increase.denied"
INCREASE_EXPIRED = "increase.expired"
#: Decided requests past the retention left the increases' list (``Increases.archive_decided``);
#: target ``increases``, detail how many and up to when.
INCREASE_ARCHIVED = "increase.archived"
#: The local backend preempted a job because a quota window with ``onClose: preempt`` closed
#: (``backends/local/lifecycle.py``); target ``job/<namespace>/<name>``.
WINDOW_PREEMPTED = "window.preempted"
#: An admin-approved estimator correction for every team (``JupyterQuota.shared_corrections``), recorded
#: once at the first start that has it; ``who`` is its ``approvedBy``, target ``correction/<family>/<regime>``.
CORRECTION_SHARED = "estimator.correction.shared"

#: An admin created or replaced a team's profile (``PUT /profiles/{team}``, the admin view's form
#: and its Apply of a recommendation); target ``profile/<team>``, detail the ``hard`` keys it changed.
PROFILE_REPLACED = "profile.replaced"

FIELDS = ("id", "at", "who", "action", "target", "detail")


def record(state_dir: str, who: str, action: str, target: str, detail: str = "", when: float | None = None) -> dict:
    """Append one entry to the audit log of ``state_dir``; return it as the API shows it.

    ``who``: the user who acted, or :data:`SYSTEM`. ``action``: a short dotted name (the constants
    above, or your feature's own). ``target``: what was acted on, e.g. ``increase/<name>`` or
    ``job/<namespace>/<name>``. ``detail``: why, in words. ``when``: epoch seconds (default now).
    """
    with open_records(state_dir).write() as con:
        return append(con, who, action, target, detail, when)


def append(con, who: str, action: str, target: str, detail: str = "", when: float | None = None) -> dict:
    """:func:`record` inside a write transaction of ``records`` the caller holds, so an entry is
    committed with the change it records, or not at all."""
    at = rfc3339(time.time() if when is None else when)
    cursor = con.execute(
        "INSERT INTO audit (at, who, action, target, detail) VALUES (?, ?, ?, ?, ?)",
        (at, who, action, target, detail or ""),
    )
    return {"id": cursor.lastrowid, "at": at, "who": who, "action": action, "target": target, "detail": detail or ""}


def entries(state_dir: str) -> list[dict]:
    """Every entry, oldest first (the CSV export)."""
    with open_records(state_dir).read() as con:
        rows = con.execute("SELECT id, at, who, action, target, detail FROM audit ORDER BY id").fetchall()
    return [dict(row) for row in rows]


def page(state_dir: str, limit: int, start: str | None) -> Page:
    """A page of entries, newest first, after the entry id ``start`` (``paging`` keyset)."""
    before = _position(start)
    with open_records(state_dir).read() as con:
        rows = con.execute(
            "SELECT id, at, who, action, target, detail FROM audit WHERE (?1 IS NULL OR id < ?1) ORDER BY id DESC "
            "LIMIT ?2",
            (before, limit + 1),
        ).fetchall()
        if len(rows) <= limit:
            return Page([dict(r) for r in rows])
        rows = rows[:limit]
        remaining = con.execute("SELECT COUNT(*) FROM audit WHERE id < ?", (rows[-1]["id"],)).fetchone()[0]
    return Page([dict(r) for r in rows], str(rows[-1]["id"]), remaining)


def _position(start: str | None) -> int | None:
    if start is None:
        return None
    if not (start.isascii() and start.isdigit() and len(start) < 19):
        raise paging.invalid_start(start)
    return int(start)


def to_csv(rows: list[dict]) -> str:
    """``rows`` (from :func:`entries`) as CSV with a header line."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _safe_cell(row[k]) for k in FIELDS})
    return out.getvalue()


def _safe_cell(value):
    """A text cell a spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@``) is quoted with ``'``:
    a user's reason ends up here."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value
