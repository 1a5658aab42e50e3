"""The local backend's durable ledger: one SQLite file holding every job and its state.

The ledger is the authority for admission on a single machine, so it must stay atomic and
durable under concurrent writers (threads and processes) and crashes:
- WAL journal, every write in a ``BEGIN IMMEDIATE`` transaction, so writers queue on SQLite's
  lock (``busy_timeout``) and a transaction that re-reads usage sees everything committed before it.
- ``synchronous=FULL``: in WAL mode NORMAL may lose the last commits on power loss; a lost
  admission would leave a running process the ledger does not know of. Admissions are rare,
  so an fsync per commit costs nothing that matters.
- A ``meta`` table holds ``schema_version`` and ``generation``, a counter bumped by every
  transaction that changes a job, so readers can cache and revalidate with a one-row read.
- Every job row carries ``rev``, the generation of the transaction that last changed it (set by
  triggers, so no writer can forget it): ``changed_since(g)`` is exactly what changed after
  generation ``g``, which lets the scheduler keep a copy of the live jobs current (``livejobs``).
- Each thread keeps one connection and reuses it for its transactions: opening and closing a
  connection per transaction cost more than the transaction (closing the last one checkpoints
  the WAL).
- Columns that make a row meaningful are NOT NULL: a row is either complete or absent.
- ``job_runs`` holds one row per run of a job (``runs``): a preempted job runs again after a
  wait, and usage charges its runs, not the wait.
- On a full or read-only file system the ledger still reads (see ``_reader``): balances and job
  lists keep working while writes fail with the error ``statedir.storage_error`` names. A ledger
  that could not even be created or upgraded then (``startup_error``) is tried again by every
  write and, at most every ``CREATE_RETRY`` seconds, by reads (see ``_ready``), so it works again
  once there is space or write access, without a restart.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from ... import changebeacon
from ...changebeacon import ChangeBeacon
from ...sqlitebusy import retry_busy
from ...statedir import make_private_dir, storage_error
from . import runs

SCHEMA_VERSION = 4
LIVE = ("Pending", "Running")
CREATE_RETRY = 1.0  # seconds between reads' tries to create a ledger that could not be created

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,  -- submission order (FIFO)
    namespace    TEXT NOT NULL,
    name         TEXT NOT NULL,
    team         TEXT NOT NULL,
    owner        TEXT NOT NULL,
    phase        TEXT NOT NULL CHECK (phase IN ('Pending', 'Running', 'Succeeded', 'Failed')),
    reason       TEXT,
    message      TEXT,
    args         TEXT NOT NULL,   -- JSON list: the user's arguments, as shown by the API
    gpus         INTEGER NOT NULL,
    pod          TEXT NOT NULL,   -- JSON: the admitted, defaulted pod (what quota counts)
    usage        TEXT NOT NULL,   -- JSON: quota usage charged at admission, canonical strings
    job          TEXT NOT NULL,   -- JSON: the batch/v1 Job as submitted
    created_at   TEXT NOT NULL,
    gpu_indices  TEXT,            -- JSON list, set when the job starts
    pid          INTEGER,         -- the supervisor's pid = the job's process group
    pid_start    INTEGER,         -- /proc/<pid>/stat starttime, so a reused pid is not ours
    boot_id      TEXT,
    started_at   TEXT,
    finished_at  TEXT,
    exit_code    INTEGER,
    cancelled_by TEXT,
    kill_after   REAL,            -- epoch seconds: SIGKILL the group if still alive then
    rev          INTEGER NOT NULL DEFAULT 0,  -- generation that last changed the row (triggers)
    priority     TEXT NOT NULL DEFAULT 'normal',  -- high, normal or best-effort (priority.py)
    borrowed     INTEGER NOT NULL DEFAULT 0,  -- 1 while it runs on quota borrowed from other teams
    preempted    TEXT,            -- JSON while a preemption is under way: reason, message, by, step
    history      TEXT,            -- JSON list: its elastic events (borrowed, preempted, requeued, resumed)
    UNIQUE (namespace, name),
    CHECK (phase = 'Pending' OR phase = 'Failed' OR pid IS NOT NULL)
);
CREATE INDEX IF NOT EXISTS jobs_by_phase ON jobs (phase, id);
CREATE INDEX IF NOT EXISTS jobs_by_rev ON jobs (rev);
CREATE INDEX IF NOT EXISTS jobs_by_namespace ON jobs (namespace, phase, id);
CREATE INDEX IF NOT EXISTS jobs_in_namespace ON jobs (namespace, id);
CREATE INDEX IF NOT EXISTS jobs_by_finish ON jobs (finished_at) WHERE finished_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS job_history (  -- finished jobs pruned from jobs: see retention.py
    id           INTEGER PRIMARY KEY,     -- the job's id in jobs
    namespace    TEXT NOT NULL,
    name         TEXT NOT NULL,
    team         TEXT NOT NULL,
    owner        TEXT NOT NULL,
    phase        TEXT NOT NULL,
    reason       TEXT,
    message      TEXT,
    exit_code    INTEGER,
    gpus         INTEGER NOT NULL,
    gpu_indices  TEXT,                    -- JSON list
    resources    TEXT NOT NULL,           -- JSON: the train container's requests and limits
    usage        TEXT NOT NULL,           -- JSON: quota usage charged at admission
    created_at   TEXT NOT NULL,
    started_at   TEXT,
    finished_at  TEXT,
    pruned_at    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS job_history_by_namespace ON job_history (namespace, finished_at);
"""

