"""Balance reads on the kube backend: from the watch-fed cache vs listing the API per read.

Starts the real test control plane (``tests/kube/kubecluster.py``; build it first with
``scripts/build-kube.sh``), fills it with NAMESPACES team namespaces, each with a ResourceQuota,
a LimitRange and PODS pods (bound to a node that does not exist, so nothing schedules them),
then measures:

- ``cache``: ``KubeBackend.balance(profile)``, served from the cache (no API call);
- ``list``: what a backend without a cache would do per read: list the namespace's
  ResourceQuotas and LimitRanges from the API server, then ``quota.balance``;
- the cache's memory: Python heap (tracemalloc) and RSS growth from start to synced;
- both watch scopes (``kube_watch_scope``): ``cluster`` (5 watches across all namespaces) and
  ``namespaces`` (5 per team namespace, what the per-namespace Role allows): sync time, heap,
  threads, watch requests per second (each watch is renewed every ``kube_watch_timeout``) and reads.

    .venv/bin/python benchmarks/kube_balance_bench.py [--namespaces 200] [--pods 50] [--reads 2000] [--json out.json]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import random
import statistics
import sys
import threading
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "kube"))

import kubecluster  # noqa: E402

from jupyter_quota import quota  # noqa: E402
from jupyter_quota.backends.kube import KubeBackend, apply_profiles  # noqa: E402
from jupyter_quota.backends.kube.client import KubeError  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--namespaces", type=int, default=200)
    parser.add_argument("--pods", type=int, default=50)
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()

    t0 = time.monotonic()
    cluster = kubecluster.start_cluster(nodes=False, agent=False)
    try:
        print(f"cluster ready in {time.monotonic() - t0:.1f}s ({cluster.timings})", flush=True)
        kube = cluster.kube(timeout=60)
        profiles = [
            kubecluster.team_profile(
                f"bench-{i:03d}",
                hard={
                    "pods": str(args.pods * 2),
                    "requests.cpu": "100",
                    "requests.memory": "400Gi",
                    "requests.nvidia.com/gpu": "64",
                },
                limitRange={"limits": [{"type": "Container", "default": {"cpu": "1", "memory": "1Gi"}}]},
            )
            for i in range(args.namespaces)
        ]
        t = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(args.workers) as pool:
            list(pool.map(lambda p: apply_profiles([p], cluster.kube(timeout=60)), profiles))
        print(f"applied {len(profiles)} profiles in {time.monotonic() - t:.1f}s", flush=True)
        t = time.monotonic()
        jobs = [(p.namespace, j) for p in profiles for j in range(args.pods)]
        local = threading.local()

        def create(item):
            if not hasattr(local, "kube"):
                local.kube = cluster.kube(timeout=60)
            _create_pod(local.kube, *item)

        with concurrent.futures.ThreadPoolExecutor(args.workers) as pool:
            list(pool.map(create, jobs))
        print(f"created {len(jobs)} pods in {time.monotonic() - t:.1f}s", flush=True)
        t = time.monotonic()
        _wait_quota_used(kube, profiles, args.pods)
        print(f"quota controller caught up in {time.monotonic() - t:.1f}s", flush=True)

        rng = random.Random(7)
        picks = [rng.choice(profiles) for _ in range(args.reads)]
        scopes = {}
        for scope in ("cluster", "namespaces"):
            tracemalloc.start()
            rss_before, threads_before = _rss(), threading.active_count()
            heap_before = tracemalloc.get_traced_memory()[0]
            t = time.monotonic()
            backend = KubeBackend(cluster.kube(timeout=60), job_image="bench", namespaced=scope == "namespaces")
            for p in profiles:  # the namespaced cache watches a team from its first request; here all at once
                backend.cache.watch(p.namespace)
            backend.start()
            assert backend.wait_synced(300), backend.cache.errors()
            sync_s = time.monotonic() - t
            heap_after = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            counts = {k: r.count() for k, r in backend.cache.reflectors.items()}
            watches = backend.cache.watches()
            print(f"{scope}: cache synced in {sync_s:.1f}s with {watches} watches: {counts}", flush=True)
            cached = _timed(backend.balance, picks)
            check = backend.balance(profiles[0])["resources"]["pods"]
            assert check["used"] == str(args.pods), check
            scopes[scope] = {
                "watches": watches,
                "watchRequestsPerSecond": round(watches / backend.cache.watch_timeout, 1),
                "threads": threading.active_count() - threads_before,
                "cacheSyncSeconds": round(sync_s, 2),
                "cacheHeapMiB": round((heap_after - heap_before) / 2**20, 1),
                "rssGrowthMiB": round((_rss() - rss_before) / 2**20, 1),
                "cacheReadMicroseconds": _summary(cached),
            }
            backend.close()
        listed = _timed(lambda p: _balance_by_listing(kube, p), picks[: max(50, args.reads // 10)])
    finally:
        cluster.stop()
    cached_s = scopes["cluster"]["cacheReadMicroseconds"]

    listed_s = _summary(listed)
    figures = {
        "namespaces": args.namespaces,
        "podsPerNamespace": args.pods,
        "cachedObjects": counts,
        "scopes": scopes,
        "listReadMicroseconds": listed_s,
        "ratioMedian": round(listed_s["median"] / cached_s["median"], 1),
        "ratioMean": round(listed_s["mean"] / cached_s["mean"], 1),
        "namespacesOverClusterSync": round(
            scopes["namespaces"]["cacheSyncSeconds"] / scopes["cluster"]["cacheSyncSeconds"], 1
        ),
        "namespacesOverClusterHeap": round(
            scopes["namespaces"]["cacheHeapMiB"] / max(0.1, scopes["cluster"]["cacheHeapMiB"]), 1
        ),
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


def _create_pod(kube, namespace: str, index: int) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"train-{index:03d}",
            "labels": {"app.kubernetes.io/managed-by": "jupyter-quota", "job-name": f"train-{index:03d}"},
        },
        "spec": {
            "nodeName": "bench-node",
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "train",
                    "image": "bench",
                    "command": ["swift", "sft", "--model", "qwen"],
                    "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "2Gi"}},
                }
            ],
        },
    }
    for attempt in range(5):
        try:
            kube.post(f"/api/v1/namespaces/{namespace}/pods", pod)
            return
        except KubeError as e:
            if e.code == 409:
                return
            if attempt == 4:
                raise
            time.sleep(0.5 * (attempt + 1))


def _wait_quota_used(kube, profiles, pods: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    pending = {p.namespace for p in profiles}
    while pending:
        for namespace in sorted(pending):
            q = kube.get(f"/api/v1/namespaces/{namespace}/resourcequotas/team-quota")
            if ((q.get("status") or {}).get("used") or {}).get("pods") == str(pods):
                pending.discard(namespace)
        if pending and time.monotonic() > deadline:
            raise SystemExit(f"quota status never caught up in {len(pending)} namespaces")
        if pending:
            time.sleep(1)


def _balance_by_listing(kube, profile) -> dict:
    quotas = kube.get(f"/api/v1/namespaces/{profile.namespace}/resourcequotas").get("items") or []
    limit_ranges = kube.get(f"/api/v1/namespaces/{profile.namespace}/limitranges").get("items") or []
    summary = quota.balance(quotas)
    return {"resources": summary["resources"], "limitRange": limit_ranges[0]["spec"] if limit_ranges else None}


def _timed(fn, items) -> list[float]:
    out = []
    for item in items:
        t = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - t) * 1e6)
    return out


def _summary(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {
        "n": len(samples),
        "median": round(statistics.median(ordered), 1),
        "mean": round(statistics.fmean(ordered), 1),
        "p99": round(ordered[int(len(ordered) * 0.99) - 1], 1),
    }


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


if __name__ == "__main__":
    sys.exit(main())
