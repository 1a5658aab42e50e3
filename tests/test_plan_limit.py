"""Plans and estimates in flight are bounded (``max_concurrent_plans``); balance reads never wait on them."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

PLAN = {"args": ["--model", "Qwen/Qwen2.5-0.5B", "--tuner_type", "lora"]}


@pytest.fixture
def extra_quota_config():
    return {"max_concurrent_plans": 1}


@pytest.fixture
def held_plan(jp_serverapp, monkeypatch):
    """The service's first plan waits, in progress, until ``release`` is set; later plans run as usual."""
    service = jp_serverapp.web_app.settings["jupyter_quota_service"]
    real_plan = service.plan
    started, release = threading.Event(), threading.Event()

    def plan(*args):
        if not started.is_set():
            started.set()
            release.wait(timeout=120)
        return real_plan(*args)

    monkeypatch.setattr(service, "plan", plan)
    yield started, release
    release.set()


async def call(jp_fetch, method, *path, body=None):
    response = await jp_fetch(
        "quota", "v1", *path, method=method, raise_error=False, body=None if body is None else json.dumps(body)
    )
    return response.code, response.headers, json.loads(response.body)


async def test_a_plan_beyond_the_limit_gets_429_and_a_balance_read_answers_meanwhile(jp_fetch, held_plan):
    started, release = held_plan
    first = asyncio.ensure_future(call(jp_fetch, "POST", "namespaces", "team-alpha", "plan", body=PLAN))
    assert await asyncio.get_running_loop().run_in_executor(None, started.wait, 60), "the first plan never started"

    status, headers, answer = await asyncio.wait_for(
        call(jp_fetch, "POST", "namespaces", "team-alpha", "plan", body=PLAN), 60
    )
    assert status == 429, answer
    assert answer["reason"] == "TooManyRequests"
    assert "1 plan" in answer["message"] and "max_concurrent_plans" in answer["message"], answer
    assert int(headers["Retry-After"]) >= 1

    status, headers, answer = await asyncio.wait_for(call(jp_fetch, "POST", "estimate", body={**PLAN, "gpus": 1}), 60)
    assert status == 429, answer

    status, _, balance = await asyncio.wait_for(call(jp_fetch, "GET", "namespaces", "team-alpha", "balance"), 60)
    assert status == 200 and balance["namespace"] == "team-alpha"
    assert not first.done(), "the first plan was still held"

    release.set()
    status, _, answer = await asyncio.wait_for(first, 60)
    assert status == 200, answer
    status, _, answer = await call(jp_fetch, "POST", "namespaces", "team-alpha", "plan", body=PLAN)
    assert status == 200, answer  # the slot is free again
