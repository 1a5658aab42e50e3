#!/usr/bin/env python
"""The cost of one scrape of ``GET quota/v1/metrics`` at 100 teams and 100,000 finished jobs.

    python benchmarks/metrics_bench.py [--teams 100] [--finished 100000] [--running 2] [--repeat 20]

Fills a fresh local ledger with ``--finished`` Succeeded jobs spread over ``--teams`` teams and
``--running`` Running jobs per team (rows written straight into the ledger as admission and the
reaper leave them; no process runs), then times ``QuotaService.scrape`` (what the route runs,
less HTTP) in process:

1. the first scrape (the tracker's first look: the live jobs only);
2. a scrape with nothing changed since the last (median and p90 of ``--repeat``);
3. a scrape after 100 jobs changed (each start and end observed once);
4. the same with no finished jobs at all, and the ratio: a scrape reads what changed, so 100,000
   finished jobs should cost (almost) nothing.

Prints figures and ratios, the exposition's size and its series; asserts nothing.
"""

from __future__ import annotations

import argparse
import getpass
import statistics
import tempfile
import time
from pathlib import Path

from jupyter_quota import quota
from jupyter_quota.backends.local import admission, ledger
from jupyter_quota.config import JupyterQuota
from jupyter_quota.jobspec import build_job, parse_job_request
from jupyter_quota.profiles import TeamProfile
from jupyter_quota.service.app import build_service
from jupyter_quota.times import rfc3339

HARD = {"requests.nvidia.com/gpu": "8", "requests.cpu": "64", "limits.memory": "512Gi"}
LIMITS = {"limits": [{"type": "Container", "defaultRequest": {"cpu": "2", "memory": "16Gi"}}]}


def profiles(teams: int) -> list[dict]:
    return [
        {
            "team": f"t{i:03d}",
            "namespace": f"team-{i:03d}",
            "users": [getpass.getuser()],
            "hard": HARD,
            "limitRange": LIMITS,
        }
        for i in range(teams)
    ]


def fill(path: Path, teams: list[dict], finished: int, running: int) -> None:
    """``finished`` Succeeded jobs round-robin over the teams and ``running`` Running ones per team."""
    book = ledger.Ledger(path)
    owner = getpass.getuser()
    rows = []
    for team in teams:
        profile = TeamProfile(**team)
        request = parse_job_request({"name": "x", "args": ["--model", "Qwen/Qwen2.5-0.5B"], "gpus": 1}, profile)
        spec = build_job(profile, request, owner, ["swift", "sft"])
        rows.append((spec, admission.job_row(profile, spec, owner, quota.admit_job(spec, [], profile.limit_ranges()))))
    start = rfc3339(time.time() - 7200)
    with book.write() as con:
        for i in range(finished + running * len(teams)):
            spec, row = rows[i % len(rows)]
            name = f"job-{i:06d}"
            spec["metadata"]["name"] = name
            live = i >= finished
            ledger.insert(
                con,
                dict(
                    row,
                    name=name,
                    job=ledger.dumps(spec),
                    phase="Running" if live else "Succeeded",
                    gpu_indices="[0]",
                    pid=1,
                    pid_start=1,
                    boot_id="bench",
                    started_at=start,
                    finished_at=None if live else rfc3339(time.time() - 3600),
                    exit_code=None if live else 0,
                ),
            )


def finish_some(path: Path, count: int) -> None:
    """``count`` Running jobs end (as the reaper records an end)."""
    book = ledger.Ledger(path)
    with book.write() as con:
        ids = [r[0] for r in con.execute("SELECT id FROM jobs WHERE phase = 'Running' LIMIT ?", (count,))]
        for job_id in ids:
            ledger.update(con, job_id, "Running", phase="Succeeded", finished_at=rfc3339(time.time()), exit_code=0)


def timed(fn) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def measure(teams: int, finished: int, running: int, repeat: int) -> dict:
    with tempfile.TemporaryDirectory() as state:
        config = JupyterQuota(profiles=profiles(teams), state_dir=state, inventory={"gpus": 8})
        fill_seconds, _ = timed(lambda: fill(Path(config.ledger_path), config.profiles, finished, running))
        service = build_service(config)  # the backend is not started: no reaper touches the rows
        first, text = timed(lambda: service.scrape(None))
        steady = sorted(timed(lambda: service.scrape(None))[0] for _ in range(repeat))
        finish_some(Path(config.ledger_path), 100)
        changed, text = timed(lambda: service.scrape(None))
        series = sum(1 for line in text.decode().splitlines() if line and not line.startswith("#"))
        return {
            "fill": fill_seconds,
            "first": first,
            "median": statistics.median(steady),
            "p90": steady[int(0.9 * (len(steady) - 1))],
            "changed": changed,
            "bytes": len(text),
            "series": series,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teams", type=int, default=100)
    parser.add_argument("--finished", type=int, default=100_000)
    parser.add_argument("--running", type=int, default=2, help="Running jobs per team")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    ms = 1000.0
    for finished in (args.finished, 0):
        r = measure(args.teams, finished, args.running, args.repeat)
        print(
            f"{args.teams} teams, {finished:,} finished + {args.running * args.teams} running jobs "
            f"(ledger filled in {r['fill']:.1f} s):\n"
            f"  first scrape        {r['first'] * ms:8.1f} ms\n"
            f"  unchanged, median   {r['median'] * ms:8.1f} ms   p90 {r['p90'] * ms:.1f} ms   ({args.repeat} scrapes)\n"
            f"  after 100 jobs ended {r['changed'] * ms:7.1f} ms\n"
            f"  exposition          {r['bytes']:,} bytes, {r['series']:,} series"
        )
        if finished:
            with_history = r
    print(
        f"ratio, unchanged scrape with {args.finished:,} finished jobs / with none: "
        f"{with_history['median'] / r['median']:.2f}"
    )


if __name__ == "__main__":
    main()
