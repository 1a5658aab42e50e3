"""A deterministic week of jobs in a local ledger, for the usage tests and ``benchmarks/usage_bench.py``.

    python tests/usage_seed.py STATE_DIR [--jobs 400] [--seed 12]

Jobs are admitted as the server admits them (``jobspec.build_job``, ``quota.admit_job`` with the
profile's LimitRange, ``admission.job_row``), so their usage is what quota charged, LimitRange
defaults included; they are then written Succeeded or Failed with start and finish times spread
over the week (some never started: cancelled while Pending), and one per team is left Running.
``prune`` moves the oldest into ``job_history`` the way retention does, so both tables count.
The same seed gives the same ledger.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from jupyter_quota import quota
from jupyter_quota.backends.local import admission, ledger, retention, runs
from jupyter_quota.jobspec import build_job, parse_job_request
from jupyter_quota.profiles import TeamProfile
from jupyter_quota.quantity import Quantity
from jupyter_quota.times import rfc3339

#: Monday 2026-11-16 00:00 UTC: the seeded week is [WEEK_START, WEEK_START + 7 days).
WEEK_START = int(datetime(2026, 11, 16, tzinfo=timezone.utc).timestamp())
WEEK = 7 * 24 * 3600
SHAPES = (  # (gpus, cpu request or None for the LimitRange default, memory request or None)
    (1, "4", "32Gi"),
    (2, "8", "64Gi"),
    (0, "2", "8Gi"),
    (1, None, None),
    (0, "500m", "1Gi"),
)


def seed(
    state_dir: Path,
    profiles: list[TeamProfile],
    jobs: int = 400,
    rng_seed: int = 12,
    running: bool = True,
    week_start: int = WEEK_START,
):
    """Fill ``state_dir``'s ledger with a week from ``week_start`` (epoch seconds); return the ledger.
    Users are each profile's ``users``."""
    book = ledger.Ledger(Path(state_dir) / "ledger.sqlite3")
    rng = random.Random(rng_seed)
    admitted = {}
    with book.write() as con:
        for i in range(jobs):
            profile = profiles[i % len(profiles)]
            user = rng.choice(profile.users or ["nobody"])
            shape = rng.randrange(len(SHAPES))
            if (profile.team, shape) not in admitted:
                admitted[profile.team, shape] = _admitted(profile, SHAPES[shape])
            spec, admission_ = admitted[profile.team, shape]
            start = week_start + rng.randrange(WEEK)
            duration = rng.randrange(60, 10 * 3600)  # may run past the week's end
            started = rng.random() > 0.05  # a few were cancelled while Pending: they held nothing
            _insert(con, _row(profile, spec, admission_, user, f"job-{i:06d}", start, duration, rng, started))
        if running:
            for n, profile in enumerate(profiles):
                spec, admission_ = admitted.get((profile.team, 0)) or _admitted(profile, SHAPES[0])
                row = _row(
                    profile, spec, admission_, profile.users[0], f"live-{n:04d}", week_start + 3600, 0, rng, True
                )
                _insert(con, {**row, "phase": "Running", "finished_at": None, "exit_code": None})
    return book


def _insert(con, row: dict) -> None:
    """A job and, when it started, its run (``runs``), as the scheduler and reaper record them."""
    ledger.insert(con, row)
    if row.get("started_at"):
        job_id = con.execute("SELECT last_insert_rowid()").fetchone()[0]
        runs.begin(con, job_id, row["started_at"])
        if row.get("finished_at"):
            runs.end(con, job_id, row["finished_at"])


def prune(state_dir: Path, keep_count: int, batch: int = 5000) -> int:
    """Move all but the newest ``keep_count`` finished jobs per namespace into ``job_history``."""
    import logging

    book = ledger.Ledger(Path(state_dir) / "ledger.sqlite3")
    moved = 0
    while True:
        n = retention.prune(
            book, str(state_dir), keep_seconds=-1, keep_count=keep_count, batch=batch, log=logging.getLogger("seed")
        )
        moved += n
        if n < batch:
            return moved


def ledger_totals(path: Path, since: str, until: str, now: int | None = None) -> dict:
    """GPU-, CPU- and memory GiB-seconds per (team, user) of the window, straight from the rows
    (with plain SQL and quantities, not ``jupyter_quota.usage``); a running job ends at ``now``."""
    start, end = _epoch(since), _epoch(until)
    con = sqlite3.connect(path)
    totals: dict = {}
    for table in ("jobs", "job_history"):
        for team, owner, gpus, used, began, ended in con.execute(
            f"SELECT team, owner, gpus, usage, started_at, finished_at FROM {table} WHERE started_at IS NOT NULL"
        ):
            stop = _epoch(ended) if ended else (now if now is not None else int(time.time()))
            seconds = max(0, min(stop, end) - max(_epoch(began), start))
            used = json.loads(used)
            figures = totals.setdefault((team, owner), [0, 0, 0])
            figures[0] += gpus * seconds
            figures[1] += Quantity(used.get("requests.cpu", "0")).as_fraction() * seconds
            figures[2] += Quantity(used.get("requests.memory", "0")).as_fraction() * seconds / 2**30
    con.close()
    return totals


def save(name: str, text: str) -> None:
    """Print a table a test made, and keep it under ``$JUPYTER_QUOTA_TEST_OUTPUT`` when set."""
    folder = os.environ.get("JUPYTER_QUOTA_TEST_OUTPUT")
    if folder:
        Path(folder, name).write_text(text)
    print(f"--- {name}\n{text}")


def _epoch(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())


def _admitted(profile: TeamProfile, shape) -> tuple[dict, quota.JobAdmission]:
    gpus, cpu, memory = shape
    body = {"name": "x", "args": ["--model", "Qwen/Qwen2.5-0.5B", "--tuner_type", "lora"], "gpus": gpus}
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    if requests:
        body["resources"] = {"requests": requests, "limits": requests}
    spec = build_job(profile, parse_job_request(body, profile), "seed", ["swift", "sft"])
    return spec, quota.admit_job(spec, [], profile.limit_ranges())


def _row(profile, spec, admitted, user, name, start, duration, rng, started: bool) -> dict:
    row = admission.job_row(profile, spec, user, admitted)
    base = {**row, "name": name, "created_at": rfc3339(start - 30)}
    if not started:
        return {**base, "phase": "Failed", "reason": "Cancelled", "finished_at": rfc3339(start)}
    return {
        **base,
        "phase": "Succeeded" if rng.random() > 0.2 else "Failed",
        "gpu_indices": "[]",
        "pid": 1,
        "pid_start": 1,
        "boot_id": "seed",
        "started_at": rfc3339(start),
        "finished_at": rfc3339(start + duration),
        "exit_code": 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("state_dir", type=Path)
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    from quota_testing import demo_config

    from jupyter_quota.config import JupyterQuota

    profiles = [TeamProfile(**p) for p in JupyterQuota(config=demo_config()).profiles]
    seed(args.state_dir, profiles, args.jobs, args.seed)
    print(f"seeded {args.jobs} jobs of {len(profiles)} teams in {args.state_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
