"""The kernel's client of its Jupyter server's quota API (``{base_url}quota/v1``).

The server stays the one authority on who the user is and what their team may use: the magics
never read the ledger or the cluster themselves, they ask the server that started the kernel.

:func:`connect` finds that server, in this order:

1. ``JUPYTER_QUOTA_URL`` (the server's base URL, e.g. ``http://127.0.0.1:8888/``) with
   ``JUPYTER_QUOTA_TOKEN``: an explicit choice wins;
2. JupyterHub's single-user environment, which kernels inherit: ``JUPYTERHUB_SERVICE_URL``
   with ``JUPYTERHUB_API_TOKEN`` (the server's own token, which may call its own server);
3. jupyter-server's runtime files (``jupyter_server.serverapp.list_running_servers()``): the
   server whose process started this kernel, else the one whose ``root_dir`` holds the
   kernel's working directory (the deepest such root).

Every call sends ``Authorization: token ...`` (token-authenticated requests need no XSRF
cookie). API errors arrive as :class:`ApiError` with the server's ``reason`` and ``message``.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import urllib.error
import urllib.parse
import urllib.request

API_PATH = "quota/v1"

HOW_TO_FIX = (
    "How to fix: open this notebook from JupyterLab or Jupyter Server with the jupyter_quota "
    "server extension enabled (jupyter server extension list shows it; enable it with "
    "`jupyter server extension enable jupyter_quota`), or point the kernel at a server with "
    "%env JUPYTER_QUOTA_URL=http://127.0.0.1:8888/ and %env JUPYTER_QUOTA_TOKEN=<its token>."
)


class QuotaClientError(Exception):
    """Something the user should read: its ``str`` is the whole message, no traceback needed."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class ServerNotFound(QuotaClientError):
    """No server with the quota API could be found or reached from this kernel."""


class ApiError(QuotaClientError):
    """The API answered with an error: ``status``, and its ``reason`` and ``message``."""

    def __init__(self, status: int, reason: str, message: str):
        super().__init__(message)
        self.status = status
        self.reason = reason


