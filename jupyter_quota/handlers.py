"""REST handlers for ``{base_url}quota/v1``: HTTP in, one service call, JSON out.

Every verb is authenticated (``@tornado.web.authenticated``) and authorized through
jupyter-server's Authorizer (``@authorized`` on the ``quota`` resource); writes get XSRF checks
from ``APIHandler``. Domain errors become ``{"reason", "message"}`` with their status; only a
bug can produce a 500.
"""

from __future__ import annotations

import asyncio
import functools
import json

import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join

from .errors import InvalidRequest, QuotaError
from .identity import identify

API_PREFIX = ("quota", "v1")
MAX_BODY_BYTES = 1024 * 1024
AUTH_RESOURCE = "quota"


def api_call(method):
    """Run the handler method, turning domain errors into their JSON answer."""

    @functools.wraps(method)
    async def wrapper(self, *args, **kwargs):
        try:
            await method(self, *args, **kwargs)
        except QuotaError as e:
            self.set_status(e.status)
            self.finish(json.dumps(e.to_json()))

    return wrapper


class QuotaHandler(APIHandler):
    auth_resource = AUTH_RESOURCE

    @property
    def service(self):
        return self.settings["jupyter_quota_service"]

    @property
    def who(self):
        return identify(self.current_user, self.identity_provider, self.service.config)

    async def run(self, fn, *args):
        """Call a service method off the IO loop (it may touch SQLite, files or processes)."""
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    def reply(self, payload: dict, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(payload))

    def json_body(self):
        raw = self.request.body or b""
        if len(raw) > MAX_BODY_BYTES:
            raise InvalidRequest(f"the body is {len(raw)} bytes; at most {MAX_BODY_BYTES} are accepted")
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise InvalidRequest(f"the body is not valid JSON: {e}") from None

    def write_error(self, status_code: int, **kwargs) -> None:
        """Even tornado's own errors (405, 500) answer in the API's shape."""
        self.set_header("Content-Type", "application/json")
        reason = {404: "NotFound", 405: "MethodNotAllowed", 403: "Forbidden"}.get(status_code, "InternalError")
        message = self._reason or "internal error; the server log has the details"
        self.finish(json.dumps({"reason": reason, "message": message}))


class NamespacesHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self):
        # Served from the backend's cache (tens of microseconds): cheaper inline than a thread hop.
        self.reply(self.service.namespaces(self.who))


class BalanceHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self, namespace):
        self.reply(self.service.balance(self.who, namespace))


class JobsHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self, namespace):
        limit, token = self.get_query_argument("limit", None), self.get_query_argument("continue", None)
        self.reply(await self.run(self.service.list_jobs, self.who, namespace, limit, token))

    @tornado.web.authenticated
    @authorized
    @api_call
    async def post(self, namespace):
        body = self.json_body()
        job = await self.run(self.service.submit, self.who, namespace, body)
        self.set_header("Location", url_path_join(self.request.path, job["name"]))
        self.reply(job, 201)


class JobHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self, namespace, name):
        self.reply(await self.run(self.service.get_job, self.who, namespace, name))

    @tornado.web.authenticated
    @authorized
    @api_call
    async def delete(self, namespace, name):
        self.reply(await self.run(self.service.cancel, self.who, namespace, name))


class JobLogsHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self, namespace, name):
        tail = self.get_query_argument("tailLines", None)
        self.reply(await self.run(self.service.logs, self.who, namespace, name, tail))


class ProfilesHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self):
        self.reply(await self.run(self.service.profiles, self.who))


class ProfileHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self, team):
        self.reply(await self.run(self.service.profile, self.who, team))

    @tornado.web.authenticated
    @authorized
    @api_call
    async def put(self, team):
        body = self.json_body()
        self.reply(await self.run(self.service.put_profile, self.who, team, body))


class IdentityHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self):
        self.reply(await self.run(self.service.identity, self.who))


class InventoryHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self):
        self.reply(await self.run(self.service.inventory, self.who))


class ModelsHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self):
        self.reply(await self.run(self.service.models, self.who))


class EstimateHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def post(self):
        body = self.json_body()
        self.reply(await self.run(self.service.estimate, self.who, body))


class PlanHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def post(self, namespace):
        body = self.json_body()
        self.reply(await self.run(self.service.plan, self.who, namespace, body))


_SEGMENT = r"([^/]+)"

#: (path below quota/v1, handler): the OpenAPI file documents exactly these.
ROUTES = [
    ("/namespaces", NamespacesHandler),
    (f"/namespaces/{_SEGMENT}/balance", BalanceHandler),
    (f"/namespaces/{_SEGMENT}/jobs", JobsHandler),
    (f"/namespaces/{_SEGMENT}/jobs/{_SEGMENT}", JobHandler),
    (f"/namespaces/{_SEGMENT}/jobs/{_SEGMENT}/logs", JobLogsHandler),
    (f"/namespaces/{_SEGMENT}/plan", PlanHandler),
    ("/estimate", EstimateHandler),
    ("/models", ModelsHandler),
    ("/profiles", ProfilesHandler),
    (f"/profiles/{_SEGMENT}", ProfileHandler),
    ("/identity", IdentityHandler),
    ("/inventory", InventoryHandler),
]


def setup_handlers(web_app, service) -> None:
    """Register the routes under the server's base URL (so they work under JupyterHub)."""
    web_app.settings["jupyter_quota_service"] = service
    base_url = web_app.settings["base_url"]
    web_app.add_handlers(
        ".*$",
        [(url_path_join(base_url, *API_PREFIX) + path + "/?$", handler) for path, handler in ROUTES],
    )