# One row per run of a job (runs.py): a requeued job runs again. Kept when its job is pruned.
# Usage windows (backends/local/usagespans.py) read the covering index alone, never the rows.
_RUNS = """
CREATE TABLE IF NOT EXISTS job_runs (
    job_id       INTEGER NOT NULL,        -- the job's id in jobs, then in job_history
    run          INTEGER NOT NULL,        -- 1, 2, ...
    namespace    TEXT NOT NULL,
    team         TEXT NOT NULL,
    owner        TEXT NOT NULL,
    name         TEXT NOT NULL,
    gpus         INTEGER NOT NULL,
    usage        TEXT NOT NULL,           -- JSON: the job's quota usage charged at admission
    started_at   TEXT NOT NULL,
    ended_at     TEXT,                    -- NULL while it runs
    PRIMARY KEY (job_id, run)
);
CREATE INDEX IF NOT EXISTS job_runs_usage
    ON job_runs (ended_at, started_at, namespace, team, owner, name, gpus, usage);
"""

# A trigger body holds semicolons, so these are statements of their own. A row's ``rev`` is the
# generation its transaction commits as (``write`` bumps it by one at the end); the WHEN clause
# keeps the trigger's own UPDATE from firing it again.
_REV = "UPDATE jobs SET rev = (SELECT value FROM meta WHERE key = 'generation') + 1 WHERE id = NEW.id;"
_TRIGGERS = (
    f"CREATE TRIGGER IF NOT EXISTS jobs_rev_on_insert AFTER INSERT ON jobs BEGIN {_REV} END",
    f"CREATE TRIGGER IF NOT EXISTS jobs_rev_on_update AFTER UPDATE ON jobs WHEN NEW.rev = OLD.rev BEGIN {_REV} END",
)


