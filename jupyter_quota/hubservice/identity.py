"""Who calls the quota service: the hub user behind a token or the service's OAuth cookie.

The same pattern as JupyterHub's own single-user server (``JupyterHubIdentityProvider`` in
``jupyterhub/singleuser/extension.py``), for a service: ``HubOAuth`` resolves a token (header)
or the OAuth cookie (browsers, after ``{prefix}oauth_callback``) to the hub's user model, at
most ``HubOAuth.cache_max_age`` seconds old, and the caller must hold the service's access
scope (``names.ACCESS_SCOPE``). The model reaches ``jupyter_quota.identity.identify`` as the
user's ``hub_user``, exactly as in a single-user server, so name, groups and admin mean the
same in both modes. Hub services (``kind: service``) are not quota users and are refused.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

from jupyter_server.auth import IdentityProvider, User
from jupyterhub.services.auth import HubOAuth
from tornado.httputil import url_concat
from tornado.web import HTTPError
from traitlets import Float, Instance, observe

from ..handlers import OPTIMISATIONS

HUB_UNAVAILABLE = (
    "JupyterHub did not answer when the quota service asked who you are; try again in a "
    "minute, and if it persists ask a hub admin to check the hub"
)


class HubUser(User):
    """A jupyter-server ``User`` carrying the hub's model, as ``identify`` expects."""

    def __init__(self, hub_user: dict):
        self.hub_user = hub_user
        super().__init__(username=hub_user["name"])


class HubServiceIdentityProvider(IdentityProvider):
    hub_auth = Instance(HubOAuth)
    #: seconds to wait for the hub's answer (``JupyterQuota.hub_timeout``); aiohttp's own is 300
    timeout = Float(10.0)

    async def get_user(self, handler):
        if hasattr(handler, "_quota_hub_user"):
            return handler._quota_hub_user
        if OPTIMISATIONS["token-cache"]:
            known = self._cached_token_user(handler)
            if known is not None:
                handler._token_authenticated = True
                handler._quota_hub_user = known
                return known
        handler._quota_hub_user = None
        self._patch_login_url(handler)
        self.hub_auth._patch_xsrf(handler)  # cookie-authenticated writes need the hub's XSRF token
        try:
            model = await asyncio.wait_for(self.hub_auth.get_user(handler, sync=False), self.timeout)
        except TimeoutError:
            self.log.error("jupyter_quota: the hub did not say who a caller is within %g s", self.timeout)
            raise HTTPError(503, HUB_UNAVAILABLE) from None
        except HTTPError as e:
            if e.status_code < 500:
                raise
            # HubAuth answers 500 when the hub's API does not answer: the caller may try again
            self.log.error("jupyter_quota: could not identify a caller: %s", e.log_message)
            raise HTTPError(503, HUB_UNAVAILABLE) from None
        if not model:
            return None
        kind, name = model.get("kind", "user"), model.get("name", "")
        if kind != "user" or not self.hub_auth.check_scopes(self.hub_auth.access_scopes, model):
            reason = (
                "hub services have no team quota; call it with a user's token"
                if kind != "user"
                else f"it needs the scope {' or '.join(sorted(self.hub_auth.access_scopes))}: ask a hub "
                "admin to grant it (README: Running under JupyterHub)"
            )
            self.log.warning("jupyter_quota: refusing hub %s %r: %s", kind, name, reason)
            # signed in but not allowed: a 403 that says why (a login redirect could not help)
            raise HTTPError(403, f"hub {kind} {name!r} may not use the quota service: {reason}")
        handler._quota_hub_user = HubUser(model)
        return handler._quota_hub_user

    def _cached_token_user(self, handler) -> HubUser | None:
        return self.cached_token_user(handler.request)

    def cached_token_user(self, request) -> HubUser | None:
        """The caller of a token ``HubOAuth`` holds an allowed user's model for, read straight from
        its cache (the same key, the same expiry: a group change still arrives within
        ``cache_max_age``), without the per-request task, timer and patching of the full path.
        None (the full path) for anything else: no token, a session cookie, a cache miss, a
        model this provider refuses. ``request`` is tornado's: ``leanread`` asks before a
        handler exists."""
        headers = request.headers
        scheme, _, token = headers.get("Authorization", "").partition(" ")
        token = token.strip()
        if (
            scheme.lower() not in ("token", "bearer")
            or not token
            # HubAuth's key holds the session (the Cookie header parsed only when there is one)
            or ("Cookie" in headers and "jupyterhub-session-id" in request.cookies)
            or "token" in request.query_arguments  # a token in the URL would be read first
        ):
            return None
        key = f"token::{hashlib.sha256(token.encode('utf8', 'replace')).hexdigest()}"
        try:
            model = self._token_cache()[key]  # its expiry checked as HubAuth's own reads check it
        except KeyError:
            return None
        memo = getattr(self, "_allowed", None)
        if memo is None:
            memo = self._allowed = {}
        entry = memo.get(key)
        if entry is None or entry[0] is not model:  # a model once checked: its verdict stands
            allowed = (
                bool(model)
                and model.get("kind", "user") == "user"
                and self.hub_auth.check_scopes(self.hub_auth.access_scopes, model)
            )
            if len(memo) > 100_000:  # tokens come and go: a bounded memo
                memo.clear()
            entry = memo[key] = (model, HubUser(model) if allowed else None)
        return entry[1]

    def _token_cache(self):
        """``hub_auth.cache``, read through two traits once, not on every request (HubAuth makes
        it once; a new ``hub_auth`` forgets it, ``_new_hub_auth``)."""
        cache = self.__dict__.get("_cache")
        if cache is None:
            cache = self.__dict__["_cache"] = self.hub_auth.cache
        return cache

    @observe("hub_auth")
    def _new_hub_auth(self, change) -> None:
        self.__dict__.pop("_cache", None)

    def is_token_authenticated(self, handler) -> bool:
        return bool(getattr(handler, "_token_authenticated", False))

    def validate_security(self, app, ssl_options=None):
        """No token or password of our own: the hub authenticates every call."""

    def _patch_login_url(self, handler):
        """A page asked for by a browser without the cookie starts the hub's OAuth flow (API
        handlers answer 403 instead, as jupyter-server's ``APIHandler.get_login_url`` does)."""
        original = handler.get_login_url
        hub_auth = self.hub_auth

        def get_login_url():
            with _setting(handler.application.settings, "login_url", hub_auth.login_url):
                login_url = original()
            params, state = {}, {}
            if getattr(hub_auth, "pkce_enabled", False):  # JupyterHub 6; 5.x has no PKCE
                verifier, challenge, method = hub_auth.generate_pkce_code_challenge()
                params.update(code_challenge=challenge, code_challenge_method=method)
                state["code_verifier"] = verifier
            params["state"] = hub_auth.set_state_cookie(handler, next_url=handler.request.uri, **state)
            return url_concat(login_url, params)

        handler.get_login_url = get_login_url


@contextmanager
def _setting(settings: dict, key: str, value) -> Iterator[None]:
    """``settings[key] = value`` for the ``with`` block, then as it was (the key absent again if it was)."""
    missing = object()
    saved = settings.get(key, missing)
    settings[key] = value
    try:
        yield
    finally:
        if saved is missing:
            settings.pop(key, None)
        else:
            settings[key] = saved
