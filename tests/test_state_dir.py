"""A full or read-only state directory: writes answer 507 saying what and where; reads are still served.

The state dir is a tmpfs of its own, made read-only with ``mount -o remount,ro`` or filled to the
brim, under a real ``jupyter server`` process (chmod would not stop the root user tests run as).
"""

from __future__ import annotations

import getpass
import subprocess
import sys
import time
from pathlib import Path

import pytest
from local_testing import downgrade_to_version_1
from server_process import ServerProcess

from jupyter_quota.backends.local import ledger as ledger_mod

ADMIN = f"c.JupyterQuota.admin_users = [{getpass.getuser()!r}]\n"
PROFILE = {"namespace": "team-gamma", "users": ["ann"], "hard": {"requests.nvidia.com/gpu": "1"}}


def mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True)


@pytest.fixture
def state_tmpfs(tmp_path) -> Path:
    """A 16 MiB tmpfs for the state dir; skipped, saying why, where mounting is impossible."""
    state = tmp_path / "state"
    state.mkdir()
    done = mount("-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(state))
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs for the state dir (needs root with CAP_SYS_ADMIN): {done.stderr.strip()}")
    yield state
    subprocess.run(["umount", "-l", str(state)], check=False)


@pytest.fixture
def server(state_tmpfs, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    srv = ServerProcess(state_tmpfs, root, extra_config=ADMIN)
    yield srv
    srv.stop()


def run_a_job(srv: ServerProcess) -> str:
    status, job = srv.call("POST", "/namespaces/team-alpha/jobs", {"args": ["--lines", "3"], "gpus": 1})
    assert status == 201, job
    deadline = time.monotonic() + 60
    while job["phase"] not in ("Succeeded", "Failed"):
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
        status, job = srv.call("GET", f"/namespaces/team-alpha/jobs/{job['name']}")
    assert job["phase"] == "Succeeded", job
    return job["name"]


def assert_reads_are_served(srv: ServerProcess, name: str) -> None:
    status, balance = srv.call("GET", "/namespaces/team-alpha/balance")
    assert status == 200 and balance["resources"]["requests.nvidia.com/gpu"]["used"] == "0", balance
    status, listed = srv.call("GET", "/namespaces")
    assert status == 200 and [n["name"] for n in listed["namespaces"]] == ["team-alpha", "team-beta"], listed
    status, jobs = srv.call("GET", "/namespaces/team-alpha/jobs")
    assert status == 200 and [j["name"] for j in jobs["jobs"]] == [name], jobs
    status, job = srv.call("GET", f"/namespaces/team-alpha/jobs/{name}")
    assert status == 200 and job["phase"] == "Succeeded", job
    status, logs = srv.call("GET", f"/namespaces/team-alpha/jobs/{name}/logs")
    assert status == 200 and logs["logs"], logs


def assert_storage_error(answer, reason: str, srv: ServerProcess) -> None:
    status, body = answer
    assert status == 507, body
    assert body["reason"] == reason, body
    assert str(srv.state_dir) in body["message"], body


def test_a_read_only_state_dir_serves_reads_and_refuses_writes_with_507(server):
    name = run_a_job(server.start())
    server.stop()
    done = mount("-o", "remount,ro", str(server.state_dir))
    assert done.returncode == 0, done.stderr

    server.start()  # the extension loads on a read-only state dir
    assert_reads_are_served(server, name)
    submit = server.call("POST", "/namespaces/team-alpha/jobs", {"args": [], "gpus": 1})
    assert_storage_error(submit, "StateDirectoryReadOnly", server)
    assert "read-only" in submit[1]["message"]
    assert_storage_error(server.call("DELETE", f"/namespaces/team-alpha/jobs/{name}"), "StateDirectoryReadOnly", server)
    assert_storage_error(server.call("PUT", "/profiles/gamma", PROFILE), "StateDirectoryReadOnly", server)
    assert_reads_are_served(server, name)
    assert "Traceback" not in server.log()


def fill(directory: Path) -> Path:
    """Write a file until the file system has no block left."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
        try:
            while True:
                f.write(b"\0")
        except OSError:
            pass
    return filler


def test_a_full_state_dir_serves_reads_and_refuses_writes_with_507(server):
    name = run_a_job(server.start())
    filler = fill(server.state_dir)

    assert_reads_are_served(server, name)
    submit = server.call("POST", "/namespaces/team-alpha/jobs", {"args": [], "gpus": 1})
    assert_storage_error(submit, "StateDirectoryFull", server)
    assert "full" in submit[1]["message"]
    assert_storage_error(server.call("PUT", "/profiles/gamma", PROFILE), "StateDirectoryFull", server)
    assert not list(server.state_dir.glob(".profiles.*")), "a half-written profiles file was left behind"

    server.stop()
    server.start()  # and the extension loads on a full state dir
    assert_reads_are_served(server, name)
    assert_storage_error(
        server.call("POST", "/namespaces/team-alpha/jobs", {"args": [], "gpus": 1}), "StateDirectoryFull", server
    )

    filler.unlink()  # space again: writes work again, without a restart
    status, job = server.call("POST", "/namespaces/team-alpha/jobs", {"args": [], "gpus": 1})
    assert status == 201, job
    assert "Traceback" not in server.log()


def test_a_new_read_only_state_dir_serves_an_empty_balance(server):
    done = mount("-o", "remount,ro", str(server.state_dir))
    assert done.returncode == 0, done.stderr

    server.start()  # no ledger yet, and none can be made
    status, balance = server.call("GET", "/namespaces/team-alpha/balance")
    assert status == 200 and balance["resources"]["requests.nvidia.com/gpu"]["remaining"] == "2", balance
    status, jobs = server.call("GET", "/namespaces/team-alpha/jobs")
    assert status == 200 and jobs["jobs"] == [], jobs
    assert_storage_error(
        server.call("POST", "/namespaces/team-alpha/jobs", {"args": [], "gpus": 1}), "StateDirectoryReadOnly", server
    )
    assert not (server.state_dir / "ledger.sqlite3").exists()


def test_a_ledger_that_could_not_be_created_is_created_once_the_state_dir_is_writable(server):
    done = mount("-o", "remount,ro", str(server.state_dir))
    assert done.returncode == 0, done.stderr
    server.start()  # no ledger, and none can be made
    status, balance = server.call("GET", "/namespaces/team-alpha/balance")
    assert status == 200, balance

    done = mount("-o", "remount,rw", str(server.state_dir))  # writable again, without a restart
    assert done.returncode == 0, done.stderr
    for _ in range(3):  # reads first: they must not settle on an empty ledger file
        status, balance = server.call("GET", "/namespaces/team-alpha/balance")
        assert status == 200 and balance["resources"]["requests.nvidia.com/gpu"]["remaining"] == "2", balance
        status, jobs = server.call("GET", "/namespaces/team-alpha/jobs")
        assert status == 200 and jobs["jobs"] == [], jobs
    name = run_a_job(server)
    assert_reads_are_served(server, name)
    assert "Traceback" not in server.log()


def test_a_version_1_ledger_on_a_read_only_state_dir_is_upgraded_once_it_is_writable(state_tmpfs):
    path = state_tmpfs / "ledger.sqlite3"
    made = subprocess.run(
        [sys.executable, "-c", f"from jupyter_quota.backends.local import ledger; ledger.Ledger({str(path)!r})"],
        capture_output=True,
        text=True,
    )  # in a process of its own: it leaves no file open
    assert made.returncode == 0, made.stderr
    downgrade_to_version_1(path)
    done = mount("-o", "remount,ro", str(state_tmpfs))
    assert done.returncode == 0, done.stderr
    book = ledger_mod.Ledger(path)
    assert book.startup_error is not None and book.startup_error.reason == "StateDirectoryReadOnly"
    assert book.generation() == 0  # reads are served meanwhile

    done = mount("-o", "remount,rw", str(state_tmpfs))
    assert done.returncode == 0, done.stderr
    with book.write() as con:  # the upgrade is tried again, without a new Ledger
        ledger_mod.insert(
            con,
            {
                "namespace": "team-alpha",
                "name": "new",
                "team": "alpha",
                "owner": "ann",
                "phase": "Pending",
                "args": "[]",
                "gpus": 0,
                "pod": "{}",
                "usage": "{}",
                "job": "{}",
                "created_at": "2026-11-30T12:00:00Z",
            },
        )
    with book.read() as con:
        assert (
            con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
            == ledger_mod.SCHEMA_VERSION
        )
        assert [r["name"] for r in ledger_mod.changed_since(con, 0)] == ["new"]  # its rev set by the trigger
    assert book.startup_error is None


def test_a_read_while_another_thread_creates_the_ledger_sees_an_empty_ledger(state_tmpfs, monkeypatch):
    """The race CI hit: one thread creates the ledger (its schema not yet committed, the file
    already there) while another reads; the reader must not open the half-made file."""
    import threading

    path = state_tmpfs / "ledger.sqlite3"
    assert mount("-o", "remount,ro", str(state_tmpfs)).returncode == 0
    book = ledger_mod.Ledger(path)
    assert book.startup_error is not None
    assert mount("-o", "remount,rw", str(state_tmpfs)).returncode == 0

    creating, go_on = threading.Event(), threading.Event()
    create_schema = ledger_mod.Ledger._create_schema

    def slow_create_schema(con, version=ledger_mod.SCHEMA_VERSION):
        if threading.current_thread() is creator:  # the reader's empty in-memory ledger is made at once
            creating.set()  # the file exists now, without a committed schema
            assert go_on.wait(60)
        create_schema(con, version)

    monkeypatch.setattr(ledger_mod.Ledger, "_create_schema", staticmethod(slow_create_schema))
    book._retry_at = 0.0  # the next read tries to create it
    creator = threading.Thread(target=book.generation)
    creator.start()
    try:
        assert creating.wait(60)
        assert path.stat().st_size > 0
        with book.read() as con:  # another thread, meanwhile
            assert ledger_mod.live(con) == []
    finally:
        go_on.set()
        creator.join(60)
    assert book.startup_error is None
    with book.read() as con:
        assert ledger_mod.live(con) == []