def _runs_of_older_jobs(con: sqlite3.Connection) -> None:
    """Version 3 to 4: the runs of the jobs kept so far, from their times and elastic events
    (``runs.from_history``); a pruned job kept no events: one run, from its start to its end.
    Usage read the jobs' own times through the indexes dropped here."""
    for statement in (*_statements(_RUNS), "DROP INDEX IF EXISTS jobs_usage", "DROP INDEX IF EXISTS job_history_usage"):
        con.execute(statement)
    held = ("namespace", "team", "owner", "name", "gpus", "usage")
    columns = f"id, {', '.join(held)}, phase, started_at, finished_at"
    cursor = con.cursor()
    cursor.row_factory = sqlite3.Row
    # A job that ended after its last requeue ran again: it has a process (a Pending job's cancel has none).
    older = [
        *cursor.execute(f"SELECT {columns}, pid IS NOT NULL AS ran, history FROM jobs WHERE started_at IS NOT NULL"),
        *cursor.execute(f"SELECT {columns}, 1 AS ran, NULL AS history FROM job_history WHERE started_at IS NOT NULL"),
    ]
    insert = (
        f"INSERT OR IGNORE INTO job_runs (job_id, run, {', '.join(held)}, started_at, ended_at)"
        f" VALUES (?, ?, {', '.join('?' for _ in held)}, ?, ?)"
    )
    for row in older:
        ran_again = row["phase"] == "Running" or bool(row["ran"])
        spans = runs.from_history(row["phase"], ran_again, row["started_at"], row["finished_at"], loads(row["history"]))
        job = tuple(row[k] for k in held)
        con.executemany(insert, [(row["id"], n, *job, start, end) for n, (start, end) in enumerate(spans, 1)])


# Ordered migrations: _MIGRATIONS[v] upgrades a ledger from version v to v+1 (SQL, or a function
# of the connection); they run before ``_SCHEMA``, whose ``IF NOT EXISTS`` statements then add new
# tables, indexes and triggers.
_MIGRATIONS: dict = {
    1: "ALTER TABLE jobs ADD COLUMN rev INTEGER NOT NULL DEFAULT 0",
    2: """
ALTER TABLE jobs ADD COLUMN priority TEXT NOT NULL DEFAULT 'normal';
ALTER TABLE jobs ADD COLUMN borrowed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN preempted TEXT;
ALTER TABLE jobs ADD COLUMN history TEXT
""",
    3: _runs_of_older_jobs,
}


class LedgerError(RuntimeError):
    """The ledger cannot be used (written by a newer version, unreadable)."""


