"""Endpoints on the local backend, through a real jupyter-server: create, Ready on ``/health``,
the OpenAI-compatible API proxied (plain and streamed), team membership, bad input, DELETE and
idle stop returning the quota.

The server behind each endpoint is ``tests/fake_deploy.py`` (``deploy_command``), a real process
on a real port with the routes ``swift deploy`` has; the real ``swift deploy`` on the tiny model
is tests/e2e/test_swift_deploy_endpoint.py. Waits are on phases the API reports.
"""

from __future__ import annotations

import getpass
import json
import sys
from pathlib import Path

import pytest
from openapi_contract import assert_matches
from quota_testing import QUOTA_MODES, HeaderIdentityProvider, eventually

from jupyter_quota import reasons

FAKE_DEPLOY = str(Path(__file__).resolve().parent / "fake_deploy.py")
NS = "team-alpha"
CPU = "requests.cpu"
OWNER = getpass.getuser()


@pytest.fixture
def extra_quota_config():
    return {"deploy_command": [sys.executable, FAKE_DEPLOY]}


@pytest.fixture(params=QUOTA_MODES)
def quota_mode(request):
    """Embedded, and through a quota service as under a hub (the user server forwards)."""
    return request.param


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config.ServerApp.identity_provider_class = HeaderIdentityProvider
    return jp_server_config


@pytest.fixture
def api(api):
    """As the server's owner (a member of team-alpha) unless ``user`` says otherwise."""

    async def call(*path, user=OWNER, **kwargs):
        return await api(*path, user=user, **kwargs)

    return call


async def wait_endpoint(api, name, phases, timeout=120.0):
    async def read():
        status, endpoint = await api("GET", "namespaces", NS, "endpoints", name)
        assert status == 200, endpoint
        return endpoint

    def done(endpoint) -> bool:
        if endpoint["phase"] in phases:
            return True
        assert endpoint["phase"] not in ("Failed", "Stopped"), endpoint  # it will not get there
        return False

    return await eventually(read, done, lambda e: f"endpoint {name} stayed {e['phase']}: {e}", timeout)


async def cpu_used(api) -> str:
    _, balance = await api("GET", "namespaces", NS, "balance")
    return balance["resources"][CPU]["used"]


async def wait_cpu_used(api, value, timeout=60.0):
    await eventually(
        lambda: cpu_used(api), value.__eq__, lambda used: f"{CPU} used stayed {used}, not {value}", timeout
    )


