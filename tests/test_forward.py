"""Service mode in the user's server: ``quota/v1/*`` is forwarded to the hub's quota service.

The service here is a recording tornado app on a free port (what it answers is made up per
path); the user server is the real extension with ``JupyterQuota.service_url`` set. The real
service behind a real JupyterHub is exercised in tests/hub/.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest
import tornado.web
from quota_testing import HeaderIdentityProvider, free_port

SERVER_TOKEN = "server-token-of-ann"
PREFIX = "/services/jupyter-quota/"


class Recorder(tornado.web.RequestHandler):
    """Remembers each call; answers as the service would for the path."""

    def initialize(self, calls):
        self.calls = calls

    def _answer(self, path):
        self.calls.append(
            {
                "method": self.request.method,
                "uri": self.request.uri,
                "body": self.request.body,
                "authorization": self.request.headers.get("Authorization"),
            }
        )
        self.set_header("Content-Type", "application/json")
        if path.endswith("/jobs") and self.request.method == "POST":
            self.set_status(201)
            self.set_header("Location", f"{PREFIX}quota/v1{path}/made-by-service")
            self.finish(json.dumps({"name": "made-by-service"}))
        elif path.endswith("/busy"):
            self.set_status(429)
            self.set_header("Retry-After", "7")
            self.finish(json.dumps({"reason": "TooManyRequests", "message": "busy"}))
        elif path.endswith("/big"):  # an answer over the forwarder's size limit (set small in its test)
            self.finish(json.dumps({"rows": ["x" * 100] * 50}))
        elif path.startswith("/namespaces/team-beta"):
            self.set_status(403)
            self.finish(json.dumps({"reason": "Forbidden", "message": "not your team"}))
        else:
            self.finish(json.dumps({"path": path, "query": self.request.query}))

    get = post = put = delete = _answer


@pytest.fixture
def calls():
    return []


@pytest.fixture
def service_port(calls, io_loop):
    port = free_port()
    app = tornado.web.Application([(PREFIX + r"quota/v1(/.*)", Recorder, {"calls": calls})])
    server = app.listen(port, address="127.0.0.1")
    yield port
    server.stop()


@pytest.fixture
def jp_server_config(jp_server_config, service_port, monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", SERVER_TOKEN)
    jp_server_config.ServerApp.identity_provider_class = HeaderIdentityProvider
    jp_server_config.JupyterQuota.service_url = f"http://127.0.0.1:{service_port}{PREFIX}"
    jp_server_config.JupyterQuota.owner = "ann"
    return jp_server_config


async def test_a_call_is_forwarded_with_path_query_and_the_server_token(api, calls):
    status, answer = await api("GET", "namespaces", "team-alpha", "jobs", user="ann", params={"limit": "5"})
    assert status == 200
    assert answer == {"path": "/namespaces/team-alpha/jobs", "query": "limit=5"}
    assert calls == [
        {
            "method": "GET",
            "uri": f"{PREFIX}quota/v1/namespaces/team-alpha/jobs?limit=5",
            "body": b"",
            "authorization": f"token {SERVER_TOKEN}",
        }
    ]


async def test_a_body_goes_through_and_location_names_this_server(api, jp_fetch, calls, jp_base_url):
    response = await jp_fetch(
        "quota",
        "v1",
        "namespaces",
        "team-alpha",
        "jobs",
        method="POST",
        headers={"X-Test-User": "ann"},
        body=json.dumps({"args": ["--model", "m"]}),
    )
    assert response.code == 201
    assert json.loads(calls[0]["body"]) == {"args": ["--model", "m"]}
    assert response.headers["Location"] == f"{jp_base_url}quota/v1/namespaces/team-alpha/jobs/made-by-service"


async def test_the_service_refusal_reaches_the_caller_unchanged(api):
    assert await api("GET", "namespaces", "team-beta", "balance", user="ann") == (
        403,
        {"reason": "Forbidden", "message": "not your team"},
    )


async def test_retry_after_is_relayed(jp_fetch):
    response = await jp_fetch("quota", "v1", "busy", method="GET", headers={"X-Test-User": "ann"}, raise_error=False)
    assert response.code == 429 and response.headers["Retry-After"] == "7"


async def test_only_the_owner_is_forwarded(api, calls):
    status, answer = await api("GET", "namespaces", user="bob")
    assert status == 403 and answer["reason"] == "Forbidden"
    assert "belongs to ann" in answer["message"] and "your own server" in answer["message"]
    assert calls == []


async def test_a_body_over_the_cap_is_refused_before_forwarding(api, calls):
    status, answer = await api("POST", "estimate", body="x" * (1024 * 1024 + 1), user="ann")
    assert status == 413 and answer["reason"] == "RequestEntityTooLarge"
    assert calls == []


async def test_no_quota_state_in_the_user_server(jp_serverapp, quota_state, api):
    await api("GET", "namespaces", user="ann")
    assert jp_serverapp.web_app.settings["jupyter_quota_service"] is None
    assert not quota_state.exists()  # no ledger, no logs, no profiles.json


@pytest.fixture
def dead_port():
    return free_port()  # nothing listens there


async def test_a_service_that_does_not_answer_is_a_503_naming_no_address(jp_serverapp, api, dead_port):
    jp_serverapp.web_app.settings["jupyter_quota_forward"].service_url = f"http://127.0.0.1:{dead_port}/"
    response_status, answer = await api("GET", "namespaces", user="ann")
    assert response_status == 503 and answer["reason"] == "ServiceUnavailable"
    assert str(dead_port) not in answer["message"] and "hub admin" in answer["message"]


async def test_an_answer_over_the_relay_limit_is_a_502_that_says_so_not_an_outage(jp_serverapp, api, calls):
    settings = jp_serverapp.web_app.settings["jupyter_quota_forward"]
    settings.max_answer_bytes = 1000  # the service answers /big with about 5 kB
    status, answer = await api("GET", "big", user="ann")
    assert (status, answer["reason"]) == (502, "AnswerTooLarge"), answer
    assert "did not answer" not in answer["message"] and "1000 bytes" in answer["message"], answer
    assert "ask for less" in answer["message"]
    assert len(calls) == 1  # the service answered; only the relay refused its size
    status, answer = await api("GET", "namespaces", user="ann")  # and a small answer still goes through
    assert status == 200, answer


@pytest.fixture
def hung_port():
    """A port that accepts connections (the kernel's backlog) and never answers: a hung service."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield sock.getsockname()[1]
    sock.close()


@pytest.fixture
def short_timeouts(jp_server_config):
    jp_server_config.JupyterQuota.service_read_timeout = 1.0
    jp_server_config.JupyterQuota.service_timeout = 3.0
    return jp_server_config


async def test_a_hung_service_answers_a_read_with_a_503_within_seconds(short_timeouts, jp_serverapp, api, hung_port):
    jp_serverapp.web_app.settings["jupyter_quota_forward"].service_url = f"http://127.0.0.1:{hung_port}/"
    # before the read timeout, every call waited service_timeout (300 s by default): here 3 s
    started = time.monotonic()
    status, answer = await asyncio.wait_for(api("GET", "namespaces", "team-alpha", "balance", user="ann"), 60)
    took = time.monotonic() - started
    assert (status, answer["reason"]) == (503, "ServiceUnavailable"), answer
    assert took < 2.9, f"a read waited {took:.1f} s, the plan searches' timeout"


async def test_a_plan_search_keeps_the_long_timeout(short_timeouts, jp_serverapp, api, hung_port):
    jp_serverapp.web_app.settings["jupyter_quota_forward"].service_url = f"http://127.0.0.1:{hung_port}/"
    started = time.monotonic()
    status, answer = await asyncio.wait_for(api("POST", "namespaces", "team-alpha", "plan", body={}, user="ann"), 60)
    assert (status, answer["reason"]) == (503, "ServiceUnavailable"), answer
    assert time.monotonic() - started >= 3.0  # service_timeout, not the read timeout (timeouts never fire early)
