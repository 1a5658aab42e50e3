"""The quota service's own records, one SQLite file in the state directory: increase requests,
the audit log, each job's estimated and measured peak (``peaks``), and the requests each endpoint
served through the proxy (``endpoint_requests``: ``endpointrequests.py``). Both backends use it (the
local ledger holds jobs; this holds decisions about them).

``<state_dir>/records.sqlite3``, WAL, every write in ``BEGIN IMMEDIATE`` so the hub service's
threads and a CLI process queue on SQLite's lock. The audit table is append-only: triggers refuse
an UPDATE or DELETE, so no code path (ours or a later one) can rewrite what happened.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import contextmanager

from . import changebeacon
from .changebeacon import ChangeBeacon
from .sqlitebusy import retry_busy

FILE = "records.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at      TEXT NOT NULL,     -- RFC 3339 UTC
    who     TEXT NOT NULL,     -- a user name, or "system" for the service's own acts (expiry)
    action  TEXT NOT NULL,     -- audit.ACTIONS
    target  TEXT NOT NULL,     -- what it acted on, e.g. "increase/team-alpha/inc-3"
    detail  TEXT NOT NULL DEFAULT ''
);
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TABLE IF NOT EXISTS increases (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT NOT NULL UNIQUE,
    namespace   TEXT NOT NULL,
    team        TEXT NOT NULL,
    user        TEXT NOT NULL,
    phase       TEXT NOT NULL CHECK (phase IN ('Pending', 'Approved', 'Denied', 'Expired')),
    resources   TEXT NOT NULL,  -- JSON: resource -> canonical quantity string
    hours       REAL NOT NULL,
    reason      TEXT NOT NULL,
    created_at  REAL NOT NULL,  -- epoch seconds
    decided_at  REAL,
    decided_by  TEXT,
    comment     TEXT,
    expires_at  REAL            -- set on approval
);
CREATE INDEX IF NOT EXISTS increases_by_phase ON increases (phase, expires_at);
CREATE INDEX IF NOT EXISTS increases_by_team ON increases (team, phase);
CREATE INDEX IF NOT EXISTS increases_by_namespace ON increases (namespace, id);
-- decided requests past JupyterQuota.increase_retention_days, moved out of the list (same columns)
CREATE TABLE IF NOT EXISTS increases_archive AS SELECT * FROM increases WHERE 0;
CREATE TABLE IF NOT EXISTS peaks (          -- peaks.py: each job's estimate and its measured peak
    namespace       TEXT NOT NULL,
    job             TEXT NOT NULL,
    team            TEXT NOT NULL,
    owner           TEXT NOT NULL,
    created_at      REAL NOT NULL,  -- epoch seconds
    family          TEXT NOT NULL,  -- the model's model_type
    regime          TEXT NOT NULL,  -- learning.regime_of
    gpu             TEXT NOT NULL DEFAULT '',  -- the profile's gpuModel, when declared
    gpu_bytes       INTEGER,        -- the profile's gpuMemory, when declared
    gpus            INTEGER NOT NULL,
    args            TEXT NOT NULL,  -- JSON: the ms-swift argv estimated
    estimated_bytes INTEGER NOT NULL,  -- the peak the user was shown (corrected, if it was)
    raw_bytes       INTEGER NOT NULL,  -- before any correction: what corrections learn from
    range_lo        INTEGER,
    range_hi        INTEGER,
    learned_at      REAL,           -- when the ended job's log was read; NULL before
    measured_gib    REAL,           -- ms-swift's logged memory(GiB) peak; NULL if it logged none
    out_of_memory   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, job)
);
CREATE INDEX IF NOT EXISTS peaks_learned ON peaks (learned_at);
CREATE TABLE IF NOT EXISTS endpoints (      -- endpointrequests.py: every endpoint created
    namespace   TEXT NOT NULL,
    name        TEXT NOT NULL,
    created_at  TEXT NOT NULL,  -- the job's createdAt (RFC 3339): a name reused is another endpoint
    team        TEXT NOT NULL,
    owner       TEXT NOT NULL,
    PRIMARY KEY (namespace, name, created_at)
);
CREATE TABLE IF NOT EXISTS endpoint_requests (  -- endpointrequests.py: proxied requests per minute
    namespace   TEXT NOT NULL,
    name        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    minute      INTEGER NOT NULL,  -- epoch seconds of the minute the requests ended in
    code        TEXT NOT NULL,     -- status class: 2xx, 3xx, 4xx, 5xx
    count       INTEGER NOT NULL,
    seconds     REAL NOT NULL,     -- their summed latency
    PRIMARY KEY (namespace, name, created_at, minute, code)
);
CREATE INDEX IF NOT EXISTS endpoint_requests_by_minute ON endpoint_requests (minute, namespace);
"""

_lock = threading.Lock()
_stores: dict[str, Records] = {}


def open_records(state_dir: str) -> Records:
    """The store of ``state_dir``, one per process and path (its connections are per thread)."""
    path = os.path.join(os.path.abspath(state_dir), FILE)
    with _lock:
        store = _stores.get(path)
        if store is None:
            store = _stores[path] = Records(path)
        return store


class Records:
    def __init__(self, path: str):
        self.path = path
        self._local = threading.local()
        self._made = False
        self._made_lock = threading.Lock()
        #: commits made through this object; with ``PRAGMA data_version`` (others' commits) it
        #: tells a reader's cache whether anything changed (see ``Increases._approved``)
        self.writes = 0
        self._seen = False
        #: every process's commits, seen without a SQLite read (``changebeacon``)
        self.beacon = ChangeBeacon(path + changebeacon.SUFFIX)

    def exists(self) -> bool:
        """Whether anything was ever recorded: reads of a store never written need not create it
        (a read-only state directory still serves balances)."""
        if not self._seen:
            self._seen = os.path.exists(self.path)  # once there, it stays: no stat per read
        return self._seen

    def connection(self) -> sqlite3.Connection:
        """This thread's connection, in autocommit mode: each statement reads what is committed."""
        return self._connection()

    def _connection(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
            con = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            con.row_factory = sqlite3.Row
            con.execute("PRAGMA synchronous=FULL")
            self._local.con = con
        with self._made_lock:
            if not self._made:  # once per process: WAL is recorded in the file (sqlitebusy.py says why)
                retry_busy(lambda: con.execute("PRAGMA journal_mode=WAL").fetchone())
                retry_busy(lambda: con.executescript(_SCHEMA))
                self._made = True
        return con

    @contextmanager
    def write(self):
        """A write transaction (``BEGIN IMMEDIATE``): committed on success, rolled back on error."""
        con = self._connection()
        con.execute("BEGIN IMMEDIATE")
        try:
            yield con
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
        self.writes += 1
        self.beacon.bump()

    @contextmanager
    def read(self):
        con = self._connection()
        con.execute("BEGIN")
        try:
            yield con
        finally:
            con.execute("COMMIT")
