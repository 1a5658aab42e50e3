"""The quota service's caller read straight from ``HubOAuth``'s token cache (issue 23's auth fast path).

``HubServiceIdentityProvider`` takes a token's model from the cache ``HubOAuth`` itself fills
(same key, same expiry) when it holds one, without the full path's task and timer. What must hold:
it identifies exactly whom the full path would, never a refused model, and a model the hub's
cache let go (expired, or replaced after a group change) is not used.
"""

from __future__ import annotations

import asyncio
import hashlib
import time

import pytest
from jupyterhub.services.auth import HubOAuth
from tornado.httputil import HTTPHeaders, HTTPServerRequest, RequestStartLine
from tornado.web import HTTPError

from jupyter_quota.handlers import OPTIMISATIONS
from jupyter_quota.hubservice.identity import HubServiceIdentityProvider
from jupyter_quota.hubservice.names import ACCESS_SCOPE

TOKEN = "secret-token-of-ann"


class _Handler:
    """As much of a tornado handler as the provider reads."""

    def __init__(self, headers: dict, uri: str = "/services/jupyter-quota/quota/v1/namespaces"):
        self.request = HTTPServerRequest(
            headers=HTTPHeaders({"Host": "127.0.0.1", **headers}), start_line=RequestStartLine("GET", uri, "HTTP/1.1")
        )
        self.application = None

    def get_login_url(self):  # the full path wraps it
        return "/hub/login"

    def get_secure_cookie(self, name, **kwargs):
        return None

    def get_cookie(self, name, default=None):
        cookie = self.request.cookies.get(name)
        return cookie.value if cookie else default


def _key(token: str) -> str:
    return f"token::{hashlib.sha256(token.encode()).hexdigest()}"


@pytest.fixture
def provider():
    auth = HubOAuth(api_token="service-token", api_url="http://127.0.0.1:9/hub/api", cache_max_age=60)
    auth.access_scopes = {ACCESS_SCOPE}
    asked = []

    async def hub(method, url, **kwargs):  # the hub's API: counted, answers nobody
        asked.append(url)
        return None

    auth._api_request = hub
    made = HubServiceIdentityProvider(hub_auth=auth)
    made.asked = asked
    return made


def _model(groups, scopes=(ACCESS_SCOPE,), kind="user"):
    return {"kind": kind, "name": "ann", "groups": list(groups), "admin": False, "scopes": list(scopes)}


def _user(provider, headers):
    return asyncio.run(provider.get_user(_Handler(headers)))


def test_a_cached_token_is_the_user_without_asking_the_hub_and_a_group_change_arrives(provider):
    provider.hub_auth.cache[_key(TOKEN)] = _model(["ml-alpha"])
    user = _user(provider, {"Authorization": f"token {TOKEN}"})
    assert user.hub_user["groups"] == ["ml-alpha"] and provider.asked == []
    provider.hub_auth.cache[_key(TOKEN)] = _model(["ml-beta"])  # the hub's cache refreshed it
    assert _user(provider, {"Authorization": f"Bearer {TOKEN}"}).hub_user["groups"] == ["ml-beta"]


def test_the_fast_path_and_the_full_path_identify_the_same_user(provider):
    provider.hub_auth.cache[_key(TOKEN)] = _model(["ml-alpha"])
    fast = _user(provider, {"Authorization": f"token {TOKEN}"})
    OPTIMISATIONS["token-cache"] = False
    try:
        full = _user(provider, {"Authorization": f"token {TOKEN}"})
    finally:
        OPTIMISATIONS["token-cache"] = True
    assert fast.hub_user == full.hub_user and fast.username == full.username == "ann"


@pytest.mark.parametrize(
    "model",
    [_model(["ml-alpha"], scopes=()), _model([], kind="service")],
    ids=["without the service's scope", "a hub service"],
)
def test_a_model_the_full_path_refuses_is_refused_as_before(provider, model):
    provider.hub_auth.cache[_key(TOKEN)] = model
    with pytest.raises(HTTPError, match="may not use the quota service") as refused:
        _user(provider, {"Authorization": f"token {TOKEN}"})
    assert refused.value.status_code == 403


def test_an_expired_or_absent_entry_asks_the_hub(provider):
    provider.hub_auth.cache[_key(TOKEN)] = _model(["ml-alpha"])
    provider.hub_auth.cache.timestamps[_key(TOKEN)] = time.monotonic() - 61  # past cache_max_age
    assert _user(provider, {"Authorization": f"token {TOKEN}"}) is None
    assert len(provider.asked) == 1
    assert _user(provider, {"Authorization": "token another"}) is None and len(provider.asked) == 2


def test_a_new_hub_auth_is_read_from_not_the_cache_of_the_one_before(provider):
    # the provider keeps ``hub_auth.cache`` between requests (``_token_cache``)
    provider.hub_auth.cache[_key(TOKEN)] = _model(["ml-alpha"])
    assert provider._cached_token_user(_Handler({"Authorization": f"token {TOKEN}"})) is not None
    fresh = HubOAuth(api_token="service-token", api_url="http://127.0.0.1:9/hub/api", cache_max_age=60)
    fresh.access_scopes = {ACCESS_SCOPE}
    provider.hub_auth = fresh
    assert provider._cached_token_user(_Handler({"Authorization": f"token {TOKEN}"})) is None
    fresh.cache[_key(TOKEN)] = _model(["ml-alpha"])
    assert provider._cached_token_user(_Handler({"Authorization": f"token {TOKEN}"})) is not None


def test_a_session_cookie_or_a_token_in_the_url_takes_the_full_path(provider):
    provider.hub_auth.cache[_key(TOKEN)] = _model(["ml-alpha"])
    handler = _Handler({"Authorization": f"token {TOKEN}", "Cookie": "jupyterhub-session-id=s1"})
    assert provider._cached_token_user(handler) is None
    handler = _Handler({"Authorization": f"token {TOKEN}"}, uri="/x?token=other")
    assert provider._cached_token_user(handler) is None
    assert provider._cached_token_user(_Handler({"Authorization": f"token {TOKEN}"})) is not None


def test_a_token_users_identity_is_made_once_and_a_group_change_makes_it_anew(provider):
    from types import SimpleNamespace

    from jupyter_quota.config import JupyterQuota
    from jupyter_quota.handlers import QuotaHandler

    def who(user):  # QuotaHandler.who as each request reads it
        return QuotaHandler.who.fget(
            SimpleNamespace(current_user=user, identity_provider=provider, quota_config=JupyterQuota())
        )

    provider.hub_auth.cache[_key(TOKEN)] = _model(["ml-alpha"])
    first = who(_user(provider, {"Authorization": f"token {TOKEN}"}))
    assert first.groups == ("ml-alpha",)
    assert who(_user(provider, {"Authorization": f"token {TOKEN}"})) is first  # the same token: kept
    provider.hub_auth.cache[_key(TOKEN)] = _model(["ml-beta"])  # the hub's cache refreshed it
    assert who(_user(provider, {"Authorization": f"token {TOKEN}"})).groups == ("ml-beta",)
