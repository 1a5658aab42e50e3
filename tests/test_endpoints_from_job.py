"""Endpoints from a finished fine-tune by its name (``"job"``), through a real jupyter-server in
both modes: the service fills in the base model and the job's last checkpoint from the job's own
record and log; what cannot be served is refused with a 4xx that says what to do.

The fine-tunes are ``tests/fake_trainer.py`` jobs (they log ``Saving model checkpoint to ...`` as
transformers' Trainer does), the servers ``tests/fake_deploy.py``; the real pair is the serving
notebook's test (tests/e2e/test_serve_notebook.py).
"""

# ruff: noqa: F811 - the fixtures of test_endpoints, imported to be used here by name

from __future__ import annotations

import pytest
from openapi_contract import assert_matches
from quota_testing import wait_for_phase
from test_endpoints import (  # noqa: F401 - the module's fixtures: fake deploy, both modes, the owner
    NS,
    api,
    extra_quota_config,
    jp_server_config,
    quota_mode,
    wait_cpu_used,
    wait_endpoint,
)

from jupyter_quota import reasons


async def finished_job(api, name, args, namespace=NS, user=None):
    kwargs = {"user": user} if user else {}
    status, job = await api("POST", "namespaces", namespace, "jobs", body={"name": name, "args": args}, **kwargs)
    assert status == 201, job
    return await wait_for_phase(
        lambda *a, **k: api(*a, **{**kwargs, **k}), namespace, name, ("Succeeded", "Failed"), timeout=60
    )


async def test_serve_a_finished_lora_fine_tune_by_its_name(api, tmp_path):
    out = tmp_path / "out" / "v0-run"
    train = ["--model", "/models/tiny-base", "--model_type", "qwen2", "--steps", "2", "--save-to", str(out)]
    job = await finished_job(api, "tune", train)
    assert job["phase"] == "Succeeded", job

    body = {"job": "tune", "name": "tuned", "args": ["--infer_backend", "transformers"]}
    status, created = await api("POST", "namespaces", NS, "endpoints", body=body)
    assert status == 201, created
    assert_matches("Endpoint", created)
    checkpoint = str(out / "checkpoint-2")
    assert created["args"][:8] == [
        "--model", "/models/tiny-base", "--adapters", checkpoint, "--model_type", "qwen2",
        "--infer_backend", "transformers",
    ], "the base model and the last checkpoint come from the job, then its training's, then the user's"  # fmt: skip
    ready = await wait_endpoint(api, "tuned", ("Ready",))
    assert ready["models"] == ["tiny-base"], ready
    await api("DELETE", "namespaces", NS, "endpoints", "tuned")
    await wait_cpu_used(api, "0")


async def test_a_full_fine_tune_is_served_from_its_checkpoint(api, tmp_path):
    train = ["--model", "/models/tiny-base", "--tuner_type", "full", "--steps", "3", "--save-to", str(tmp_path)]
    assert (await finished_job(api, "full", train))["phase"] == "Succeeded"
    status, created = await api("POST", "namespaces", NS, "endpoints", body={"job": "full"})
    assert status == 201, created
    assert created["args"][:2] == ["--model", str(tmp_path / "checkpoint-3")] and "--adapters" not in created["args"]
    ready = await wait_endpoint(api, created["name"], ("Ready",))
    assert ready["models"] == ["checkpoint-3"]
    await api("DELETE", "namespaces", NS, "endpoints", created["name"])


