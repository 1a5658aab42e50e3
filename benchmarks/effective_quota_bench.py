#!/usr/bin/env python
"""What composing the effective hard quota costs a balance read (local backend, in process).

    python benchmarks/effective_quota_bench.py [--seconds 3]

A balance read goes through ``QuotaService.balance``, which adds approved, unexpired increases
(one indexed SQLite read of ``records.sqlite3``) and open windows' extras to the profile's hard
quota before the backend's cached balance. Measured, each for ``--seconds``:

1. the backend's balance alone (``LocalBackend.balance``: the cache and a generation check);
2. ``QuotaService.balance`` with no records file yet (no increase was ever asked for);
3. the same with a records file holding 200 decided requests, none in force for the team;
4. the same with 10 increases in force for the team (the effective profile is cached per team).

Prints reads per second, microseconds per read and the ratio to (1); asserts nothing.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from jupyter_quota.config import JupyterQuota
from jupyter_quota.identity import Identity
from jupyter_quota.service.app import build_service

GPU = "requests.nvidia.com/gpu"
BEA, ADA = Identity("bea"), Identity("ada", admin=True)


def rate(fn, seconds: float) -> float:
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(100):
            fn()
        n += 100
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as state:
        config = JupyterQuota()
        config.state_dir = state
        config.inventory = {"gpus": 8}
        config.max_open_increases = 1000
        config.profiles = [
            {"team": "beta", "users": ["bea"], "hard": {GPU: "4", "requests.cpu": "8"}},
            {"team": "gamma", "users": ["bea"], "hard": {GPU: "4"}},
        ]
        service = build_service(config)
        profile = service.registry.get("beta")
        rows = []
        base = rate(lambda: service.backend.balance(profile), args.seconds)
        rows.append(("backend balance alone", base))
        rows.append(("service balance, no records file", rate(lambda: service.balance(BEA, "team-beta"), args.seconds)))
        for i in range(200):
            made = service.request_increase(BEA, "team-gamma", {"resources": {GPU: "1"}, "hours": 1, "reason": f"{i}"})
            service.decide_increase(ADA, made["name"], {}, approve=i % 2 == 0)
        rows.append(
            ("service balance, 200 other requests", rate(lambda: service.balance(BEA, "team-beta"), args.seconds))
        )
        for i in range(10):
            made = service.request_increase(BEA, "team-beta", {"resources": {GPU: "1"}, "hours": 8, "reason": f"{i}"})
            service.decide_increase(ADA, made["name"], {}, approve=True)
        assert service.balance(BEA, "team-beta")["resources"][GPU]["hard"] == "14"
        rows.append(
            ("service balance, 10 increases in force", rate(lambda: service.balance(BEA, "team-beta"), args.seconds))
        )
        service.close()
    print(f"{'case':42} {'reads/s':>10} {'us/read':>9} {'x backend':>10}")
    for name, per_second in rows:
        print(f"{name:42} {per_second:10.0f} {1e6 / per_second:9.1f} {base / per_second:10.2f}")


if __name__ == "__main__":
    main()
