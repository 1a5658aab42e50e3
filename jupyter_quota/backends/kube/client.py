"""Talking to the API server: config loading and a thin JSON-over-HTTP layer on the official client.

The official ``kubernetes`` client loads kubeconfig or in-cluster config and owns TLS, auth
(tokens, client certs, exec plugins) and connection pooling. Requests go through its
``ApiClient`` but bodies stay plain dicts: the backend speaks Kubernetes JSON (as ``quota``,
``jobspec`` and ``profiles`` do), so no model classes are built and a watch stream is parsed
line by line as the server sends it. Paths used are stable since Kubernetes 1.9 (core/v1,
batch/v1), so the backend works on 1.20 and on current releases alike.
"""

from __future__ import annotations

import json
import os
from urllib.parse import quote

from ... import errors


class KubeError(errors.QuotaError):
    """An API call failed: the server's ``Status`` (code, reason, message), or no answer (0)."""

    status = 502
    reason = "ClusterError"

    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message, reason=reason or "ClusterError")
        self.code = code
        self.details = details or {}
        # What the REST layer answers: the server's own 4xx stays a 4xx; no answer is a 503.
        self.status = code if 400 <= code < 500 else 503

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"


class ClusterUnavailable(KubeError):
    """The API server did not answer (connection refused, timeout, TLS failure).

    ``message`` is for the user and names no address: where the API server is, is the
    cluster's business. ``detail`` (method, URL, the transport's own error) is for the log.
    """

    def __init__(self, message: str, detail: str = ""):
        super().__init__(0, "ClusterUnavailable", message)
        self.status = 503
        self.detail = detail or message


#: What a user can do about an API server that does not answer.
ADVICE = "try again later; an admin can check the Kubernetes API server (this server's log has the details)"


def unavailable(error: Exception, what: str, timeout=None) -> ClusterUnavailable:
    """A :class:`ClusterUnavailable` for a transport ``error`` of the call ``what`` (method and URL).

    ``timeout`` is the call's: seconds, or urllib3's (connect, read) pair.
    """
    cause = error
    while isinstance(getattr(cause, "reason", None), BaseException):  # MaxRetryError wraps the cause
        cause = cause.reason
    from urllib3 import exceptions as u3

    if isinstance(cause, u3.NewConnectionError):  # a subclass of ConnectTimeoutError: before it
        problem = "could not be reached (no connection)"
    elif isinstance(cause, (u3.TimeoutError, TimeoutError)):
        seconds = timeout
        if isinstance(timeout, tuple):
            seconds = timeout[0] if isinstance(cause, u3.ConnectTimeoutError) else timeout[1]
        problem = f"did not answer within {seconds:g} s" if isinstance(seconds, (int, float)) else "did not answer"
    elif isinstance(cause, u3.SSLError) or "SSLError" in str(getattr(cause, "reason", "")):
        problem = "could not be reached (the TLS handshake failed)"
    elif isinstance(cause, u3.ProtocolError):
        problem = "closed the connection"
    else:
        problem = "could not be reached"
    return ClusterUnavailable(f"the Kubernetes API server {problem}; {ADVICE}", f"{what}: {_describe(error)}")


def load_api_client(config_file: str = "", context: str = "", in_cluster: str = "auto"):
    """An ``ApiClient`` from in-cluster config or a kubeconfig (see the ``kube_*`` config traits).

    ``in_cluster``: ``auto`` (in a pod, when no ``config_file`` is named), ``true`` or ``false``.
    """
    from kubernetes import client, config

    configuration = client.Configuration()
    in_pod = bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
    use_in_cluster = str(in_cluster).lower() == "true" or (
        str(in_cluster).lower() == "auto" and in_pod and not config_file
    )
    if use_in_cluster:
        config.load_incluster_config(client_configuration=configuration)
    else:
        config.load_kube_config(
            config_file=config_file or None,
            context=context or None,
            client_configuration=configuration,
            persist_config=False,
        )
    # Fail fast and let the caller decide: the cache retries with backoff, a submit reports.
    configuration.retries = 0
    return client.ApiClient(configuration)


class Kube:
    """JSON requests to one API server through an ``ApiClient``; answers are dicts."""

    def __init__(self, api_client, request_timeout: float = 10.0):
        self.api_client = api_client
        self.request_timeout = request_timeout

    @property
    def host(self) -> str:
        return self.api_client.configuration.host

    def get(self, path: str, **query) -> dict:
        return self.request("GET", path, query=query)

    def post(self, path: str, body: dict, **query) -> dict:
        return self.request("POST", path, body=body, query=query)

    def put(self, path: str, body: dict, **query) -> dict:
        return self.request("PUT", path, body=body, query=query)

    def patch(self, path: str, body: dict, content_type: str = "application/merge-patch+json", **query) -> dict:
        return self.request("PATCH", path, body=body, query=query, content_type=content_type)

    def delete(self, path: str, body: dict | None = None, **query) -> dict:
        return self.request("DELETE", path, body=body, query=query)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict | None = None,
        body=None,
        content_type: str = "application/json",
        timeout=None,
        raw: bool = False,
    ):
        """One call; raises :class:`KubeError` with the server's Status, or :class:`ClusterUnavailable`."""
        response = self.open(
            method, path, query=query, body=body, content_type=content_type, timeout=timeout or self.request_timeout
        )
        try:
            data = response.data
        except Exception as e:  # noqa: BLE001 - any transport failure mid-body
            raise unavailable(e, f"{method} {self.host}{path}", timeout or self.request_timeout) from None
        finally:
            response.release_conn()
        if response.status >= 400:
            raise status_error(response.status, data)
        if raw:
            return data.decode("utf-8", "replace")
        return json.loads(data) if data else {}

    def open(
        self,
        method: str,
        path: str,
        *,
        query: dict | None = None,
        body=None,
        content_type: str = "application/json",
        timeout=None,
    ):
        """The raw urllib3 response, body unread (for watches). Transport errors are ClusterUnavailable."""
        params = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            method_, url, headers, body_, post = self.api_client.param_serialize(
                method=method,
                resource_path=path,
                query_params=params,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            response = self.api_client.call_api(
                method_, url, header_params=headers, body=body_, post_params=post, _request_timeout=timeout
            )
        except KubeError:
            raise
        except Exception as e:  # noqa: BLE001 - urllib3/ssl/socket errors all mean "no answer"
            raise unavailable(e, f"{method} {self.host}{path}", timeout) from None
        return response.response


def status_error(code: int, data: bytes | str) -> KubeError:
    """A :class:`KubeError` from an error response body (a ``Status`` object, or text)."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data or "")
    try:
        status = json.loads(text)
    except ValueError:
        status = None
    if isinstance(status, dict) and status.get("kind") == "Status":
        return KubeError(
            int(status.get("code") or code),
            status.get("reason") or "",
            status.get("message") or "",
            status.get("details"),
        )
    return KubeError(code, "ClusterError", text.strip()[:2000] or f"HTTP {code}")


def ns_path(namespace: str, plural: str, name: str = "", group: str = "") -> str:
    """``/api/v1/namespaces/<ns>/<plural>[/<name>]`` (core) or ``/apis/<group>/...``."""
    prefix = f"/apis/{group}" if group else "/api/v1"
    path = f"{prefix}/namespaces/{quote(namespace, safe='')}/{plural}"
    return f"{path}/{quote(name, safe='')}" if name else path


def _query_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _describe(error: Exception) -> str:
    """One line for a transport error: the innermost reason urllib3 wraps."""
    reason = getattr(error, "reason", None)
    text = str(reason if reason is not None else error) or type(error).__name__
    return text.splitlines()[0][:500]