async def test_what_is_not_a_finished_fine_tune_of_the_team_is_refused(api, hold, tmp_path):
    # no checkpoint: it trained, but saved nothing
    assert (await finished_job(api, "nosave", ["--model", "/models/tiny-base", "--steps", "2"]))["phase"] == "Succeeded"
    # not Succeeded: still running, and failed
    status, _ = await api("POST", "namespaces", NS, "jobs", body={"name": "running", "args": hold})
    assert status == 201
    fails = ["--model", "m", "--steps", "1", "--save-to", str(tmp_path / "failed-out"), "--exit", "2"]
    failed = await finished_job(api, "failed", fails)
    assert failed["phase"] == "Failed"
    # an endpoint is a job, but not a fine-tune
    status, _ = await api("POST", "namespaces", NS, "endpoints", body={"name": "ep", "args": ["--model", "tiny"]})
    assert status == 201
    cases = [
        ({"job": "nosave"}, 409, reasons.NOT_SERVABLE, "saved no checkpoint"),
        ({"job": "running"}, 409, reasons.NOT_SERVABLE, "Running"),
        ({"job": "failed"}, 409, reasons.NOT_SERVABLE, "not Succeeded"),
        ({"job": "ep"}, 400, "BadRequest", "itself an endpoint"),
        ({"job": "nosave", "args": ["--model", "x"]}, 400, "BadRequest", "leave out --model"),
        ({"job": "Not_A_Name"}, 400, "BadRequest", "the name of a finished fine-tune"),
        ({"job": "nosave", "args": "--infer_backend vllm"}, 400, "BadRequest", "a list of strings"),
        ({"job": "nosave", "args": [5]}, 400, "BadRequest", "a list of strings"),
    ]
    await assert_refused(api, cases)
    _, listed = await api("GET", "namespaces", NS, "endpoints")
    assert [e["name"] for e in listed["endpoints"]] == ["ep"], "no refused request left an endpoint"
    await api("DELETE", "namespaces", NS, "endpoints", "ep")


async def assert_refused(api, cases):
    for body, code, reason, words in cases:
        status, answer = await api("POST", "namespaces", NS, "endpoints", body=body)
        assert (status, answer.get("reason")) == (code, reason), (body, answer)
        assert words in answer["message"], (body, answer)


@pytest.mark.parametrize("quota_mode", ["embedded"])  # another user reaches the server only in this mode
async def test_another_teams_fine_tune_and_its_output_are_refused(api, tmp_path):
    """Its job by name is not found in the caller's namespace (404) and its namespace is not
    theirs (403); its checkpoint given as a path is refused (403), however the path is spelt."""
    beta_out = tmp_path / "beta-out"
    beta = ["--model", "/models/tiny-base", "--steps", "1", "--save-to", str(beta_out)]
    assert (await finished_job(api, "beta-tune", beta, "team-beta", "beta-user"))["phase"] == "Succeeded"
    beta_checkpoint = str(beta_out / "checkpoint-1")
    cases = [
        ({"job": "beta-tune"}, 404, "NotFound", "not found in namespace team-alpha"),
        ({"job": "team-beta/beta-tune"}, 400, "BadRequest", "another team's namespace"),
        ({"args": ["--model", "/models/tiny-base", "--adapters", beta_checkpoint]}, 403, "Forbidden", "another team"),
        ({"args": ["--model", f"{beta_checkpoint}/../checkpoint-1"]}, 403, "Forbidden", "another team"),
        ({"args": ["--model", str(beta_out)]}, 403, "Forbidden", "another team"),
    ]
    await assert_refused(api, cases)
    status, answer = await api("POST", "namespaces", "team-beta", "endpoints", body={"job": "beta-tune"})
    assert status == 403, answer
    # the team's own member may serve it, by name or by path
    for body in ({"job": "beta-tune"}, {"args": ["--model", "/models/tiny-base", "--adapters", beta_checkpoint]}):
        status, answer = await api("POST", "namespaces", "team-beta", "endpoints", body=body, user="beta-user")
        assert status == 201 and answer["args"][3] == beta_checkpoint, answer
        await api("DELETE", "namespaces", "team-beta", "endpoints", answer["name"], user="beta-user")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--infer_backend", "vllm", "--vllm_max_model_len", "1000000"], "longer than"),
        (["--infer_backend", "sglang", "--sglang_context_length", "999999"], "longer than"),
        (["--infer_backend", "vllm", "--vllm_tensor_parallel_size", "3"], "does not divide"),
        (["--infer_backend", "vllm", "--vllm_gpu_memory_utilization", "1.2"], "at most 1"),
        (["--infer_backend", "sglang", "--sglang_mem_fraction_static", "2"], "at most 1"),
    ],
)
async def test_what_the_model_cannot_serve_is_a_400(api, args, words):
    """Checked against the model's own config before anything starts (the catalog's Qwen2.5-7B:
    28 heads, a context of 32768)."""
    body = {"args": ["--model", "Qwen/Qwen2.5-7B-Instruct", *args]}
    status, answer = await api("POST", "namespaces", NS, "endpoints", body=body)
    assert status == 400 and words in answer["message"], answer
    _, listed = await api("GET", "namespaces", NS, "endpoints")
    assert listed["endpoints"] == []
