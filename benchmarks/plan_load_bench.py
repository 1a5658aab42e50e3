#!/usr/bin/env python
"""Balance reads while many clients plan at once (``JupyterQuota.max_concurrent_plans``).

    python benchmarks/plan_load_bench.py [--planners 50] [--seconds 10] [--limit N]

Starts a real ``jupyter server`` (demo teams, fresh state dir; ``--limit`` sets
``max_concurrent_plans``, else the server's default), then:

1. one client reads ``GET quota/v1/namespaces/team-alpha/balance`` back to back for
   ``--seconds`` with nothing else running: p50 and p99 latency;
2. the same, while ``--planners`` clients each send ``POST .../team-alpha/plan`` back to back
   (a client answered 429 waits its ``Retry-After``, as a well-behaved client does).

Prints the balance read's p50/p99 in both phases and their ratio, plans answered per second and
the 429s. Run it on an older checkout (``PYTHONPATH=<checkout>``) for the figures before a
change. Asserts nothing.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from server_process import ServerProcess

PLAN = json.dumps({"args": ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "full", "--max_length", "2048"]})


def request(conn: http.client.HTTPConnection, method: str, path: str, token: str, body: str | None = None):
    conn.request(method, "/quota/v1" + path, body=body, headers={"Authorization": f"token {token}"})
    response = conn.getresponse()
    response.read()
    return response.status, response.getheader("Retry-After")


def read_balances(server: ServerProcess, seconds: float) -> list[float]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    latencies = []
    stop = time.perf_counter() + seconds
    while time.perf_counter() < stop:
        t0 = time.perf_counter()
        status, _ = request(conn, "GET", "/namespaces/team-alpha/balance", server.token)
        latencies.append(time.perf_counter() - t0)
        assert status == 200, status
    return latencies


def plan_loop(server: ServerProcess, stop: threading.Event, counts: dict, lock: threading.Lock) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    while not stop.is_set():
        status, retry_after = request(conn, "POST", "/namespaces/team-alpha/plan", server.token, PLAN)
        with lock:
            counts[status] = counts.get(status, 0) + 1
        if status == 429:
            stop.wait(float(retry_after or 1))


def figures(latencies: list[float]) -> tuple[float, float]:
    ms = sorted(x * 1000 for x in latencies)
    return statistics.median(ms), ms[min(len(ms) - 1, int(len(ms) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--planners", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--limit", type=int, help="JupyterQuota.max_concurrent_plans (default: the server's)")
    args = parser.parse_args()
    extra = f"c.JupyterQuota.max_concurrent_plans = {args.limit}\n" if args.limit else ""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server = ServerProcess(root / "state", root, extra_config=extra + "c.ServerApp.log_level = 'WARN'\n").start()
        try:
            request(
                http.client.HTTPConnection("127.0.0.1", server.port, timeout=120),
                "POST",
                "/namespaces/team-alpha/plan",
                server.token,
                PLAN,
            )  # imports and the catalog, once
            idle = figures(read_balances(server, args.seconds))
            stop, lock, counts = threading.Event(), threading.Lock(), {}
            planners = [
                threading.Thread(target=plan_loop, args=(server, stop, counts, lock), daemon=True)
                for _ in range(args.planners)
            ]
            for t in planners:
                t.start()
            loaded = figures(read_balances(server, args.seconds))
            stop.set()
            for t in planners:
                t.join(timeout=120)
        finally:
            server.stop()
    limit = args.limit or "default"
    print(f"max_concurrent_plans = {limit}, {args.planners} planners, {args.seconds:.0f} s a phase")
    print(f"balance read alone:          p50 {idle[0]:7.1f} ms  p99 {idle[1]:7.1f} ms")
    print(
        f"balance read under planning: p50 {loaded[0]:7.1f} ms  p99 {loaded[1]:7.1f} ms"
        f"  ({loaded[0] / idle[0]:.1f}x and {loaded[1] / idle[1]:.1f}x alone)"
    )
    print(
        f"plans answered: {counts.get(200, 0) / args.seconds:.1f}/s; 429: {counts.get(429, 0)}; "
        f"other: { {k: v for k, v in counts.items() if k not in (200, 429)} }"
    )


if __name__ == "__main__":
    main()
