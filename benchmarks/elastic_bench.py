#!/usr/bin/env python
"""One elastic scheduling decision (``jupyter_quota/elastic.py``) with a large queue.

    python benchmarks/elastic_bench.py [--pending 1000] [--running 200] [--teams 50] [--gpus 400] [--repeat 5]

Builds ``--teams`` teams (GPU counts as ints, as the local backend passes whole amounts; nominal
quotas adding up to the machine's ``--gpus``, half of them with a borrowing limit, a third with a
lending limit, a fifth closing a window with ``onClose: preempt``), ``--running`` running jobs
(some of them borrowed, some being preempted) and ``--pending`` pending
jobs of every priority, spread over the teams, then times ``elastic.decide`` over all of them: the
pass the local backend runs when something changed. Prints the best and median time of one
decision over ``--repeat`` runs, what it decided, and the time per pending job; then the same for a
tenth of the queue, and the ratio (how the cost grows with the queue). Asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from jupyter_quota import elastic

GPU = "requests.nvidia.com/gpu"
LEVELS = ("high", "normal", "best-effort")


def scenario(pending: int, running: int, teams: int, gpus: int, seed: int = 1):
    rng = random.Random(seed)
    share = gpus // teams
    team_map = {
        f"team-{t}": elastic.Team(
            f"team-{t}",
            {GPU: share},
            {GPU: rng.choice([1, 2, 4])} if t % 2 == 0 else {},
            {GPU: share // 2} if t % 3 == 0 else {},
            "preempt" if t % 5 == 0 else "finish",
        )
        for t in range(teams)
    }
    names = list(team_map)
    jobs_running = []
    for i in range(running):
        job = elastic.Job(f"r{i}", rng.choice(names), rng.choice(LEVELS), {GPU: rng.choice([1, 1, 2])}, i)
        job.preempting = rng.random() < 0.05
        jobs_running.append(job)
    jobs_pending = [
        elastic.Job(f"p{i}", rng.choice(names), rng.choice(LEVELS), {GPU: rng.choice([1, 1, 2, 4])}, running + i)
        for i in range(pending)
    ]
    return team_map, {GPU: gpus}, jobs_running, jobs_pending


def time_decision(pending: int, running: int, teams: int, gpus: int, repeat: int):
    times, plan = [], None
    for _ in range(repeat):
        team_map, capacity, jobs_running, jobs_pending = scenario(pending, running, teams, gpus)
        started = time.perf_counter()
        plan = elastic.decide(team_map, capacity, jobs_running, jobs_pending)
        times.append(time.perf_counter() - started)
    return min(times), statistics.median(times), plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pending", type=int, default=1000)
    parser.add_argument("--running", type=int, default=200)
    parser.add_argument("--teams", type=int, default=50)
    parser.add_argument("--gpus", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for pending in (max(1, args.pending // 10), args.pending):
        best, median, plan = time_decision(pending, args.running, args.teams, args.gpus, args.repeat)
        counts = {a: len(plan.of(a)) for a in (elastic.START, elastic.WAIT, elastic.PREEMPT)}
        rows.append((pending, best, median))
        print(
            f"{pending:5d} pending, {args.running} running, {args.teams} teams, {args.gpus} GPUs: "
            f"one decision best {best * 1000:8.1f} ms, median {median * 1000:8.1f} ms "
            f"({median / pending * 1e6:6.1f} us per pending job); decided {counts}"
        )
    (small, _, small_median), (large, _, large_median) = rows
    print(f"ratio: {large / small:.0f}x the queue costs {large_median / small_median:.1f}x the time")


if __name__ == "__main__":
    main()