class Ledger:
    """Connections and transactions on the ledger file; rows are ``sqlite3.Row``."""

    def __init__(self, path: str | os.PathLike, busy_timeout: float = 30.0):
        self.path = os.fspath(path)
        self.busy_timeout = busy_timeout
        self._local = threading.local()
        self._folder = os.path.dirname(os.path.abspath(self.path))
        #: why the ledger could not be created or upgraded (its directory is full or read-only);
        #: None once it has been
        self.startup_error = None
        self._retry_at = 0.0  # monotonic time before which reads do not try to create it again
        self.beacon = ChangeBeacon(self.path + changebeacon.SUFFIX)
        self._setup()

    def _setup(self, quiet: bool = True) -> bool:
        """Create or upgrade the ledger; False, with the reason in ``startup_error``, when its
        directory is full or read-only (raised unless ``quiet``). Other errors (a newer schema,
        a corrupt file) raise. The connection that made it becomes this thread's."""
        self._retry_at = time.monotonic() + CREATE_RETRY
        try:
            make_private_dir(self._folder)
            con = self._connect()
            try:
                self._create(con)
            except BaseException:
                con.close()
                raise
        except (sqlite3.Error, OSError) as e:
            error = storage_error(e, self._folder)
            if error is None:
                raise
            self.startup_error = error
            if not quiet:
                raise
            return False
        self._local.con = (os.getpid(), con)
        self.startup_error = None
        self.sync_beacon(force=True)  # an old beacon file may count above a ledger made anew
        return True

    def _ready(self, write: bool) -> bool:
        """Whether the ledger has its schema; until it has, try to create it again: a write always
        (raising why it still cannot), a read at most every ``CREATE_RETRY`` seconds, so a balance
        read stays cheap meanwhile."""
        if self.startup_error is None:
            return True
        if not write and time.monotonic() < self._retry_at:
            return False
        return self._setup(quiet=not write)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction: committed whole on success, rolled back on error.

        Bumps ``generation`` when the transaction changed anything.
        """
        committed = None
        with self._transaction("BEGIN IMMEDIATE") as con:
            before = con.total_changes
            yield con
            if con.total_changes != before:
                con.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
                committed = generation(con)
        if committed is not None:  # after the commit: a reader that sees it sees the rows
            self.beacon.publish(committed)

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every statement inside sees the same snapshot."""
        with self._transaction("BEGIN") as con:
            yield con

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        own, kept = self._connection(write=begin != "BEGIN")
        if not kept and begin != "BEGIN":  # never write to a fallback reader: the file gives the real error
            own.close()
            own = self._connect()
        con = own if not (kept and own.in_transaction) else self._connect()  # a nested transaction: its own
        try:
            with _begun(con, begin):
                yield con
        finally:
            if con is not own:
                con.close()
            if not kept:
                own.close()

    def published_generation(self) -> int:
        """:meth:`generation` as the writers published it (``changebeacon``): no SQLite read,
        for a balance read's validator. It may trail a commit by the moment between the commit
        and its publish (or, after a writer died there, until ``sync_beacon``)."""
        value = self.beacon.read()
        return self.generation() if value is None else value

    def sync_beacon(self, force: bool = False) -> int:
        """Publish the generation SQLite holds (a writer that died before publishing, or with
        ``force`` a ledger opened anew whose counter is below an old beacon file's); returns it."""
        value = self.generation()
        self.beacon.publish(value, force=force)
        return value

    def generation(self) -> int:
        """The change counter: equal values mean no job changed in between.

        The hot path of every balance read: one row, on the thread's connection (autocommit
        outside a transaction, so each read sees the latest commit of any process).
        """
        con, kept = self._connection()
        if kept:
            return generation(con)
        with closing(con):
            return generation(con)

    def _connection(self, write: bool = False) -> tuple[sqlite3.Connection, bool]:
        """This thread's connection, and whether it is kept (a caller closes one that is not).

        Opened on first use (again in a forked child: a connection must not cross a fork). On a
        full or read-only file system it may be a fallback reader that is not kept (``_reader``).
        None is kept before the ledger has its schema: it would go on reading a file without it.
        """
        pid, con = getattr(self._local, "con", (None, None))
        if pid == os.getpid():
            return con, True
        ready = self._ready(write)  # a write raises when the ledger still cannot be created
        con, kept = self._reader(live=ready or _size(self.path) > 0)
        if kept and not ready and not _has_schema(con):
            # Another thread or process is creating it: the file is there, its schema not yet
            # committed. Until it is, the ledger is empty (tests/test_state_dir.py).
            con.close()
            con, kept = _empty_ledger(), False
        if kept and ready:
            self._local.con = (os.getpid(), con)
        return con, kept and ready

    def _reader(self, live: bool = True) -> tuple[sqlite3.Connection, bool]:
        """A connection to read with, and whether it follows later commits (may be kept).

        A WAL database is read through its ``-shm`` index, which a new reader must create when no
        connection has it open. On a full or read-only file system that fails, so the reader falls
        back to the file as it is (``immutable``): complete when there is no WAL left to replay,
        as after a clean close; an empty ledger when there is no file yet. With a WAL left, only
        the error remains: a reader that skipped it would miss commits. Without ``live`` it goes
        to the fallback at once (opening a ledger not yet created would create an empty file).
        """
        con = None
        try:
            if live:
                con = self._connect()
                con.execute("PRAGMA schema_version").fetchone()  # opens the WAL index, or fails
                return con, True
        except sqlite3.Error as e:
            if con is not None:
                con.close()
            if storage_error(e, self._folder) is None or _has_wal(self.path):
                raise
        if _size(self.path) > 0:
            con = sqlite3.connect(
                f"{Path(self.path).absolute().as_uri()}?immutable=1",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
            con.row_factory = sqlite3.Row
            return con, False
        return _empty_ledger(), False

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False)
        con.row_factory = sqlite3.Row
        con.execute("PRAGMA synchronous = FULL")
        return con

    def _create(self, con: sqlite3.Connection) -> None:
        """Create or upgrade the schema on ``con``; safe when several processes open a new ledger at once.

        Not on a thread's kept connection: none is kept before the ledger has its schema (see
        ``_connection``).
        """
        # journal_mode is persistent: recorded in the file for every later connection. Another
        # process creating the same new ledger can make the switch fail at once (sqlitebusy.py).
        retry_busy(lambda: con.execute("PRAGMA journal_mode = WAL").fetchone())
        with _begun(con, "BEGIN IMMEDIATE"):
            exists = con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
            version = SCHEMA_VERSION
            if exists:
                row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                version = row[0] if row else SCHEMA_VERSION
            if version > SCHEMA_VERSION:
                raise LedgerError(
                    f"ledger {self.path} has schema version {version}; this jupyter_quota "
                    f"understands up to {SCHEMA_VERSION}: upgrade jupyter_quota"
                )
            self._create_schema(con, version)

    @staticmethod
    def _create_schema(con: sqlite3.Connection, version: int = SCHEMA_VERSION) -> None:
        """Migrations from ``version``, then tables, indexes, triggers and the meta rows, on ``con``."""
        for v in range(version, SCHEMA_VERSION):
            if callable(_MIGRATIONS[v]):
                _MIGRATIONS[v](con)
                continue
            for statement in _statements(_MIGRATIONS[v]):
                con.execute(statement)
        for statement in (*_statements(_SCHEMA), *_statements(_RUNS), *_TRIGGERS):
            con.execute(statement)
        con.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (SCHEMA_VERSION,),
        )
        con.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('generation', 0)")


