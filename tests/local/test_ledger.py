"""The SQLite ledger: created private, versioned and durable; upgraded in place; all or nothing."""

from __future__ import annotations

import os
import sqlite3

import pytest
from local_testing import INVENTORY, NS, downgrade_to_version_1, downgrade_to_version_2, insert_raw

from jupyter_quota.backends.local import LocalBackend
from jupyter_quota.backends.local import ledger as ledger_mod


def test_ledger_is_created_private_versioned_wal_and_full_sync(tmp_path):
    path = tmp_path / "new" / "dir" / "ledger.sqlite"
    LocalBackend(path, tmp_path / "new" / "state", INVENTORY)
    assert (os.stat(path.parent).st_mode & 0o777) == 0o700
    assert (os.stat(tmp_path / "new" / "state").st_mode & 0o777) == 0o700
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
    assert meta["schema_version"] == ledger_mod.SCHEMA_VERSION
    assert meta["generation"] == 0
    con.close()
    book = ledger_mod.Ledger(path)
    with book.read() as con:
        assert con.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_ledger_from_a_newer_version_is_refused(tmp_path):
    path = tmp_path / "ledger.sqlite"
    ledger_mod.Ledger(path)
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value = 99 WHERE key = 'schema_version'")
    con.commit()
    con.close()
    with pytest.raises(ledger_mod.LedgerError, match="schema version 99"):
        ledger_mod.Ledger(path)


def test_a_version_1_ledger_is_upgraded_in_place_and_rows_get_their_rev(tmp_path):
    path = tmp_path / "ledger.sqlite"
    ledger_mod.Ledger(path)
    downgrade_to_version_1(path)
    insert_raw(path, "old", {"cpu": "1"}, namespace=NS)
    book = ledger_mod.Ledger(path)
    with book.read() as con:
        assert [r["name"] for r in ledger_mod.changed_since(con, -1)] == ["old"]
        assert ledger_mod.changed_since(con, 0) == []  # written before rev existed
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == 3
    with book.write() as con:
        ledger_mod.update(con, 1, "Pending", reason="Seen")
    with book.read() as con:
        assert [r["rev"] for r in con.execute("SELECT rev FROM jobs")] == [book.generation()]


def test_a_version_2_ledger_gets_the_elastic_columns_and_its_jobs_are_normal_priority(tmp_path):
    path = tmp_path / "ledger.sqlite"
    ledger_mod.Ledger(path)
    downgrade_to_version_2(path)
    insert_raw(path, "old", {"cpu": "1"}, namespace=NS)
    book = ledger_mod.Ledger(path)
    with book.read() as con:
        row = ledger_mod.find(con, NS, "old")
        assert (row["priority"], row["borrowed"], row["preempted"], row["history"]) == ("normal", 0, None, None)
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == 3


def test_failed_transaction_leaves_nothing_and_keeps_the_generation(tmp_path):
    book = ledger_mod.Ledger(tmp_path / "ledger.sqlite")

    def crash_mid_transaction():
        with book.write() as con:
            con.execute("UPDATE meta SET value = 5 WHERE key = 'schema_version'")
            raise RuntimeError("crash mid-transaction")

    with pytest.raises(RuntimeError, match="crash mid-transaction"):
        crash_mid_transaction()
    with book.read() as con:
        assert (
            con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
            == ledger_mod.SCHEMA_VERSION
        )
    assert book.generation() == 0
