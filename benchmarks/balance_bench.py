#!/usr/bin/env python
"""Balance reads over REST and admission decisions, on the local backend.

    python benchmarks/balance_bench.py [--teams 100] [--jobs 2000] [--seconds 10] [--concurrency 8]

1. Fills a fresh ledger with ``--jobs`` jobs spread over ``--teams`` team namespaces through the
   backend's real ``submit`` (admission in a ledger transaction), then cancels three in four of
   them so the ledger holds history as well as live (Pending) jobs.
2. Starts a real ``jupyter server`` on that ledger and reads
   ``GET quota/v1/namespaces/{ns}/balance`` from ``--concurrency`` keep-alive clients for
   ``--seconds``: reads per second, p50 and p99 latency. Also ``GET quota/v1/namespaces``
   (every team's balance in one answer).
3. Pure admission (``quota.admit_job``, no I/O): decisions per second, admitted and refused.
4. How a balance read grows with live jobs in a namespace: from the cache, and recomputed.

Prints figures and ratios; asserts nothing (speed targets live here, not in tests).
"""

from __future__ import annotations

import argparse
import getpass
import http.client
import os
import random
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from jupyter_quota import quota
from jupyter_quota.backends.local import LocalBackend
from jupyter_quota.jobspec import build_job, parse_job_request
from jupyter_quota.profiles import TeamProfile

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


def team_profiles(n: int) -> list[dict]:
    owner = getpass.getuser()
    return [
        {"team": f"t{i:03d}", "namespace": f"team-{i:03d}", "users": [owner], "hard": HARD, "limitRange": LIMIT_RANGE}
        for i in range(n)
    ]


