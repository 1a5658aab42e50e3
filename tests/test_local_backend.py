"""The embedded local backend: real SQLite ledgers in tmp_path, real processes, real signals.

Jobs run ``tests/fake_trainer.py`` (prints, sleeps, exits as told) under the supervisor.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import sqlite3
import sys
import threading
import time
from dataclasses import dataclass, field

import pytest

from jupyter_quota import errors
from jupyter_quota.backends.local import LocalBackend, detect_inventory, parse_nvidia_smi
from jupyter_quota.backends.local import ledger as ledger_mod
from jupyter_quota.backends.local import logtail, procfs, retention, scheduler

TRAINER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_trainer.py")
NS = "team-a"
GPU_KEY = "requests.nvidia.com/gpu"
INVENTORY = {
    "source": "declared",
    "gpus": [{"index": i, "model": "A100 80GB", "memory": "80Gi"} for i in range(2)],
    "cpu": "8",
    "memory": "16Gi",
}
NO_GPUS = dict(INVENTORY, gpus=[])
# Trainer args for a job that runs until it is cancelled or the test ends (make_backend kills
# it): a path that can never exist. A job on ``--sleep N`` would race the test's own steps,
# which take seconds on a loaded machine.
UNTIL_CANCELLED = ("--until-file", os.path.join(os.devnull, "never"))


@dataclass
class Profile:
    """Stands in for ``profiles.TeamProfile``: one ResourceQuota, optional LimitRange."""

    team: str = "a"
    namespace: str = NS
    hard: dict = field(default_factory=lambda: {GPU_KEY: "2"})
    limits: list = field(default_factory=list)

    def resource_quotas(self) -> list[dict]:
        return [
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": f"{self.team}-quota", "namespace": self.namespace},
                "spec": {"hard": dict(self.hard)},
            }
        ]

    def limit_ranges(self) -> list[dict]:
        if not self.limits:
            return []
        return [
            {
                "apiVersion": "v1",
                "kind": "LimitRange",
                "metadata": {"name": f"{self.team}-limits", "namespace": self.namespace},
                "spec": {"limits": list(self.limits)},
            }
        ]

    def to_json(self) -> dict:
        return {"team": self.team, "namespace": self.namespace}


def make_job(name, *trainer_args, gpus=1, namespace=NS, cpu="1", memory="1Gi", command=None):
    """A batch/v1 Job shaped as ``jobspec.build_job`` makes it."""
    requests = {"cpu": cpu, "memory": memory}
    limits = {"memory": memory}
    if gpus:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpus)
    argv = command or [sys.executable, TRAINER, *trainer_args]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"jupyter-quota/team": "a", "jupyter-quota/user": "alice", "jupyter-quota/job": name},
            "annotations": {"jupyter-quota/args": json.dumps(list(trainer_args))},
        },
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "train", "image": "local", "command": argv,
                         "resources": {"requests": requests, "limits": limits}}
                    ],
                }
            },
        },
    }


@pytest.fixture
def make_backend(tmp_path):
    """Build backends on one ledger in tmp_path; at the end kill any job still running."""
    ledger_path = tmp_path / "state" / "ledger.sqlite"
    state_dir = tmp_path / "state"

    def make(inventory=INVENTORY, **kwargs):
        kwargs.setdefault("workdir", str(tmp_path))
        return LocalBackend(ledger_path, state_dir, inventory, **kwargs)

    make.ledger_path = ledger_path
    make.state_dir = state_dir
    yield make
    if ledger_path.exists():
        running = _rows(ledger_path, "phase = 'Running'")
        for row in running:
            proc = procfs.ProcessId(row["pid"], row["pid_start"], row["boot_id"])
            if procfs.is_running(proc):
                os.killpg(row["pid"], signal.SIGKILL)
        # A reaper kills what those supervisors left and removes their (emptied) cgroups.
        backend, deadline = make(), time.monotonic() + 30
        while running and time.monotonic() < deadline:
            backend.reap()
            running = _rows(ledger_path, "phase = 'Running'")
            time.sleep(0.02)


def _rows(ledger_path, where="1"):
    con = sqlite3.connect(ledger_path)
    con.row_factory = sqlite3.Row
    try:
        return con.execute(f"SELECT * FROM jobs WHERE {where} ORDER BY id").fetchall()
    finally:
        con.close()


def _live_group_members(pgid):
    """Pids of processes in group ``pgid`` that are not zombies (an orphan's reaping may lag)."""
    live = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            live.append(int(entry))
    return live


def wait_for(backend, profile, name, predicate, timeout=120.0):
    """Reap until ``predicate(job)`` holds; fail with the job's last state if it never does."""
    deadline = time.monotonic() + timeout
    while True:
        backend.reap()
        job = backend.get_job(profile, name)
        if predicate(job):
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting; job is {job}")
        time.sleep(0.02)


def phase_is(*phases):
    return lambda job: job["phase"] in phases


def wait_log(backend, profile, name, text, timeout=120.0):
    deadline = time.monotonic() + timeout
    while text not in backend.logs(profile, name):
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} never appeared in the log: {backend.logs(profile, name)!r}")
        time.sleep(0.02)


# The ledger


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


def downgrade_to_version_1(path) -> None:
    """Turn a ledger back into what version 1 wrote: no rev column, index or triggers."""
    con = sqlite3.connect(path)
    with con:
        for trigger in ("jobs_rev_on_insert", "jobs_rev_on_update"):
            con.execute(f"DROP TRIGGER {trigger}")
        con.execute("DROP INDEX jobs_by_rev")
        con.execute("ALTER TABLE jobs DROP COLUMN rev")
        con.execute("UPDATE meta SET value = 1 WHERE key = 'schema_version'")
    con.close()


def test_a_version_1_ledger_is_upgraded_in_place_and_rows_get_their_rev(tmp_path):
    path = tmp_path / "ledger.sqlite"
    ledger_mod.Ledger(path)
    downgrade_to_version_1(path)
    _insert_raw(path, "old", {"cpu": "1"}, namespace=NS)
    book = ledger_mod.Ledger(path)
    with book.read() as con:
        assert [r["name"] for r in ledger_mod.changed_since(con, -1)] == ["old"]
        assert ledger_mod.changed_since(con, 0) == []  # written before rev existed
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == 2
    with book.write() as con:
        ledger_mod.update(con, 1, "Pending", reason="Seen")
    with book.read() as con:
        assert [r["rev"] for r in con.execute("SELECT rev FROM jobs")] == [book.generation()]


