"""Retrying SQLite's "database is locked" where its busy handler does not wait: opening a new file.

Connections opening a new database file at once race to switch it to WAL and create its schema.
A loser can get SQLITE_BUSY at once, without the busy timeout's wait (16 threads opening a fresh
``records.sqlite3``: about one run in 200 failed; ``tests/test_records_open.py``). The set-up is
retried here, for up to ``timeout`` seconds, with a growing pause: the records store, the local
ledger and the Kubernetes usage store all set up through it. Transactions need no retry:
``BEGIN IMMEDIATE`` waits in the busy handler.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: seconds the set-up is retried, as long as the connections' busy timeout
TIMEOUT = 30.0


def is_busy(error: BaseException) -> bool:
    """Whether ``error`` is SQLITE_BUSY (any extended code: recovery, snapshot)."""
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(error, sqlite3.OperationalError) and code is not None and code & 0xFF == sqlite3.SQLITE_BUSY


def retry_busy(step: Callable[[], T], timeout: float = TIMEOUT) -> T:
    """``step()``, again after a pause while it fails with SQLITE_BUSY, until ``timeout``."""
    deadline = time.monotonic() + timeout
    pause = 0.01
    while True:
        try:
            return step()
        except sqlite3.OperationalError as e:
            if not is_busy(e) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.5)
