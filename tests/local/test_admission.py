"""Admission (``admission``): the quota checked against the ledger in one transaction, never over-admitted,
from threads and processes alike."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import threading
import time

import pytest
from local_testing import GPU_KEY, NO_GPUS, NS, Profile, ledger_rows, make_job, phase_is, wait_for

from jupyter_quota import errors
from jupyter_quota.backends.local import LocalBackend


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
    assert [r["name"] for r in ledger_rows(make_backend.ledger_path)] == ["ft-1"]


def test_count_of_jobs_counts_live_jobs_only(make_backend):
    backend, profile = make_backend(), Profile(hard={"count/jobs.batch": "1"})
    backend.submit(profile, make_job("one", gpus=0), owner="alice")
    with pytest.raises(errors.AdmissionDenied, match=r"count/jobs\.batch=1"):
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
        (
            lambda j: j["spec"]["template"]["spec"]["containers"][0].update(command=[]),
            "containers[0].command: Required value",
        ),
    ],
)
def test_invalid_jobs_are_refused_before_the_ledger(make_backend, mutate, text):
    backend, profile = make_backend(NO_GPUS), Profile()
    job = make_job("ft-1")
    mutate(job)
    with pytest.raises(errors.Invalid, match=None) as refused:
        backend.submit(profile, job, owner="alice")
    assert text in refused.value.message
    assert ledger_rows(make_backend.ledger_path) == []


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
            args=(
                str(make_backend.ledger_path),
                str(make_backend.state_dir),
                [f"proc{p}-{i}" for i in range(10)],
                readies[p],
                go,
                results,
            ),
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
    rows = ledger_rows(make_backend.ledger_path)
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
    proc = ctx.Process(target=_submit_until_killed, args=(str(make_backend.ledger_path), str(make_backend.state_dir)))
    proc.start()
    deadline = time.monotonic() + 30
    while len(ledger_rows(make_backend.ledger_path)) < 8:
        assert time.monotonic() < deadline and proc.is_alive(), "the burst never got going"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    assert proc.exitcode == -signal.SIGKILL

    con = sqlite3.connect(make_backend.ledger_path)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    rows = ledger_rows(make_backend.ledger_path)
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
