"""The SQLite ledger: created private, versioned and durable; upgraded in place; all or nothing."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
from local_testing import (
    INVENTORY,
    NS,
    downgrade_to_version_1,
    downgrade_to_version_2,
    downgrade_to_version_3,
    insert_raw,
)

from jupyter_quota import usage
from jupyter_quota.backends.local import LocalBackend, usagespans
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
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == 4
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
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == 4


def _event(event, at, **fields):
    return {"event": event, "at": at, **fields}


# A version 3 ledger kept each job's first start and its finish, and its elastic events.
V3_JOBS = {
    # preempted at 09:10, requeued at 09:11, resumed from a checkpoint at 10:00, done at 10:20
    "resumed": (
        "Succeeded",
        1,
        "09:00",
        "10:20",
        [_event("Preempted", "09:10"), _event("Requeued", "09:11"), _event("Resumed", "10:00")],
    ),
    # borrowed, requeued at 09:30, borrowed again at 09:45 and still running
    "borrowing": (
        "Running",
        1,
        "09:00",
        None,
        [_event("Borrowed", "09:00"), _event("Requeued", "09:30"), _event("Borrowed", "09:45")],
    ),
    # requeued at 09:05 and still waiting
    "waiting": ("Pending", None, "09:00", None, [_event("Preempted", "09:04"), _event("Requeued", "09:05")]),
    # requeued at 09:20 and cancelled while it waited: it never ran again
    "cancelled": ("Failed", None, "09:00", "09:50", [_event("Requeued", "09:20")]),
    # restarted from the beginning on its own quota: no event says when; counted from the requeue
    "restarted": ("Failed", 1, "09:00", "09:40", [_event("Requeued", "09:10")]),
    "plain": ("Succeeded", 1, "09:30", "09:45", None),
    "never": ("Failed", None, None, "09:00", None),
}


def _at(hhmm):
    return None if hhmm is None else f"2026-11-30T{hhmm}:00Z"


def test_a_version_3_ledger_gets_the_runs_of_its_jobs_and_usage_skips_their_waits(tmp_path):
    path = tmp_path / "ledger.sqlite"
    ledger_mod.Ledger(path)
    downgrade_to_version_3(path)
    for name, (phase, pid, started, finished, history) in V3_JOBS.items():
        insert_raw(path, name, {"cpu": "2"}, namespace=NS)
        history = [{**e, "at": _at(e["at"])} for e in history] if history else None
        con = sqlite3.connect(path)
        with con:
            con.execute(
                "UPDATE jobs SET phase = ?, pid = ?, started_at = ?, finished_at = ?, history = ?, gpus = 1,"
                " usage = ? WHERE name = ?",
                (phase, pid, _at(started), _at(finished), history and json.dumps(history), USED, name),
            )
        con.close()
    con = sqlite3.connect(path)  # and one pruned in version 3: its times alone were kept
    with con:
        con.execute(
            "INSERT INTO job_history (id, namespace, name, team, owner, phase, gpus, resources, usage, created_at,"
            " started_at, finished_at, pruned_at) VALUES (99, ?, 'pruned', 'a', 'mallory', 'Succeeded', 1, '{}', ?,"
            " ?, ?, ?, ?)",
            (NS, USED, _at("07:00"), _at("07:00"), _at("08:00"), _at("12:00")),
        )
    con.close()

    book = ledger_mod.Ledger(path)
    with book.read() as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == 4
        runs = {}
        for row in con.execute("SELECT name, run, started_at, ended_at, gpus, usage FROM job_runs ORDER BY name, run"):
            assert (row["gpus"], row["usage"]) == (1, USED)
            runs.setdefault(row["name"], []).append((row["started_at"][11:16], (row["ended_at"] or "")[11:16] or None))
        indexes = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert runs == {
        "resumed": [("09:00", "09:11"), ("10:00", "10:20")],
        "borrowing": [("09:00", "09:30"), ("09:45", None)],
        "waiting": [("09:00", "09:05")],
        "cancelled": [("09:00", "09:20")],
        "restarted": [("09:00", "09:10"), ("09:10", "09:40")],
        "plain": [("09:30", "09:45")],
        "pruned": [("07:00", "08:00")],
    }
    assert not {"jobs_usage", "job_history_usage"} & indexes  # usage reads job_runs_usage now
    since, until = usage.parse_time(_at("07:30"), "since"), usage.parse_time(_at("10:30"), "until")
    window = usage.Window(since, until, by="job")
    sums = usage.integrate(usagespans.spans(book, since, until), window, now=until)
    gpu_minutes = {row["job"]: row["gpuSeconds"] / 60 for row, _ in usage.rows_json(sums, window)}
    assert gpu_minutes == {
        "pruned": 30,  # 07:30 (the window's start) to 08:00
        "resumed": 11 + 20,
        "borrowing": 30 + 45,  # to 10:30, the window's end
        "waiting": 5,
        "cancelled": 20,
        "restarted": 10 + 30,
        "plain": 15,
    }


USED = '{"requests.cpu":"2","requests.nvidia.com/gpu":"1"}'


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
