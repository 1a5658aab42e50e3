"""Learning from real jobs, through the REST API on a real server (docs/estimator.md §12).

Jobs run ``fake_trainer`` with ms-swift's arguments: it logs steps with the ``memory(GiB)`` a GPU
run logs (``--memory-gib``), or ends with CUDA out-of-memory (``--oom``). Team ``gamma`` has one
free 24 GiB GPU (tests/test_plan_api.py's profile).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest
from openapi_contract import assert_matches
from quota_testing import QUOTA_MODES
from test_plan_api import GAMMA, GIB

from jupyter_quota.estimator import learning

MODEL = ["--model", "Qwen/Qwen2.5-1.5B-Instruct", "--tuner_type", "full", "--max_length", "2048"]


@pytest.fixture(params=QUOTA_MODES)
def quota_mode(request):
    return request.param


@pytest.fixture
def extra_quota_config():
    from quota_testing import demo_config

    return {"profiles": [*demo_config().JupyterQuota.profiles, GAMMA]}


async def ended(api, name: str, deadline: float = 120.0) -> dict:
    """The job once it has ended (polled: the reaper runs every 0.1 s)."""
    until = time.monotonic() + deadline
    while True:
        status, job = await api("GET", "namespaces", "team-gamma", "jobs", name)
        assert status == 200, job
        if job["phase"] in ("Succeeded", "Failed"):
            return job
        assert time.monotonic() < until, job
        await asyncio.sleep(0.1)


async def run(api, args: list[str], gpus: int = 1) -> dict:
    status, job = await api("POST", "namespaces", "team-gamma", "jobs", body={"args": args, "gpus": gpus})
    assert status == 201, job
    return await ended(api, job["name"])


async def best(api) -> dict:
    status, result = await api("POST", "namespaces", "team-gamma", "plan", body={"args": MODEL})
    assert status == 200, result
    assert result["recommended"] is not None, result
    return result["recommended"]


async def test_a_measured_peak_is_kept_beside_the_estimate_and_corrects_later_plans(api):
    first = await best(api)
    estimated = first["estimate"]["peakBytesPerGpu"] / GIB
    measured = round(estimated * 1.3, 2)  # the regime runs 30% over its estimate

    jobs = [await run(api, [*first["args"], "--steps", "2", "--memory-gib", str(measured)]) for _ in range(3)]
    for job in jobs:
        assert job["phase"] == "Succeeded", job
        assert job["memory"]["measuredGib"] == measured
        assert job["memory"]["estimatedGib"] == pytest.approx(estimated, abs=0.01)
        assert job["memory"]["outOfMemory"] is False
        assert_matches("Job", job)

    status, est = await api("POST", "estimate", body={"args": first["args"], "gpus": first["gpus"]})
    assert status == 200, est
    assert est["correction"]["jobs"] == learning.MIN_JOBS
    assert est["correction"]["factor"] == pytest.approx(measured / estimated, abs=0.01)
    assert est["assumptions"][-1] == est["correction"]["note"]

    second = await best(api)
    assert second["summary"] != first["summary"], (first["summary"], second["summary"])
    evidence = {
        "before": first["summary"],
        "measuredGib": measured,
        "correction": est["correction"],
        "after": second["summary"],
    }
    out = Path(os.environ.get("JUPYTER_QUOTA_TEST_OUTPUT", "test-output")) / "learning"
    out.mkdir(parents=True, exist_ok=True)
    (out / "plan-change.json").write_text(json.dumps(evidence, indent=1))  # quoted in the closing note
    corrected = [c for c in [second, *[r["plan"] for r in (await plan_rejected(api))]] if c["args"] == first["args"]]
    assert corrected and corrected[0]["estimate"]["correction"] is not None

    status, table = await api("GET", "estimator", "errors")
    assert status == 200, table
    assert_matches("EstimatorErrors", table)
    rows = {(r["family"], r["regime"]): r for r in table["rows"]}
    assert rows[("all", "all")]["jobs"] == 3
    assert rows[("all", "all")]["underPredictedOver10Pct"] == 1.0


async def plan_rejected(api) -> list:
    status, result = await api("POST", "namespaces", "team-gamma", "plan", body={"args": MODEL})
    assert status == 200, result
    return result["rejected"]


async def test_an_out_of_memory_job_is_marked_and_re_planned_to_the_next_plan_down(api):
    first = await best(api)
    job = await run(api, [*first["args"], "--steps", "1", "--memory-gib", "23.1", "--oom"], first["gpus"])
    assert job["phase"] == "Failed"
    assert job["reason"] == "OutOfMemory", job
    assert job["memory"]["outOfMemory"] is True
    assert job["memory"]["gpu"] == "RTX 4090"
    assert job["message"].startswith("CUDA out of memory on RTX 4090: estimated"), job["message"]
    assert "job.retry()" in job["message"]

    status, replanned = await api("POST", "namespaces", "team-gamma", "jobs", job["name"], "replan")
    assert status == 200, replanned
    assert_matches("PlanResult", replanned)
    assert replanned["recommended"]["summary"] != first["summary"]
    note = f"this configuration ran out of GPU memory in job {job['name']}"
    refused = [r for r in replanned["rejected"] if note in r["plan"]["estimate"]["assumptions"]]
    assert len(refused) == 1, replanned["rejected"]
    assert refused[0]["plan"]["summary"].split(",")[:3] == first["summary"].split(",")[:3]


async def test_re_planning_a_job_that_did_not_run_out_of_memory_is_a_409(api):
    job = await run(api, [*MODEL, "--steps", "1", "--memory-gib", "9.5"])
    status, body = await api("POST", "namespaces", "team-gamma", "jobs", job["name"], "replan")
    assert status == 409, body
    assert "did not run out of GPU memory" in body["message"]


async def test_a_job_that_is_not_an_estimable_swift_sft_has_no_memory_field(api):
    job = await run(api, ["--lines", "2"])
    assert job["phase"] == "Succeeded"
    assert "memory" not in job
