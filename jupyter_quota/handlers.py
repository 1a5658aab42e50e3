"""REST handlers for ``{base_url}quota/v1``: HTTP in, one service call, JSON out.

Every verb is authenticated (``@tornado.web.authenticated``) and authorized through
jupyter-server's Authorizer (``@authorized`` on the ``quota`` resource); writes get XSRF checks
from ``APIHandler``. Domain errors become ``{"reason", "message"}`` with their status; only a
bug can produce a 500.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import json
import sqlite3
import sys
import time

import tornado.iostream
import tornado.web
from jupyter_server.auth.decorator import allow_unauthenticated, authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from prometheus_client import CONTENT_TYPE_LATEST

from .chargeback import chargeback_csv
from .errors import BodyTooLarge, Forbidden, InvalidRequest, NotFound, QuotaError, ServiceUnavailable
from .identity import identify
from .service import events
from .service.verifications import RUNNING
from .slots import WorkSlots
from .statedir import storage_error
from .times import now_rfc3339

API_PREFIX = ("quota", "v1")
#: the read path's per-request savings (issue 23), each on by default; a benchmark turns them off
#: one by one to show before and after in one run (``benchmarks/open_loop_bench.py``):
#: ``answer-cache``: a balance read whose validator is unchanged writes the bytes made last time
#: (``service.answers``) instead of computing and encoding the balance, and its ETag is not hashed
#: again; ``static-headers``: jupyter-server's default headers (Content-Security-Policy, built by
#: joining strings on every request) made once per application; ``token-cache``: the hub
#: service's caller read straight from ``HubOAuth``'s token cache (``hubservice/identity.py``).
#: ``lean-read``: in the hub service, a balance read with a token the cache holds is answered by a
#: plain tornado handler, past jupyter-server's per-request work (``hubservice/leanread.py``).
#: ``gc-freeze``: the hub service's start-up objects frozen out of the garbage collector's full
#: passes, which held an overloaded service's IO loop for over 100 ms (``hubservice/startup_heap.py``).
OPTIMISATIONS = {
    "answer-cache": True,
    "static-headers": True,
    "token-cache": True,
    "lean-read": True,
    "gc-freeze": True,
}
#: The largest request body any route accepts, enforced before auth and before the body is read.
MAX_BODY_BYTES = 1024 * 1024
#: What tornado itself lets a chunked body announce (it checks each chunk's declared size before
#: reading it, and answers a bare 400 past it); ``data_received`` answers 413 at MAX_BODY_BYTES.
CHUNKED_BODY_LIMIT = 2 * MAX_BODY_BYTES
#: deepest nesting a body may have; the deepest real body (a profile's LimitRange) nests 5 levels
MAX_BODY_DEPTH = 32
_TOO_DEEP = f"the body is nested too deeply; at most {MAX_BODY_DEPTH} levels are accepted"
AUTH_RESOURCE = "quota"
TOKEN_REFUSED = (
    "the token sent (header Authorization) was not accepted here: it is unknown or expired, "
    "or lacks the scope this server needs"
)
NOT_SIGNED_IN = (
    "not signed in here: send a token that may use this server (header Authorization: "
    "token <token>), or sign in with a browser first"
)


def api_call(method):
    """Run the handler method, turning domain errors, and a full or read-only state directory, into JSON."""

    @functools.wraps(method)
    async def wrapper(self, *args, **kwargs):
        self.check_deferred_xsrf()
        try:
            await method(self, *args, **kwargs)
        except (QuotaError, sqlite3.Error, OSError) as cause:
            if not write_quota_error(self, cause, self.quota_config.state_dir):
                raise

    return wrapper


def write_quota_error(handler: tornado.web.RequestHandler, cause: Exception, state_dir: str) -> bool:
    """Answer a domain error, or a full or read-only state directory, as ``{reason, message}``
    with its status; False (the caller re-raises: a bug, a 500) for any other error."""
    e = cause if isinstance(cause, QuotaError) else storage_error(cause, state_dir)
    if e is None:
        return False
    handler.set_status(e.status)
    for name, value in e.headers.items():
        handler.set_header(name, value)
    handler.set_header("Content-Type", "application/json")
    handler.finish(json.dumps(e.to_json()))
    return True


def identity_of(user, identity_provider, config):
    """The caller's quota identity (``identity.identify``). A hub user's is kept on the user object
    the token cache returns for every request with that token (``hubservice.identity``): made
    once, not per request."""
    known = getattr(user, "quota_identity", None)
    if known is not None:
        return known
    who = identify(user, identity_provider, config)
    if hasattr(user, "hub_user"):
        user.quota_identity = who
    return who


class Replies:
    """How a route answers JSON, with ETags and the answer cache: for ``QuotaHandler`` and for the
    hub service's lean balance read (``hubservice/leanread.py``), which is a bare tornado
    ``RequestHandler``."""

    @property
    def service(self):
        return self.settings["jupyter_quota_service"]

    def set_etag_header_for(self, version: str) -> None:
        """A weak ETag from what the answer depends on, set before it is made (``If-None-Match``)."""
        self.set_header("Etag", etag_of(version))

    def reply_cached(self, key: str, version: str | None, answer) -> None:
        """:meth:`reply_unless_version`, with the answer kept under ``key`` (a namespace) for the
        next read of the same ``version`` (``OPTIMISATIONS["answer-cache"]``): its ETag and bytes
        are written again, ``observedAt`` stamped now. Only where ``observedAt`` is the read time
        (the local backend): the kube backend's is the watch's last data, which moves by itself."""
        service = self.service
        if (
            version is None
            or not OPTIMISATIONS["answer-cache"]
            or not getattr(service.backend, "observed_at_is_read_time", False)
        ):
            self.reply_unless_version(version, answer)
            return
        hit = service.answers.get(key, version)
        if hit is None:
            etag = etag_of(version)
            payload = answer()
            rest = {k: v for k, v in payload.items() if k != "observedAt"}
            body = json.dumps(rest).encode()
            service.answers.put(key, version, etag, body)
        else:
            etag, body = hit
        self.set_header("Etag", etag)
        if self.check_etag_header():
            self.set_status(304)
            self.finish()
            return
        self.set_header("Content-Type", "application/json")
        stamp = f', "observedAt": "{now_rfc3339()}"}}'.encode() if len(body) > 2 else None
        self.finish(body[:-1] + stamp if stamp else body)

    def reply_unless_unchanged(self, payload: dict) -> None:
        """200 with ``payload`` and its ETag, or 304 with no body when ``If-None-Match`` holds that
        ETag. The ETag covers all but ``observedAt``: a balance only read again is unchanged."""
        self.set_etag_header_for(json.dumps(_without_observed_at(payload), sort_keys=True))
        if self.check_etag_header():
            self.set_status(304)
            self.finish()
            return
        self.reply(payload)

    def reply_unless_version(self, version: str | None, answer) -> None:
        """As :meth:`reply_unless_unchanged`, with the ETag from ``version`` (a cheap validator,
        ``service/validators.py``) so that a 304 computes nothing: ``answer()`` is called only for
        a 200. ``version`` None: the answer's hash, as before."""
        if version is None:
            self.reply_unless_unchanged(answer())
            return
        self.set_etag_header_for(version)
        if self.check_etag_header():
            self.set_status(304)
            self.finish()
            return
        self.reply(answer())

    def reply(self, payload: dict, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(payload))


