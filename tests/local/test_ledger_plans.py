"""The ledger's hot queries use the index meant for them (SQLite's own query plan says which)."""

from __future__ import annotations

import inspect

from jupyter_quota.backends.local import ledger


class Recorder:
    """A connection stand-in that keeps each statement, to ask SQLite for its plan."""

    def __init__(self, con):
        self.con, self.sql = con, []

    def execute(self, sql, params=()):
        self.sql.append((sql, params))
        return self.con.execute(sql, params)


def test_a_balance_read_finds_the_live_jobs_by_namespace_and_phase(tmp_path):
    book = ledger.Ledger(tmp_path / "ledger.sqlite3")
    with book.read() as con:
        recorder = Recorder(con)
        ledger.live_in_namespace(recorder, "team-alpha")
        ((sql, params),) = recorder.sql
        plan = " ".join(row[3] for row in con.execute("EXPLAIN QUERY PLAN " + sql, params))
    assert "jobs_by_namespace (namespace=? AND phase=?)" in plan, (plan, inspect.getsource(ledger.live_in_namespace))
