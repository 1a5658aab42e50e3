"""The audit log: append-only entries, read back in order, exported as CSV."""

import csv
import io
import sqlite3

import pytest

from jupyter_quota import audit
from jupyter_quota.records import open_records


def test_record_then_read_back_in_order(tmp_path):
    first = audit.record(str(tmp_path), "alice", audit.INCREASE_REQUESTED, "increase/inc-1", "+2 GPUs for 8 h", when=0)
    audit.record(str(tmp_path), audit.SYSTEM, audit.INCREASE_EXPIRED, "increase/inc-1", when=3600)
    rows = audit.entries(str(tmp_path))
    assert rows == [
        first,
        {
            "id": first["id"] + 1,
            "at": "1970-01-01T01:00:00Z",
            "who": "system",
            "action": "increase.expired",
            "target": "increase/inc-1",
            "detail": "",
        },
    ]
    assert first["at"] == "1970-01-01T00:00:00Z"


@pytest.mark.parametrize("statement", ["UPDATE audit SET who = 'mallory'", "DELETE FROM audit"])
def test_entries_cannot_be_changed_or_deleted(tmp_path, statement):
    audit.record(str(tmp_path), "alice", audit.INCREASE_REQUESTED, "increase/inc-1")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"), open_records(str(tmp_path)).write() as con:
        con.execute(statement)
    assert [r["who"] for r in audit.entries(str(tmp_path))] == ["alice"]


def test_csv_export_has_a_header_and_defuses_formulas(tmp_path):
    audit.record(str(tmp_path), "alice", audit.INCREASE_REQUESTED, "increase/inc-1", '=HYPERLINK("x"), "quoted"')
    text = audit.to_csv(audit.entries(str(tmp_path)))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == list(audit.FIELDS)
    assert rows[0]["detail"] == '\'=HYPERLINK("x"), "quoted"'
    assert rows[0]["who"] == "alice"
