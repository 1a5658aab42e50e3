"""POST /quota/v1/estimate/serve on a real server: the contract's shape, and 400s a person can act on."""

from __future__ import annotations

import pytest
from openapi_contract import assert_matches

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


@pytest.mark.parametrize(
    "body, words",
    [
        ({"args": [*QWEN3, "--vllm_max_model_len", "131072"]}, "longer than Qwen/Qwen3-8B's context"),
        ({"args": [*QWEN3, "--vllm_gpu_memory_utilization", "1.5"]}, "at most 1"),
        ({"args": [*QWEN3, "--vllm_tensor_parallel_size", "5"]}, "does not divide"),
        ({"args": [*QWEN3, "--vllm_tensor_parallel_size", "2"], "gpus": 1}, "needs 2 GPUs"),
        ({"args": QWEN3, "gpuMemory": "lots"}, '"gpuMemory"'),
        ({"args": QWEN3, "modelSize": "8B"}, "unknown field"),
        ({"gpus": 1}, '"args" is required'),
    ],
)
async def test_serve_estimate_bad_input_is_400(api, body, words):
    status, answer = await api("POST", "estimate/serve", body=body)
    assert status == 400, answer
    assert set(answer) == {"reason", "message"} and words in answer["message"], answer
