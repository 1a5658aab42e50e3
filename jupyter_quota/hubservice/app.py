"""``jupyter quota serve``: the quota service a JupyterHub runs for all its users.

One process holds every team's state (the local backend's ledger and job processes, or the
kube backend's credentials and watch cache) and the team profiles, and serves the REST API of
``jupyter_quota.handlers`` (the same handlers, the same ``QuotaService``) under
``{JUPYTERHUB_SERVICE_PREFIX}quota/v1``. It is a plain tornado application, not a Jupyter
server: there is no contents, kernel or terminal API in it, so nothing a user sends can run
code in it. Callers are identified by the hub (``identity.HubServiceIdentityProvider``).

The hub starts it as a managed service and passes, in the environment,
``JUPYTERHUB_SERVICE_URL`` (where to listen), ``JUPYTERHUB_SERVICE_PREFIX``, its API token and
OAuth client (read by ``HubOAuth``); ``hubconfig.py`` writes that ``c.JupyterHub.services``
entry. ``JupyterQuota`` settings come from the Jupyter config path, as for the CLI.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import sys
from urllib.parse import urlparse

import tornado.web
from jupyter_server.auth.authorizer import AllowAllAuthorizer
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler
from tornado.ioloop import IOLoop
from traitlets.config import Config

from ..config import JupyterQuota
from ..errors import QuotaError
from ..handlers import API_PREFIX, setup_handlers
from ..service.app import build_service
from .identity import HubServiceIdentityProvider
from .leanread import lean_rules
from .names import SERVICE_NAME
from .startup_heap import freeze_startup_heap

#: how long the service trusts a token's hub model (name, groups, admin) before asking the hub
#: again, unless ``c.HubOAuth.cache_max_age`` says otherwise: a group change on the hub reaches
#: the service within this many seconds. JupyterHub's own default is 300.
DEFAULT_HUB_CACHE_SECONDS = 60


class OAuthCallbackHandler(HubOAuthCallbackHandler):
    """``{prefix}oauth_callback``: the end of a browser's login through the hub."""

    def initialize(self, hub_auth):
        self.hub_auth = hub_auth


class HomeHandler(JupyterHandler):
    """``{prefix}``: where a browser signs in (through the hub's OAuth), then what the service is."""

    auth_resource = "quota"

    @tornado.web.authenticated
    def get(self):
        self.set_header("Content-Type", "application/json")
        self.finish(
            {
                "service": SERVICE_NAME,
                "user": self.current_user.username,
                "api": url_path_join(self.base_url, *API_PREFIX) + "/",
            }
        )

    def write_error(self, status_code, **kwargs):
        self.set_header("Content-Type", "application/json")
        self.finish({"reason": "Forbidden" if status_code == 403 else "Error", "message": self._reason})


def hub_auth_from(config: Config) -> HubOAuth:
    """``HubOAuth`` from the hub's environment, with ``c.HubOAuth`` settings applied."""
    if "cache_max_age" not in config.get("HubOAuth", {}):
        config = Config(config)
        config.HubOAuth.cache_max_age = DEFAULT_HUB_CACHE_SECONDS
    return HubOAuth(config=config)


def make_app(
    service, identity_provider: HubServiceIdentityProvider, base_url: str, log: logging.Logger
) -> tornado.web.Application:
    """The service's tornado application: the quota API, the OAuth callback and a sign-in page.

    ``identity_provider`` is a ``HubServiceIdentityProvider``; tests may give another
    jupyter-server ``IdentityProvider`` whose users carry a hub model (``HubUser``).
    """
    hub_auth = getattr(identity_provider, "hub_auth", None)
    settings = {
        "base_url": base_url,
        "identity_provider": identity_provider,
        # authorization is per team and per action, in QuotaService; the hub scope is checked
        # by the identity provider
        "authorizer": AllowAllAuthorizer(),
        "cookie_secret": secrets.token_bytes(32),  # holds only OAuth cookies: a restart signs in again
        "allow_remote_access": True,  # reached through the hub's proxy, under the hub's host name
        "log_function": lambda handler: (
            None
            if handler.get_status() < 400
            else log.info("%d %s %s", handler.get_status(), handler.request.method, handler.request.path)
        ),
    }
    routes = [(base_url.rstrip("/") + "/?", HomeHandler)]
    if hub_auth is not None:
        routes.append((url_path_join(base_url, "oauth_callback"), OAuthCallbackHandler, {"hub_auth": hub_auth}))
    app = tornado.web.Application(routes, **settings)
    app.add_handlers(".*$", lean_rules(app, base_url))  # tried before the full routes
    setup_handlers(app, service)
    return app


def listen_address(env=os.environ) -> tuple[str, int, str]:
    """(host, port, URL prefix) from the hub's ``JUPYTERHUB_SERVICE_URL`` and ``..._PREFIX``."""
    url = env.get("JUPYTERHUB_SERVICE_URL", "")
    if not url:
        raise QuotaError(
            "JUPYTERHUB_SERVICE_URL is not set: `jupyter quota serve` runs as a JupyterHub "
            f"service; give it a url in c.JupyterHub.services (see {__name__.replace('.app', '.hubconfig')})"
        )
    parsed = urlparse(url)
    prefix = env.get("JUPYTERHUB_SERVICE_PREFIX") or f"/services/{SERVICE_NAME}/"
    return parsed.hostname or "127.0.0.1", parsed.port or 80, prefix if prefix.endswith("/") else prefix + "/"


def serve(config: JupyterQuota, ip: str | None = None, port: int | None = None) -> int:
    """Run the service until SIGTERM or SIGINT; the hub restarts it if it dies. ``ip`` and
    ``port`` override where ``JUPYTERHUB_SERVICE_URL`` says to listen."""
    log = logging.getLogger("jupyter_quota")
    if not log.handlers:
        logging.basicConfig(
            level=logging.INFO, stream=sys.stderr, format="[%(levelname).1s %(asctime)s %(name)s] %(message)s"
        )
    host, url_port, prefix = listen_address()
    host, port = ip or host, port or url_port
    service = build_service(config, log=log, root_dir=os.getcwd())
    service.start()
    identity = HubServiceIdentityProvider(hub_auth=hub_auth_from(config.config), timeout=config.hub_timeout)
    app = make_app(service, identity, prefix, log)
    server = app.listen(port, address=host, xheaders=True)
    loop = IOLoop.current()

    def stop(signum, frame):
        log.info("jupyter_quota: stopping the quota service (signal %d)", signum)
        loop.add_callback_from_signal(loop.stop)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    frozen = freeze_startup_heap()
    log.info(
        "jupyter_quota: quota service (%s backend, %d team(s)) at http://%s:%d%squota/v1; "
        "%d start-up objects frozen out of the garbage collector",
        service.backend.name,
        len(service.registry.all()),
        host,
        port,
        prefix,
        frozen,
    )
    try:
        loop.start()
    finally:
        server.stop()
        service.close()
    return 0
