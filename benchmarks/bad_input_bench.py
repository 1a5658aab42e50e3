#!/usr/bin/env python
"""What big-number input costs the server, and what it does to other users' balance reads.

    python benchmarks/bad_input_bench.py [--digits 100000] [--bad 8] [--seconds 8] [--attackers 4]

On a real ``jupyter server`` with the demo teams (``tests/server_process.py``):

1. CPU per bad request: the server process's CPU time (``/proc/<pid>/stat``) spent on each
   ``POST .../jobs`` whose ``resources.requests.cpu`` is a ``--digits``-digit quantity
   (``1000...0``), and its answer (status, latency).
2. Balance reads while bad requests arrive: p50/p99 of ``GET .../balance`` from one client for
   ``--seconds``, first alone, then with ``--attackers`` clients sending bad requests meanwhile.
3. Listing a namespace holding one stored job with a ``--digits``-digit quantity (written into
   the ledger directly, as an older version stored it; phase Failed so that no scheduling runs).

Run it on the code before and after a change with ``PYTHONPATH=<checkout>``. Prints figures and
ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from server_process import ServerProcess  # noqa: E402

NAMESPACE = "team-alpha"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def call(srv: ServerProcess, method: str, path: str, body: bytes | None = None) -> tuple[int, float]:
    request = urllib.request.Request(
        srv.url + path, data=body, method=method, headers={"Authorization": f"token {srv.token}"}
    )
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            response.read()
            status = response.status
    except urllib.error.HTTPError as e:
        e.read()
        status = e.code
    return status, time.perf_counter() - started


def bad_body(digits: int) -> bytes:
    """A job asking for 10^(digits-1) CPUs, written out: the costliest shape for exact parsing."""
    return json.dumps({"args": [], "resources": {"requests": {"cpu": "1" + "0" * (digits - 1)}}}).encode()


def cpu_per_bad_request(srv: ServerProcess, digits: int, count: int, seconds: float = 2.0) -> dict:
    """At least ``count`` requests and ``seconds`` of them, so CPU ticks (10 ms) add up to a figure."""
    body = bad_body(digits)
    before = cpu_seconds(srv.proc.pid)
    answers = []
    deadline = time.monotonic() + seconds
    while len(answers) < count or time.monotonic() < deadline:
        answers.append(call(srv, "POST", f"/namespaces/{NAMESPACE}/jobs", body))
    spent = cpu_seconds(srv.proc.pid) - before
    return {
        "cpu_s_per_request": spent / len(answers),
        "requests": len(answers),
        "statuses": sorted({s for s, _ in answers}),
        "latency_s": statistics.median(t for _, t in answers),
    }


def balance_latency(srv: ServerProcess, seconds: float, attackers: int, digits: int) -> dict:
    stop = threading.Event()
    sent = [0]

    def attack():
        body = bad_body(digits)
        while not stop.is_set():
            call(srv, "POST", f"/namespaces/{NAMESPACE}/jobs", body)
            sent[0] += 1

    threads = [threading.Thread(target=attack, daemon=True) for _ in range(attackers)]
    for t in threads:
        t.start()
    took = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        took.append(call(srv, "GET", f"/namespaces/{NAMESPACE}/balance")[1])
    stop.set()
    for t in threads:
        t.join(timeout=600)
    cuts = statistics.quantiles(took, n=100)
    return {"reads": len(took), "p50_ms": cuts[49] * 1e3, "p99_ms": cuts[98] * 1e3, "bad_requests": sent[0]}


def store_huge_job(state: Path, digits: int) -> None:
    from jupyter_quota.backends.local import ledger

    container = {
        "name": "train",
        "command": ["true"],
        "resources": {"requests": {"cpu": "9" * digits}, "limits": {"cpu": "9" * digits}},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "huge", "namespace": NAMESPACE},
        "spec": {"containers": [container]},
    }
    book = ledger.Ledger(state / "ledger.sqlite3")
    with book.write() as con:
        ledger.insert(
            con,
            {
                "namespace": NAMESPACE,
                "name": "huge",
                "team": "alpha",
                "owner": "bench",
                "phase": "Failed",
                "args": "[]",
                "gpus": 0,
                "pod": json.dumps(pod),
                "usage": "{}",
                "job": json.dumps({"metadata": {"name": "huge"}}),
                "created_at": "2026-01-01T00:00:00Z",
            },
        )


def listing_latency(srv: ServerProcess, reads: int = 20) -> float:
    return statistics.median(call(srv, "GET", f"/namespaces/{NAMESPACE}/jobs")[1] for _ in range(reads))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--digits", type=int, default=100_000)
    parser.add_argument("--bad", type=int, default=2, help="bad requests timed one by one (at least)")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--attackers", type=int, default=4)
    args = parser.parse_args()

    import jupyter_quota

    print(f"jupyter_quota from {Path(jupyter_quota.__file__).parent}")
    with tempfile.TemporaryDirectory() as tmp:
        root, state = Path(tmp) / "root", Path(tmp) / "state"
        root.mkdir()
        state.mkdir()
        store_huge_job(state, args.digits)
        srv = ServerProcess(state, root).start()
        try:
            listing_ms = listing_latency(srv) * 1e3
            bad = cpu_per_bad_request(srv, args.digits, args.bad)
            alone = balance_latency(srv, args.seconds, 0, args.digits)
            attacked = balance_latency(srv, args.seconds, args.attackers, args.digits)
        finally:
            srv.stop()
    print(
        f"bad request ({args.digits} digits, {bad['requests']} sent): "
        f"{bad['cpu_s_per_request'] * 1e3:.1f} ms CPU each, median answer {bad['latency_s'] * 1e3:.1f} ms, "
        f"statuses {bad['statuses']}"
    )
    print(f"balance alone:  p50 {alone['p50_ms']:.2f} ms  p99 {alone['p99_ms']:.2f} ms  ({alone['reads']} reads)")
    print(
        f"balance with {args.attackers} attackers: p50 {attacked['p50_ms']:.2f} ms  p99 {attacked['p99_ms']:.2f} ms "
        f"({attacked['reads']} reads, {attacked['bad_requests']} bad requests)"
    )
    print(f"p99 ratio attacked/alone: {attacked['p99_ms'] / alone['p99_ms']:.1f}x")
    print(f"listing a namespace holding one {args.digits}-digit job: median {listing_ms:.1f} ms")


if __name__ == "__main__":
    main()
