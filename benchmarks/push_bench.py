#!/usr/bin/env python
"""Push at scale: N open ``GET /events`` subscriptions on one quota service, submit → event latency.

    python benchmarks/push_bench.py [--subscribers 2000] [--teams 100] [--submits 20] [--interval 1.5]
                                    [--heartbeat slices|whole]

The quota service (``hubservice.app``: the same handlers and ``QuotaService`` a hub runs, local
backend, ``--teams`` teams) runs in a process of its own. Its callers are simulated users
``u0``..``uN-1``, user i in team i mod ``--teams``, identified by their token alone (a stand-in for
the hub's token check, which this benchmark leaves out). This process opens one event stream per
user (asyncio sockets, one event loop), waits until each has its first balance, then submits
``--submits`` jobs, one every ``--interval`` seconds (so that they meet the 15 s heartbeat to
every stream), each into the next team, and times, for every subscriber of that team, from
just before the POST is sent to the moment that subscriber has the job's ``event: job``.
It also checks that no subscriber heard of a team not its own.

Prints p50/p99/max of those latencies over every (submit, subscriber) pair, the service's RSS
before and after the subscriptions and per subscription, and how many balances the service
computed for the submits (one per team per change, whatever the number of subscribers), and the
longest the service's IO loop was held meanwhile, beside its longest garbage collection then (a
full collection walks every open stream's objects). The client shares the machine's cores with
the service. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "benchmarks")]
import bench_service  # noqa: E402
from bench_service import PREFIX, rss_kib  # noqa: E402
from quota_testing import free_port  # noqa: E402


class Subscriber:
    """One event stream: the team it belongs to, and when each job event arrived."""

    def __init__(self, user: int, team: int):
        self.user, self.team = user, team
        self.first = asyncio.Event()
        self.jobs: dict[str, float] = {}
        self.foreign = 0
        self.waiters: dict[str, asyncio.Event] = {}

    async def run(self, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=2**20)
        writer.write(
            f"GET {PREFIX}quota/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: token u{self.user}\r\nAccept: text/event-stream\r\n\r\n".encode()
        )
        await writer.drain()
        event = None
        while True:
            line = await reader.readline()
            if not line:
                return
            text = line.decode().rstrip("\r\n")
            if text.startswith("event: "):
                event = text[7:]
            elif text.startswith("data: ") and event:
                data = json.loads(text[6:])
                if data.get("namespace") != f"team-{self.team:03d}":
                    self.foreign += 1
                if event == "balance":
                    self.first.set()
                elif event == "job" and data["name"] not in self.jobs:
                    self.jobs[data["name"]] = time.perf_counter()
                    waiter = self.waiters.get(data["name"])
                    if waiter:
                        waiter.set()
                event = None


async def post(port: int, user: int, team: int, name: str) -> int:
    small = {"cpu": "10m", "memory": "16Mi"}
    job = {"name": name, "args": ["--exit", "0"], "resources": {"requests": small, "limits": small}}
    body = json.dumps(job).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"POST {PREFIX}quota/v1/namespaces/team-{team:03d}/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: token u{user}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    await reader.read()
    writer.close()
    return status


async def get_json(port: int, path: str) -> dict:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    raw = await reader.read()
    writer.close()
    return json.loads(raw.split(b"\r\n\r\n", 1)[1])


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def bench(port: int, pid: int, subscribers: int, teams: int, submits: int, interval: float) -> None:
    before = rss_kib(pid)
    subs = [Subscriber(i, i % teams) for i in range(subscribers)]
    t0 = time.perf_counter()
    tasks = []
    for i in range(0, subscribers, 100):  # in batches: the listen backlog is 128
        batch = subs[i : i + 100]
        tasks += [asyncio.ensure_future(s.run(port)) for s in batch]
        await asyncio.wait_for(asyncio.gather(*(s.first.wait() for s in batch)), 120)
    opened = time.perf_counter() - t0
    after = rss_kib(pid)
    print(f"{subscribers} subscriptions over {teams} teams open in {opened:.1f} s")
    print(
        f"service RSS: {before / 1024:.1f} MiB before, {after / 1024:.1f} MiB after: "
        f"{(after - before) / subscribers:.1f} KiB per subscription"
    )
    computed_before = (await get_json(port, "/bench/computations?reset=1"))["balances"]
    await get_json(port, "/bench/served")  # its longest collection, from here on
    latencies, answered = [], []
    start = time.perf_counter()
    for k in range(submits):
        await asyncio.sleep(max(0.0, start + k * interval - time.perf_counter()))  # on a schedule
        team = k % teams
        name = f"push-bench-{k}"
        members = [s for s in subs if s.team == team]
        for s in members:
            s.waiters[name] = asyncio.Event()
        sent = time.perf_counter()
        status = await post(port, team, team, name)  # user `team` is in team `team`
        answered.append((time.perf_counter() - sent) * 1000)
        if status != 201:
            print(f"submit {name}: HTTP {status}")
            continue
        await asyncio.wait_for(asyncio.gather(*(s.waiters[name].wait() for s in members)), 60)
        latencies += [s.jobs[name] - sent for s in members]
    after_submits = await get_json(port, "/bench/computations")
    collected = await get_json(port, "/bench/served")
    computed = after_submits["balances"] - computed_before
    ms = [x * 1000 for x in latencies]
    print(
        f"submit -> job event, {len(ms)} deliveries ({submits} submits x {subscribers // teams} subscribers): "
        f"p50 {statistics.median(ms):.1f} ms, p99 {percentile(ms, 0.99):.1f} ms, max {max(ms):.1f} ms"
    )
    print(f"the submit's own answer (201) took: p50 {statistics.median(answered):.1f} ms, max {max(answered):.1f} ms")
    print(f"balances computed for the {submits} submits: {computed} (a periodic sweep adds one per subscribed team)")
    print(f"events of another team heard: {sum(s.foreign for s in subs)}")
    print(
        f"the longest the service's IO loop was held during the submits: {after_submits['loopLagMaxMs']:.0f} ms "
        f"(its longest garbage collection then: {collected['gcMaxMs']:.0f} ms)"
    )
    for t in tasks:
        t.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscribers", type=int, default=2000)
    parser.add_argument("--teams", type=int, default=100)
    parser.add_argument("--submits", type=int, default=20)
    parser.add_argument(
        "--interval",
        type=float,
        default=1.5,
        help="seconds from one submit to the next (20 x 1.5 s spans two heartbeats)",
    )
    parser.add_argument(
        "--heartbeat", choices=("slices", "whole"), default="slices", help="whole: every stream in one turn, as before"
    )
    args = parser.parse_args()
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.subscribers * 2 + 256)), hard))
    with tempfile.TemporaryDirectory(prefix="push-bench-") as tmp:
        port = free_port()
        proc = bench_service.start(port, Path(tmp) / "state", args.teams, {"BENCH_HEARTBEAT": args.heartbeat})
        try:
            asyncio.run(bench(port, proc.pid, args.subscribers, args.teams, args.submits, args.interval))
        finally:
            bench_service.stop(proc)


if __name__ == "__main__":
    main()
