"""``statedir.storage_error``: which failures mean a full or read-only state directory, and which do not."""

from __future__ import annotations

import errno
import sqlite3

import pytest

from jupyter_quota.statedir import FULL, READ_ONLY, storage_error


@pytest.mark.parametrize(
    "code, reason", [(errno.ENOSPC, FULL), (errno.EDQUOT, FULL), (errno.EROFS, READ_ONLY), (errno.EACCES, READ_ONLY)]
)
def test_an_os_error_on_a_file_in_the_state_dir_is_named_with_the_file(tmp_path, code, reason):
    path = tmp_path / "jobs" / "team-alpha" / "x" / "output.log"
    error = storage_error(OSError(code, "no", str(path)), str(tmp_path))
    assert error.status == 507 and error.reason == reason
    assert str(tmp_path) in error.message and str(path) in error.message


def test_an_os_error_elsewhere_or_of_another_kind_is_not_ours_to_explain(tmp_path):
    assert storage_error(OSError(errno.EACCES, "denied", "/etc/shadow"), str(tmp_path)) is None
    assert storage_error(OSError(errno.ENOSPC, "full"), str(tmp_path)) is None  # names no file
    assert storage_error(OSError(errno.ENOENT, "gone", str(tmp_path / "x")), str(tmp_path)) is None
    assert storage_error(ValueError("no"), str(tmp_path)) is None


def real_sqlite_error(tmp_path, how: str) -> sqlite3.Error:
    path = tmp_path / "db.sqlite"
    sqlite3.connect(path).execute("CREATE TABLE t (x)").connection.commit()
    try:
        if how == "full":
            con = sqlite3.connect(path)
            con.execute("PRAGMA max_page_count = 2")
            con.execute("INSERT INTO t VALUES (randomblob(100000))")
        elif how == "read-only":
            sqlite3.connect(f"file:{path}?mode=ro", uri=True).execute("INSERT INTO t VALUES (1)")
        elif how == "cannot open":
            sqlite3.connect(tmp_path / "missing" / "db.sqlite").execute("SELECT 1")
        else:
            sqlite3.connect(path).execute("SELECT * FROM nowhere")
    except sqlite3.Error as e:
        return e
    raise AssertionError(f"no sqlite error for {how}")


@pytest.mark.parametrize(
    "how, reason", [("full", FULL), ("read-only", READ_ONLY), ("cannot open", READ_ONLY), ("a bug", None)]
)
def test_sqlite_errors_from_the_ledger(tmp_path, how, reason):
    error = storage_error(real_sqlite_error(tmp_path, how), str(tmp_path))
    if reason is None:
        assert error is None
    else:
        assert error.reason == reason and "job ledger" in error.message and str(tmp_path) in error.message