async def test_an_endpoint_serves_through_the_proxy_and_delete_returns_its_quota(api, jp_fetch, jp_base_url, tmp_path):
    assert await cpu_used(api) == "0"
    gate = tmp_path / "first-chunk-arrived"
    args = ["--model", "/models/tiny-chat", "--stream_gate", str(gate)]
    status, created = await api("POST", "namespaces", NS, "endpoints", body={"name": "chat", "args": args})
    assert status == 201, created
    assert_matches("Endpoint", created)
    assert created["phase"] in ("Pending", "Starting") and created["models"] == []
    assert created["url"] == f"{jp_base_url}quota/v1/namespaces/{NS}/endpoints/chat/v1/"
    assert created["args"][:4] == args and created["args"][4:6] == ["--host", "127.0.0.1"]
    assert await cpu_used(api) == "2", "an endpoint holds quota as a job does (the LimitRange's default request)"

    ready = await wait_endpoint(api, "chat", ("Ready",))
    assert ready["models"] == ["tiny-chat"] and ready["readyAt"]
    _, listed = await api("GET", "namespaces", NS, "endpoints")
    assert [e["name"] for e in listed["endpoints"]] == ["chat"]
    assert_matches("EndpointList", listed)
    _, job = await api("GET", "namespaces", NS, "jobs", "chat")
    assert job["kind"] == "endpoint", "an endpoint is a kind of job"
    assert_matches("Job", job)

    proxied = ("namespaces", NS, "endpoints", "chat", "v1")
    status, models = await api("GET", *proxied, "models")
    assert status == 200 and models["data"][0]["id"] == "tiny-chat"
    chat = {"model": "tiny-chat", "messages": [{"role": "user", "content": "hello there"}]}
    status, answer = await api("POST", *proxied, "chat", "completions", body=chat)
    assert status == 200 and answer["choices"][0]["message"]["content"] == "echo: hello there"

    # a streamed answer passes through as server-sent events, chunk by chunk: the server holds
    # the rest of its answer until the first chunk has reached this client
    chunks: list[bytes] = []

    def arrived(chunk: bytes) -> None:
        chunks.append(chunk)
        gate.touch()

    response = await jp_fetch(
        "quota",
        "v1",
        *proxied,
        "chat",
        "completions",
        method="POST",
        body=json.dumps({**chat, "stream": True}),
        streaming_callback=arrived,
        headers={"X-Test-User": OWNER},
    )
    assert response.code == 200 and response.headers["Content-Type"] == "text/event-stream"
    events = [line[6:] for line in b"".join(chunks).decode().splitlines() if line.startswith("data: ")]
    assert events[-2:] == [json.dumps({"gate": "opened"}), "[DONE]"], "the first chunk was held back"
    assert [json.loads(e)["choices"][0]["delta"]["content"] for e in events[:-2]] == ["echo:", "hello", "there"]
    status, missing = await api("GET", *proxied, "nothing")
    assert status == 404 and missing == {"detail": "Not Found"}, "the server's own answer passes through"
    _, seen = await api("GET", "namespaces", NS, "endpoints", "chat")
    assert seen["lastRequestAt"] >= ready["readyAt"]

    status, deleted = await api("DELETE", "namespaces", NS, "endpoints", "chat")
    assert status == 200 and deleted["name"] == "chat"
    await wait_cpu_used(api, "0")
    stopped = await wait_endpoint(api, "chat", ("Stopped",))
    assert stopped["reason"] == reasons.CANCELLED and stopped["models"] == []
    assert_matches("Endpoint", stopped)
    status, refused = await api("POST", *proxied, "chat", "completions", body=chat)
    assert status == 409 and refused["reason"] == reasons.NOT_READY and "Stopped" in refused["message"], refused


async def test_only_the_team_may_see_call_or_delete_an_endpoint(api):
    status, created = await api("POST", "namespaces", NS, "endpoints", body={"args": ["--model", "tiny"]})
    assert status == 201 and created["name"].startswith("serve-"), created
    name = created["name"]
    await wait_endpoint(api, name, ("Ready",))
    for method, path in [
        ("GET", ("endpoints", name)),
        ("GET", ("endpoints",)),
        ("DELETE", ("endpoints", name)),
        ("GET", ("endpoints", name, "v1", "models")),
        ("POST", ("endpoints", name, "v1", "chat", "completions")),
    ]:
        body = {"messages": []} if method == "POST" else None
        status, answer = await api(method, "namespaces", NS, *path, body=body, user="beta-user")
        assert status == 403 and answer["reason"] == "Forbidden", (method, path, answer)
    status, answer = await api("POST", "namespaces", "team-beta", "endpoints", body={"args": ["--model", "tiny"]})
    assert status == 403 and "team-beta" in answer["message"], answer
    status, _ = await api("DELETE", "namespaces", NS, "endpoints", name)
    assert status == 200


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"args": ["--infer_backend", "transformers"]}, "--model"),
        ({"args": ["--model", "tiny", "--port", "8000"]}, "--port is set by the service"),
        ({"args": ["--model", "tiny", "--host=0.0.0.0"]}, "--host is set by the service"),
        ({"args": ["--model", "tiny", "--vllm_gpu_memory_utilization", "1.5"]}, "at most 1"),
        ({"args": "--model tiny"}, "list of strings"),
        ({"name": "chat"}, '"args" is required'),
        ({"args": ["--model", "tiny"], "resources": {}}, "unknown field"),
        ({"args": ["--model", "tiny"], "name": "Not_A_Name"}, "not a valid job name"),
        ({"args": ["--model", "tiny"], "gpus": 0.5}, "whole"),
        ({"args": ["--model", "tiny"], "priority": "urgent"}, "priority"),
    ],
)
async def test_bad_input_is_a_400_that_says_what_to_fix(api, body, words):
    status, answer = await api("POST", "namespaces", NS, "endpoints", body=body)
    assert status == 400, answer
    assert words in answer["message"], answer
    _, listed = await api("GET", "namespaces", NS, "endpoints")
    assert listed["endpoints"] == []


