"""POST /quota/v1/estimate and POST /quota/v1/namespaces/{ns}/plan on a real server.

Beside the demo teams, a test team ``gamma`` (the caller is a member) has one free 24 GiB GPU.
"""

from __future__ import annotations

import getpass

import pytest
from openapi_contract import assert_matches
from quota_testing import QUOTA_MODES, demo_config

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


_ALPHA_LIMITS = demo_config().JupyterQuota.profiles[0]["limitRange"]["limits"][0]
#: like team-alpha (two 80 GiB GPUs) with 256Gi of memory a pod and in its quota: room for offload
DELTA = {
    "team": "delta",
    "namespace": "team-delta",
    "users": [getpass.getuser()],
    "hard": {"requests.nvidia.com/gpu": "2", "requests.cpu": "8", "limits.memory": "256Gi"},
    "limitRange": {"limits": [{**_ALPHA_LIMITS, "max": {**_ALPHA_LIMITS["max"], "memory": "256Gi"}}]},
    "gpuModel": "A100 80GB",
    "gpuMemory": "80Gi",
}


@pytest.fixture(params=QUOTA_MODES)
def quota_mode(request):
    return request.param


@pytest.fixture
def extra_quota_config():
    return {"profiles": [*demo_config().JupyterQuota.profiles, GAMMA, DELTA]}


QWEN_VL_FULL = ["--model", "Qwen/Qwen-VL-Chat", "--tuner_type", "full"]


async def test_estimate_answers_the_design_shape(api):
    status, body = await api(
        "POST",
        "estimate",
        body={
            "args": ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "lora", "--max_length", "2048"],
            "gpus": 1,
        },
    )
    assert status == 200, body
    assert_matches("Estimate", body)
    assert {"peakBytesPerGpu", "peakGibPerGpu", "breakdown", "assumptions"} <= set(body)
    assert set(body["breakdown"]) >= {"weights", "gradients", "optimizer", "activations", "logits", "overhead"}
    assert sum(body["breakdown"].values()) == body["peakBytesPerGpu"]


async def test_estimate_gpus_default_to_one_and_older_names_work(api):
    status, body = await api("POST", "estimate", body={"args": ["--model_type", "qwen-vl-chat", "--sft_type", "full"]})
    assert status == 200, body
    assert body["gpus"] == 1


