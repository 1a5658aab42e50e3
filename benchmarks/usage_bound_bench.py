#!/usr/bin/env python
"""Issue 25 item 3: ``GET /usage?by=job&step=605`` over a week, bounded, beside other users' balance reads.

    python benchmarks/usage_bound_bench.py [--jobs 3000] [--teams 4] [--readers 2] [--concurrent 3]

Seeds a week of ``--jobs`` jobs (``tests/usage_seed.py``), starts a real ``jupyter server`` on it,
and prints:

1. balance reads alone (``--readers`` threads for 5 s): latency p50, p99, max;
2. ``--concurrent`` usage queries at once (by job, 605-second buckets over the week: about 1,000
   buckets x the jobs), each one's status, time and answer size, with the balance reads running
   beside them: their latency while the queries run, against 1;
3. the server's resident memory before, and its peak (``VmHWM``) during the queries;
4. the step the refusal names, asked for: its status, time, rows and size.

Prints figures; asserts nothing (speed and memory targets live here, not in tests).
"""

from __future__ import annotations

import argparse
import getpass
import http.client
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import usage_seed  # tests/ holds the seeder the usage tests use
from balance_bench import get, start_server, team_profiles

from jupyter_quota import usage
from jupyter_quota.profiles import TeamProfile

WEEK = {
    "since": usage.format_time(usage_seed.WEEK_START),
    "until": usage.format_time(usage_seed.WEEK_START + usage_seed.WEEK),
}


def memory_kb(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    return out


def balance_reads(port: int, token: str, stop: threading.Event, latencies: list[float]) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    while not stop.is_set():
        t0 = time.perf_counter()
        status, _ = get(conn, "/quota/v1/namespaces/team-000/balance", token)
        latencies.append(time.perf_counter() - t0)
        assert status == 200, status


def figures(latencies: list[float]) -> str:
    ms = sorted(x * 1000 for x in latencies)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return f"n={len(ms)} p50={statistics.median(ms):.1f} ms p99={p99:.1f} ms max={ms[-1]:.1f} ms"


def readers_during(port: int, token: str, readers: int, work) -> tuple[list[float], object]:
    stop, latencies = threading.Event(), []
    threads = [threading.Thread(target=balance_reads, args=(port, token, stop, latencies)) for _ in range(readers)]
    for t in threads:
        t.start()
    try:
        result = work()
    finally:
        stop.set()
        for t in threads:
            t.join()
    return latencies, result


def usage_query(port: int, token: str, step: str) -> tuple[int, float, int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    path = "/quota/v1/usage?" + urllib.parse.urlencode({**WEEK, "by": "job", "step": step})
    t0 = time.perf_counter()
    status, body = get(conn, path, token)
    return status, time.perf_counter() - t0, len(body), body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--teams", type=int, default=4)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--concurrent", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        state, root = Path(tmp) / "state", Path(tmp) / "root"
        root.mkdir()
        profiles = [TeamProfile(**p) for p in team_profiles(args.teams)]
        usage_seed.seed(state, profiles, jobs=args.jobs)
        admin = f"c.JupyterQuota.admin_users = [{getpass.getuser()!r}]\n"
        proc, port, token = start_server(state, root, args.teams, admin)
        try:
            print(f"seeded {args.jobs} jobs of {args.teams} teams over the week {WEEK['since']}..{WEEK['until']}")
            alone, _ = readers_during(port, token, args.readers, lambda: time.sleep(5))
            print(f"1. balance reads alone ({args.readers} readers, 5 s): {figures(alone)}")
            before = memory_kb(proc.pid)
            with open(f"/proc/{proc.pid}/clear_refs", "w") as f:
                f.write("5")  # VmHWM back to VmRSS: the peak below is the queries'

            def queries():
                results = [None] * args.concurrent

                def one(i):
                    results[i] = usage_query(port, token, "605")

                threads = [threading.Thread(target=one, args=(i,)) for i in range(args.concurrent)]
                t0 = time.perf_counter()
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                return results, time.perf_counter() - t0

            during, (results, took) = readers_during(port, token, args.readers, queries)
            peak = memory_kb(proc.pid)
            print(f"2. {args.concurrent} x GET usage?by=job&step=605 (the week) at once, all done in {took:.2f} s:")
            for status, seconds, size, _ in results:
                print(f"     {status} in {seconds:.2f} s, {size} bytes")
            print(f"   its message: {json.loads(results[0][3]).get('message', '')[:300]}")
            print(f"   balance reads meanwhile: {figures(during)}")
            grew = (peak["VmHWM"] - before["VmRSS"]) / 1024
            print(
                f"3. server memory: VmRSS before {before['VmRSS'] / 1024:.0f} MiB; "
                f"peak during the queries {peak['VmHWM'] / 1024:.0f} MiB (+{grew:.0f} MiB)"
            )
            message = json.loads(results[0][3]).get("message", "")
            if "step >= " in message:
                step = message.split("step >= ")[1].split()[0].rstrip(",;")
                status, seconds, size, body = usage_query(port, token, step)
                rows = len(json.loads(body)["rows"]) if status == 200 else body[:200]
                print(f"4. the step it names, {step}: {status} in {seconds:.2f} s, {size} bytes, rows={rows}")
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