@tornado.web.stream_request_body
class QuotaHandler(Replies, APIHandler):
    """Base of every route: the body cap, the service, the caller, and the JSON error shape.

    Bodies are streamed (``stream_request_body``) so that ``prepare`` runs on the headers alone,
    before jupyter-server's auth and before tornado reads the body: a declared ``Content-Length``
    over ``MAX_BODY_BYTES`` is refused at once, and a chunked body as soon as it passes the cap.
    Refusing before the body is read makes tornado close the connection after the answer
    (``HTTP1Connection.finish``), the only way not to read the rest. Such an answer says
    ``Connection: close``, which tornado does not add: a proxy (the hub's configurable-http-proxy)
    would otherwise reuse the closed socket for its next request and fail it (a 503).
    """

    auth_resource = AUTH_RESOURCE

    async def prepare(self):
        declared = self.request.headers.get("Content-Length")
        self.request.body = bytearray()  # filled by data_received, read by json_body
        try:
            too_large = declared is not None and int(declared) > MAX_BODY_BYTES
        except ValueError:
            too_large = False  # tornado refuses a malformed Content-Length itself
        if too_large:
            self._refuse_body(f"{int(declared)} bytes")
            return
        self.request.connection.set_max_body_size(MAX_BODY_BYTES if declared is not None else CHUNKED_BODY_LIMIT)
        await super().prepare()  # a refusal here closes the connection (HTTP1Connection.finish)
        self._body_read = True  # tornado reads it all before the method; data_received refuses on its own

    def check_xsrf_cookie(self) -> None:
        """jupyter-server checks XSRF in ``prepare``, before tornado has read the request (body or not);
        a refusal then closes the connection, and a proxy reusing it, or still sending the body, gets
        a reset instead of the answer (a 503 page from the hub). So the check waits for the body (at
        most ``MAX_BODY_BYTES``: ``prepare`` refuses more): ``api_call`` runs it before the handler's
        method does anything."""
        if not getattr(self, "_body_read", False):
            self._xsrf_deferred = True
            return
        self._check_xsrf_now()

    def check_deferred_xsrf(self) -> None:
        if getattr(self, "_xsrf_deferred", False):
            self._xsrf_deferred = False
            self._check_xsrf_now()

    def _check_xsrf_now(self) -> None:
        """A caller who is not signed in (or whose token was not accepted) hears that, not about
        XSRF (jupyter-server checks XSRF on every write of a caller it did not authenticate)."""
        if hasattr(self, "_jupyter_current_user") and self._jupyter_current_user is None:
            raise tornado.web.HTTPError(403, self._not_signed_in())
        super().check_xsrf_cookie()

    def _not_signed_in(self) -> str:
        return TOKEN_REFUSED if self.request.headers.get("Authorization") else NOT_SIGNED_IN

    def data_received(self, chunk: bytes) -> None:
        if self._finished:
            return
        if len(self.request.body) + len(chunk) > MAX_BODY_BYTES:
            self._refuse_body(f"over {MAX_BODY_BYTES} bytes (sent chunked)")
            return
        self.request.body += chunk

    def _refuse_body(self, size: str) -> None:
        error = BodyTooLarge(f"the request body is {size}; at most {MAX_BODY_BYTES} bytes (1 MiB) are accepted")
        self.set_header("Connection", "close")
        self.reply(error.to_json(), error.status)

    @property
    def quota_config(self):
        return self.settings["jupyter_quota_config"]

    @property
    def who(self):
        return identity_of(self.current_user, self.identity_provider, self.quota_config)

    @property
    def plan_slots(self) -> WorkSlots:
        return self.settings["jupyter_quota_plan_slots"]

    async def run(self, fn, *args):
        """Call a service method off the IO loop (it may touch SQLite, files or processes)."""
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    def set_default_headers(self) -> None:
        if not OPTIMISATIONS["static-headers"]:
            super().set_default_headers()
            return
        headers = self.settings.get("jupyter_quota_default_headers")
        if headers is None:  # jupyter-server's, as it sets them; they depend on the settings alone
            before = dict(self._headers.get_all())  # tornado's own (Date, Server) stay per request
            super().set_default_headers()
            headers = {k: v for k, v in self._headers.get_all() if before.get(k) != v}
            self.settings["jupyter_quota_default_headers"] = headers
        self._headers.update(headers)  # values ``set_header`` checked when they were made

    def required_body(self):
        """``json_body`` of a route whose body the OpenAPI file requires: none is a 400, not ``{}``."""
        if not (self.request.body or b"").strip():
            raise InvalidRequest("this request needs a JSON body (jupyter_quota/openapi.yaml and the README say which)")
        return self.json_body()

    def json_body(self):
        raw = self.request.body or b""  # at most MAX_BODY_BYTES: prepare/data_received refuse more
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise InvalidRequest(f"the body is not valid JSON: {e}") from None
        except RecursionError:  # json's C scanner recurses per level
            raise InvalidRequest(_TOO_DEEP) from None
        except ValueError:  # Python's int-string limit (sys.get_int_max_str_digits(), 4,300 by default)
            raise InvalidRequest(
                f"the body holds an integer of more than {sys.get_int_max_str_digits()} digits; "
                'write quantities as strings, e.g. "64Gi" or "1e9"'
            ) from None
        if _depth(body) > MAX_BODY_DEPTH:  # shallower, but deep enough to exhaust recursion further on
            raise InvalidRequest(_TOO_DEEP)
        return body

    def get_login_url(self) -> str:
        """An API call without credentials is refused with what to send, never redirected."""
        if not self.current_user:
            raise tornado.web.HTTPError(403, self._not_signed_in())
        return super().get_login_url()

    def write_error(self, status_code: int, **kwargs) -> None:
        """Even tornado's own errors (403 from auth, 405, 500) answer in the API's shape."""
        self.set_header("Content-Type", "application/json")
        if not getattr(self, "_body_read", False):  # an answer before the read: tornado closes
            self.set_header("Connection", "close")
        reasons = {
            400: InvalidRequest.reason,
            403: Forbidden.reason,
            404: NotFound.reason,
            405: "MethodNotAllowed",
            503: ServiceUnavailable.reason,
        }
        reason = reasons.get(status_code, "InternalError")
        error = (kwargs.get("exc_info") or (None, None, None))[1]
        # a 4xx or 503 says what to do; a 500's text may hold internals, so it stays generic
        said = (
            error.log_message
            if isinstance(error, tornado.web.HTTPError) and (status_code < 500 or status_code == 503)
            else None
        )
        if status_code == 403 and not said and getattr(self, "_jupyter_current_user", None) is None:
            said = self._not_signed_in()  # tornado's @authenticated refuses a write with a bare 403
        message = said or self._reason or "internal error; the server log has the details"
        if status_code == 405:  # RFC 9110 15.5.6: a 405 says which methods the resource has
            self.set_header("Allow", ", ".join(self.allowed_methods()))
        self.finish(json.dumps({"reason": reason, "message": message}))

    @classmethod
    def allowed_methods(cls) -> list[str]:
        """The methods this route implements (tornado's defaults answer 405)."""
        unimplemented = tornado.web.RequestHandler.get
        return [m for m in ("GET", "POST", "PUT", "DELETE") if getattr(cls, m.lower()) is not unimplemented]


