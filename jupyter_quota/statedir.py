"""A full or read-only state directory, recognised in one place and told as one error.

``JupyterQuota.state_dir`` holds the local backend's ledger (SQLite), the job directories with
their logs, and ``profiles.json``. When its file system is full or read-only, SQLite and the OS
fail in several ways; ``storage_error`` tells which, and where, as a ``StateDirectoryError``
(507). Everything else is not ours to explain and passes through. What still works: reads of the
ledger (see ``Ledger.read``), logs and balances; what cannot: submit, cancel, profile changes.
"""

from __future__ import annotations

import errno
import os
import sqlite3

from .errors import StateDirectoryError

FULL = StateDirectoryError.FULL
READ_ONLY = StateDirectoryError.READ_ONLY

_OS_ERRNOS = {
    errno.ENOSPC: FULL,
    errno.EDQUOT: FULL,
    errno.EROFS: READ_ONLY,
    errno.EACCES: READ_ONLY,
    errno.EPERM: READ_ONLY,
}
# SQLite result codes (sqlite3.h): primary codes, then extended ones whose primary code is vague.
_SQLITE_CODES = {13: FULL, 8: READ_ONLY, 14: READ_ONLY}  # SQLITE_FULL, SQLITE_READONLY, SQLITE_CANTOPEN
_SQLITE_EXTENDED = {4874: FULL, 4618: READ_ONLY}  # SQLITE_IOERR_SHMSIZE, SQLITE_IOERR_SHMOPEN
# Before Python 3.11 an sqlite3 error has no code; its message says the same.
_SQLITE_MESSAGES = {
    "database or disk is full": FULL,
    "attempt to write a readonly database": READ_ONLY,
    "unable to open database file": READ_ONLY,
}
_ADVICE = {
    FULL: "is full: {what}. Free space there",
    READ_ONLY: "is read-only or not writable by this server: {what}. Make it writable",
}


def make_private_dir(path: str) -> None:
    """Create ``path`` (and parents) with mode 0700; an existing directory is left as it is.

    The state directory and every folder below it that holds users' records are made this way."""
    if os.path.isdir(path):
        return
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)  # makedirs' mode is filtered by the umask


def storage_error(exc: BaseException, state_dir: str) -> StateDirectoryError | None:
    """The error to answer for ``exc`` if it says the state directory is full or read-only, else None.

    An ``OSError`` counts only when it names a file inside ``state_dir``; an ``sqlite3`` error
    always does, as the ledger is the only database and lives there.
    """
    if isinstance(exc, StateDirectoryError):
        return exc
    if isinstance(exc, sqlite3.Error):
        kind = _sqlite_kind(exc)
        code = getattr(exc, "sqlite_errorname", None)
        what = f"cannot write the job ledger ({exc}{', ' + code if code else ''})"
    elif isinstance(exc, OSError) and _inside(exc.filename, state_dir):
        kind = _OS_ERRNOS.get(exc.errno)
        what = f"cannot write {exc.filename} ({exc.strerror})"
    else:
        return None
    if kind is None:
        return None
    message = (
        f"the state directory {state_dir} (JupyterQuota.state_dir) "
        + _ADVICE[kind].format(what=what)
        + "; until then balances, jobs and logs are still served, but nothing can be submitted, "
        "cancelled or changed"
    )
    return StateDirectoryError(message, reason=kind)


def _sqlite_kind(exc: sqlite3.Error) -> str | None:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return _SQLITE_EXTENDED.get(code) or _SQLITE_CODES.get(code & 0xFF)
    return _SQLITE_MESSAGES.get(str(exc))


def _inside(filename, state_dir: str) -> bool:
    if not isinstance(filename, (str, bytes, os.PathLike)):
        return False
    path, root = os.path.abspath(os.fsdecode(filename)), os.path.abspath(state_dir)
    return os.path.commonpath([path, root]) == root
