#!/usr/bin/env python
"""Recommendations and replays at scale: 100 teams, 100,000 jobs over a month (in process).

    python benchmarks/recommend_bench.py [--teams 100] [--jobs 100000] [--days 30] [--curve]

A generated month: each team has a hard GPU quota of 2-8 (the machine has 80 % of their sum, so
peaks queue and borrowing happens); jobs of 1-4 GPUs at high, normal or best-effort priority
arrive at random, busier in working hours, each running from 10 minutes to twice the mean run
that keeps the machine ``--busy`` (default 70 %) on average. Measured:

1. the history as the CSV parser reads it (``history.parse_csv``),
2. ``GET /recommendations``' work: every team's rows (``recommend.recommend_team``),
3. one replay of the month through the scheduler's passes (``replay.replay``: one kept
   ``elastic.Cohort``, whose passes ``tests/test_replay_incremental.py`` checks against ``elastic.decide``),
4. with ``--curve``, the capacity curve (a replay at each of 8 cluster sizes).

Prints wall seconds and, beside them, this process's CPU seconds (on a shared machine the wall
time includes waiting for a core); asserts nothing (speed targets live here, not in tests).
"""

from __future__ import annotations

import argparse
import random
import time

from jupyter_quota import history, recommend, replay
from jupyter_quota.history import JobRecord
from jupyter_quota.profiles import TeamProfile

GPU = "requests.nvidia.com/gpu"
START = 1_793_491_200  # 2026-11-01T00:00:00Z


def generate(teams: int, jobs: int, days: int, seed: int = 1, busy: float = 0.7):
    rng = random.Random(seed)
    profiles = [
        TeamProfile(
            team=f"t{i:03d}",
            hard={GPU: str(rng.randint(2, 8))},
            borrowingLimit={GPU: "2"} if i % 3 == 0 else {},
        )
        for i in range(teams)
    ]
    until = START + days * 86400
    capacity = int(0.8 * sum(int(p.hard[GPU]) for p in profiles))
    sizes = [1, 1, 1, 2, 2, 4]
    mean_work = busy * capacity * days * 86400 / (jobs * sum(sizes) / len(sizes))
    records = []
    for _ in range(jobs):
        team = rng.choice(profiles).team
        while True:  # busier 08-20 on weekdays
            t = rng.randrange(START, until)
            hour, weekday = (t // 3600) % 24, ((t - START) // 86400) % 7
            if (weekday < 5 and 8 <= hour < 20) or rng.random() < 0.3:
                break
        level = rng.choices(["high", "normal", "best-effort"], [1, 6, 3])[0]
        gpus = rng.choice(sizes)
        work = rng.randint(600, max(601, int(2 * mean_work) - 600))
        records.append(JobRecord(team, "u", t, t, t + work, float(gpus), 4.0, 32 * 2**30, level))
    records.sort(key=lambda r: r.submitted)
    return profiles, records, until


def _now() -> float:
    return time.perf_counter()


def _cpu(started_cpu: float) -> str:
    return f"{time.process_time() - started_cpu:.2f} s CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teams", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--busy", type=float, default=0.7, help="the machine's mean load the runs are sized for")
    parser.add_argument("--curve", action="store_true", help="also time the capacity curve (8 replays)")
    args = parser.parse_args()
    profiles, records, until = generate(args.teams, args.jobs, args.days, busy=args.busy)
    capacity = int(0.8 * sum(replay.gpus_of(p) for p in profiles))
    print(f"{args.teams} teams, {len(records)} jobs over {args.days} days, {capacity} GPUs")

    text = history.to_csv(records)
    started, cpu = _now(), time.process_time()
    parsed = history.parse_csv(text)
    took = _now() - started
    print(f"CSV parse: {took:.2f} s ({_cpu(cpu)}; {len(text) / 2**20:.1f} MiB, {len(parsed) / took:,.0f} jobs/s)")

    by_team: dict[str, list] = {}
    for r in records:
        by_team.setdefault(r.team, []).append(r)
    since = until - 28 * 86400
    started, cpu = _now(), time.process_time()
    rows = []
    for p in profiles:
        rows += recommend.recommend_team(
            p.team, p.namespace, p.hard, p.gpuResource, by_team.get(p.team, []), since, until
        )
    took = _now() - started
    print(f"recommendations: {took:.2f} s ({_cpu(cpu)}) for {len(rows)} rows ({1000 * took / len(rows):.1f} ms a team)")

    started, cpu = _now(), time.process_time()
    result = replay.replay(records, profiles, capacity, START, until)
    took = _now() - started
    out = result.to_json()
    teams = out["teams"]
    per_pass = 1e3 * took / max(1, result.passes)
    print(
        f"replay of the month: {took:.2f} s ({_cpu(cpu)}), {result.passes} passes ({per_pass:.2f} ms a pass), "
        f"{len(records) / took:,.0f} jobs/s"
    )
    print(
        f"  utilization {out['utilization']}, refused {sum(t['refused'] for t in teams)}, "
        f"preemptions {sum(t['preemptions'] for t in teams)}, borrowed {sum(t['borrowedGpuHours'] for t in teams):.0f} "
        f"GPU h, worst p90 wait {result.worst_wait_p90()} s"
    )
    if args.curve:
        started, cpu = _now(), time.process_time()
        curve = replay.capacity_curve(records, profiles, START, until, replay.curve_sizes(capacity, 4), gpu_hour=2.5)
        took = _now() - started
        print(
            f"capacity curve ({len(curve['points'])} replays): {took:.2f} s ({_cpu(cpu)}); "
            f"GPUs for p90 wait <= 1 h: {curve['gpusForWaitTarget']}"
        )


if __name__ == "__main__":
    main()
