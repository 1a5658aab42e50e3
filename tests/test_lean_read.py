"""The hub service's lean balance read (``hubservice/leanread.py``) answers as the full route does.

A real tornado server on a loopback port runs ``hubservice.app.make_app`` with the service's own
``HubServiceIdentityProvider`` (its ``HubOAuth`` cache holding two users' tokens; the hub's API,
asked for anything else, knows nobody). Each request is sent twice, with the lean read on and off
(``handlers.OPTIMISATIONS["lean-read"]``), and the two answers must match: status, body (less
``observedAt``), ETag and every header but ``Date``. Which route answered is counted, so a request
the lean read must leave alone (an ``Origin``, a session cookie, a token in the URL, a token the
cache does not hold) is shown to reach the full route.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging

import pytest
from jupyterhub.services.auth import HubOAuth
from quota_testing import free_port, teams_config
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from jupyter_quota.config import JupyterQuota
from jupyter_quota.handlers import OPTIMISATIONS, BalanceHandler
from jupyter_quota.hubservice.app import make_app
from jupyter_quota.hubservice.identity import HubServiceIdentityProvider
from jupyter_quota.hubservice.leanread import LeanBalanceHandler
from jupyter_quota.hubservice.names import ACCESS_SCOPE
from jupyter_quota.service.app import build_service

PREFIX = "/services/jupyter-quota/"
TOKENS = {"ann": "token-of-ann", "bob": "token-of-bob"}  # ann in team-0, bob in team-1


def _key(token: str) -> str:
    return f"token::{hashlib.sha256(token.encode()).hexdigest()}"


@pytest.fixture
def served(tmp_path, monkeypatch):
    """(request(path, headers) -> (status, headers, body), the routes' answer counts), on a live server."""
    counts = {"lean": 0, "full": 0}
    for cls, name in ((LeanBalanceHandler, "lean"), (BalanceHandler, "full")):
        original = cls.initialize  # called once per request the route was chosen for

        def counted(self, *args, _original=original, _name=name, **kwargs):
            counts[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "initialize", counted)
    service = build_service(JupyterQuota(config=teams_config(tmp_path, 2, {"requests.cpu": "4"})))
    auth = HubOAuth(api_token="service-token", api_url="http://127.0.0.1:9/hub/api", cache_max_age=3600)
    auth.access_scopes = {ACCESS_SCOPE}

    async def hub(method, url, **kwargs):  # the hub's API: knows no token the cache lacks
        return None

    auth._api_request = hub
    for i, (name, token) in enumerate(TOKENS.items()):
        auth.cache[_key(token)] = {"kind": "user", "name": name, "groups": [f"g{i}"], "admin": False}
        auth.cache[_key(token)]["scopes"] = [ACCESS_SCOPE]
    app = make_app(service, HubServiceIdentityProvider(hub_auth=auth), PREFIX, logging.getLogger("test"))
    port = free_port()

    async def run(calls):
        server = app.listen(port, address="127.0.0.1")
        client = AsyncHTTPClient(force_instance=True)
        try:
            answers = []
            for path, headers in calls:
                url = f"http://127.0.0.1:{port}{path}"
                r = await client.fetch(HTTPRequest(url, headers=headers), raise_error=False)
                answers.append((r.code, r.headers, r.body))
            return answers
        finally:
            client.close()
            server.stop()

    yield lambda calls: asyncio.run(run(calls)), counts
    service.close()


def _balance(ns: str) -> str:
    return f"{PREFIX}quota/v1/namespaces/{ns}/balance"


def _token(name: str) -> dict:
    return {"Authorization": f"token {TOKENS[name]}"}


def _comparable(answer):
    status, headers, body = answer
    kept = {k: v for k, v in headers.get_all() if k not in ("Date",)}
    payload = json.loads(body) if body else None
    if isinstance(payload, dict):
        payload.pop("observedAt", None)
    return status, sorted(kept.items()), payload


def test_lean_and_full_routes_give_the_same_answers(served):
    request, counts = served
    warm = [(_balance("team-0"), _token("ann"))]  # the full route makes the default headers once
    own = request(warm + [(_balance("team-0"), _token("ann"))])[1]
    etag = own[1]["Etag"]
    calls = [
        (_balance("team-0"), _token("ann")),  # her team's: 200
        (_balance("team-0"), {**_token("ann"), "If-None-Match": etag}),  # unchanged: 304
        (_balance("team-0"), {**_token("ann"), "If-None-Match": 'W/"other"'}),  # another ETag: 200
        (_balance("team-1"), _token("ann")),  # another team's: refused
        (_balance("team-9"), _token("ann")),  # no such namespace
        (_balance("team-1"), _token("bob")),  # bob's own
    ]
    counts.update(lean=0, full=0)
    lean = request(calls)
    assert counts == {"lean": len(calls), "full": 0}
    OPTIMISATIONS["lean-read"] = False
    try:
        full = request(calls)
    finally:
        OPTIMISATIONS["lean-read"] = True
    assert counts == {"lean": len(calls), "full": len(calls)}
    assert [a[0] for a in lean] == [200, 304, 200, 403, 404, 200]
    for mine, theirs in zip(lean, full, strict=True):
        assert _comparable(mine) == _comparable(theirs)
    assert lean[0][1]["Etag"] == etag and json.loads(lean[0][2])["observedAt"]
    assert json.loads(lean[3][2])["reason"] and json.loads(lean[3][2])["message"]  # a 4xx that says why


@pytest.mark.parametrize(
    "extra, path",
    [
        ({"Origin": "http://elsewhere.example"}, ""),
        ({"Cookie": "jupyterhub-session-id=s1"}, ""),
        ({}, "?token=other"),
    ],
    ids=["an Origin header", "a session cookie", "a token in the URL"],
)
def test_requests_the_lean_read_must_not_judge_take_the_full_route(served, extra, path):
    request, counts = served
    request([(_balance("team-0"), _token("ann"))])  # warm
    counts.update(lean=0, full=0)
    request([(_balance("team-0") + path, {**_token("ann"), **extra})])
    assert counts == {"lean": 0, "full": 1}


def test_a_token_the_cache_lacks_is_refused_by_the_full_route(served):
    request, counts = served
    first, unknown = request(
        [(_balance("team-0"), _token("ann")), (_balance("team-0"), {"Authorization": "token nobody-knows"})]
    )
    assert first[0] == 200 and counts == {"lean": 0, "full": 2}  # before the default headers: full
    assert unknown[0] == 403 and "not accepted" in json.loads(unknown[2])["message"]


@pytest.mark.parametrize(
    "settings",
    [
        {"allow_origin": "https://lab.example"},
        {"allow_remote_access": False},
        {"identity_provider": None},
    ],
    ids=["CORS configured", "host check on", "another identity provider"],
)
def test_no_lean_route_where_jupyter_server_could_answer_differently(settings):
    import tornado.web
    from jupyter_server.auth.authorizer import AllowAllAuthorizer

    from jupyter_quota.hubservice.leanread import lean_rules

    base = {
        "identity_provider": HubServiceIdentityProvider(
            hub_auth=HubOAuth(api_token="t", api_url="http://127.0.0.1:9/")
        ),
        "authorizer": AllowAllAuthorizer(),
        "allow_remote_access": True,
    }
    assert len(lean_rules(tornado.web.Application([], **base), PREFIX)) == 1
    assert lean_rules(tornado.web.Application([], **{**base, **settings}), PREFIX) == []
