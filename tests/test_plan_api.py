"""POST /quota/v1/estimate and POST /quota/v1/namespaces/{ns}/plan on a real server.

Beside the demo teams, a test team ``gamma`` (the caller is a member) has one free 24 GiB GPU.
"""

from __future__ import annotations

import getpass

import pytest

from quota_testing import demo_config

GIB = 1024**3
GAMMA = {
    "team": "gamma",
    "namespace": "team-gamma",
    "users": [getpass.getuser()],
    "hard": {"requests.nvidia.com/gpu": "1", "requests.cpu": "8", "limits.memory": "64Gi"},
    "limitRange": demo_config().JupyterQuota.profiles[0]["limitRange"],
    "gpuModel": "RTX 4090",
    "gpuMemory": "24Gi",
}


@pytest.fixture
def extra_quota_config():
    return {"profiles": [*demo_config().JupyterQuota.profiles, GAMMA]}


QWEN_VL_FULL = ["--model", "Qwen/Qwen-VL-Chat", "--tuner_type", "full"]


async def test_estimate_answers_the_design_shape(api):
    status, body = await api("POST", "estimate", body={"args": ["--model", "Qwen/Qwen2.5-7B-Instruct",
                                                                "--tuner_type", "lora", "--max_length", "2048"],
                                                       "gpus": 1})
    assert status == 200, body
    assert {"peak_bytes_per_gpu", "peak_gib_per_gpu", "breakdown", "assumptions"} <= set(body)
    assert set(body["breakdown"]) >= {"weights", "gradients", "optimizer", "activations", "logits", "overhead"}
    assert sum(body["breakdown"].values()) == body["peak_bytes_per_gpu"]


async def test_estimate_gpus_default_to_one_and_older_names_work(api):
    status, body = await api("POST", "estimate", body={"args": ["--model_type", "qwen-vl-chat", "--sft_type", "full"]})
    assert status == 200, body
    assert body["gpus"] == 1


@pytest.mark.parametrize("body, words", [
    ({"args": "--model Qwen/Qwen2.5-7B-Instruct"}, "list of strings"),
    ({"args": ["--model", 7]}, "must be a string"),
    ({"args": ["--model", "Qwen/Qwen2.5-7B-Instruct"], "gpus": 0.5}, "whole"),
    ({"args": ["--model", "Qwen/Qwen2.5-7B-Instruct"], "gpus": -1}, "at least 1"),
    ({"args": ["--model", "Qwen/Qwen2.5-7B-Instruct"], "gpus": 0}, "at least 1"),
    ({"args": ["--model", "Qwen/Qwen2.5-7B-Instruct"], "gpus": True}, "whole number"),
    ({"args": ["--model", "Qwen/Qwen2.5-7B-Instruct"], "extra": 1}, "unknown field"),
    ({"gpus": 1}, '"args" is required'),
    (["--model", "x"], "JSON object"),
    ({"args": ["--model", "nobody/no-such-model-13b"]}, "nobody/no-such-model-13b"),
    ({"args": ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max_length", "many"]}, "max_length"),
])
async def test_estimate_bad_input_is_400(api, body, words):
    status, answer = await api("POST", "estimate", body=body)
    assert status == 400, answer
    assert set(answer) == {"reason", "message"} and words in answer["message"], answer


async def test_estimate_body_not_json_is_400(api):
    status, answer = await api("POST", "estimate", body="{nope")
    assert status == 400 and "not valid JSON" in answer["message"]


async def test_plan_classic_scenario_on_one_free_24gib_gpu(api):
    status, body = await api("POST", "namespaces", "team-gamma", "plan", body={"args": QWEN_VL_FULL})
    assert status == 200, body
    assert body["namespace"] == "team-gamma" and body["gpusFree"] == 1 and body["gpuMemory"] == "24Gi"
    asked = body["rejected"][0]
    assert asked["plan"]["args"] == QWEN_VL_FULL
    assert asked["reason"].startswith("needs ") and "a GPU has 24 GiB (21.6 GiB with the 10% margin)" in asked["reason"]
    best = body["recommended"]
    assert best["args"][best["args"].index("--quant_method") + 1] == "bnb"
    assert best["estimate"]["peak_bytes_per_gpu"] <= 0.9 * 24 * GIB
    assert best["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert best["changes"][0]["field"] == "method" and "GiB" in best["changes"][0]["why"]
    assert body["candidates"][0] == best


async def test_plan_7b_full_on_team_alpha(api):
    status, body = await api("POST", "namespaces", "team-alpha", "plan",
                             body={"args": ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "full",
                                            "--max_length", "2048"]})
    assert status == 200, body
    assert body["gpusFree"] == 2 and body["recommended"] is not None
    assert body["recommended"]["estimate"]["peak_bytes_per_gpu"] <= 0.9 * 80 * GIB


async def test_a_plan_submits_as_it_is(api):
    """The recommended plan's args and resources are a job the namespace admits."""
    status, body = await api("POST", "namespaces", "team-gamma", "plan", body={"args": QWEN_VL_FULL})
    best = body["recommended"]
    status, job = await api("POST", "namespaces", "team-gamma", "jobs",
                            body={"args": best["args"], "gpus": best["gpus"], "resources": best["resources"]})
    assert status == 201, job
    status, again = await api("POST", "namespaces", "team-gamma", "plan", body={"args": QWEN_VL_FULL})
    assert status == 200 and again["gpusFree"] == 0 and again["recommended"] is None
    assert "0 GPUs free" in " ".join(r["reason"] for r in again["rejected"])
    await api("DELETE", "namespaces", "team-gamma", "jobs", job["name"])


async def test_plan_foreign_and_unknown_namespaces(api):
    status, answer = await api("POST", "namespaces", "team-beta", "plan", body={"args": QWEN_VL_FULL})
    assert status == 403 and answer["reason"] == "Forbidden" and "candidates" not in answer
    status, answer = await api("POST", "namespaces", "team-beta", "plan", body={"args": "not a list"})
    assert status == 403, "access is decided before the body is read"
    status, answer = await api("POST", "namespaces", "kube-system", "plan", body={"args": QWEN_VL_FULL})
    assert status == 404


@pytest.mark.parametrize("body, words", [
    ({"args": "--model Qwen/Qwen-VL-Chat"}, "list of strings"),
    ({"args": QWEN_VL_FULL, "gpus": 1.5}, "whole"),
    ({"args": QWEN_VL_FULL, "gpus": -2}, "at least 1"),
    ({"args": ["--model", "nobody/no-such-model-13b"]}, "nobody/no-such-model-13b"),
    ({"args": QWEN_VL_FULL, "namespace": "x"}, "unknown field"),
])
async def test_plan_bad_input_is_400(api, body, words):
    status, answer = await api("POST", "namespaces", "team-alpha", "plan", body=body)
    assert status == 400, answer
    assert words in answer["message"], answer
