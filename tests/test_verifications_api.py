"""POST /quota/v1/verifications and GET /quota/v1/verifications/{id} on a real server: the
simulated training step of an argv in a child process (``service/verifications.py``), here on a
tiny local model whose config.json the test writes."""

from __future__ import annotations

import json

import pytest
from openapi_contract import assert_matches
from quota_testing import QUOTA_MODES, HeaderIdentityProvider, eventually

#: a two-layer Qwen2 small enough for a step in seconds; the step reads its config.json only
TINY_QWEN2 = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1024,
    "max_position_embeddings": 1024,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}


@pytest.fixture
def tiny_model(tmp_path):
    folder = tmp_path / "tiny-qwen2"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_QWEN2))
    return str(folder)


async def settled(api, vid: str, user: str | None = None) -> dict:
    """The verification ``vid`` once it is no longer running (the child's end is the event)."""

    async def read():
        status, verification = await api("GET", "verifications", vid, user=user)
        assert status == 200, verification
        return verification

    return await eventually(
        read, lambda v: v["state"] != "running", lambda v: f"verification {vid} still running: {v}", timeout=300
    )


@pytest.mark.parametrize("quota_mode", QUOTA_MODES)
async def test_a_verification_runs_the_step_in_the_background_and_a_second_ask_shares_it(api, tiny_model):
    args = ["--model", tiny_model, "--tuner_type", "lora", "--max_length", "256"]
    status, started = await api("POST", "verifications", body={"args": args, "gpus": 1})
    assert status == 202, started
    assert started["state"] == "running" and started["result"] is None and started["finishedAt"] is None
    assert_matches("Verification", started)

    done = await settled(api, started["id"])
    assert done["state"] == "done", done
    assert_matches("Verification", done)
    result = done["result"]
    assert result["regime"].startswith("lora/r8/") and result["regime"].endswith("/t256")
    # what the allocator model holds is at least what is live; the figure adds the measured gap
    assert 0 < result["liveBytes"] <= result["allocatedBytes"] <= result["reservedBytes"]
    assert result["peakBytesPerGpu"] == result["reservedBytes"] + result["foreachBytes"] + result["workspaceBytes"]
    assert sum(result["breakdown"].values()) == result["liveBytes"]

    status, again = await api("POST", "verifications", body={"args": args})
    assert status == 200 and again["state"] == "done", again
    assert again["id"] != started["id"] and again["result"] == result


async def test_what_the_step_cannot_simulate_is_answered_at_once_with_the_reason(api):
    status, answer = await api(
        "POST",
        "verifications",
        body={"args": ["--model", "Qwen/Qwen2.5-7B-Instruct", "--deepspeed", "zero3"], "gpus": 2},
    )
    assert status == 200, answer
    assert answer["state"] == "unsupported" and answer["result"] is None
    assert "2 GPUs" in answer["reason"] and "--deepspeed zero3" in answer["reason"]
    assert_matches("Verification", answer)

    status, answer = await api("POST", "verifications", body={"args": ["--model", "no-such/model-8B"]})
    assert status == 200 and answer["state"] == "unsupported", answer
    assert "no config.json facts" in answer["reason"]


@pytest.mark.parametrize(
    "written, says",
    [
        ("[1, 2]", "names no model_type"),
        ("{}", "names no model_type"),
        ('{"model_type": 5}', "names no model_type"),
        ("not json", "could not be read"),
        (None, "could not be read"),  # a folder without one
    ],
)
async def test_a_local_config_json_that_is_no_model_config_is_unsupported_with_the_reason(api, tmp_path, written, says):
    folder = tmp_path / "model"
    folder.mkdir()
    if written is not None:
        (folder / "config.json").write_text(written)
    status, answer = await api("POST", "verifications", body={"args": ["--model", str(folder)]})
    assert status == 200 and answer["state"] == "unsupported", answer
    assert says in answer["reason"], answer


@pytest.mark.parametrize(
    "body, says",
    [
        ({}, '"args" is required'),
        ({"args": "--model Qwen/Qwen2.5-7B-Instruct"}, "list"),
        ({"args": ["--model", "Qwen/Qwen2.5-7B-Instruct"], "modelSize": "7B"}, "unknown field(s) 'modelSize'"),
        ({"args": ["--tuner_type", "lora"]}, "--model is required"),
        ({"args": ["--model", "Qwen/Qwen2.5-7B-Instruct"], "gpus": 0}, "gpus"),
    ],
)
async def test_a_bad_body_is_a_400_that_says_what_to_send(api, body, says):
    status, answer = await api("POST", "verifications", body=body)
    assert status == 400, answer
    assert says in answer["message"], answer


async def test_an_unknown_id_is_a_404_that_says_to_start_again(api):
    status, answer = await api("GET", "verifications", "0123456789abcdef")
    assert status == 404, answer
    assert "POST /verifications" in answer["message"]


class TestOwnership:
    @pytest.fixture
    def jp_server_config(self, jp_server_config):
        jp_server_config.ServerApp.identity_provider_class = HeaderIdentityProvider
        return jp_server_config

    async def test_a_verification_is_its_callers_alone(self, api):
        body = {"args": ["--model", "Qwen/Qwen2.5-7B-Instruct", "--deepspeed", "zero2"]}
        status, ann = await api("POST", "verifications", body=body, user="ann")
        assert status == 200, ann
        status, answer = await api("GET", "verifications", ann["id"], user="bob")
        assert status == 404, answer
        status, answer = await api("GET", "verifications", ann["id"], user="ann")
        assert status == 200 and answer["reason"] == ann["reason"], answer