async def test_a_server_that_exits_with_an_error_is_failed_with_its_last_log_line(api):
    body = {"name": "broken", "args": ["--model", "tiny", "--crash", "CUDA out of memory at start"]}
    status, _ = await api("POST", "namespaces", NS, "endpoints", body=body)
    assert status == 201
    failed = await wait_endpoint(api, "broken", ("Failed",))
    assert failed["reason"] == reasons.ERROR and "exit code 3" in failed["message"], failed
    assert "CUDA out of memory at start" in failed["message"] and failed["models"] == []
    assert await cpu_used(api) == "0"


async def test_unknown_endpoint_is_404_and_a_starting_one_is_409_through_the_proxy(api):
    status, answer = await api("GET", "namespaces", NS, "endpoints", "nope")
    assert status == 404 and "nope" in answer["message"]
    status, answer = await api("GET", "namespaces", NS, "endpoints", "nope", "v1", "models")
    assert status == 404
    body = {"name": "never", "args": ["--model", "tiny", "--fail_health"]}
    status, _ = await api("POST", "namespaces", NS, "endpoints", body=body)
    assert status == 201
    await wait_endpoint(api, "never", ("Starting",))
    status, answer = await api("GET", "namespaces", NS, "endpoints", "never", "v1", "models")
    assert status == 409 and answer["reason"] == reasons.NOT_READY and "Starting" in answer["message"], answer
    await api("DELETE", "namespaces", NS, "endpoints", "never")
    await wait_cpu_used(api, "0")


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
async def test_a_method_the_proxy_route_lacks_is_a_405_that_names_the_methods_it_has(jp_fetch, method):
    """In both modes: the forwarder relays the service's 405 and its Allow (schemathesis found,
    in service mode, a PUT's 405 without Allow and a PATCH's 500)."""
    response = await jp_fetch(
        "quota", "v1", "namespaces", NS, "endpoints", "any", "v1", "models", method=method, body="{}",
        headers={"X-Test-User": OWNER}, raise_error=False, allow_nonstandard_methods=True,
    )  # fmt: skip
    assert response.code == 405
    assert set(response.headers["Allow"].replace(" ", "").split(",")) == {"GET", "POST"}


@pytest.mark.parametrize(
    "extra_quota_config", [{"deploy_command": [sys.executable, FAKE_DEPLOY], "endpoint_idle_minutes": 0.02}]
)
async def test_an_idle_endpoint_is_stopped_and_says_why(api):
    """0.02 minutes (1.2 s) without a proxied request: the service stops it, the quota comes back."""
    status, _ = await api("POST", "namespaces", NS, "endpoints", body={"name": "idle", "args": ["--model", "tiny"]})
    assert status == 201
    await wait_endpoint(api, "idle", ("Ready", "Stopped"))
    await wait_cpu_used(api, "0")
    _, stopped = await api("GET", "namespaces", NS, "endpoints", "idle")
    assert stopped["phase"] == "Stopped" and stopped["reason"] == reasons.IDLE, stopped
    assert "endpoint_idle_minutes" in stopped["message"]


