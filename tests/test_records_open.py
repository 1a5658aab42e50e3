"""Opening a new state file from many threads at once (``sqlitebusy.py``).

Once, the first job submitted to a fresh demo server answered 500 "database is locked" (CI stop
27, ``tests/ui/test_loss_plot.py``): the submit's thread, the event pass, the increase expiry
and the window timer each opened their first connection to the new ``records.sqlite3`` and each
switched it to WAL, and a loser of that race got SQLITE_BUSY at once, without the busy
timeout's wait. 16 threads opening a fresh store failed about once in 200 rounds.
"""

from __future__ import annotations

import sqlite3
import threading

import pytest

from jupyter_quota import records
from jupyter_quota.backends.local.ledger import Ledger
from jupyter_quota.sqlitebusy import is_busy, retry_busy

THREADS = 16


def busy() -> sqlite3.OperationalError:
    error = sqlite3.OperationalError("database is locked")
    error.sqlite_errorcode = sqlite3.SQLITE_BUSY
    return error


def open_at_once(state_dir, work) -> list[BaseException]:
    """``work(store)`` in ``THREADS`` threads released together; the errors they raised."""
    store = records.open_records(str(state_dir))
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def run():
        barrier.wait()
        try:
            work(store)
        except BaseException as e:  # noqa: BLE001 - collected for the assertion
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def read_and_write(store):
    with store.read() as con:
        con.execute("SELECT COUNT(*) FROM audit").fetchone()
    with store.write() as con:
        con.execute("INSERT INTO audit (at, who, action, target) VALUES ('t', 'u', 'a', 'x')")


def test_a_new_store_is_switched_to_wal_once_whatever_the_threads_opening_it(tmp_path, monkeypatch):
    statements: list[str] = []
    connect = sqlite3.connect

    def traced(*args, **kwargs):
        con = connect(*args, **kwargs)
        con.set_trace_callback(statements.append)
        return con

    monkeypatch.setattr(records.sqlite3, "connect", traced)
    assert open_at_once(tmp_path, read_and_write) == []
    switches = [s for s in statements if "journal_mode" in s]
    assert switches == ["PRAGMA journal_mode=WAL"], "once per process: WAL is recorded in the file"
    con = connect(records.open_records(str(tmp_path)).path)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert con.execute("SELECT COUNT(*) FROM audit").fetchone()[0] == THREADS


def test_many_rounds_of_threads_opening_fresh_stores_and_ledgers_raise_nothing(tmp_path):
    for round_ in range(40):
        state = tmp_path / str(round_)
        ledger = Ledger(str(state / "ledger.sqlite3"))

        def work(store, ledger=ledger):
            read_and_write(store)
            with ledger.read() as con:
                con.execute("SELECT COUNT(*) FROM jobs").fetchone()

        assert open_at_once(state, work) == []


def test_busy_is_retried_until_it_passes_and_other_errors_are_not():
    failures = [busy(), busy()]

    def step():
        if failures:
            raise failures.pop()
        return "done"

    assert retry_busy(step) == "done" and failures == []
    calls = []

    def broken():
        calls.append(1)
        raise sqlite3.OperationalError("no such table: audit")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        retry_busy(broken)
    assert calls == [1]


def test_busy_past_the_timeout_is_raised():
    def always():
        raise busy()

    with pytest.raises(sqlite3.OperationalError) as raised:
        retry_busy(always, timeout=0.05)
    assert is_busy(raised.value)
