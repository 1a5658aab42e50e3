"""POST /quota/v1/estimate/serve and POST /quota/v1/namespaces/{ns}/plan/serve on a real server:
the contract's shape, the plan for a small leftover, and 400s a person can act on.

Beside the demo teams, a test team ``gamma`` (the caller is a member) has one free 24 GiB GPU.
"""

from __future__ import annotations

import getpass

import pytest
from openapi_contract import assert_matches
from quota_testing import QUOTA_MODES, demo_config

GAMMA = {
    "team": "gamma",
    "namespace": "team-gamma",
    "users": [getpass.getuser()],
    "hard": {"requests.nvidia.com/gpu": "1", "requests.cpu": "8", "limits.memory": "64Gi"},
    "limitRange": demo_config().JupyterQuota.profiles[0]["limitRange"],
    "gpuModel": "RTX 4090",
    "gpuMemory": "24Gi",
}


@pytest.fixture(params=QUOTA_MODES)
def quota_mode(request):
    return request.param


@pytest.fixture
def extra_quota_config():
    return {"profiles": [*demo_config().JupyterQuota.profiles, GAMMA]}


QWEN3 = ["--model", "Qwen/Qwen3-8B", "--infer_backend", "vllm"]


async def test_serve_estimate_answers_the_contract(api):
    status, body = await api(
        "POST", "estimate/serve", body={"args": [*QWEN3, "--vllm_max_model_len", "8192"], "gpuMemory": "80Gi"}
    )
    assert status == 200, body
    assert_matches("ServeEstimate", body)
    assert body["kvCacheBytesPerToken"] == 147456
    assert sum(body["breakdown"].values()) == body["peakBytesPerGpu"]
    assert body["maxModelLen"] == 8192 and body["maxConcurrentSequences"] > 0 and body["refusal"] is None


BAD_BODIES = [
    ({"args": [*QWEN3, "--vllm_max_model_len", "131072"]}, "longer than Qwen/Qwen3-8B's context"),
    ({"args": [*QWEN3, "--vllm_gpu_memory_utilization", "1.5"]}, "at most 1"),
    ({"args": [*QWEN3, "--vllm_tensor_parallel_size", "5"]}, "does not divide"),
    ({"args": [*QWEN3, "--vllm_tensor_parallel_size", "2"], "gpus": 1}, "needs 2 GPUs"),
    ({"args": QWEN3, "gpuMemory": "lots"}, '"gpuMemory"'),
    ({"args": QWEN3, "modelSize": "8B"}, "unknown field"),
    ({"gpus": 1}, '"args" is required'),
]


async def test_serve_estimate_bad_input_is_400(api):
    """One server for every case (each starts a server otherwise): the cases are a table."""
    for body, words in BAD_BODIES:
        status, answer = await api("POST", "estimate/serve", body=body)
        assert status == 400, (body, answer)
        assert set(answer) == {"reason", "message"} and words in answer["message"], (body, answer)


async def test_serve_plan_fits_a_small_leftover_with_its_reasons(api):
    """Qwen3-8B, 4 sequences of its full 40,960-token context, on gamma's one 24 GiB GPU: neither
    16-bit nor fp8 weights leave room for 4 such sequences, so the plan quantizes to fp8 and
    halves the context, and says so."""
    status, body = await api(
        "POST",
        "namespaces",
        "team-gamma",
        "plan",
        "serve",
        body={"args": ["--model", "Qwen/Qwen3-8B", "--vllm_max_model_len", "40960", "--vllm_max_num_seqs", "4"]},
    )
    assert status == 200, body
    assert_matches("ServePlanResult", body)
    assert body["gpuMemory"] == "24Gi" and body["gpusFree"] == 1
    plan = body["recommended"]
    assert plan["gpus"] == 1 and "--vllm_quantization" in plan["args"]
    assert plan["estimate"]["maxModelLen"] == 20480 and plan["estimate"]["maxConcurrentSequences"] >= 4
    assert [r["plan"] for r in body["rejected"]] == [
        {"tensorParallel": 1, "maxModelLen": 40960, "quantization": None},
        {"tensorParallel": 1, "maxModelLen": 40960, "quantization": "fp8"},
        {"tensorParallel": 1, "maxModelLen": 20480, "quantization": None},
    ]
    assert all("sequence(s) of" in r["reason"] or "lower --vllm_max_model_len" in r["reason"] for r in body["rejected"])
    assert any("fp8" in note for note in body["notes"])
    assert any("lowered from 40960 to 20480" in note for note in body["notes"])


async def test_serve_plan_refuses_another_team_and_a_gpu_memory_field(api):
    status, answer = await api(
        "POST", "namespaces", "team-gamma", "plan", "serve", body={"args": QWEN3, "gpuMemory": "80Gi"}
    )
    assert status == 400 and "unknown field" in answer["message"]
    status, answer = await api("POST", "namespaces", "team-beta", "plan", "serve", body={"args": QWEN3})
    assert status == 403 and answer["reason"] == "Forbidden" and "recommended" not in answer
    status, answer = await api("POST", "namespaces", "team-beta", "plan", "serve", body={"args": "not a list"})
    assert status == 403, "access is decided before the body is read"
