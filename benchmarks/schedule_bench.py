#!/usr/bin/env python
"""Admissions through the local backend's ledger, by length of the queue of Pending jobs.

    python benchmarks/schedule_bench.py [--queues 0,2000,10000] [--submits 400] [--clients 1,8] [--teams 100]

For each queue length N: a fresh ledger gets N Pending jobs spread over ``--teams`` namespaces
(written straight into the ledger as admission writes them, with their scheduling decision, so
filling is quick), then a new backend (a fresh server process's view) takes one scheduling pass
(it reads the whole queue once) and makes one submission into each namespace it will submit
into (timed apart: a server's first admission in a namespace reads that namespace's live jobs
once, see ``quotausage``). Then ``--submits`` jobs go through the real ``submit``: admission and
the scheduling pass in one ledger transaction, until the job's decision (reason and message) is
committed. The submissions go, in turn, to as many namespaces of their own, so the figures show
the scheduler. A second series submits into the queue's own namespaces instead (N / ``--teams``
live jobs each), which shows the admission's quota check too.
The machine declares no GPUs and every job asks for one, so each decision is ``Unschedulable``
and no process is started: what is measured is the ledger and the scheduler.

One commit with ``synchronous=FULL`` (an fsync) is the floor of an admission from one client:
the benchmark measures it on the same disk first and prints the rate it allows. With several
clients (threads, as the server's request threads), admissions that wait for the ledger share a
transaction (group commit), so the rate can pass that floor.

Prints admissions per second per queue length, and the ratio to the empty queue; asserts nothing.
"""

from __future__ import annotations

import argparse
import getpass
import sqlite3
import tempfile
import threading
import time
from pathlib import Path

from jupyter_quota import quota, reasons
from jupyter_quota.backends.local import LocalBackend, admission, ledger, scheduler
from jupyter_quota.jobspec import build_job, parse_job_request
from jupyter_quota.profiles import TeamProfile

INVENTORY = {"source": "declared", "gpus": [], "cpu": "32", "memory": "256Gi"}
LIMIT_RANGE = {
    "limits": [
        {
            "type": "Container",
            "default": {"cpu": "4", "memory": "32Gi"},
            "defaultRequest": {"cpu": "2", "memory": "16Gi"},
        }
    ]
}
HARD = {"requests.nvidia.com/gpu": "100000", "requests.cpu": "1000000", "limits.memory": "100000Ti", "pods": "100000"}


def profiles(teams: int, prefix: str = "team") -> list[TeamProfile]:
    return [
        TeamProfile(team=f"{prefix}{i:03d}", namespace=f"{prefix}-{i:03d}", hard=HARD, limitRange=LIMIT_RANGE)
        for i in range(teams)
    ]


def job(profile: TeamProfile, name: str) -> dict:
    request = parse_job_request({"name": name, "args": ["--model", "m"], "gpus": 1}, profile)
    return build_job(profile, request, getpass.getuser(), ["true"])


def fill(path: Path, teams: list[TeamProfile], queue: int) -> None:
    """``queue`` Pending jobs, as admission and a scheduling pass leave them, in one transaction."""
    book = ledger.Ledger(path)
    owner = getpass.getuser()
    decision = scheduler.schedule(INVENTORY, [], [scheduler.Pending(0, {scheduler.GPU: "1"})])[0]
    with book.write() as con:
        for i in range(queue):
            profile = teams[i % len(teams)]
            spec = job(profile, f"queued-{i:05d}")
            admitted = quota.admit_job(spec, [], profile.limit_ranges())
            row = admission.job_row(profile, spec, owner, admitted)
            ledger.insert(con, dict(row, reason=decision.reason, message=decision.message))


def commit_floor(directory: Path, commits: int = 200) -> float:
    """Seconds one ``BEGIN IMMEDIATE``/``COMMIT`` of one small row takes, as the ledger commits."""
    con = sqlite3.connect(directory / "floor.sqlite3", isolation_level=None)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA synchronous = FULL")
    con.execute("CREATE TABLE t (x)")
    started = time.perf_counter()
    for i in range(commits):
        con.execute("BEGIN IMMEDIATE")
        con.execute("INSERT INTO t VALUES (?)", (i,))
        con.execute("COMMIT")
    con.close()
    return (time.perf_counter() - started) / commits


def rate(
    state: Path, teams: list[TeamProfile], queue: int, submits: int, clients: int, among_queue: bool = False
) -> dict:
    fill(state / "ledger.sqlite3", teams, queue)
    backend = LocalBackend(state / "ledger.sqlite3", state, INVENTORY)
    backend.schedule()  # a new server's first pass reads the whole queue once
    owner = getpass.getuser()
    own = teams if among_queue else profiles(len(teams), prefix="bench")
    specs = [(own[i % len(own)], job(own[i % len(own)], f"new-{i:05d}")) for i in range(submits)]
    errors = []
    started = time.perf_counter()
    for profile in own:  # a namespace's first admission in a server reads its live jobs once
        backend.submit(profile, job(profile, "first"), owner)
    first = (time.perf_counter() - started) / len(own)

    def client(mine):
        try:
            for profile, spec in mine:
                got = backend.submit(profile, spec, owner)
                assert got["reason"] == reasons.UNSCHEDULABLE, got  # the decision is recorded
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=client, args=(specs[i::clients],)) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    backend.close()
    if errors:
        raise errors[0]
    return {"queue": queue, "per_s": submits / elapsed, "ms": 1000 * elapsed / submits, "first_ms": 1000 * first}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queues", default="0,2000,10000", help="queue lengths, comma-separated")
    parser.add_argument("--submits", type=int, default=400, help="submissions measured per queue length")
    parser.add_argument("--clients", default="1,8", help="concurrent submitting threads, comma-separated")
    parser.add_argument("--teams", type=int, default=100, help="namespaces the jobs are spread over")
    args = parser.parse_args()
    teams = profiles(args.teams)
    with tempfile.TemporaryDirectory(prefix="jq-schedule-bench-") as tmp:
        floor = commit_floor(Path(tmp))
    print(
        f"one ledger commit (fsync) on this disk: {1000 * floor:.2f} ms, so at most {1 / floor:.0f} "
        f"admissions/s from one writer"
    )
    print(
        f"admissions through the ledger (submit: admission and scheduling decision committed), "
        f"{args.submits} submissions; the queue spread over {args.teams} other namespaces:"
    )
    for among_queue in (False, True):
        if among_queue:
            print(
                f"the same, submitting into the queue's {args.teams} namespaces (each holding "
                f"1/{args.teams} of the queue):"
            )
        for clients in (int(c) for c in args.clients.split(",")):
            base = None
            for queue in (int(q) for q in args.queues.split(",")):
                with tempfile.TemporaryDirectory(prefix="jq-schedule-bench-") as tmp:
                    row = rate(Path(tmp), teams, queue, args.submits, clients, among_queue)
                base = base or row["per_s"]
                print(
                    f"  {clients} client{'s' if clients > 1 else ''}, queue of {queue:6d} Pending: "
                    f"{row['per_s']:5.0f} admissions/s ({row['ms']:.2f} ms each), {row['per_s'] / base:.2f}x "
                    f"the empty queue; each namespace's first: {row['first_ms']:.2f} ms",
                    flush=True,
                )


if __name__ == "__main__":
    main()
