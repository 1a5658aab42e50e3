"""The user server's quota API when a hub runs the quota service: every call is forwarded.

``{base_url}quota/v1/<path>`` in the user's server becomes ``{service_url}quota/v1/<path>``,
same method, query and body, sent with the server's own hub token (``JUPYTERHUB_API_TOKEN``).
That token proves the server's owner to the service and nothing more, so the user's server
holds no quota state and no credential beyond what its owner already has; the service decides
everything. The sidebar, the magics and the CLI keep calling their own server, unchanged.

Only the server's owner is forwarded: a hub admin or a user the server is shared with would
otherwise act as the owner, so they get 403 and are told to use their own server.
"""

from __future__ import annotations

import os
import re

import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.iostream import StreamClosedError

from ..errors import Forbidden, QuotaError, ServiceUnavailable
from ..handlers import API_PREFIX, QuotaHandler, api_call

#: the service's answer headers a client needs (Location is rewritten to this server's path)
_RELAYED_HEADERS = ("Allow", "Content-Disposition", "Etag", "Retry-After")
#: a relayed stream's: the same (a 405's Allow included), and how to read and cache the stream
_STREAM_HEADERS = {name.lower() for name in (*_RELAYED_HEADERS, "Content-Type", "Cache-Control")}
#: the caller's request headers the service needs (a conditional read: ``GET increases``)
_FORWARDED_HEADERS = ("If-None-Match",)
#: the one route relayed as a stream (server-sent events), not as one answer
STREAM_PATH = "/events"
#: an endpoint's OpenAI-compatible API (``handlers.EndpointProxyHandler``): relayed as a stream too
ENDPOINT_API = re.compile(r"^/namespaces/[^/?]+/endpoints/[^/?]+/v1/")
#: what a client is told to wait when the service does not answer (the hub restarts it)
RETRY_AFTER_SECONDS = 10
#: the largest answer relayed (tornado's own client limit, which failed past it as a dropped connection)
MAX_ANSWER_BYTES = 100 * 1024 * 1024


class ForwardHandler(QuotaHandler):
    """Every method of every path below ``quota/v1``: checked here, answered by the service."""

    @tornado.web.authenticated
    @authorized
    @api_call
    async def get(self, path):
        await self._forward()

    @tornado.web.authenticated
    @authorized
    @api_call
    async def post(self, path):
        await self._forward()

    @tornado.web.authenticated
    @authorized
    @api_call
    async def put(self, path):
        await self._forward()

    @tornado.web.authenticated
    @authorized
    @api_call
    async def delete(self, path):
        await self._forward()

    @tornado.web.authenticated
    @authorized
    @api_call
    async def patch(self, path):  # no route has it: the service's 405 names the methods it has
        await self._forward()

    async def _forward(self) -> None:
        settings = self.settings["jupyter_quota_forward"]
        caller = self.who.name
        if caller != settings.owner:
            raise Forbidden(
                f"this server belongs to {settings.owner}; quota calls go through your own "
                f"server, and {caller} is not its owner: open yours from the hub home page"
            )
        local = url_path_join(self.base_url, *API_PREFIX)
        rest = self.request.uri[len(local) :]  # "/namespaces/...?query", still percent-encoded
        body = bytes(self.request.body) if self.request.method in ("POST", "PUT") else None
        if self.request.method == "GET" and rest.split("?", 1)[0].rstrip("/") == STREAM_PATH:
            await self._relay_stream(settings, rest)
            return
        if ENDPOINT_API.match(rest):  # a model's answer, streamed as the model writes it
            await self._relay_stream(settings, rest, body, self.request.headers.get("Accept", "*/*"))
            return
        received, dropped = bytearray(), [0]

        def keep(chunk: bytes) -> None:  # past the limit the rest is read and counted, not held
            if dropped[0] or len(received) + len(chunk) > settings.max_answer_bytes:
                dropped[0] += len(chunk)
            else:
                received.extend(chunk)

        request = HTTPRequest(
            settings.service_url + "/".join(API_PREFIX) + rest,
            method=self.request.method,
            body=body,
            headers={
                "Authorization": f"token {settings.token}",
                "Content-Type": "application/json",
                "X-Forwarded-Prefix": self.base_url,  # an endpoint's url is under this server's
                **{k: self.request.headers[k] for k in _FORWARDED_HEADERS if k in self.request.headers},
            },
            connect_timeout=settings.connect_timeout,
            request_timeout=settings.timeout_for(self.request.method),
            follow_redirects=False,
            allow_nonstandard_methods=True,
            streaming_callback=keep,
        )
        try:
            answer = await settings.client().fetch(request, raise_error=False)
        except (OSError, HTTPClientError) as e:
            raise self._unavailable(settings, e) from None
        if answer.code == 599:  # tornado's "no answer": timeout or connection error
            raise self._unavailable(settings, answer.error)
        if dropped[0]:
            raise AnswerTooLarge(
                f"the quota service's answer ({len(received) + dropped[0]} bytes) is larger than this server "
                f"relays ({settings.max_answer_bytes} bytes): ask for less, e.g. usage with a larger step, "
                "a shorter window or by=team, or a smaller page (limit)"
            )
        self.set_status(answer.code)
        for name in _RELAYED_HEADERS:
            if name in answer.headers:
                self.set_header(name, answer.headers[name])
        if "Location" in answer.headers:
            self.set_header("Location", local + answer.headers["Location"].split("/".join(API_PREFIX), 1)[-1])
        # APIHandler.finish would label every answer JSON: metrics are text, the chargeback's CSV is text/csv
        if answer.code == 304:  # not modified: no body, as HTTP requires
            self.finish()
            return
        self.finish(bytes(received), set_content_type=answer.headers.get("Content-Type", "application/json"))

    async def _relay_stream(
        self, settings, rest: str, body: bytes | None = None, accept: str = "text/event-stream"
    ) -> None:
        """``GET /events`` (and an endpoint's API, with its ``body``): each chunk passed on as it
        arrives, never held (no size limit, no request timeout: the service's heartbeats keep
        it alive; the service bounds an endpoint's request). When the client leaves, the next
        chunk (a heartbeat at the latest) finds its stream closed and ends the relay."""
        started, gone = [False], [False]

        def on_header(line: str) -> None:
            if line.startswith("HTTP/"):
                self.set_status(int(line.split()[1]))
            elif ":" in line:
                name, _, value = line.partition(":")
                if name.strip().lower() in _STREAM_HEADERS:
                    self.set_header(name.strip(), value.strip())

        def on_chunk(chunk: bytes) -> None:
            if gone[0] or self.request.connection.stream.closed():
                gone[0] = True
                raise StreamClosedError()  # tornado's client closes the upstream connection
            started[0] = True
            self.write(chunk)
            self.flush()

        request = HTTPRequest(
            settings.service_url + "/".join(API_PREFIX) + rest,
            method=self.request.method,
            body=body,
            headers={"Authorization": f"token {settings.token}", "Accept": accept, "Content-Type": "application/json"},
            connect_timeout=settings.connect_timeout,
            request_timeout=0,  # none: the stream lasts as long as the client stays
            follow_redirects=False,
            allow_nonstandard_methods=True,  # a PATCH with no body: the service answers its 405
            header_callback=on_header,
            streaming_callback=on_chunk,
        )
        client = AsyncHTTPClient(force_instance=True, max_body_size=2**62)  # its own: closed with the stream
        try:
            answer = await client.fetch(request, raise_error=False)
        except (OSError, HTTPClientError) as e:
            if started[0] or gone[0]:
                return
            raise self._unavailable(settings, e) from None
        finally:
            client.close()
        if gone[0] or answer.code != 599 or started[0]:
            if not self._finished and not self.request.connection.stream.closed():
                self.finish()
            return
        raise self._unavailable(settings, answer.error)

    def _unavailable(self, settings, cause) -> ServiceUnavailable:
        self.log.warning("jupyter_quota: the quota service at %s did not answer: %s", settings.service_url, cause)
        error = ServiceUnavailable(
            "the hub's quota service did not answer; try again in a minute. If it persists, ask a hub "
            "admin to check the jupyter-quota service in the hub's log"
        )
        error.headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
        return error