class QuotaClient:
    """Calls ``{server}{base_url}quota/v1/...`` with token auth; JSON in, JSON out."""

    def __init__(self, server_url: str, token: str = "", source: str = "", timeout: float = 60.0):
        self.server_url = server_url if server_url.endswith("/") else server_url + "/"
        self.token = token
        self.source = source
        self.timeout = timeout

    @property
    def api_url(self) -> str:
        return self.server_url + API_PATH

    def __repr__(self) -> str:
        return f"QuotaClient({self.api_url!r}, found from {self.source or 'arguments'})"

    # -- the API ---------------------------------------------------------------------------------
    def namespaces(self) -> list[dict]:
        return self.call("GET", "/namespaces")["namespaces"]

    def balance(self, namespace: str) -> dict:
        return self.call("GET", f"/namespaces/{_seg(namespace)}/balance")

    def identity(self) -> dict:
        return self.call("GET", "/identity")

    def estimate(self, args: list[str], gpus: int = 1) -> dict:
        return self.call("POST", "/estimate", {"args": list(args), "gpus": gpus})

    def plan(self, namespace: str, args: list[str], gpus: int | None = None, model_size: str | None = None) -> dict:
        body: dict = {"args": list(args)}
        if gpus is not None:
            body["gpus"] = gpus
        if model_size is not None:
            body["modelSize"] = model_size
        return self.call("POST", f"/namespaces/{_seg(namespace)}/plan", body)

    def replan(self, namespace: str, name: str) -> dict:
        """The next plan down for a job that ran out of GPU memory (409 for any other job)."""
        return self.call("POST", f"/namespaces/{_seg(namespace)}/jobs/{_seg(name)}/replan", {})

    def submit(self, namespace: str, body: dict) -> dict:
        return self.call("POST", f"/namespaces/{_seg(namespace)}/jobs", body)

    def job(self, namespace: str, name: str) -> dict:
        return self.call("GET", f"/namespaces/{_seg(namespace)}/jobs/{_seg(name)}")

    def jobs(self, namespace: str) -> list[dict]:
        """Every job of the namespace, newest first: the pages one after the other."""
        jobs, params = [], None
        while True:
            page = self.call("GET", f"/namespaces/{_seg(namespace)}/jobs", params=params)
            jobs += page["jobs"]
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return jobs
            params = {"continue": token}

    def logs(self, namespace: str, name: str, tail_lines: int | None = None) -> str:
        params = {"tailLines": str(tail_lines)} if tail_lines else None
        return self.call("GET", f"/namespaces/{_seg(namespace)}/jobs/{_seg(name)}/logs", params=params)["logs"]

    def cancel(self, namespace: str, name: str) -> dict:
        return self.call("DELETE", f"/namespaces/{_seg(namespace)}/jobs/{_seg(name)}")

    def create_endpoint(self, namespace: str, body: dict) -> dict:
        return self.call("POST", f"/namespaces/{_seg(namespace)}/endpoints", body)

    def endpoint(self, namespace: str, name: str) -> dict:
        return self.call("GET", f"/namespaces/{_seg(namespace)}/endpoints/{_seg(name)}")

    def delete_endpoint(self, namespace: str, name: str) -> dict:
        return self.call("DELETE", f"/namespaces/{_seg(namespace)}/endpoints/{_seg(name)}")

    def request_increase(self, namespace: str, body: dict) -> dict:
        return self.call("POST", f"/namespaces/{_seg(namespace)}/increases", body)

    def increases(self) -> list[dict]:
        return self.call("GET", "/increases")["increases"]

    def events(self, timeout: float = 45.0) -> EventStream:
        """``GET /events`` held open: the caller's balance, job and increase changes as they happen.
        ``timeout``: seconds without a byte (the service sends a heartbeat every 15) before the
        stream counts as lost."""
        return EventStream(self, timeout)

    # -- transport -------------------------------------------------------------------------------
    def call(self, method: str, path: str, body=None, params: dict | None = None):
        url = self.api_url + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        data = None
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"token {self.token}"
        if body is not None or method in ("POST", "PUT"):
            data = json.dumps(body if body is not None else {}).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as e:
            raise _api_error(e, self) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ServerNotFound(
                f"could not reach the Jupyter server at {self.server_url} "
                f"(found from {self.source or 'arguments'}): {reason}. {HOW_TO_FIX}"
            ) from None
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            raise ServerNotFound(
                f"{url} did not answer with JSON: is it a Jupyter server with jupyter_quota? {HOW_TO_FIX}"
            ) from None


class EventStream:
    """One ``GET /events`` stream (server-sent events): iterate it for ``(event, data)`` pairs, the
    data parsed from JSON. Opening it raises as :meth:`QuotaClient.call` does (``ApiError`` for a
    refusal, ``ServerNotFound`` when unreachable); :meth:`close`, from any thread, ends the
    iteration. Once it is open the service has registered the subscription: every change after
    it arrives on the stream."""

    def __init__(self, client: QuotaClient, timeout: float):
        parts = urllib.parse.urlsplit(client.api_url + "/events")
        make = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self._conn = make(parts.hostname, parts.port, timeout=timeout)
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if client.token:
            headers["Authorization"] = f"token {client.token}"
        try:
            self._conn.request("GET", parts.path, headers=headers)
            self._response = self._conn.getresponse()
        except OSError as e:
            self._conn.close()
            raise ServerNotFound(f"could not open {client.api_url}/events: {e}") from None
        if self._response.status != 200 or not (self._response.getheader("Content-Type") or "").startswith(
            "text/event-stream"
        ):
            body = self._response.read(64 * 1024)
            self._conn.close()
            try:
                payload = json.loads(body or b"null")
            except ValueError:
                payload = None
            if isinstance(payload, dict) and "message" in payload:
                raise ApiError(self._response.status, str(payload.get("reason", "")), str(payload["message"]))
            raise ApiError(self._response.status, "HTTPError", f"HTTP {self._response.status} from {parts.path}")

    def __iter__(self):
        event, data = "message", []
        while True:
            try:
                raw = self._response.readline()
            except (OSError, ValueError, http.client.HTTPException):  # closed, timed out or reset
                return
            if not raw:
                return
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if not line:  # the blank line ends an event
                if data:
                    try:
                        yield event, json.loads("\n".join(data))
                    except ValueError:
                        pass  # not one of the API's events: skipped
                event, data = "message", []
            elif not line.startswith(":"):  # a comment (the heartbeat) only keeps the stream open
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "event":
                    event = value
                elif field == "data":
                    data.append(value)

    def close(self) -> None:
        sock = self._conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes a reader blocked in another thread
            except OSError:
                pass
        self._conn.close()


