"""The hub service's lean balance read: the hottest route, past jupyter-server's per-request work.

Every open sidebar and status bar of a hub reads its team's balance (issue 23). Through the full
route (``handlers.BalanceHandler``, a jupyter-server ``APIHandler``) each read also pays for
jupyter-server's ``prepare`` and ``finish`` (host check, identity-provider call, CORS, the
``authorized`` decorator, the API activity stamp): about a third of the route's own CPU
(``benchmarks/read_path_cpu_bench.py``). This module answers the same read with a plain tornado
handler, but only when that work could not change the answer:

- ``GET`` of ``{prefix}quota/v1/namespaces/{ns}/balance``, with no ``Origin`` header (jupyter-server
  lets such a request through its origin check; its CORS header for a token is then empty);
- the caller's token is one ``HubOAuth``'s cache holds for an allowed user
  (``HubServiceIdentityProvider.cached_token_user``: no session cookie, no token in the URL);
- the application allows remote access (jupyter-server's host check then passes every request),
  authorizes all (``AllowAllAuthorizer``: access is the service's per-team check, made here too) and
  sets no CORS settings; the full route has made its default headers once (the lean one sends the
  same).

A request that is anything else does not match here and goes on to the full route
(``_LeanBalanceRead.match`` returns None, tornado's router tries the next rule). Authorization is
the same call (``QuotaService.balance_read``: the caller's teams), and the answer the same bytes,
ETag and errors (``handlers.Replies``, ``handlers.write_quota_error``): ``tests/test_lean_read.py``
compares the two routes answer by answer.
"""

from __future__ import annotations

import json
import sqlite3

import tornado.web
from jupyter_server.auth.authorizer import AllowAllAuthorizer
from tornado.routing import PathMatches, Rule

from ..errors import QuotaError
from ..handlers import API_PREFIX, OPTIMISATIONS, Replies, identity_of, write_quota_error
from .identity import HubServiceIdentityProvider

#: settings under which jupyter-server's origin check or CORS headers could differ per request
_CORS_SETTINGS = ("allow_origin", "allow_origin_pat", "allow_credentials")


class _LeanBalanceRead(PathMatches):
    """The balance route's path, for a request the lean handler may answer (module docstring)."""

    def __init__(self, pattern: str, application: tornado.web.Application):
        super().__init__(pattern)
        self.application = application

    def match(self, request):
        if request.method != "GET" or not OPTIMISATIONS["lean-read"] or "Origin" in request.headers:
            return None
        found = super().match(request)
        if found is None:
            return None
        settings = self.application.settings
        if "jupyter_quota_default_headers" not in settings:
            return None  # the full route makes them on its first answer
        user = settings["identity_provider"].cached_token_user(request)
        if user is None:
            return None
        request.quota_hub_user = user  # read by the handler: one token lookup per request
        return found


class LeanBalanceHandler(Replies, tornado.web.RequestHandler):
    """``GET .../namespaces/{ns}/balance`` for a request ``_LeanBalanceRead`` matched."""

    def set_default_headers(self) -> None:
        # as the full route set them (checked by ``set_header`` there): put, not converted again
        self._headers.update(self.settings["jupyter_quota_default_headers"])
        if "Access-Control-Allow-Origin" not in self.settings.get("headers", {}):
            # jupyter-server's set_cors_headers for a token-authenticated caller: the request's
            # Origin, which a lean read has none of
            self.set_header("Access-Control-Allow-Origin", "")

    def get(self, namespace: str) -> None:
        settings = self.settings
        who = identity_of(self.request.quota_hub_user, settings["identity_provider"], settings["jupyter_quota_config"])
        try:
            self.reply_cached(namespace, *self.service.balance_read(who, namespace))
        except (QuotaError, sqlite3.Error, OSError) as cause:
            if not write_quota_error(self, cause, settings["jupyter_quota_config"].state_dir):
                raise

    def write_error(self, status_code: int, **kwargs) -> None:
        """A bug's 500 in the shape ``APIHandler`` gives it (JSON, no traceback)."""
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": "Unhandled error", "reason": None, "traceback": ""}))


def lean_rules(application: tornado.web.Application, base_url: str) -> list[Rule]:
    """The lean route, to put before the full ones; none where its conditions cannot hold."""
    settings = application.settings
    if (
        not isinstance(settings.get("identity_provider"), HubServiceIdentityProvider)
        or type(settings.get("authorizer")) is not AllowAllAuthorizer  # jupyter-server's check: none
        or not settings.get("allow_remote_access")
        or any(settings.get(name) for name in _CORS_SETTINGS)
    ):
        return []
    prefix = base_url.rstrip("/") + "/" + "/".join(API_PREFIX)
    pattern = prefix + r"/namespaces/([^/]+)/balance/?$"
    return [Rule(_LeanBalanceRead(pattern, application), LeanBalanceHandler)]
