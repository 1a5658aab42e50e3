#!/usr/bin/env python
"""What an idle local service's reaper pass costs, by number of teams (issue 23).

    python benchmarks/idle_pass_bench.py [--teams 10,100,1000] [--passes 50]

The reaper runs every ``reap_interval`` (0.5 s) on a thread that shares the GIL with the
service's IO loop, so a long pass delays every request that arrives meanwhile. With no job and
nothing changed a pass is a change check (``lifecycle.schedule``): row ``idle``. Row ``forced``
runs the scheduling transaction every pass, as every pass of a service whose teams could not
borrow did before that check worked (``_elastic_due`` compared with a signature that was never
recorded; that code also read the increases once per team, so it cost more than ``forced``).
Prints the median and max milliseconds per pass, and the ratio. Asserts nothing.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from quota_testing import teams_config  # noqa: E402

from jupyter_quota.config import JupyterQuota  # noqa: E402
from jupyter_quota.service.app import build_service  # noqa: E402


def service(state_dir: str, teams: int):
    inventory = {"gpus": 0, "cpu": "10000", "memory": "10000Gi"}
    config = teams_config(state_dir, teams, {"requests.cpu": "100"}, inventory)
    return build_service(JupyterQuota(config=config), log=logging.getLogger("bench"))


def pass_ms(backend, passes: int) -> list[float]:
    times = []
    for _ in range(passes):
        start = time.perf_counter()
        backend.reap()
        times.append((time.perf_counter() - start) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teams", default="10,100,1000", help="numbers of teams, comma-separated")
    parser.add_argument("--passes", type=int, default=50, help="passes measured per row")
    args = parser.parse_args()
    print(f"{'teams':>6} {'path':>7} {'median ms':>10} {'max ms':>8} {'ratio':>6}")
    for teams in (int(t) for t in args.teams.split(",")):
        with tempfile.TemporaryDirectory() as d:
            backend = service(d, teams).backend
            backend.reap()
            now = pass_ms(backend, args.passes)
            lifecycle = backend._jobs
            due = lifecycle._elastic_due
            lifecycle._elastic_due = lambda: True  # every pass a scheduling transaction
            forced = pass_ms(backend, args.passes)
            lifecycle._elastic_due = due
        f, n = statistics.median(forced), statistics.median(now)
        print(f"{teams:>6} {'forced':>7} {f:>10.2f} {max(forced):>8.2f}")
        print(f"{teams:>6} {'idle':>7} {n:>10.2f} {max(now):>8.2f} {f / n:>6.1f}x")


if __name__ == "__main__":
    main()