def fill_ledger(state: Path, profiles: list[TeamProfile], jobs: int) -> dict:
    # No GPUs in the inventory: GPU jobs stay Pending (Unschedulable), so no process is spawned.
    backend = LocalBackend(
        state / "ledger.sqlite3", state, {"source": "declared", "gpus": [], "cpu": "32", "memory": "256Gi"}
    )
    started = time.perf_counter()
    names, took = [], []
    for i in range(jobs):
        profile = profiles[i % len(profiles)]
        request = parse_job_request({"name": f"job-{i:05d}", "args": ["--model", "m"], "gpus": 1}, profile)
        t0 = time.perf_counter()
        backend.submit(profile, build_job(profile, request, getpass.getuser(), ["true"]), getpass.getuser())
        took.append(time.perf_counter() - t0)
        names.append((profile, request.name))
    submit_s = time.perf_counter() - started
    window = max(1, min(100, jobs // 10))
    for profile, name in names[: (3 * jobs) // 4]:
        backend.cancel(profile, name, "bench")
    backend.close()
    return {
        "submissions_per_s": jobs / submit_s,
        "live_jobs": jobs - (3 * jobs) // 4,
        "first_per_s": window / sum(took[:window]),
        "last_per_s": window / sum(took[-window:]),
        "window": window,
    }


def start_server(state: Path, root: Path, teams: int, extra_config: str = "") -> tuple[subprocess.Popen, int, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    config = root / "bench_config.py"
    config.write_text(
        "c = get_config()\n"
        "c.ServerApp.jpserver_extensions = {'jupyter_quota': True}\n"
        "c.ServerApp.open_browser = False\nc.ServerApp.allow_root = True\n"
        f"c.JupyterQuota.state_dir = {str(state)!r}\n"
        f"c.JupyterQuota.profiles = {team_profiles(teams)!r}\n"
        "c.JupyterQuota.inventory = {'gpus': 0, 'cpu': '32', 'memory': '256Gi'}\n"
        "c.ServerApp.log_level = 'WARN'\n" + extra_config
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter_server",
            f"--config={config}",
            f"--port={port}",
            "--ip=127.0.0.1",
            "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={root}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(root / "server.log", "wb"),  # noqa: SIM115 - the server process holds it for its life
        env={**os.environ, "JUPYTER_TOKEN": token},
    )
    for _ in range(300):
        try:
            status, _ = get(http.client.HTTPConnection("127.0.0.1", port, timeout=5), "/quota/v1/identity", token)
            if status == 200:
                return proc, port, token
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the server did not start; see " + str(root / "server.log"))


def get(conn: http.client.HTTPConnection, path: str, token: str) -> tuple[int, bytes]:
    conn.request("GET", path, headers={"Authorization": f"token {token}"})
    response = conn.getresponse()
    return response.status, response.read()


def load(port: int, token: str, paths: list[str], seconds: float, concurrency: int) -> dict:
    return load_targets([(port, paths, token)] * concurrency, seconds)


def load_targets(targets: list[tuple[int, list[str], str]], seconds: float) -> dict:
    """One keep-alive client per (port on 127.0.0.1, paths to pick from, token), all at once, for ``seconds``."""
    latencies: list[float] = []
    errors = []
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def client(port, paths, token):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine = []
        while time.perf_counter() < stop:
            path = random.choice(paths)
            t0 = time.perf_counter()
            status, _ = get(conn, path, token)
            mine.append(time.perf_counter() - t0)
            if status != 200:
                errors.append(status)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=target) for target in targets]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return summary(latencies, time.perf_counter() - t0, len(errors))


def summary(latencies: list[float], elapsed: float, errors: int) -> dict:
    """Requests, requests per second, errors and the p50/p99 latency (ms) of one load run."""
    latencies = sorted(latencies)
    return {
        "requests": len(latencies),
        "per_s": len(latencies) / elapsed,
        "errors": errors,
        "p50_ms": 1000 * latencies[len(latencies) // 2],
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
    }


def admission_rate(seconds: float = 2.0) -> dict:
    profile = TeamProfile(
        team="alpha",
        namespace="team-alpha",
        limitRange=LIMIT_RANGE,
        hard={"requests.nvidia.com/gpu": "2", "limits.memory": "128Gi", "requests.cpu": "8"},
    )
    live = [quota.job_pod(build_job(profile, parse_job_request({"gpus": 1}, profile), "u", ["x"]))]
    live = [quota.admit_pod(p, [], profile.limit_ranges()) for p in live]
    quotas = [quota.quota_status(q, live, {"count/jobs.batch": 1}) for q in profile.resource_quotas()]
    fits = build_job(profile, parse_job_request({"gpus": 1}, profile), "u", ["x"])
    too_big = build_job(profile, parse_job_request({"gpus": 4}, profile), "u", ["x"])
    out = {}
    for label, job in (("admitted", fits), ("refused", too_big)):
        n, stop = 0, time.perf_counter() + seconds / 2
        while time.perf_counter() < stop:
            try:
                quota.admit_job(job, quotas, profile.limit_ranges())
            except Exception:  # noqa: BLE001 - a refusal is the measured outcome here
                pass
            n += 1
        out[label] = n / (seconds / 2)
    return out


def balance_growth(state_root: Path) -> list[dict]:
    """In-process balance read cost for a namespace holding 0..N live jobs: cached and recomputed."""
    rows = []
    for live in (0, 10, 100, 1000):
        state = state_root / f"growth-{live}"
        backend = LocalBackend(
            state / "ledger.sqlite3", state, {"source": "declared", "gpus": [], "cpu": "8", "memory": "64Gi"}
        )
        profile = TeamProfile(team="g", namespace="team-g", hard=HARD, limitRange=LIMIT_RANGE)
        for i in range(live):
            request = parse_job_request({"name": f"j{i}", "gpus": 1}, profile)
            backend.submit(profile, build_job(profile, request, "u", ["true"]), "u")
        backend.balance(profile)
        n, t0 = 2000, time.perf_counter()
        for _ in range(n):
            backend.balance(profile)
        cached_us = 1e6 * (time.perf_counter() - t0) / n
        m, t0 = 50, time.perf_counter()
        for _ in range(m):
            backend._usage.clear()  # measure the recompute the cache saves
            backend.balance(profile)
        fresh_us = 1e6 * (time.perf_counter() - t0) / m
        rows.append({"live_jobs": live, "cached_us": cached_us, "recomputed_us": fresh_us})
        backend.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teams", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="jq-bench-") as tmp:
        tmp = Path(tmp)
        state, root = tmp / "state", tmp / "root"
        root.mkdir()
        profiles = [TeamProfile(**p) for p in team_profiles(args.teams)]
        print(f"filling the ledger: {args.jobs} jobs over {args.teams} namespaces ...", flush=True)
        filled = fill_ledger(state, profiles, args.jobs)
        print(
            f"  admissions through the ledger (transaction, fsync, scheduling pass): "
            f"{filled['submissions_per_s']:.0f}/s on average; first {filled['window']}: "
            f"{filled['first_per_s']:.0f}/s, last {filled['window']} (behind {args.jobs} Pending jobs): "
            f"{filled['last_per_s']:.0f}/s"
        )
        print(f"  {filled['live_jobs']} live jobs kept, the rest cancelled")

        proc, port, token = start_server(state, root, args.teams)
        try:
            paths = [f"/quota/v1/namespaces/{p.namespace}/balance" for p in profiles]
            get(http.client.HTTPConnection("127.0.0.1", port), paths[0], token)
            one = load(port, token, paths, args.seconds, args.concurrency)
            print(
                f"GET .../namespaces/{{ns}}/balance, {args.concurrency} clients, {args.seconds:.0f}s: "
                f"{one['per_s']:.0f} reads/s, p50 {one['p50_ms']:.2f} ms, p99 {one['p99_ms']:.2f} ms, "
                f"errors {one['errors']}"
            )
            every = load(port, token, ["/quota/v1/namespaces"], max(2.0, args.seconds / 3), args.concurrency)
            print(
                f"GET .../namespaces ({args.teams} balances per answer): {every['per_s']:.0f} reads/s, "
                f"p50 {every['p50_ms']:.2f} ms, p99 {every['p99_ms']:.2f} ms"
            )
        finally:
            proc.terminate()
            proc.wait(timeout=30)

        rates = admission_rate()
        print(f"pure admission (quota.admit_job): {rates['admitted']:.0f} admitted/s, {rates['refused']:.0f} refused/s")
        print("balance read in-process vs live jobs in the namespace:")
        for row in balance_growth(tmp):
            print(
                f"  {row['live_jobs']:5d} live jobs: cached {row['cached_us']:8.1f} us, "
                f"recomputed {row['recomputed_us']:10.1f} us, ratio {row['recomputed_us'] / row['cached_us']:6.1f}x"
            )


if __name__ == "__main__":
    main()