# Queries shared by the backend; each takes a connection inside a transaction.


def generation(con: sqlite3.Connection) -> int:
    return con.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0]


def find(con: sqlite3.Connection, namespace: str, name: str) -> sqlite3.Row | None:
    return con.execute("SELECT * FROM jobs WHERE namespace = ? AND name = ?", (namespace, name)).fetchone()


def find_id(con: sqlite3.Connection, job_id: int) -> sqlite3.Row | None:
    return con.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()


def live_in_namespace(con: sqlite3.Connection, namespace: str) -> list[sqlite3.Row]:
    """Pending and Running jobs of a namespace: what its quota counts."""
    # Left to itself SQLite walks jobs_in_namespace to skip the sort, i.e. every kept job of the
    # namespace on each balance read after a change; the live ones are few (tests/local/test_ledger_plans.py).
    return con.execute(
        "SELECT * FROM jobs INDEXED BY jobs_by_namespace WHERE namespace = ? AND phase IN (?, ?) ORDER BY id",
        (namespace, *LIVE),
    ).fetchall()


def page_in_namespace(con: sqlite3.Connection, namespace: str, limit: int, before: int | None) -> list[sqlite3.Row]:
    """At most ``limit`` jobs of a namespace, newest first, with ids below ``before`` (if given)."""
    return con.execute(
        "SELECT * FROM jobs INDEXED BY jobs_in_namespace WHERE namespace = ? AND id < ? ORDER BY id DESC LIMIT ?",
        (namespace, _NO_ID if before is None else before, limit),
    ).fetchall()


def count_in_namespace(con: sqlite3.Connection, namespace: str, before: int) -> int:
    """How many jobs of a namespace have ids below ``before``."""
    return con.execute(
        "SELECT count(*) FROM jobs INDEXED BY jobs_in_namespace WHERE namespace = ? AND id < ?",
        (namespace, before),
    ).fetchone()[0]


