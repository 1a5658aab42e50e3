#!/usr/bin/env python
"""How long a whole plan search takes: enumerate, estimate, admit, rank (target: at most 50 ms).

    python benchmarks/plan_bench.py [--repeat 30]

Runs ``planner.plan`` on the demo's team-alpha (two free 80 GiB GPUs), on the same team with
256Gi of memory a pod and in its quota (room for DeepSpeed CPU offload), and on a test team with
one free 24 GiB GPU, for typical requests, with the real estimator and catalog and the real
admission code, in one warm process (the first call pays the imports and the catalog load, and
is shown apart). Prints the median and p90 per scenario, the estimates each search made, and
the share of the time spent in the estimator. Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from traitlets.config.loader import PyFileConfigLoader

from jupyter_quota import quota
from jupyter_quota.estimator import estimate as estimate_memory
from jupyter_quota.planner import context_from_balance, plan
from jupyter_quota.profiles import TeamProfile

DEMO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "binder")
GPU = "requests.nvidia.com/gpu"


def balance_of(profile: TeamProfile, used: dict | None = None) -> dict:
    quotas = []
    for rq in profile.resource_quotas():
        status_used = {k: (used or {}).get(k, "0") for k in rq["spec"]["hard"]}
        quotas.append({**rq, "status": {"hard": dict(rq["spec"]["hard"]), "used": status_used}})
    return {"namespace": profile.namespace, "team": profile.team, **quota.balance(quotas)}


def contexts():
    config = PyFileConfigLoader("jupyter_server_config.py", path=DEMO).load_config()
    alpha = TeamProfile(**config.JupyterQuota.profiles[0])
    gamma = TeamProfile(
        team="gamma",
        namespace="team-gamma",
        hard={GPU: "1", "requests.cpu": "8"},
        limitRange=alpha.limitRange,
        gpuMemory="24Gi",
    )
    limits = alpha.limitRange["limits"][0]
    roomy = TeamProfile(
        **{
            **config.JupyterQuota.profiles[0],
            "limitRange": {"limits": [{**limits, "max": {**limits["max"], "memory": "256Gi"}}]},
            "hard": {**alpha.hard, "limits.memory": "256Gi"},
        }
    )
    return {
        "team-alpha": context_from_balance(balance_of(alpha), alpha),
        "team-alpha, 256Gi memory": context_from_balance(balance_of(roomy), roomy),
        "team-gamma (1 x 24Gi)": context_from_balance(balance_of(gamma), gamma),
    }


SCENARIOS = [
    (
        "team-alpha",
        "7B full, 2048",
        ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "full", "--max_length", "2048"],
    ),
    (
        "team-alpha, 256Gi memory",
        "7B full, 2048 (offload fits)",
        ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "full", "--max_length", "2048"],
    ),
    ("team-alpha", "7B LoRA (fits as asked)", ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max_length", "2048"]),
    ("team-alpha", "72B full (nothing close)", ["--model", "Qwen/Qwen2.5-72B-Instruct", "--tuner_type", "full"]),
    (
        "team-alpha",
        "14B full, batch 8",
        [
            "--model",
            "Qwen/Qwen2.5-14B-Instruct",
            "--tuner_type",
            "full",
            "--per_device_train_batch_size",
            "8",
            "--gradient_checkpointing",
            "false",
        ],
    ),
    ("team-gamma (1 x 24Gi)", "Qwen-VL-Chat full", ["--model", "Qwen/Qwen-VL-Chat", "--tuner_type", "full"]),
    ("team-gamma (1 x 24Gi)", "old names: qwen-vl-chat qlora", ["--model_type", "qwen-vl-chat", "--sft_type", "qlora"]),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    opts = parser.parse_args()
    ctx = contexts()

    started = time.perf_counter()
    plan(SCENARIOS[0][2], ctx[SCENARIOS[0][0]])
    print(f"first search in a fresh process (imports, catalog): {(time.perf_counter() - started) * 1000:.1f} ms\n")

    print(
        f"{'namespace':<24} {'request':<32} {'median ms':>9} {'p90 ms':>7} {'estimates':>9} {'estimator':>9}  "
        "recommended"
    )
    worst = 0.0
    for ns, name, argv in SCENARIOS:
        times, spent = [], [0.0]

        def timed_estimate(a, g, spent=spent):
            t = time.perf_counter()
            try:
                return estimate_memory(a, gpus=g)
            finally:
                spent[0] += time.perf_counter() - t

        for _ in range(opts.repeat):
            t = time.perf_counter()
            result = plan(argv, ctx[ns], estimate=timed_estimate)
            times.append((time.perf_counter() - t) * 1000)
        times.sort()
        median, p90 = statistics.median(times), times[int(0.9 * (len(times) - 1))]
        worst = max(worst, p90)
        share = spent[0] * 1000 / sum(times)
        best = result.recommended["summary"] if result.recommended else "none fits"
        print(f"{ns:<24} {name:<32} {median:>9.1f} {p90:>7.1f} {result.search['estimates']:>9} {share:>8.0%}  {best}")
    print(f"\nworst p90: {worst:.1f} ms (target: at most 50 ms for a whole plan search)")


if __name__ == "__main__":
    main()