def connect(cwd: str | None = None, environ=None, servers=None, ppid: int | None = None) -> QuotaClient:
    """The client of the server this kernel belongs to; :class:`ServerNotFound` when none is.

    ``environ``, ``servers`` (runtime-file dicts) and ``ppid`` stand in for the process's own,
    for tests.
    """
    env = os.environ if environ is None else environ
    if env.get("JUPYTER_QUOTA_URL"):
        return QuotaClient(env["JUPYTER_QUOTA_URL"], env.get("JUPYTER_QUOTA_TOKEN", ""), "JUPYTER_QUOTA_URL")
    if env.get("JUPYTERHUB_SERVICE_URL") and env.get("JUPYTERHUB_API_TOKEN"):
        return QuotaClient(
            _local_host(env["JUPYTERHUB_SERVICE_URL"]), env["JUPYTERHUB_API_TOKEN"], "JUPYTERHUB_SERVICE_URL"
        )
    if servers is None:
        servers = _running_servers()
    info = pick_server(servers, cwd or os.getcwd(), os.getppid() if ppid is None else ppid)
    if info is None:
        found = (
            f"{len(servers)} running Jupyter server(s) were found, but none started this kernel "
            f"or serves its folder {cwd or os.getcwd()}"
            if servers
            else "no running Jupyter server was found (no JupyterHub environment, no jupyter-server runtime files)"
        )
        raise ServerNotFound(f"jupyter_quota cannot find its Jupyter server: {found}. {HOW_TO_FIX}")
    return QuotaClient(_local_host(info["url"]), info.get("token") or "", f"runtime file of pid {info.get('pid')}")


def pick_server(servers: list[dict], cwd: str, ppid: int) -> dict | None:
    """The server that launched the kernel (``pid == ppid``), else the deepest root holding ``cwd``."""
    for info in servers:
        if info.get("pid") == ppid:
            return info
    cwd = os.path.realpath(cwd)
    best, depth = None, -1
    for info in servers:
        root = info.get("root_dir") or info.get("notebook_dir")
        if not root:
            continue
        root = os.path.realpath(os.path.expanduser(root))
        if (cwd == root or cwd.startswith(root.rstrip(os.sep) + os.sep)) and len(root) > depth:
            best, depth = info, len(root)
    return best


def _running_servers() -> list[dict]:
    try:
        from jupyter_server.serverapp import list_running_servers
    except ImportError:  # pragma: no cover - jupyter_server is a dependency
        return []
    try:
        return list(list_running_servers())
    except OSError:
        return []


def _local_host(url: str) -> str:
    """A server bound to all interfaces (``0.0.0.0``, ``::``) is reached on the loopback."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if host in ("0.0.0.0", "::", ""):
        netloc = "127.0.0.1" + (f":{parts.port}" if parts.port else "")
        parts = parts._replace(netloc=netloc)
    return urllib.parse.urlunsplit(parts)


def _seg(value: str) -> str:
    return urllib.parse.quote(str(value), safe="")


def _api_error(e: urllib.error.HTTPError, client: QuotaClient) -> QuotaClientError:
    try:
        payload = json.loads(e.read() or b"null")
    except ValueError:
        payload = None
    if isinstance(payload, dict) and "message" in payload:
        return ApiError(e.code, str(payload.get("reason", "")), str(payload["message"]))
    if e.code == 404:
        return ServerNotFound(
            f"the Jupyter server at {client.server_url} has no quota API ({e.url} is "
            f"404): the jupyter_quota server extension is not enabled there. {HOW_TO_FIX}"
        )
    if e.code in (401, 403):
        return ServerNotFound(
            f"the Jupyter server at {client.server_url} refused this kernel's "
            f"credentials (HTTP {e.code}; found from {client.source}). {HOW_TO_FIX}"
        )
    return ApiError(e.code, "HTTPError", f"HTTP {e.code} from {e.url}: {e.reason}")