def test_failed_transaction_leaves_nothing_and_keeps_the_generation(tmp_path):
    book = ledger_mod.Ledger(tmp_path / "ledger.sqlite")
    with pytest.raises(RuntimeError):
        with book.write() as con:
            con.execute("UPDATE meta SET value = 5 WHERE key = 'schema_version'")
            raise RuntimeError("crash mid-transaction")
    with book.read() as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == ledger_mod.SCHEMA_VERSION
    assert book.generation() == 0


# Admission


def test_submit_admits_within_quota_and_reports_the_job(make_backend):
    backend, profile = make_backend(NO_GPUS), Profile()
    job = backend.submit(profile, make_job("ft-1", "--sleep", "1"), owner="alice")
    assert job["name"] == "ft-1" and job["namespace"] == NS and job["team"] == "a"
    assert job["owner"] == "alice"
    assert job["phase"] == "Pending"
    assert job["args"] == ["--sleep", "1"]
    assert job["gpus"] == 1 and job["gpuIndices"] == []
    assert job["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert job["resources"]["requests"]["memory"] == "1Gi"
    assert job["createdAt"].endswith("Z") and time.strptime(job["createdAt"], "%Y-%m-%dT%H:%M:%SZ")
    assert [j["name"] for j in backend.list_jobs(profile)] == ["ft-1"]
    gpu = backend.balance(profile)["resources"][GPU_KEY]
    assert (gpu["hard"], gpu["used"], gpu["remaining"]) == ("2", "1", "1")


def test_submit_over_quota_is_refused_with_the_api_servers_text(make_backend):
    backend, profile = make_backend(NO_GPUS), Profile()
    backend.submit(profile, make_job("ft-1", gpus=2), owner="alice")
    with pytest.raises(errors.AdmissionDenied) as refused:
        backend.submit(profile, make_job("ft-2", gpus=1), owner="alice")
    assert refused.value.reason == "ExceededQuota"
    assert refused.value.status == 403
    assert refused.value.message == (
        "exceeded quota: a-quota, requested: requests.nvidia.com/gpu=1, "
        "used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2"
    )
    assert [r["name"] for r in _rows(make_backend.ledger_path)] == ["ft-1"]


def test_count_of_jobs_counts_live_jobs_only(make_backend):
    backend, profile = make_backend(), Profile(hard={"count/jobs.batch": "1"})
    backend.submit(profile, make_job("one", gpus=0), owner="alice")
    with pytest.raises(errors.AdmissionDenied, match="count/jobs.batch=1"):
        backend.submit(profile, make_job("two", gpus=0), owner="alice")
    wait_for(backend, profile, "one", phase_is("Succeeded"))
    # A finished job counts as deleted (ttlSecondsAfterFinished: 0): the slot is free again.
    backend.submit(profile, make_job("two", gpus=0), owner="alice")


def test_name_taken_in_the_namespace_is_a_conflict(make_backend):
    backend, profile = make_backend(NO_GPUS), Profile()
    backend.submit(profile, make_job("ft-1"), owner="alice")
    with pytest.raises(errors.Conflict) as taken:
        backend.submit(profile, make_job("ft-1"), owner="bob")
    assert taken.value.message == 'jobs.batch "ft-1" already exists'
    assert taken.value.status == 409
    # The same name in another namespace is another job.
    other = Profile(team="b", namespace="team-b")
    backend.submit(other, make_job("ft-1", namespace="team-b"), owner="bob")


@pytest.mark.parametrize(
    ("mutate", "text"),
    [
        (lambda j: j["metadata"].update(name="Bad_Name"), 'metadata.name: Invalid value: "Bad_Name"'),
        (lambda j: j["metadata"].update(name="../etc"), 'metadata.name: Invalid value: "../etc"'),
        (lambda j: j["metadata"].update(namespace="team-b"), "does not match the namespace"),
        (lambda j: j["spec"].update(parallelism=2), "spec.parallelism: Invalid value: 2"),
        (lambda j: j["spec"]["template"]["spec"]["containers"][0].update(command=[]),
         "containers[0].command: Required value"),
    ],
)
def test_invalid_jobs_are_refused_before_the_ledger(make_backend, mutate, text):
    backend, profile = make_backend(NO_GPUS), Profile()
    job = make_job("ft-1")
    mutate(job)
    with pytest.raises(errors.Invalid, match=None) as refused:
        backend.submit(profile, job, owner="alice")
    assert text in refused.value.message
    assert _rows(make_backend.ledger_path) == []


def _submit_from_process(ledger_path, state_dir, names, ready, go, results):
    """Runs in a spawned process: its own backend on the shared ledger, submitting ``names``."""
    backend = LocalBackend(ledger_path, state_dir, NO_GPUS)
    profile = Profile()
    ready.set()
    go.wait(30)
    outcome = {"admitted": 0, "denied": 0, "other": []}
    for name in names:
        try:
            backend.submit(profile, make_job(name), owner="proc")
            outcome["admitted"] += 1
        except errors.AdmissionDenied as e:
            outcome["denied"] += 1 if e.reason == "ExceededQuota" else 0
        except Exception as e:  # noqa: BLE001 - reported to the test
            outcome["other"].append(repr(e))
    results.put(outcome)


def test_concurrent_submissions_from_threads_and_processes_never_over_admit(make_backend):
    backend, profile = make_backend(NO_GPUS), Profile()
    ctx = multiprocessing.get_context("spawn")
    go, results = ctx.Event(), ctx.Queue()
    readies = [ctx.Event() for _ in range(2)]
    procs = [
        ctx.Process(
            target=_submit_from_process,
            args=(str(make_backend.ledger_path), str(make_backend.state_dir),
                  [f"proc{p}-{i}" for i in range(10)], readies[p], go, results),
        )
        for p in range(2)
    ]
    for p in procs:
        p.start()
    for ready in readies:
        assert ready.wait(30), "a submitting process never became ready"

    outcomes, lock, start = [], threading.Lock(), threading.Event()

    def submit(i):
        start.wait()
        try:
            backend.submit(profile, make_job(f"thread-{i}"), owner=f"user{i}")
            result = "admitted"
        except errors.AdmissionDenied as e:
            result = f"denied:{e.reason}"
        except Exception as e:  # noqa: BLE001 - reported below
            result = repr(e)
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    go.set()
    start.set()
    for t in threads:
        t.join(60)
    process_outcomes = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0

    assert all(o["other"] == [] for o in process_outcomes), process_outcomes
    assert set(outcomes) <= {"admitted", "denied:ExceededQuota"}, outcomes
    admitted = outcomes.count("admitted") + sum(o["admitted"] for o in process_outcomes)
    denied = outcomes.count("denied:ExceededQuota") + sum(o["denied"] for o in process_outcomes)
    assert admitted == 2
    assert admitted + denied == 70
    # The ledger agrees with itself: two rows, and what they were charged fits the quota.
    rows = _rows(make_backend.ledger_path)
    assert len(rows) == 2
    charged = sum(int(json.loads(r["usage"]).get(GPU_KEY, "0")) for r in rows)
    assert charged <= 2
    assert backend.balance(profile)["resources"][GPU_KEY]["used"] == "2"


def _submit_until_killed(ledger_path, state_dir):
    """Runs in a spawned process: submits jobs as fast as it can until the test kills it."""
    backend = LocalBackend(ledger_path, state_dir, NO_GPUS)
    profile = Profile(hard={GPU_KEY: "100000"})
    i = 0
    while True:
        backend.submit(profile, make_job(f"burst-{i}"), owner="burst")
        i += 1


def test_sigkill_during_a_burst_of_submissions_leaves_a_consistent_ledger(make_backend):
    backend = make_backend(NO_GPUS)
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(
        target=_submit_until_killed, args=(str(make_backend.ledger_path), str(make_backend.state_dir))
    )
    proc.start()
    deadline = time.monotonic() + 30
    while len(_rows(make_backend.ledger_path)) < 8:
        assert time.monotonic() < deadline and proc.is_alive(), "the burst never got going"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    assert proc.exitcode == -signal.SIGKILL

    con = sqlite3.connect(make_backend.ledger_path)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    rows = _rows(make_backend.ledger_path)
    names = [r["name"] for r in rows]
    assert names == [f"burst-{i}" for i in range(len(rows))]  # no gaps, no half rows
    for row in rows:
        assert row["phase"] in ("Pending", "Failed")
        assert json.loads(row["pod"])["spec"]["containers"][0]["name"] == "train"
        assert json.loads(row["usage"])[GPU_KEY] == "1"
        assert json.loads(row["job"])["metadata"]["name"] == row["name"]
        assert row["owner"] == "burst" and row["created_at"].endswith("Z")
    # The ledger is usable afterwards, by a new backend as by the old one.
    big = Profile(hard={GPU_KEY: "100000"})
    assert len(make_backend(NO_GPUS).list_jobs(big)) == len(rows)
    backend.submit(big, make_job("after-crash"), owner="alice")


def test_pages_are_keyset_pages_a_job_submitted_meanwhile_shows_on_no_later_page(make_backend):
    backend, profile = make_backend(NO_GPUS), Profile(hard={GPU_KEY: "100"})
    other = Profile(team="b", namespace="team-b", hard={GPU_KEY: "100"})
    for i in range(7):
        backend.submit(profile, make_job(f"j-{i}"), owner="alice")
        backend.submit(other, make_job(f"o-{i}", namespace="team-b"), owner="bob")
    first = backend.page_jobs(profile, 3)
    assert [j["name"] for j in first.items] == ["j-6", "j-5", "j-4"] and first.remaining == 4
    backend.submit(profile, make_job("late"), owner="alice")
    backend.cancel(profile, "j-3", by="alice")
    second = backend.page_jobs(profile, 3, first.next_start)
    assert [(j["name"], j["phase"]) for j in second.items] == [("j-3", "Failed"), ("j-2", "Pending"), ("j-1", "Pending")]
    assert second.remaining == 1
    third = backend.page_jobs(profile, 3, second.next_start)
    assert [j["name"] for j in third.items] == ["j-0"] and third.next_start is None
    assert [j["name"] for j in backend.page_jobs(profile, 1).items] == ["late"]


# Balance


def test_balance_is_cached_and_revalidated_by_the_generation(make_backend, monkeypatch):
    backend = make_backend(NO_GPUS)
    profile = Profile(limits=[{"type": "Container", "max": {"nvidia.com/gpu": "2"}}])
    backend.submit(profile, make_job("ft-1"), owner="alice")
    scans = []
    real = ledger_mod.live_in_namespace
    monkeypatch.setattr(ledger_mod, "live_in_namespace", lambda con, ns: scans.append(ns) or real(con, ns))

    first = backend.balance(profile)
    assert set(first) == {"namespace", "team", "resources", "quotas", "warnings", "limitRange",
                          "observedAt", "stale"}
    assert first["namespace"] == NS and first["team"] == "a" and first["stale"] is False
    assert first["limitRange"] == {"limits": [{"type": "Container", "max": {"nvidia.com/gpu": "2"}}]}
    assert first["observedAt"].endswith("Z")
    assert first["resources"][GPU_KEY]["used"] == "1"
    for _ in range(5):
        backend.balance(profile)
    assert scans == [NS]  # one scan, then served from the cache

    # Another server process (here: another backend object) writes the ledger: seen at once.
    other = make_backend(NO_GPUS)
    other.submit(profile, make_job("ft-2"), owner="bob")
    assert backend.balance(profile)["resources"][GPU_KEY]["used"] == "2"
    other.cancel(profile, "ft-2", by="bob")
    assert backend.balance(profile)["resources"][GPU_KEY]["used"] == "1"
    assert backend.balance(Profile())["limitRange"] is None


# Lifecycle with real processes


def test_job_runs_succeeds_and_sees_its_gpus(make_backend):
    backend, profile = make_backend(), Profile()
    backend.submit(profile, make_job("ft-1", "--env", "--lines", "3", gpus=2), owner="alice")
    job = wait_for(backend, profile, "ft-1", phase_is("Succeeded", "Failed"))
    assert job["phase"] == "Succeeded", job
    assert job["exitCode"] == 0
    assert job["gpuIndices"] == [0, 1]
    assert job["startedAt"].endswith("Z") and job["finishedAt"].endswith("Z")
    assert "reason" not in job
    log = backend.logs(profile, "ft-1")
    assert "CUDA_VISIBLE_DEVICES=0,1\n" in log
    assert "JUPYTER_QUOTA_JOB=ft-1\n" in log and f"JUPYTER_QUOTA_NAMESPACE={NS}\n" in log
    assert f"cwd={make_backend.state_dir.parent}\n" in log
    assert log.endswith("line 2\nready\nexiting with 0\n")
    assert os.path.exists(make_backend.state_dir / "jobs" / NS / "ft-1" / "output.log")
    # The GPUs are free again: a 2-GPU job starts at once.
    backend.submit(profile, make_job("ft-2", gpus=2), owner="alice")
    assert backend.get_job(profile, "ft-2")["phase"] == "Running"


def test_job_without_gpus_gets_an_empty_cuda_visible_devices(make_backend):
    backend, profile = make_backend(), Profile()
    backend.submit(profile, make_job("cpu-only", "--env", gpus=0), owner="alice")
    wait_for(backend, profile, "cpu-only", phase_is("Succeeded"))
    assert "CUDA_VISIBLE_DEVICES=\n" in backend.logs(profile, "cpu-only")


def test_job_fails_with_its_exit_code_and_last_log_line(make_backend):
    backend, profile = make_backend(), Profile()
    backend.submit(profile, make_job("ft-1", "--exit", "3"), owner="alice")
    job = wait_for(backend, profile, "ft-1", phase_is("Succeeded", "Failed"))
    assert job["phase"] == "Failed"
    assert job["exitCode"] == 3
    assert job["reason"] == "Error"
    assert job["message"] == "exit code 3: exiting with 3"
    assert backend.logs(profile, "ft-1", tail_lines=2) == "ready\nexiting with 3\n"


@pytest.mark.parametrize("command", [["/nonexistent/swift", "sft"], ["no-such-trainer", "sft"]])
def test_a_command_that_cannot_be_found_fails_at_submit_and_is_never_running(make_backend, command):
    backend, profile = make_backend(), Profile()
    job = backend.submit(profile, make_job("nope", command=command), owner="alice")
    assert (job["phase"], job["reason"]) == ("Failed", "StartError")
    assert f"cannot run {command[0]!r}" in job["message"] and "JupyterQuota.job_command" in job["message"]
    assert job.get("startedAt") is None and _rows(make_backend.ledger_path)[0]["pid"] is None
    assert backend.balance(profile)["resources"][GPU_KEY]["used"] == "0"


def test_the_job_command_resolves_in_the_servers_environment_without_it_on_path(make_backend, monkeypatch):
    """A server started as ``.venv/bin/jupyter lab`` without activating the venv: PATH lacks its bin."""
    monkeypatch.setenv("PATH", "/nonexistent-bin")
    backend, profile = make_backend(), Profile()
    script = "import os, sys; print('prefix', sys.prefix); print('path', os.environ['PATH'])"
    backend.submit(profile, make_job("venv", command=["python", "-c", script]), owner="alice")
    job = wait_for(backend, profile, "venv", phase_is("Succeeded", "Failed"))
    log = backend.logs(profile, "venv")
    assert job["phase"] == "Succeeded", (job, log)
    assert f"prefix {sys.prefix}\n" in log
    path = log.split("path ", 1)[1].splitlines()[0].split(os.pathsep)
    assert os.path.dirname(sys.executable) in path and path[-1] == "/nonexistent-bin"


def test_pending_jobs_start_fifo_on_freed_gpus_and_unschedulable_ones_say_why(make_backend):
    backend, profile = make_backend(), Profile(hard={GPU_KEY: "8"})
    for name in ("a", "b", "c"):
        backend.submit(profile, make_job(name, *UNTIL_CANCELLED), owner="alice")
    a, b, c = (backend.get_job(profile, n) for n in "abc")
    assert (a["phase"], a["gpuIndices"]) == ("Running", [0])
    assert (b["phase"], b["gpuIndices"]) == ("Running", [1])
    assert (c["phase"], c["reason"]) == ("Pending", "WaitingForResources")
    assert c["message"] == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."

    big = backend.submit(profile, make_job("big", gpus=3), owner="alice")
    assert (big["phase"], big["reason"]) == ("Pending", "Unschedulable")
    assert big["message"] == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    huge = backend.submit(profile, make_job("huge", gpus=0, cpu="64", memory="1Ti"), owner="alice")
    assert huge["message"] == "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."

    backend.cancel(profile, "a", by="alice")
    c = wait_for(backend, profile, "c", phase_is("Running"))
    assert c["gpuIndices"] == [0] and "reason" not in c
    assert backend.get_job(profile, "big")["reason"] == "Unschedulable"


def _insert_raw(ledger_path, name, requests, namespace="team-b"):
    """A Pending row written straight into the ledger, as an older version admitted it.

    In another team's namespace: the scheduler is shared by every team (admission and balance
    of the row's own namespace are ``badinput``'s tests).
    """
    job = make_job(name, *UNTIL_CANCELLED)
    container = job["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": requests, "limits": {}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": namespace},
           "spec": job["spec"]["template"]["spec"]}
    con = sqlite3.connect(ledger_path)
    with con:
        con.execute(
            "INSERT INTO jobs (namespace, name, team, owner, phase, args, gpus, pod, usage, job, created_at)"
            " VALUES (?, ?, 'a', 'mallory', 'Pending', '[]', 0, ?, '{}', ?, '2026-11-29T08:30:00Z')",
            (namespace, name, json.dumps(pod), json.dumps(job)),
        )
        con.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
    con.close()


@pytest.mark.parametrize("requests", [
    {"ephemeral-storage": "1e200000"},
    {"cpu": "1e200000", "memory": "1Gi"},
    {"nvidia.com/gpu": "1e2147483647"},
])
def test_a_row_the_arithmetic_cannot_carry_fails_and_the_others_start(make_backend, requests):
    backend, profile = make_backend(NO_GPUS), Profile(hard={GPU_KEY: "8"})
    backend.submit(profile, make_job("first", *UNTIL_CANCELLED), owner="alice")  # waits: no GPUs here
    _insert_raw(make_backend.ledger_path, "bad", requests)
    backend.submit(profile, make_job("second", *UNTIL_CANCELLED), owner="alice")
    assert backend.get_job(profile, "second")["reason"] == "Unschedulable"  # its pass was not stopped

    restarted = make_backend()  # a server with GPUs, starting on this ledger
    restarted.reap()
    assert [restarted.get_job(profile, n)["phase"] for n in ("first", "second")] == ["Running", "Running"]
    bad = restarted.get_job(Profile(team="b", namespace="team-b"), "bad")
    assert (bad["phase"], bad["reason"]) == ("Failed", "InvalidJob")
    resource = next(iter(requests))
    assert bad["message"].startswith(f"the job cannot be scheduled: resources.requests[{resource}]")
    assert "out of range" in bad["message"] and "finishedAt" in bad


def test_a_bad_row_written_while_a_server_runs_fails_without_stopping_its_passes(make_backend):
    backend, profile = make_backend(), Profile(hard={GPU_KEY: "8"})
    backend.submit(profile, make_job("first", *UNTIL_CANCELLED), owner="alice")
    _insert_raw(make_backend.ledger_path, "bad", {"cpu": "1e200000"})
    second = backend.submit(profile, make_job("second", *UNTIL_CANCELLED), owner="alice")
    assert (second["phase"], second["gpuIndices"]) == ("Running", [1])
    assert backend.get_job(Profile(team="b", namespace="team-b"), "bad")["reason"] == "InvalidJob"


def test_a_pass_tries_only_new_jobs_until_capacity_frees(make_backend, monkeypatch):
    """Incremental scheduling: waiting jobs are not re-decided on every submission, and an end
    recorded by another server process (one without GPUs, so it starts nothing) is not missed."""
    backend, profile = make_backend(), Profile(hard={GPU_KEY: "100"})
    for name in ("a", "b"):
        backend.submit(profile, make_job(name, *UNTIL_CANCELLED), owner="alice")
    for i in range(5):
        backend.submit(profile, make_job(f"wait-{i}"), owner="alice")
    tried = []  # the jobs each pass of ``backend`` (the one with GPUs) tried
    real = scheduler.schedule

    def spy(inventory, running, pending):
        if inventory["gpus"]:
            tried.append([p.key for p in pending])
        return real(inventory, running, pending)

    monkeypatch.setattr(scheduler, "schedule", spy)
    late = backend.submit(profile, make_job("late"), owner="alice")
    assert late["reason"] == "WaitingForResources"
    assert [len(keys) for keys in tried] == [1]  # the new job only, not the five before it

    other = make_backend(NO_GPUS)
    other.cancel(profile, "a", by="alice")
    wait_for(other, profile, "a", phase_is("Failed"))
    job = wait_for(backend, profile, "wait-0", phase_is("Running"))
    assert job["gpuIndices"] == [0]
    assert len(tried[-1]) == 6  # capacity freed: every waiting job was tried, oldest first
    assert backend.get_job(profile, "wait-1")["reason"] == "WaitingForResources"


def test_admissions_waiting_for_the_ledger_share_one_transaction_and_a_refusal_stays_alone(make_backend, monkeypatch):
    backend, profile = make_backend(NO_GPUS), Profile(hard={GPU_KEY: "2"})
    backend.submit(profile, make_job("taken"), owner="alice")
    writes = []
    real = backend._ledger.write
    monkeypatch.setattr(backend._ledger, "write", lambda: writes.append(1) or real())
    outcomes = {}

    def submit(name, gpus):
        try:
            outcomes[name] = backend.submit(profile, make_job(name, gpus=gpus), owner="alice")["phase"]
        except errors.QuotaError as e:
            outcomes[name] = e.reason

    jobs = [("one", 1), ("taken", 1), ("two", 1)]  # "two" would exceed the quota of 2 GPUs
    with backend._jobs._lock:  # a transaction in progress: the three wait for the next one
        threads = [threading.Thread(target=submit, args=job) for job in jobs]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while len(backend._jobs._queue) < 3:
            assert time.monotonic() < deadline, "the submissions never queued"
            time.sleep(0.01)
    for thread in threads:
        thread.join(30)
    assert outcomes == {"one": "Pending", "taken": "AlreadyExists", "two": "ExceededQuota"}
    assert writes == [1]  # one transaction (one fsync) for the three
    assert [j["name"] for j in backend.list_jobs(profile)] == ["one", "taken"]


def test_scheduler_fit_is_pure_and_skips_what_does_not_fit():
    running = [scheduler.Running({"nvidia.com/gpu": "1", "cpu": "6"}, [1])]
    pending = [
        scheduler.Pending("too-much-cpu", {"cpu": "4"}),
        scheduler.Pending("gpu", {"nvidia.com/gpu": "1", "cpu": "1"}),
        scheduler.Pending("other-gpu", {"nvidia.com/gpu": "1"}),
        scheduler.Pending("foreign", {"example.com/fpga": "1"}),
    ]
    decisions = {d.key: d for d in scheduler.schedule(INVENTORY, running, pending)}
    assert decisions["too-much-cpu"].reason == "WaitingForResources"
    assert decisions["too-much-cpu"].message == "0/1 nodes are available: 1 Insufficient cpu."
    assert decisions["gpu"].start and decisions["gpu"].gpu_indices == [0]
    assert not decisions["other-gpu"].start
    assert decisions["foreign"].reason == "Unschedulable"
    assert decisions["foreign"].message == "0/1 nodes are available: 1 Insufficient example.com/fpga."


# Cancel


def test_cancel_sends_sigterm_to_the_process_group(make_backend):
    # A grace period no loaded machine outlasts: the exit code, not a stopwatch, shows that
    # SIGTERM ended the job (a SIGKILL would give 128 + 9).
    backend, profile = make_backend(grace_period=3600), Profile()
    backend.submit(profile, make_job("ft-1", *UNTIL_CANCELLED), owner="alice")
    wait_log(backend, profile, "ft-1", "ready")
    backend.cancel(profile, "ft-1", by="bob")
    job = wait_for(backend, profile, "ft-1", phase_is("Succeeded", "Failed"))
    assert (job["phase"], job["reason"], job["message"]) == ("Failed", "Cancelled", "cancelled by bob")
    assert job["exitCode"] == 128 + signal.SIGTERM
    assert _live_group_members(_rows(make_backend.ledger_path)[0]["pid"]) == []
    assert backend.balance(profile)["resources"][GPU_KEY]["used"] == "0"


def test_cancel_kills_a_job_that_ignores_sigterm_after_the_grace_period(make_backend):
    # The grace period is an hour, and the test ends it (the deadline is in the ledger), so no
    # stopwatch races a loaded machine: a cancel that waited for the grace period would not
    # return, and a SIGKILL before the deadline would end the job before the test moves it.
    backend, profile = make_backend(grace_period=3600), Profile()
    backend.submit(profile, make_job("stubborn", "--ignore-term", *UNTIL_CANCELLED), owner="alice")
    wait_log(backend, profile, "stubborn", "ready")
    pid = _rows(make_backend.ledger_path)[0]["pid"]
    job = backend.cancel(profile, "stubborn", by="bob")  # returns: not held for the grace period
    assert (job["phase"], job["reason"]) == ("Running", "Terminating")
    assert job["message"].startswith("cancelled by bob")
    time.sleep(0.3)  # time for the SIGTERM to arrive; a slow machine only makes the check weaker
    backend.reap()
    assert backend.get_job(profile, "stubborn")["phase"] == "Running"  # SIGTERM ignored
    con = sqlite3.connect(make_backend.ledger_path)
    with con:  # the grace period is over
        con.execute("UPDATE jobs SET kill_after = 0 WHERE name = 'stubborn'")
        con.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
    con.close()
    job = wait_for(backend, profile, "stubborn", phase_is("Succeeded", "Failed"))
    assert (job["phase"], job["reason"], job["message"]) == ("Failed", "Cancelled", "cancelled by bob")
    assert job["exitCode"] == 128 + signal.SIGKILL
    assert _live_group_members(pid) == []  # the whole group is dead (zombies aside)


def test_cancel_a_pending_job_marks_it_and_a_finished_one_is_unchanged(make_backend):
    backend, profile = make_backend(NO_GPUS), Profile()
    backend.submit(profile, make_job("waiting"), owner="alice")
    job = backend.cancel(profile, "waiting", by="bob")
    assert (job["phase"], job["reason"], job["message"]) == ("Failed", "Cancelled", "cancelled by bob")
    assert job["finishedAt"].endswith("Z")
    assert backend.cancel(profile, "waiting", by="carol") == job  # idempotent
    with pytest.raises(errors.NotFound, match='jobs.batch "ghost" not found'):
        backend.cancel(profile, "ghost", by="bob")


def test_cancel_after_the_job_ended_unrecorded_reports_how_it_really_ended(make_backend):
    backend, profile = make_backend(), Profile()
    backend.submit(profile, make_job("done", "--exit", "0"), owner="alice")
    row = _rows(make_backend.ledger_path)[0]
    proc = procfs.ProcessId(row["pid"], row["pid_start"], row["boot_id"])
    deadline = time.monotonic() + 60
    while procfs.is_running(proc):  # ended, but no reap has recorded it
        assert time.monotonic() < deadline
        time.sleep(0.01)
    job = backend.cancel(profile, "done", by="bob")
    assert (job["phase"], job["exitCode"]) == ("Succeeded", 0)


# Restart recovery


@pytest.mark.parametrize(("code", "phase"), [(0, "Succeeded"), (4, "Failed")])
def test_a_job_outlives_the_server_and_the_next_server_records_its_end(make_backend, tmp_path, code, phase):
    # The job ends when the test touches a file, after both servers saw it Running: a timer
    # could run out while a loaded machine is still between the two.
    release = tmp_path / "release"
    first, profile = make_backend(), Profile()
    first.start()  # with its reaper thread, as a server runs it
    first.submit(profile, make_job("long", "--until-file", str(release), "--exit", str(code)), owner="alice")
    assert first.get_job(profile, "long")["phase"] == "Running"
    pid = _rows(make_backend.ledger_path)[0]["pid"]
    assert os.getsid(pid) == pid and os.getpgid(pid) == pid  # a session of its own
    first.close()  # the server stops; the job must not
    del first

    second = make_backend()
    assert second.get_job(profile, "long")["phase"] == "Running"
    second.reap()
    assert second.get_job(profile, "long")["phase"] == "Running"  # alive, not our child
    assert procfs.identify(pid) is not None
    release.touch()
    job = wait_for(second, profile, "long", phase_is("Succeeded", "Failed"))
    assert job["phase"] == phase and job["exitCode"] == code


def test_a_job_killed_while_no_server_runs_is_lost(make_backend):
    first, profile = make_backend(), Profile()
    first.submit(profile, make_job("doomed", *UNTIL_CANCELLED), owner="alice")
    wait_log(first, profile, "doomed", "ready")
    row = _rows(make_backend.ledger_path)[0]
    proc = procfs.ProcessId(row["pid"], row["pid_start"], row["boot_id"])
    first.close()
    del first
    os.killpg(row["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 60
    while procfs.is_running(proc):
        assert time.monotonic() < deadline
        time.sleep(0.01)

    # The job's own process dies with its group too, a moment later; until the reaper sees none
    # of the job's processes left, the job is Running/Terminating and keeps its GPU.
    second = make_backend()
    deadline = time.monotonic() + 60
    while True:
        second.reap()
        job = second.get_job(profile, "doomed")
        if job["phase"] != "Running":
            break
        assert job["reason"] == "Terminating" and time.monotonic() < deadline, job
        time.sleep(0.02)
    assert (job["phase"], job["reason"]) == ("Failed", "Lost")
    assert "disappeared while the server was not watching" in job["message"]
    assert "exitCode" not in job
    assert second.balance(profile)["resources"][GPU_KEY]["used"] == "0"


def test_reaper_thread_records_ends_without_being_asked(make_backend):
    backend, profile = make_backend(poll_interval=0.05), Profile()
    backend.start()
    try:
        backend.submit(profile, make_job("quick"), owner="alice")
        deadline = time.monotonic() + 60
        while backend.get_job(profile, "quick")["phase"] != "Succeeded":
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        backend.close()


def test_a_missing_workdir_refuses_the_submit_and_fails_a_waiting_job_at_start(make_backend, tmp_path):
    workdir = tmp_path / "soon-gone"
    backend, profile = make_backend(workdir=str(workdir)), Profile(hard={GPU_KEY: "4"})
    with pytest.raises(errors.Forbidden, match="soon-gone .*does not exist"):
        backend.submit(profile, make_job("early"), owner="alice")
    assert _rows(make_backend.ledger_path) == []  # refused before admission
    workdir.mkdir()
    release = tmp_path / "release"
    backend.submit(profile, make_job("first", "--until-file", str(release), gpus=2), owner="alice")
    assert backend.submit(profile, make_job("homeless"), owner="alice")["phase"] == "Pending"
    workdir.rmdir()  # gone while "homeless" waits for a GPU
    release.touch()
    job = wait_for(backend, profile, "homeless", phase_is("Succeeded", "Failed"))
    assert (job["phase"], job["reason"]) == ("Failed", "StartError")
    assert "soon-gone" in job["message"] and "does not exist" in job["message"]
    assert backend.balance(profile)["resources"][GPU_KEY]["used"] == "0"


def test_an_idle_reaper_takes_no_write_lock(make_backend, monkeypatch):
    backend, profile = make_backend(NO_GPUS), Profile()
    backend.submit(profile, make_job("stuck"), owner="alice")  # Pending: Unschedulable
    backend.reap()
    writes = []
    real = backend._ledger.write
    monkeypatch.setattr(backend._ledger, "write", lambda: writes.append(1) or real())
    for _ in range(5):
        backend.reap()
    assert writes == []
    make_backend(NO_GPUS).submit(profile, make_job("other"), owner="bob")
    backend.reap()  # the ledger changed: the next pass looks again
    assert len(writes) == 1
    assert backend.get_job(profile, "other")["reason"] == "Unschedulable"


# Retention of finished jobs


def _history(ledger_path):
    con = sqlite3.connect(ledger_path)
    con.row_factory = sqlite3.Row
    try:
        return {r["name"]: dict(r) for r in con.execute("SELECT * FROM job_history")}
    finally:
        con.close()


def test_finished_jobs_past_their_retention_are_pruned_with_their_logs_and_kept_in_history(make_backend):
    backend, profile = make_backend(retention_seconds=3600, retention_count=-1), Profile()
    backend.submit(profile, make_job("done", "--lines", "1"), owner="alice")
    wait_for(backend, profile, "done", phase_is("Succeeded"))
    backend.submit(profile, make_job("recent", "--lines", "1"), owner="alice")
    wait_for(backend, profile, "recent", phase_is("Succeeded"))
    backend.submit(profile, make_job("live", *UNTIL_CANCELLED), owner="alice")
    done_dir = make_backend.state_dir / "jobs" / NS / "done"
    assert done_dir.is_dir()
    assert backend.prune() == 0  # nothing finished an hour ago yet
    con = sqlite3.connect(make_backend.ledger_path)
    with con:  # as if "done" had finished two hours ago
        con.execute("UPDATE jobs SET finished_at = '2000-01-01T00:00:00Z' WHERE name = 'done'")
        con.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
    con.close()
    assert backend.prune() == 1
    assert [j["name"] for j in backend.list_jobs(profile)] == ["live", "recent"]
    assert not done_dir.exists()
    kept = _history(make_backend.ledger_path)["done"]
    assert (kept["namespace"], kept["team"], kept["owner"], kept["phase"], kept["exit_code"]) == (NS, "a", "alice", "Succeeded", 0)
    assert kept["finished_at"] == "2000-01-01T00:00:00Z" and kept["started_at"] and kept["created_at"]
    assert kept["gpus"] == 1 and json.loads(kept["gpu_indices"]) == [0]
    assert json.loads(kept["resources"])["requests"] == {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
    assert json.loads(kept["usage"])["requests.nvidia.com/gpu"] == "1"
    again = backend.submit(profile, make_job("done", "--lines", "1"), owner="alice")  # the name is free again
    assert again["phase"] == "Running"


def test_a_job_submitted_under_a_pruned_name_keeps_its_directory(make_backend, monkeypatch, tmp_path):
    """A submit of the same name lands between the prune's commit (the name is free) and the
    removal of the pruned job's directory: the new job's log and exit record survive."""
    backend, profile = make_backend(retention_seconds=-1, retention_count=0), Profile()
    backend.submit(profile, make_job("reused", "--lines", "1"), owner="alice")
    wait_for(backend, profile, "reused", phase_is("Succeeded"))
    go = tmp_path / "go"
    remove, resubmitted = retention._remove, []

    def submit_then_remove(directory, log):
        if not resubmitted:  # the name is free once the prune has committed
            job = backend.submit(profile, make_job("reused", "--lines", "1", "--until-file", str(go)), owner="bob")
            resubmitted.append(job)
        remove(directory, log)

    monkeypatch.setattr(retention, "_remove", submit_then_remove)
    assert backend.prune() == 1
    assert resubmitted and resubmitted[0]["phase"] == "Running", resubmitted
    go.touch()
    job = wait_for(backend, profile, "reused", phase_is("Succeeded", "Failed"))
    assert (job["phase"], job["owner"]) == ("Succeeded", "bob"), job
    assert "exiting with 0" in backend.logs(profile, "reused")


def test_a_pruned_jobs_directory_left_behind_by_a_crash_is_removed_by_the_next_prune(make_backend):
    backend, profile = make_backend(retention_seconds=-1, retention_count=0), Profile()
    left = make_backend.state_dir / "jobs" / ".pruned" / "7"  # moved aside, then the server died
    left.mkdir(parents=True)
    (left / "output.log").write_text("old\n")
    backend.submit(profile, make_job("kept", *UNTIL_CANCELLED), owner="alice")  # live: not pruned
    assert backend.prune() == 0
    assert not left.exists()
    assert (make_backend.state_dir / "jobs" / NS / "kept").is_dir()


def test_each_namespace_keeps_its_newest_finished_jobs_pruned_in_bounded_batches(make_backend):
    backend = make_backend(NO_GPUS, retention_seconds=-1, retention_count=2, prune_batch=2)
    a, b = Profile(), Profile(team="b", namespace="team-b")
    for i in range(5):
        backend.submit(a, make_job(f"a-{i}"), owner="alice")
        backend.cancel(a, f"a-{i}", by="alice")
    backend.submit(a, make_job("waiting"), owner="alice")
    backend.submit(b, make_job("b-0", namespace="team-b"), owner="bob")
    backend.cancel(b, "b-0", by="bob")
    assert backend.prune() == 2  # a batch at most
    assert backend.prune() == 1
    assert backend.prune() == 0
    assert [j["name"] for j in backend.list_jobs(a)] == ["waiting", "a-4", "a-3"]
    assert [j["name"] for j in backend.list_jobs(b)] == ["b-0"]
    assert sorted(_history(make_backend.ledger_path)) == ["a-0", "a-1", "a-2"]
    assert _history(make_backend.ledger_path)["a-0"]["reason"] == "Cancelled"


# Logs and inventory


def test_tail_reads_the_end_of_a_big_log_and_caps_bytes(tmp_path):
    path = tmp_path / "output.log"
    path.write_text("".join(f"line {i}\n" for i in range(200_000)))
    assert logtail.tail(path, 3) == "line 199997\nline 199998\nline 199999\n"
    assert logtail.tail(path, 0) == ""
    capped = logtail.tail(path, 10**9, max_bytes=1000)
    assert len(capped) <= 1000 and capped.endswith("line 199999\n")
    assert capped.startswith("line ")  # a cut first line is dropped, not shown half
    assert logtail.tail(tmp_path / "missing.log", 10) == ""
    (tmp_path / "short.log").write_text("a\nb")
    assert logtail.tail(tmp_path / "short.log", 5) == "a\nb"


NVIDIA_SMI_SAMPLE = """\
0, NVIDIA A100-SXM4-80GB, 81920, GPU-3a9b4c1e-8a0f-2b6c-9d1e-4f5a6b7c8d9e
1, NVIDIA A100-SXM4-80GB, 81920, GPU-7f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b
"""


def test_nvidia_smi_output_is_parsed():
    assert parse_nvidia_smi(NVIDIA_SMI_SAMPLE) == [
        {"index": 0, "model": "NVIDIA A100-SXM4-80GB", "memory": "80Gi",
         "uuid": "GPU-3a9b4c1e-8a0f-2b6c-9d1e-4f5a6b7c8d9e"},
        {"index": 1, "model": "NVIDIA A100-SXM4-80GB", "memory": "80Gi",
         "uuid": "GPU-7f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"},
    ]
    assert parse_nvidia_smi("") == []
    with pytest.raises(ValueError):
        parse_nvidia_smi("garbage")


def _fake_nvidia_smi(tmp_path, script):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(0o755)
    return str(bindir)


def test_inventory_comes_from_nvidia_smi_when_it_answers(tmp_path, monkeypatch):
    sample = NVIDIA_SMI_SAMPLE.replace("\n", "\\n")
    monkeypatch.setenv("PATH", _fake_nvidia_smi(tmp_path, f'printf "{sample}"\n'))
    inventory = detect_inventory({"gpus": 8, "cpu": "16", "memory": "64Gi"})
    assert inventory["source"] == "nvidia-smi"
    assert [g["index"] for g in inventory["gpus"]] == [0, 1]
    assert (inventory["cpu"], inventory["memory"]) == ("16", "64Gi")


def test_inventory_falls_back_to_the_declaration(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", _fake_nvidia_smi(tmp_path, "echo 'NVML: driver not loaded' >&2; exit 9\n"))
    declared = {"gpus": 4, "gpuModel": "A100 80GB", "gpuMemory": "80Gi", "cpu": "32", "memory": "256Gi"}
    assert detect_inventory(declared) == {
        "source": "declared",
        "gpus": [{"index": i, "model": "A100 80GB", "memory": "80Gi"} for i in range(4)],
        "cpu": "32",
        "memory": "256Gi",
    }
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    bare = detect_inventory(None)
    assert bare["source"] == "declared" and bare["gpus"] == []
    assert int(bare["cpu"]) >= 1 and bare["memory"] not in ("0", "")


def test_backend_reports_its_inventory(make_backend):
    backend = make_backend()
    assert backend.inventory() == INVENTORY
    backend.inventory()["gpus"].clear()
    assert len(backend.inventory()["gpus"]) == 2


def test_a_second_storage_outage_is_logged_again_after_the_reaper_recovers(make_backend, monkeypatch):
    """The reaper logs a full state dir once per outage, not once per pass, and not once ever: a
    pass that succeeds ends the outage. The ledger's failures are injected into the real reaper
    thread (a full disk needs a mount of its own; tests/test_state_dir.py does that end to end)."""
    records, done = [], threading.Event()
    log = logging.getLogger("test-storage-outage")
    log.propagate = False
    handler = logging.Handler()
    handler.emit = records.append
    log.addHandler(handler)
    backend = make_backend(poll_interval=0.01, log=log)
    real_reap = backend._jobs.reap
    # start()'s pass, then the thread's: full twice, recovered, full again, then fine for good.
    script = iter(["full", "full", "full", "ok", "full", "full"])

    def reap():
        step = next(script, None)
        if step is None:
            done.set()
        if step == "full":
            raise sqlite3.OperationalError("database or disk is full")
        real_reap()

    monkeypatch.setattr(backend._jobs, "reap", reap)
    backend.start()
    try:
        assert done.wait(60), "the reaper thread did not run the scripted passes"
    finally:
        backend.close()
        log.removeHandler(handler)
    warnings = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and "is full" in warnings[0] and warnings[0] == warnings[1], warnings
    assert not [r for r in records if r.levelno >= logging.ERROR], [r.getMessage() for r in records]
