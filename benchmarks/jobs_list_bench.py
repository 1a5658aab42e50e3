#!/usr/bin/env python
"""Listing a namespace's jobs over REST when the ledger holds many: a page, and every page.

    python benchmarks/jobs_list_bench.py [--jobs 20000] [--repeat 20]

Fills a fresh ledger with ``--jobs`` finished jobs in one namespace (written straight into the
ledger as admission and the reaper leave them, so filling is quick; retention is turned off so
the server keeps them all), starts a real ``jupyter server`` on it, then measures
``GET quota/v1/namespaces/{ns}/jobs``:

1. without parameters (the server's default page): median time and answer size;
2. the whole list, 1,000 a page, following ``metadata.continue`` to the last page: total time,
   total size and the number of requests.

The same script runs against a version without paging (before): there the first answer already
holds every job and has no ``metadata``, so both lines measure the whole list in one answer.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import getpass
import http.client
import json
import statistics
import tempfile
import time
import urllib.parse
from pathlib import Path

from balance_bench import get, start_server

from jupyter_quota import quota
from jupyter_quota.backends.local import admission, ledger
from jupyter_quota.jobspec import build_job, parse_job_request
from jupyter_quota.profiles import TeamProfile

NAMESPACE = "team-000"
NO_RETENTION = "c.JupyterQuota.job_retention_seconds = -1\nc.JupyterQuota.job_retention_count = -1\n"


def fill(path: Path, profile: TeamProfile, jobs: int) -> None:
    """``jobs`` Succeeded jobs of ``profile``'s namespace, in one transaction."""
    book = ledger.Ledger(path)
    owner = getpass.getuser()
    request = parse_job_request(
        {"name": "x", "args": ["--model", "Qwen/Qwen2.5-0.5B", "--train_type", "lora"], "gpus": 1}, profile
    )
    spec = build_job(profile, request, owner, ["swift", "sft"])
    admitted = quota.admit_job(spec, [], profile.limit_ranges())
    row = admission.job_row(profile, spec, owner, admitted)
    with book.write() as con:
        for i in range(jobs):
            spec["metadata"]["name"] = f"job-{i:05d}"
            ledger.insert(
                con,
                dict(
                    row,
                    name=f"job-{i:05d}",
                    job=ledger.dumps(spec),
                    phase="Succeeded",
                    gpu_indices="[0]",
                    pid=1,
                    pid_start=1,
                    boot_id="bench",
                    started_at=row["created_at"],
                    finished_at=row["created_at"],
                    exit_code=0,
                ),
            )


def list_all(conn: http.client.HTTPConnection, path: str, token: str) -> dict:
    """Every page, 1,000 a page, as a client follows ``metadata.continue``."""
    started, size, requests, jobs, query = time.perf_counter(), 0, 0, 0, {"limit": "1000"}
    while True:
        status, body = get(conn, f"{path}?{urllib.parse.urlencode(query)}", token)
        assert status == 200, body[:300]
        size, requests = size + len(body), requests + 1
        answer = json.loads(body)
        jobs += len(answer["jobs"])
        following = (answer.get("metadata") or {}).get("continue")
        if not following:
            return {"s": time.perf_counter() - started, "bytes": size, "requests": requests, "jobs": jobs}
        query = {"limit": "1000", "continue": following}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=20, help="requests timed for the default page")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jq-list-bench-") as tmp:
        tmp = Path(tmp)
        state, root = tmp / "state", tmp / "root"
        root.mkdir()
        profile = TeamProfile(
            team="t000", namespace=NAMESPACE, users=[getpass.getuser()], hard={"requests.nvidia.com/gpu": "100000"}
        )
        fill(state / "ledger.sqlite3", profile, args.jobs)
        proc, port, token = start_server(state, root, 1, extra_config=NO_RETENTION)
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            path = f"/quota/v1/namespaces/{NAMESPACE}/jobs"
            times, size, shown = [], 0, 0
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                status, body = get(conn, path, token)
                times.append(time.perf_counter() - t0)
                assert status == 200, body[:300]
                size, shown = len(body), len(json.loads(body)["jobs"])
            print(f"{args.jobs} jobs in {NAMESPACE}:")
            print(
                f"  GET .../jobs (default page, {shown} jobs): median {1000 * statistics.median(times):.1f} ms, "
                f"{size / 1e6:.3f} MB"
            )
            whole = list_all(conn, path, token)
            print(
                f"  the whole list ({whole['jobs']} jobs) in {whole['requests']} requests of at most 1,000: "
                f"{1000 * whole['s']:.0f} ms, {whole['bytes'] / 1e6:.2f} MB"
            )
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