def etag_of(version: str) -> str:
    """A weak ETag naming ``version`` (what the answer depends on), not its content."""
    return f'W/"{hashlib.sha256(version.encode()).hexdigest()[:32]}"'


def _without_observed_at(value):
    """A balance, or the namespaces with theirs, less the time it was read."""
    if isinstance(value, dict):
        return {k: _without_observed_at(v) for k, v in value.items() if k != "observedAt"}
    if isinstance(value, list):
        return [_without_observed_at(v) for v in value]
    return value


def _depth(value) -> int:
    """How deeply lists and objects nest in a parsed body (iterative: no recursion to exhaust)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in item)
    return deepest


class NamespacesHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self):
        # Served from the backend's cache (tens of microseconds): cheaper inline than a thread hop.
        self.reply_unless_version(*self.service.namespaces_read(self.who))


class BalanceHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self, namespace):
        self.reply_cached(namespace, *self.service.balance_read(self.who, namespace))


class EventsHandler(QuotaHandler):
    """``GET /events``: server-sent events for the caller's namespaces (``service/events.py``).

    Authorised as ``GET /namespaces`` is (the same caller, the same teams). The stream starts
    with each namespace's balance, then carries every change; a heartbeat comment keeps proxies
    from closing it. A client too slow to read what it is sent is closed: it reconnects and
    starts afresh from the balances.
    """

    #: frames a client may leave unread before it is closed
    MAX_UNSENT = 256

    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self):
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")  # nginx in front of a hub: pass each event on
        closed = asyncio.get_running_loop().create_future()
        self._closed_future = closed
        unsent = [0]

        def sent(future) -> None:
            unsent[0] -= 1
            if not future.cancelled() and future.exception() is not None and not closed.done():
                closed.set_result(None)  # the client left: end the subscription

        def send(data: bytes) -> None:
            if closed.done() or self.request.connection.stream.closed():
                raise tornado.iostream.StreamClosedError()
            if unsent[0] >= self.MAX_UNSENT:
                closed.set_result(None)
                self.finish()
                raise tornado.iostream.StreamClosedError()
            unsent[0] += 1
            self.write(data)
            self.flush().add_done_callback(sent)

        subscription, balances = self.service.subscribe(self.who, send, asyncio.get_running_loop())
        try:
            send(f"retry: {events.RETRY_MS}\n\n".encode())
            for balance in balances:
                send(events.frame(events.BALANCE, balance))
            await closed
        except tornado.iostream.StreamClosedError:
            pass
        finally:
            self.service.events.unsubscribe(subscription)

    def on_connection_close(self) -> None:
        future = getattr(self, "_closed_future", None)
        if future is not None and not future.done():
            future.set_result(None)


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
        body = self.required_body()
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


class EndpointsHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self, namespace):
        listed = await self.run(self.service.list_endpoints, self.who, namespace)
        self.reply({"endpoints": [_with_url(self, e) for e in listed["endpoints"]]})

    @tornado.web.authenticated
    @authorized
    @api_call
    async def post(self, namespace):
        body = self.required_body()
        endpoint = await self.run(self.service.create_endpoint, self.who, namespace, body)
        self.set_header("Location", url_path_join(self.request.path, endpoint["name"]))
        self.reply(_with_url(self, endpoint), 201)


def _with_url(handler: QuotaHandler, endpoint: dict) -> dict:
    """The endpoint with ``url``: its OpenAI-compatible API under the caller's server: the user's
    server that forwarded the call (its ``X-Forwarded-Prefix``, ``hubservice/forward.py``), else this one."""
    base = handler.request.headers.get("X-Forwarded-Prefix", "")
    if not (base.startswith("/") and base.isprintable()):
        base = handler.settings["base_url"]
    path = ("namespaces", endpoint["namespace"], "endpoints", endpoint["name"], "v1")
    return {**endpoint, "url": url_path_join(base, *API_PREFIX, *path) + "/"}


class EndpointHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self, namespace, name):
        self.reply(_with_url(self, await self.run(self.service.get_endpoint, self.who, namespace, name)))

    @tornado.web.authenticated
    @authorized
    @api_call
    async def delete(self, namespace, name):
        self.reply(_with_url(self, await self.run(self.service.delete_endpoint, self.who, namespace, name)))


class EndpointProxyHandler(QuotaHandler):
    """``.../endpoints/{name}/v1/{path}``: the endpoint's OpenAI-compatible API, reverse-proxied.

    Authenticated and authorised as every route (a member of the endpoint's team may call it, so a
    teammate with the link can). Only the body and ``Content-Type``/``Accept`` go on: the caller's
    token and cookies never reach the model server. The answer streams through as it comes
    (server-sent events of ``"stream": true``). Each request counts against the idle policy, and
    is counted with its status and latency (to the answer's last byte): the endpoint's
    ``requests``, usage and the metrics (ms-swift's server has no ``/metrics`` of its own).
    """

    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self, namespace, name, path):
        await self._forward(namespace, name, path)

    @tornado.web.authenticated
    @authorized
    @api_call
    async def post(self, namespace, name, path):
        await self._forward(namespace, name, path)

    async def _forward(self, namespace: str, name: str, path: str) -> None:
        import tornado.httpclient
        import tornado.httputil

        base = await self.run(self.service.endpoint_target, self.who, namespace, name)
        url = f"{base}/v1/{path}" + (f"?{self.request.query}" if self.request.query else "")
        headers = {k: v for k in ("Content-Type", "Accept") if (v := self.request.headers.get(k))}
        upstream = {"status": 502, "headers": tornado.httputil.HTTPHeaders(), "started": False}

        def header_line(line: str) -> None:
            if line.startswith("HTTP/"):
                upstream["status"] = int(line.split(" ", 2)[1])
                upstream["headers"] = tornado.httputil.HTTPHeaders()
            elif line.strip():
                upstream["headers"].parse_line(line)

        def start() -> None:
            if not upstream["started"]:
                upstream["started"] = True
                self.set_status(upstream["status"])
                self.set_header("Content-Type", upstream["headers"].get("Content-Type", "application/json"))
                self.set_header("Cache-Control", "no-cache")
                self.set_header("X-Accel-Buffering", "no")  # a proxy in front passes each event on

        def chunk(data: bytes) -> None:
            start()
            self.write(data)
            self.flush()

        request = tornado.httpclient.HTTPRequest(
            url,
            method=self.request.method,
            headers=headers,
            body=bytes(self.request.body) if self.request.method == "POST" else None,
            header_callback=header_line,
            streaming_callback=chunk,
            connect_timeout=10,
            request_timeout=self.quota_config.endpoint_request_timeout,
        )
        began, status = time.monotonic(), 503
        try:
            response = await tornado.httpclient.AsyncHTTPClient().fetch(request, raise_error=False)
            if response.code == 599 and not upstream["started"]:  # no answer at all
                raise ServiceUnavailable(
                    f'endpoint "{name}" did not answer ({response.error}); GET .../endpoints/{name} shows its phase'
                )
            start()
            status = self.get_status()
            self.finish()
        finally:
            self.service.endpoint_served(namespace, name, status, time.monotonic() - began)


class JobLogsHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self, namespace, name):
        # strip=False: tornado turns a control character into a space and would strip it to "" (the default)
        tail = self.get_query_argument("tailLines", None, strip=False)
        self.reply(await self.run(self.service.logs, self.who, namespace, name, tail))


class JobReplanHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def post(self, namespace, name):
        self.json_body()  # none is needed; a malformed one is still refused
        self.reply(await self.plan_slots.run(self.service.replan, self.who, namespace, name))


class EstimatorErrorsHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self):
        self.reply(await self.run(self.service.estimator_errors, self.who))


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
        if not (self.request.body or b"").strip():  # the body is the profile: none is not an empty one
            raise InvalidRequest('the body must be the team\'s profile as JSON, e.g. {"hard": {...}}')
        body = self.required_body()
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
        self.reply(await self.plan_slots.run(self.service.estimate, self.who, body))


class ServeEstimateHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def post(self):
        body = self.json_body()
        self.reply(await self.plan_slots.run(self.service.estimate_serve, self.who, body))


class VerificationsHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def post(self):
        body = self.required_body()
        verification = await self.run(self.service.start_verification, self.who, body)
        self.set_header("Location", url_path_join(self.request.path, verification["id"]))
        self.reply(verification, 202 if verification["state"] == RUNNING else 200)


class VerificationHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self, vid):
        self.reply(await self.run(self.service.verification, self.who, vid))


class PlanHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def post(self, namespace):
        body = self.json_body()
        self.reply(await self.plan_slots.run(self.service.plan, self.who, namespace, body))


class ServePlanHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def post(self, namespace):
        body = self.json_body()
        self.reply(await self.plan_slots.run(self.service.plan_serve, self.who, namespace, body))


class MetricsHandler(QuotaHandler):
    """Prometheus text, for quota admins, or for a scraper that sends the scrape token
    (``Authorization: Bearer <JupyterQuota.metrics_token>``) and never signs in."""

    async def prepare(self):
        self._scraper = self._sent_scrape_token()
        if self._scraper:
            # The token is the credential: no identity lookup (a hub would be asked about a
            # token it never issued). GET only, and no body: nothing else of prepare applies.
            self._body_read = True
            return
        await super().prepare()

    def _sent_scrape_token(self) -> bool:
        token = self.quota_config.metrics_token
        scheme, _, sent = self.request.headers.get("Authorization", "").partition(" ")
        return (
            bool(token)
            and self.request.method == "GET"
            and scheme.lower() == "bearer"
            and hmac.compare_digest(sent.strip().encode(), token.encode())  # constant time
        )

    @allow_unauthenticated  # not anonymous: the scrape token, else @web.authenticated on _get_as_user
    async def get(self):
        await (self._get_as_scraper() if self._scraper else self._get_as_user())

    @api_call
    async def _get_as_scraper(self):
        self._reply_text(await self.run(self.service.scrape, None))

    @tornado.web.authenticated
    @authorized
    @api_call
    async def _get_as_user(self):
        self._reply_text(await self.run(self.service.scrape, self.who))

    def _reply_text(self, text: bytes) -> None:
        self.finish(text, set_content_type=CONTENT_TYPE_LATEST)  # APIHandler.finish would say JSON


class IncreasesHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def post(self, namespace):
        body = self.required_body()
        self.reply(await self.run(self.service.request_increase, self.who, namespace, body), 201)


class IncreaseListHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self):
        limit, token = self.get_query_argument("limit", None), self.get_query_argument("continue", None)
        who = self.who
        # the version is two indexed reads: an unchanged poll is a 304 without reading the requests
        version = await self.run(self.service.increases_version, who)
        self.set_etag_header_for(f"{version}.{limit}.{token}")
        if self.check_etag_header():
            self.set_status(304)
            self.finish()
            return
        self.reply(await self.run(self.service.list_increases, who, limit, token))


class ApproveHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def post(self, name):
        await self.decide(name, approve=True)

    async def decide(self, name: str, approve: bool) -> None:
        body = self.json_body()
        self.reply(await self.run(self.service.decide_increase, self.who, name, body, approve))


class DenyHandler(ApproveHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def post(self, name):
        await self.decide(name, approve=False)


class AuditHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self):
        fmt = self.get_query_argument("format", "json")
        if fmt not in ("json", "csv"):
            raise InvalidRequest(f"format must be json or csv, not {fmt[:32]!r}")
        if fmt == "json":
            limit, token = self.get_query_argument("limit", None), self.get_query_argument("continue", None)
            self.reply(await self.run(self.service.audit_page, self.who, limit, token))
            return
        from .audit import to_csv

        entries = await self.run(self.service.audit_log, self.who)  # the export: the whole log
        self.set_header("Content-Disposition", "attachment; filename=quota-audit.csv")
        self.finish(to_csv(entries), set_content_type="text/csv; charset=utf-8")


class UsageHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self):
        params = [self.get_query_argument(k, None) for k in ("since", "until", "by", "namespace", "step")]
        who = self.who
        # rows and their JSON are made in a worker thread: the IO loop keeps serving balances
        text = await self.run(lambda: json.dumps(self.service.usage(who, *params)))
        self.set_header("Content-Type", "application/json")
        self.finish(text)


class ChargebackHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self):
        month, form = self.get_query_argument("month", None), self.get_query_argument("format", "json")
        if form not in ("json", "csv"):
            raise InvalidRequest(f"format must be json or csv, not {form[:32]!r}")
        report = await self.run(self.service.chargeback, self.who, month)
        if form == "json":
            self.reply(report)
            return
        self.set_header("Content-Disposition", f"attachment; filename=chargeback-{report['month']}.csv")
        self.finish(chargeback_csv(report), set_content_type="text/csv; charset=utf-8")  # APIHandler's default: JSON


class RecommendationsHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self):
        series = self.get_query_argument("series", "false")
        if series not in ("true", "false"):
            raise InvalidRequest(f"series must be true or false, not {series[:32]!r}")
        self.reply(await self.run(self.service.recommendations, self.who, series == "true"))


class ReplayHandler(QuotaHandler):
    @tornado.web.authenticated
    @authorized
    @api_call
    async def post(self):
        body = self.json_body()
        self.reply(await self.run(self.service.replay, self.who, body))


_SEGMENT = r"([^/]+)"

#: (path below quota/v1, handler): the OpenAPI file documents exactly these.
ROUTES = [
    ("/namespaces", NamespacesHandler),
    ("/events", EventsHandler),
    (f"/namespaces/{_SEGMENT}/balance", BalanceHandler),
    (f"/namespaces/{_SEGMENT}/jobs", JobsHandler),
    (f"/namespaces/{_SEGMENT}/jobs/{_SEGMENT}", JobHandler),
    (f"/namespaces/{_SEGMENT}/jobs/{_SEGMENT}/logs", JobLogsHandler),
    (f"/namespaces/{_SEGMENT}/jobs/{_SEGMENT}/replan", JobReplanHandler),
    (f"/namespaces/{_SEGMENT}/plan", PlanHandler),
    (f"/namespaces/{_SEGMENT}/plan/serve", ServePlanHandler),
    (f"/namespaces/{_SEGMENT}/endpoints", EndpointsHandler),
    (f"/namespaces/{_SEGMENT}/endpoints/{_SEGMENT}", EndpointHandler),
    (f"/namespaces/{_SEGMENT}/endpoints/{_SEGMENT}/v1/(.+)", EndpointProxyHandler),
    ("/estimate", EstimateHandler),
    ("/estimate/serve", ServeEstimateHandler),
    ("/estimator/errors", EstimatorErrorsHandler),
    ("/verifications", VerificationsHandler),
    (f"/verifications/{_SEGMENT}", VerificationHandler),
    ("/models", ModelsHandler),
    ("/profiles", ProfilesHandler),
    (f"/profiles/{_SEGMENT}", ProfileHandler),
    (f"/namespaces/{_SEGMENT}/increases", IncreasesHandler),
    ("/increases", IncreaseListHandler),
    (f"/increases/{_SEGMENT}/approve", ApproveHandler),
    (f"/increases/{_SEGMENT}/deny", DenyHandler),
    ("/audit", AuditHandler),
    ("/identity", IdentityHandler),
    ("/inventory", InventoryHandler),
    ("/metrics", MetricsHandler),
    ("/usage", UsageHandler),
    ("/chargeback", ChargebackHandler),
    ("/recommendations", RecommendationsHandler),
    ("/replay", ReplayHandler),
]


def setup_handlers(web_app, service) -> None:
    """Register the routes under the server's base URL (so they work under JupyterHub)."""
    web_app.settings["jupyter_quota_service"] = service
    web_app.settings["jupyter_quota_config"] = service.config
    web_app.settings["jupyter_quota_plan_slots"] = WorkSlots(
        service.config.max_concurrent_plans, "plan or estimate searches", "JupyterQuota.max_concurrent_plans"
    )
    base_url = web_app.settings["base_url"]
    web_app.add_handlers(
        ".*$",
        [(url_path_join(base_url, *API_PREFIX) + path + "/?$", handler) for path, handler in ROUTES],
    )
