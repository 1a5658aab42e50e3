#!/usr/bin/env python
"""The usage query (``GET quota/v1/usage``, ``GET quota/v1/chargeback``) at scale, on the local backend.

    python benchmarks/usage_bench.py [--teams 100] [--jobs 100000] [--repeat 5]

1. Seeds a fresh ledger with ``--jobs`` finished jobs of ``--teams`` teams spread over a week
   (``tests/usage_seed.py``: admitted as the server admits them) plus one running job per team,
   and moves half of them into ``job_history`` as retention does, so both tables count.
2. In process: the usage spans read from the ledger, then integrated (by team, by user, by job,
   and by team in hourly buckets): median seconds of each part, and the plan SQLite uses.
3. Over REST, on a real ``jupyter server`` on that ledger, as an admin: the week by team, the week
   by job (100,000 rows), one team's week in hourly buckets, the last 24 hours, and the month's
   chargeback: median latency and answer size.

Prints figures; asserts nothing (speed targets live here, not in tests).
"""

from __future__ import annotations

import argparse
import getpass
import json
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import usage_seed  # tests/ holds the seeder the usage tests use
from balance_bench import get, start_server, team_profiles

from jupyter_quota import usage
from jupyter_quota.backends.local import ledger, usagespans
from jupyter_quota.profiles import TeamProfile

SINCE, UNTIL = usage_seed.WEEK_START, usage_seed.WEEK_START + usage_seed.WEEK


def median_time(fn, repeat: int) -> tuple[float, object]:
    took, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        took.append(time.perf_counter() - t0)
    return statistics.median(took), result


def in_process(state: Path, repeat: int) -> None:
    book = ledger.Ledger(state / "ledger.sqlite3")
    read, spans = median_time(lambda: usagespans.spans(book, SINCE, UNTIL), repeat)
    print(f"spans read from the ledger: {len(spans)} in {read * 1000:.0f} ms (median of {repeat})")
    read, mine = median_time(lambda: usagespans.spans(book, SINCE, UNTIL, {"team-000"}), repeat)
    print(f"  one team's spans (a user's query): {len(mine)} in {read * 1000:.0f} ms")
    now = int(time.time())
    for by, step in (("team", None), ("user", None), ("job", None), ("team", 3600)):
        window = usage.Window(SINCE, UNTIL, by, step)
        took, sums = median_time(lambda w=window: usage.integrate(spans, w, now), repeat)
        print(f"  integrate by {by:<4} step={step}: {len(sums):>6} rows in {took * 1000:.0f} ms")
    with book.read() as con:
        args = (usage.format_time(SINCE), usage.format_time(UNTIL), None)
        for name, sql in (
            ("running", usagespans._RUNNING),
            ("ended", usagespans._ENDED),
        ):
            plan = " | ".join(row[3] for row in con.execute("EXPLAIN QUERY PLAN " + sql, args))
            print(f"  query plan ({name}): {plan}")


def over_rest(state: Path, root: Path, teams: int, repeat: int) -> None:
    admin = f"c.JupyterQuota.admin_users = [{getpass.getuser()!r}]\n"
    no_retention = "c.JupyterQuota.job_retention_seconds = -1\nc.JupyterQuota.job_retention_count = -1\n"
    proc, port, token = start_server(state, root, teams, admin + no_retention)
    import http.client

    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        week = {"since": usage.format_time(SINCE), "until": usage.format_time(UNTIL)}
        cases = [
            ("week by team", "usage", {**week, "by": "team"}),
            ("week by user", "usage", {**week, "by": "user"}),
            ("week by job", "usage", {**week, "by": "job"}),
            ("one team, hourly", "usage", {**week, "namespace": "team-000", "step": "3600"}),
            ("last 24 hours", "usage", {}),
            ("chargeback 2026-11", "chargeback", {"month": "2026-11"}),
        ]
        for label, route, params in cases:
            path = f"/quota/v1/{route}?{urllib.parse.urlencode(params)}"
            took, answer = median_time(lambda p=path: get(conn, p, token), repeat)
            status, body = answer
            rows = len(json.loads(body)["rows"]) if status == 200 else body[:200]
            print(f"  GET {label:<20} {status} {took * 1000:>7.0f} ms  {len(body) / 1024:>8.0f} KiB  rows={rows}")
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teams", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        state, root = Path(tmp) / "state", Path(tmp) / "root"
        root.mkdir()
        profiles = [TeamProfile(**p) for p in team_profiles(args.teams)]
        t0 = time.perf_counter()
        usage_seed.seed(state, profiles, jobs=args.jobs)
        moved = usage_seed.prune(state, keep_count=args.jobs // args.teams // 2)
        print(
            f"seeded {args.jobs} jobs of {args.teams} teams (+{args.teams} running), {moved} moved to "
            f"job_history, in {time.perf_counter() - t0:.1f} s"
        )
        in_process(state, args.repeat)
        over_rest(state, root, args.teams, args.repeat)


if __name__ == "__main__":
    main()
