"""Every route is authenticated: by declaration (jupyter-server's check) and in fact (HTTP)."""

from __future__ import annotations

import json
import re
import warnings

import pytest
from jupyter_server.serverapp import ServerApp
from jupyter_server.utils import JupyterServerAuthWarning

from jupyter_quota.handlers import ROUTES


def test_server_refuses_no_route_as_unguarded(tmp_path, jp_environ):
    """The template's check_auth: starting with allow_unauthenticated_access=False warns on none."""
    app = ServerApp(
        allow_unauthenticated_access=False,
        jpserver_extensions={"jupyter_quota": True},
        reraise_server_extension_failures=True,
        root_dir=str(tmp_path),
        open_browser=False,
        port=0,
    )
    app.config.JupyterQuota.state_dir = str(tmp_path / "state")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        app.initialize([])
    unguarded = [
        w
        for w in caught
        if issubclass(w.category, JupyterServerAuthWarning) and "without @allow_unauthenticated" in str(w.message)
    ]
    assert not unguarded, "\n".join(str(w.message) for w in unguarded)
    assert "jupyter_quota_service" in app.web_app.settings, "the extension did not load"


def _concrete(path: str) -> str:
    return re.sub(r"\(\[\^/\]\+\)", "x", path)


@pytest.mark.parametrize("path, handler", ROUTES, ids=[p for p, _ in ROUTES])
async def test_every_verb_refuses_an_anonymous_caller(http_server_client, jp_base_url, path, handler):
    url = f"{jp_base_url}quota/v1{_concrete(path)}"
    verbs = [m for m in ("GET", "POST", "PUT", "DELETE") if m.lower() in vars(handler)]
    assert verbs
    for verb in verbs:
        body = "{}" if verb in ("POST", "PUT") else None
        response = await http_server_client.fetch(url, method=verb, body=body, raise_error=False)
        assert response.code == 403, (verb, url, response.code, response.body[:200])
        assert b"resources" not in response.body and b"jobs" not in response.body


@pytest.mark.parametrize("verb", ["GET", "POST", "PUT", "DELETE"])
async def test_an_unknown_token_is_told_so_on_every_verb(http_server_client, jp_base_url, verb):
    """A write with a token the server does not know is refused for the token, not for a missing
    XSRF cookie (jupyter-server checks XSRF on writes of callers it did not authenticate)."""
    body = "{}" if verb in ("POST", "PUT") else None
    response = await http_server_client.fetch(
        f"{jp_base_url}quota/v1/profiles/alpha",
        method=verb,
        body=body,
        headers={"Authorization": "token forged"},
        raise_error=False,
    )
    answer = json.loads(response.body)
    assert response.code in (403, 405) and answer["reason"] in ("Forbidden", "MethodNotAllowed")
    if response.code == 403:
        assert "token" in answer["message"] and "_xsrf" not in answer["message"], answer
