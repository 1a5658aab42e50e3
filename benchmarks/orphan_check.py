#!/usr/bin/env python
"""Orphans under load: do a local job's processes all end with it, and is no GPU shared?

    python benchmarks/orphan_check.py [--threads 20] [--rounds 3] [--gpus 4] [--grace 1] [--proc-only]

``--threads`` clients each run ``--rounds`` jobs on one local backend (its reaper thread on, as
a server runs it) over a declared inventory of ``--gpus`` GPUs. Every job is
``tests/fake_trainer.py --spawn ignore-term --spawn setsid --spawn worker``: a child that
ignores SIGTERM, a grandchild that calls ``setsid`` and is re-parented, and a background
worker. Two jobs in three are cancelled once they run; the third exits 0 by itself, leaving
its processes behind. ``--proc-only`` turns the cgroup per job off (``cgroups=False``), so
only the /proc tracking works. Each job, as it starts, lists the processes of other jobs that hold one
of its GPUs (``--check-gpus``).

Prints:
- jobs run and how they ended;
- processes of a job still alive when the job was seen Succeeded/Failed, and at the end (0
  expected: a job ends only when nothing of it runs);
- GPU hand-outs while a process of another job used that GPU (0 expected);
- seconds from cancel to the job's recorded end (p50/max), and the whole run's time.

Asserts nothing; exits 1 when a count is not 0.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from jupyter_quota.backends.local import LocalBackend
from jupyter_quota.jobspec import build_job, parse_job_request
from jupyter_quota.profiles import TeamProfile

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))
from fake_trainer import RUN, run_processes  # noqa: E402

HARD = {"requests.nvidia.com/gpu": "100000", "requests.cpu": "100000", "pods": "100000"}
LIMIT_RANGE = {
    "limits": [
        {
            "type": "Container",
            "default": {"cpu": "100m", "memory": "64Mi"},
            "defaultRequest": {"cpu": "10m", "memory": "64Mi"},
        }
    ]
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--grace", type=float, default=1.0, help="cancel grace period, seconds")
    parser.add_argument("--proc-only", action="store_true", help="no cgroup per job")
    args = parser.parse_args()
    run = uuid.uuid4().hex
    with tempfile.TemporaryDirectory(prefix="orphan-check-") as tmp:
        tmp = Path(tmp)
        inventory = {
            "source": "declared",
            "cpu": "64",
            "memory": "256Gi",
            "gpus": [{"index": i, "model": "declared", "memory": "80Gi"} for i in range(args.gpus)],
        }
        backend = LocalBackend(
            tmp / "state" / "ledger.sqlite3",
            tmp / "state",
            inventory,
            grace_period=args.grace,
            poll_interval=0.1,
            workdir=tmp,
            cgroups=not args.proc_only,
        )
        profile = TeamProfile(team="load", namespace="team-load", hard=HARD, limitRange=LIMIT_RANGE)
        results: list[dict] = []
        started = time.monotonic()
        backend.start()
        try:
            with ThreadPoolExecutor(args.threads) as pool:
                list(pool.map(lambda t: client(backend, profile, run, tmp, t, args, results), range(args.threads)))
        finally:
            backend.close()
        took = time.monotonic() - started
        left_at_end = run_processes(run)
        for proc in left_at_end:  # a failed check must not leave processes behind
            _kill(proc["pid"])
        return report(results, left_at_end, took, args)


def client(backend, profile, run, tmp, t, args, results) -> None:
    user = getpass.getuser()
    for i in range(args.rounds):
        name = f"j{t:02d}-{i}"
        pids, check = tmp / f"pids-{name}", tmp / f"{name}.json"
        pids.mkdir()
        cancel = (t + i) % 3 != 2
        trainer_args = [
            "--spawn",
            "ignore-term",
            "--spawn",
            "setsid",
            "--spawn",
            "worker",
            "--pid-dir",
            str(pids),
            "--check-gpus",
            str(check),
        ]
        trainer_args += ["--sleep", "600"] if cancel else ["--exit", "0"]
        request = parse_job_request({"name": name, "args": trainer_args, "gpus": 1}, profile)
        job = build_job(profile, request, user, [sys.executable, str(TESTS / "fake_trainer.py")])
        job["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": RUN, "value": run}]
        result = {"name": name, "cancelled": cancel}
        try:
            backend.submit(profile, job, user)
            if cancel:
                wait(lambda name=name: "ready" in backend.logs(profile, name, 5))
                result["cancelled_at"] = time.monotonic()
                backend.cancel(profile, name, "bench")
            ended = wait(lambda name=name: backend.get_job(profile, name)["phase"] in ("Succeeded", "Failed"))
            end = backend.get_job(profile, name)
            result.update(
                ended_at=ended,
                phase=end["phase"],
                reason=end.get("reason"),
                gpus=end.get("gpuIndices"),
                left=[p for p in run_processes(run) if p["job"].endswith(f"/{name}")],
                conflicts=json.loads(check.read_text()) if check.exists() else None,
            )
        except Exception as e:  # noqa: BLE001 - counted in the report
            result["error"] = repr(e)
        results.append(result)


def wait(condition, timeout=300.0) -> float:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        time.sleep(0.05)
    return time.monotonic()


def report(results: list[dict], left_at_end: list[dict], took: float, args) -> int:
    errors = [r for r in results if "error" in r]
    done = [r for r in results if "error" not in r]
    left_at_end_job = sum(len(r["left"]) for r in done)
    unchecked = sum(r["conflicts"] is None for r in done)
    conflicts = sum(len(r["conflicts"] or []) for r in done)
    shared = sum(bool(r["conflicts"]) for r in done)
    cancel_s = [r["ended_at"] - r["cancelled_at"] for r in done if "cancelled_at" in r]
    phases: dict[str, int] = {}
    for r in done:
        key = f"{r['phase']}/{r['reason'] or '-'}"
        phases[key] = phases.get(key, 0) + 1
    print(
        f"threads {args.threads} x rounds {args.rounds} on {args.gpus} GPUs, grace {args.grace}s, "
        f"{'/proc only' if args.proc_only else 'cgroup per job where allowed'}"
    )
    print(f"jobs run: {len(results)}  ended: {len(done)}  errors: {len(errors)}  {phases}")
    print(f"processes of a job alive when it was seen ended: {left_at_end_job}")
    print(f"processes of any ended job alive at the end: {len(left_at_end)}")
    print(
        f"GPU hand-outs while another job's process held the GPU: {shared} "
        f"({conflicts} processes; {unchecked} jobs never started their check)"
    )
    if cancel_s:
        print(
            f"cancel to recorded end: p50 {statistics.median(cancel_s):.2f}s, max {max(cancel_s):.2f}s "
            f"({len(cancel_s)} cancels)"
        )
    print(f"wall time: {took:.1f}s")
    for r in errors[:5]:
        print(f"  error {r['name']}: {r['error']}")
    return 1 if errors or left_at_end_job or left_at_end or shared or unchecked else 0


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


if __name__ == "__main__":
    sys.exit(main())