@pytest.mark.parametrize(
    "body, words",
    [
        ({"args": "--model Qwen/Qwen2.5-7B-Instruct"}, "list of strings"),
        ({"args": ["--model", 7]}, "must be a string"),
        ({"args": ["--model", "Qwen/Qwen2.5-7B-Instruct"], "gpus": 0.5}, "whole"),
        ({"args": ["--model", "Qwen/Qwen2.5-7B-Instruct"], "gpus": -1}, "at least 1"),
        ({"args": ["--model", "Qwen/Qwen2.5-7B-Instruct"], "gpus": 0}, "at least 1"),
        ({"args": ["--model", "Qwen/Qwen2.5-7B-Instruct"], "gpus": True}, "whole number"),
        ({"args": ["--model", "Qwen/Qwen2.5-7B-Instruct"], "extra": 1}, "unknown field"),
        ({"gpus": 1}, '"args" is required'),
        (["--model", "x"], "JSON object"),
        ({"args": ["--model", "nobody/no-such-model"]}, "--model_size"),
        ({"args": ["--model", "nobody/no-such-model"], "modelSize": "huge"}, "'huge'"),
        ({"args": ["--model", "nobody/no-such-model"], "modelSize": 13}, '"modelSize" must be a string'),
        ({"args": ["--model", "nobody/no-such-model"], "modelSize": "8B-A9B"}, "at most the total"),
        ({"args": ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max_length", "many"]}, "max_length"),
    ],
)
async def test_estimate_bad_input_is_400(api, body, words):
    status, answer = await api("POST", "estimate", body=body)
    assert status == 400, answer
    assert set(answer) == {"reason", "message"} and words in answer["message"], answer


async def test_estimate_of_an_unknown_model_by_its_size(api):
    """modelSize sizes a model the estimator has no facts for; the answer says it is approximate."""
    status, body = await api("POST", "estimate", body={"args": ["--model", "acme/custom"], "modelSize": "30B-A3B"})
    assert status == 200, body
    assert body["approximate"] is True and body["model"]["approximate"] is True and body["model"]["numExperts"] > 0
    status, real = await api("POST", "estimate", body={"args": ["--model", "Qwen/Qwen3-8B"], "modelSize": "30B-A3B"})
    assert status == 200 and real["approximate"] is False and real["model"]["source"] == "catalog"
    assert any("--model_size 30B-A3B not used" in a for a in real["assumptions"])


async def test_estimate_body_not_json_is_400(api):
    status, answer = await api("POST", "estimate", body="{nope")
    assert status == 400 and "not valid JSON" in answer["message"]


async def test_plan_classic_scenario_on_one_free_24gib_gpu(api):
    status, body = await api("POST", "namespaces", "team-gamma", "plan", body={"args": QWEN_VL_FULL})
    assert status == 200, body
    assert_matches("PlanResult", body)
    assert body["namespace"] == "team-gamma" and body["gpusFree"] == 1 and body["gpuMemory"] == "24Gi"
    asked = body["rejected"][0]
    assert asked["plan"]["args"] == QWEN_VL_FULL
    assert asked["reason"].startswith("needs ") and "a GPU has 24 GiB (21.6 GiB with the 10% margin)" in asked["reason"]
    best = body["recommended"]
    assert best["args"][best["args"].index("--quant_method") + 1] == "bnb"
    assert best["estimate"]["peakBytesPerGpu"] <= 0.9 * 24 * GIB
    assert best["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert best["changes"][0]["field"] == "method" and "GiB" in best["changes"][0]["why"]
    assert body["candidates"][0] == best


async def test_plan_of_an_unknown_model_by_its_size(api):
    """A plan for a model known only by modelSize: every estimate in it is approximate."""
    args = ["--model", "acme/custom", "--tuner_type", "full", "--max_length", "2048"]
    status, body = await api("POST", "namespaces", "team-alpha", "plan", body={"args": args, "modelSize": "7B"})
    assert status == 200, body
    assert_matches("PlanResult", body)
    plans = [body["request"], *body["candidates"]]
    assert body["recommended"] is not None and all(p["estimate"]["approximate"] for p in plans)


async def test_plan_7b_full_on_team_alpha(api):
    status, body = await api(
        "POST",
        "namespaces",
        "team-alpha",
        "plan",
        body={"args": ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "full", "--max_length", "2048"]},
    )
    assert status == 200, body
    assert_matches("PlanResult", body)  # offload plans (hostMemory) and rejected summaries (no resources)
    assert body["gpusFree"] == 2 and body["recommended"] is not None
    assert body["recommended"]["estimate"]["peakBytesPerGpu"] <= 0.9 * 80 * GIB
    # DeepSpeed CPU offload fits the GPU but its host memory does not fit team-alpha's 128Gi
    offload = [r for r in body["rejected"] if "offload" in r["plan"]["summary"]]
    assert offload and all(r["plan"]["hostMemory"] for r in offload)
    assert any(
        r["reason"].startswith("zero2_offload needs ")
        and "GiB of host memory" in r["reason"]
        and r["reason"].endswith(
            "the pod may have at most 128Gi (the LimitRange's max) and team-alpha has 128Gi of limits.memory left"
        )
        for r in offload
    ), offload


async def test_plan_7b_full_with_offload_where_the_pod_may_hold_its_host_memory(api):
    status, body = await api(
        "POST",
        "namespaces",
        "team-delta",
        "plan",
        body={"args": ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "full", "--max_length", "2048"]},
    )
    assert status == 200, body
    best = body["recommended"]
    args = best["args"]
    assert args[args.index("--tuner_type") + 1] == "full" and args[args.index("--deepspeed") + 1] == "zero2_offload"
    assert best["estimate"]["peakBytesPerGpu"] <= 0.9 * 80 * GIB
    assert best["hostMemory"] == best["resources"]["requests"]["memory"] == best["resources"]["limits"]["memory"]
    assert any("estimate_zero2_model_states_mem_needs" in a for a in body["assumptions"])


async def test_a_plan_submits_as_it_is(api):
    """The recommended plan's args and resources are a job the namespace admits."""
    status, body = await api("POST", "namespaces", "team-gamma", "plan", body={"args": QWEN_VL_FULL})
    best = body["recommended"]
    status, job = await api(
        "POST",
        "namespaces",
        "team-gamma",
        "jobs",
        body={"args": best["args"], "gpus": best["gpus"], "resources": best["resources"]},
    )
    assert status == 201, job
    status, again = await api("POST", "namespaces", "team-gamma", "plan", body={"args": QWEN_VL_FULL})
    assert status == 200 and again["gpusFree"] == 0 and again["recommended"] is None
    assert "0 GPUs left" in " ".join(r["reason"] for r in again["rejected"])
    await api("DELETE", "namespaces", "team-gamma", "jobs", job["name"])


async def test_plan_foreign_and_unknown_namespaces(api):
    status, answer = await api("POST", "namespaces", "team-beta", "plan", body={"args": QWEN_VL_FULL})
    assert status == 403 and answer["reason"] == "Forbidden" and "candidates" not in answer
    status, answer = await api("POST", "namespaces", "team-beta", "plan", body={"args": "not a list"})
    assert status == 403, "access is decided before the body is read"
    status, answer = await api("POST", "namespaces", "kube-system", "plan", body={"args": QWEN_VL_FULL})
    assert status == 404


@pytest.mark.parametrize(
    "body, words",
    [
        ({"args": "--model Qwen/Qwen-VL-Chat"}, "list of strings"),
        ({"args": QWEN_VL_FULL, "gpus": 1.5}, "whole"),
        ({"args": QWEN_VL_FULL, "gpus": -2}, "at least 1"),
        ({"args": ["--model", "nobody/no-such-model"]}, "nobody/no-such-model"),
        ({"args": QWEN_VL_FULL, "modelSize": "7 billion"}, "'7 billion'"),
        ({"args": QWEN_VL_FULL, "namespace": "x"}, "unknown field"),
    ],
)
async def test_plan_bad_input_is_400(api, body, words):
    status, answer = await api("POST", "namespaces", "team-alpha", "plan", body=body)
    assert status == 400, answer
    assert words in answer["message"], answer