class AnswerTooLarge(QuotaError):
    """The service answered, but with more than the forwarder relays: not an outage."""

    status = 502
    reason = "AnswerTooLarge"


class ForwardSettings:
    """Where to forward, as whom, for how long to wait, and how much to relay."""

    def __init__(
        self,
        service_url: str,
        owner: str,
        token: str,
        timeout: float,
        read_timeout: float | None = None,
        connect_timeout: float = 5.0,
    ):
        self.service_url = service_url if service_url.endswith("/") else service_url + "/"
        self.owner = owner
        self.token = token
        self.timeout = timeout
        self.read_timeout = timeout if read_timeout is None else read_timeout
        self.connect_timeout = connect_timeout
        self.max_answer_bytes = MAX_ANSWER_BYTES
        self._client = None

    def timeout_for(self, method: str) -> float:
        """Reads (the sidebar's polls) wait ``read_timeout``; plan searches (``POST estimate``,
        ``plan``, ``replan``) and other writes ``timeout``."""
        return self.read_timeout if method == "GET" else self.timeout

    def client(self) -> AsyncHTTPClient:
        """A client of its own: tornado's shared one caps answers at 100 MB and then reports only a
        closed connection; ``_forward`` enforces ``max_answer_bytes`` itself, so it can say why."""
        if self._client is None:
            self._client = AsyncHTTPClient(force_instance=True, max_body_size=2**62)
        return self._client


def setup_forwarding(web_app, config, log) -> ForwardSettings:
    """Route ``{base_url}quota/v1/*`` to the service at ``config.service_url``."""
    token = os.environ.get("JUPYTERHUB_API_TOKEN", "")
    if not token:
        raise RuntimeError(
            "JupyterQuota.service_url is set, but this server has no JUPYTERHUB_API_TOKEN: "
            "the quota service is reached from servers a JupyterHub started"
        )
    settings = ForwardSettings(
        config.service_url,
        config.owner,
        token,
        config.service_timeout,
        config.service_read_timeout,
        config.service_connect_timeout,
    )
    web_app.settings["jupyter_quota_forward"] = settings
    web_app.settings["jupyter_quota_service"] = None  # no state here: the service holds it
    web_app.settings["jupyter_quota_config"] = config
    base_url = web_app.settings["base_url"]
    web_app.add_handlers(".*$", [(url_path_join(base_url, *API_PREFIX) + "(/.*)?$", ForwardHandler)])
    return settings