@pytest.mark.parametrize(
    "extra_quota_config", [{"deploy_command": [sys.executable, FAKE_DEPLOY], "stalled_job_minutes": 0.01}]
)
async def test_a_quiet_endpoint_is_not_a_stalled_job(api, hold):
    """A fine-tune that writes nothing for ``stalled_job_minutes`` is flagged; a Ready endpoint
    waiting for requests is not (its idleness is ``endpoint_idle_minutes``')."""
    status, _ = await api("POST", "namespaces", NS, "endpoints", body={"name": "quiet", "args": ["--model", "tiny"]})
    assert status == 201
    await wait_endpoint(api, "quiet", ("Ready",))
    status, _ = await api("POST", "namespaces", NS, "jobs", body={"name": "train", "args": hold})
    assert status == 201
    await eventually(
        lambda: api("GET", "namespaces", NS, "jobs", "train"),
        lambda answer: answer[1]["stalled"],
        lambda _: "the quiet fine-tune was never flagged",
        timeout=60,
    )
    _, endpoint_job = await api("GET", "namespaces", NS, "jobs", "quiet")
    assert endpoint_job["phase"] == "Running" and endpoint_job["stalled"] is None, endpoint_job
    await api("DELETE", "namespaces", NS, "endpoints", "quiet")
    await wait_cpu_used(api, "2")  # the fine-tune's own, until the test ends


async def test_the_proxy_counts_requests_and_latency_and_usage_names_the_endpoint(api, jp_fetch):
    """ms-swift's server has no /metrics: what the proxy forwarded is counted per status class,
    with its latency, on the endpoint, and in usage by job (written to the records each pass)."""
    status, _ = await api("POST", "namespaces", NS, "endpoints", body={"name": "counted", "args": ["--model", "tiny"]})
    assert status == 201
    await wait_endpoint(api, "counted", ("Ready",))
    _, before = await api("GET", "namespaces", NS, "endpoints", "counted")
    assert before["requests"] == {"total": 0, "byStatus": {}, "latencyMs": None}
    proxied = ("namespaces", NS, "endpoints", "counted", "v1")
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "count me"}]}
    answers = [
        await api("GET", *proxied, "models"),
        await api("POST", *proxied, "chat", "completions", body=chat),
        await api("GET", *proxied, "nothing"),
    ]
    streamed = await jp_fetch(
        "quota", "v1", *proxied, "chat", "completions", method="POST",
        body=json.dumps({**chat, "stream": True}), headers={"X-Test-User": OWNER},
    )  # fmt: skip
    assert [status for status, _ in answers] + [streamed.code] == [200, 200, 404, 200]
    _, shown = await api("GET", "namespaces", NS, "endpoints", "counted")
    assert_matches("Endpoint", shown)
    counted = shown["requests"]
    assert (counted["total"], counted["byStatus"]) == (4, {"2xx": 3, "4xx": 1}), counted
    latency = counted["latencyMs"]
    assert latency["sample"] == 4 and 0 <= latency["p50"] <= latency["p99"] and latency["p99"] > 0, latency

    async def row():
        status, report = await api("GET", "usage", params={"by": "job", "namespace": NS})
        assert status == 200, report
        return report

    def recorded(report) -> bool:
        rows = [r for r in report["rows"] if r["job"] == "counted"]
        return bool(rows) and rows[0].get("requests", {}).get("total") == 4

    report = await eventually(row, recorded, lambda r: f"usage never counted the 4 requests: {r['rows']}", 60)
    assert_matches("UsageReport", report)
    (served,) = [r for r in report["rows"] if r["job"] == "counted"]
    assert served["kind"] == "endpoint" and served["requests"]["byStatus"] == {"2xx": 3, "4xx": 1}
    assert served["cpuSeconds"] > 0, "an endpoint's requested CPU counts as any job's"
    await api("DELETE", "namespaces", NS, "endpoints", "counted")
    await wait_cpu_used(api, "0")
