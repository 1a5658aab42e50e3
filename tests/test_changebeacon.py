"""The change beacon (``jupyter_quota/changebeacon.py``): a balance read that nothing changed
reads no SQLite (issue 23), and still sees every process's commits."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap

import pytest
from quota_testing import teams_config

from jupyter_quota.backends.local import ledger
from jupyter_quota.changebeacon import SUFFIX, ChangeBeacon
from jupyter_quota.config import JupyterQuota
from jupyter_quota.identity import Identity
from jupyter_quota.service.app import build_service

ANN = Identity("ann", ("g0",), False, "jupyterhub")
NS = "team-0"


@pytest.fixture
def service(tmp_path):
    return build_service(JupyterQuota(config=teams_config(tmp_path / "state", 1, {"requests.cpu": "2"})))


def traced(con: sqlite3.Connection) -> list[str]:
    statements: list[str] = []
    con.set_trace_callback(statements.append)
    return statements


def test_a_balance_read_that_nothing_changed_reads_no_sqlite(service):
    with service.effective.store.write():  # the records store exists, as it does once used
        pass
    version, _ = service.balance_read(ANN, NS)  # the first read opens the connections
    ledger_reads = traced(service.backend._ledger._connection()[0])
    records_reads = traced(service.effective.store.connection())
    again, _ = service.balance_read(ANN, NS)
    assert again == version
    assert ledger_reads == [] and records_reads == []


def commit_in_another_process(ledger_path, sql: str) -> None:
    """A write by another process through the ledger's own code (which publishes it)."""
    script = textwrap.dedent(
        f"""
        from jupyter_quota.backends.local import ledger
        with ledger.Ledger({str(ledger_path)!r}).write() as con:
            con.execute({sql!r})
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)


def test_another_process_commit_changes_the_version(service):
    before, _ = service.balance_read(ANN, NS)
    commit_in_another_process(
        service.backend._ledger.path, "INSERT INTO meta (key, value) VALUES ('another-process', 1)"
    )
    after, _ = service.balance_read(ANN, NS)
    assert after != before


def test_a_writer_that_died_before_publishing_is_seen_by_the_next_poll(service):
    before, _ = service.balance_read(ANN, NS)
    path = service.backend._ledger.path
    con = sqlite3.connect(path, isolation_level=None)  # commits, as a writer killed before its publish
    con.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
    con.close()
    assert service.balance_read(ANN, NS)[0] == before  # the beacon trails the commit
    service.backend.reap()  # the reaper's poll publishes what SQLite holds
    assert service.balance_read(ANN, NS)[0] != before


def test_a_ledger_made_anew_resets_an_old_beacon_file(tmp_path):
    path = tmp_path / "ledger.sqlite"
    ChangeBeacon(str(path) + SUFFIX).publish(1000)  # left by a ledger since deleted
    fresh = ledger.Ledger(path)
    assert fresh.published_generation() == fresh.generation() == 0
    with fresh.write() as con:
        con.execute("INSERT INTO meta (key, value) VALUES ('x', 1)")
    assert fresh.published_generation() == fresh.generation() == 1


def test_publishing_never_lowers_the_counter(tmp_path):
    beacon = ChangeBeacon(str(tmp_path / "f") + SUFFIX)
    beacon.publish(7)
    beacon.publish(5)  # a writer that published late, after a later commit's writer
    assert beacon.read() == 7
    beacon.bump()
    assert beacon.read() == 8


def test_without_a_beacon_file_reads_fall_back_to_sqlite(tmp_path):
    beacon = ChangeBeacon(str(tmp_path / "missing-dir" / "ledger.sqlite") + SUFFIX)
    assert beacon.read() is None
    beacon.publish(3)  # nothing to write to: ignored
    assert beacon.read() is None