_NO_ID = 2**63 - 1  # above every id: SQLite's largest integer


def in_phase(con: sqlite3.Connection, phase: str) -> list[sqlite3.Row]:
    """Jobs of every namespace in one phase, oldest first."""
    return con.execute("SELECT * FROM jobs WHERE phase = ? ORDER BY id", (phase,)).fetchall()


def live(con: sqlite3.Connection) -> list[sqlite3.Row]:
    """What the scheduler needs of every Pending and Running job, oldest first."""
    return con.execute(f"SELECT {_SCHEDULING} FROM jobs WHERE phase IN (?, ?) ORDER BY id", LIVE).fetchall()


def changed_since(con: sqlite3.Connection, generation: int) -> list[sqlite3.Row]:
    """What the scheduler needs of every job changed after ``generation``, oldest first."""
    # The index, not a scan in id order (what the planner picks without statistics).
    rows = con.execute(f"SELECT {_SCHEDULING} FROM jobs INDEXED BY jobs_by_rev WHERE rev > ?", (generation,)).fetchall()
    return sorted(rows, key=lambda row: row["id"])


def live_rows(con: sqlite3.Connection) -> list[sqlite3.Row]:
    """Every Pending and Running job, whole rows, oldest first (the metrics' first look)."""
    return con.execute("SELECT * FROM jobs WHERE phase IN (?, ?) ORDER BY id", LIVE).fetchall()


def rows_changed_since(con: sqlite3.Connection, generation: int) -> list[sqlite3.Row]:
    """Whole rows of every job changed after ``generation``, oldest first (the metrics' next looks)."""
    rows = con.execute("SELECT * FROM jobs INDEXED BY jobs_by_rev WHERE rev > ?", (generation,)).fetchall()
    return sorted(rows, key=lambda row: row["id"])


_SCHEDULING = "id, namespace, name, phase, reason, message, gpu_indices, pod, usage, priority, borrowed, preempted"


def insert(con: sqlite3.Connection, row: dict) -> None:
    columns = ", ".join(row)
    marks = ", ".join("?" for _ in row)
    con.execute(f"INSERT INTO jobs ({columns}) VALUES ({marks})", tuple(row.values()))


def update(con: sqlite3.Connection, job_id: int, expect_phase: str, **values) -> bool:
    """Set ``values`` on a job still in ``expect_phase``; False when another writer moved it."""
    sets = ", ".join(f"{k} = ?" for k in values)
    cur = con.execute(
        f"UPDATE jobs SET {sets} WHERE id = ? AND phase = ?",
        (*values.values(), job_id, expect_phase),
    )
    return cur.rowcount == 1


def loads(text: str | None, default=None):
    """JSON column to Python (None stays ``default``)."""
    return default if text is None else json.loads(text)


def dumps(value) -> str:
    """Python to a JSON column; quantities and other str-like values become their strings."""
    return json.dumps(value, default=str, separators=(",", ":"), sort_keys=True)


def _statements(script: str) -> list[str]:
    """Split a schema script into statements (no semicolons inside our statements)."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


@contextmanager
def _begun(con: sqlite3.Connection, begin: str) -> Iterator[sqlite3.Connection]:
    """A transaction on ``con``: committed on success, rolled back on error."""
    try:
        con.execute(begin)
        yield con
        con.execute("COMMIT")
    except BaseException:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise


def _empty_ledger() -> sqlite3.Connection:
    """An empty ledger in memory: what a reader sees before the file has its schema."""
    con = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    Ledger._create_schema(con)
    con.row_factory = sqlite3.Row
    return con


def _has_schema(con: sqlite3.Connection) -> bool:
    return con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone() is not None


def _has_wal(path: str) -> bool:
    """Whether commits may wait in the ``-wal`` file, unseen by a reader of the main file alone."""
    return _size(path + "-wal") > 0


def _size(path: str) -> int:
    """The size of a file, 0 when there is none."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
