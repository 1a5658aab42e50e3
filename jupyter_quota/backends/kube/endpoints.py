"""Endpoints on a cluster: a Deployment (one replica) and a Service in the team namespace.

``service/endpoints.py`` drives these through the methods it calls on the local backend for its
endpoint jobs (``build_job``, ``submit``, ``list_jobs``, ``get_job``, ``cancel``) plus
``base_url``; the views are ``endpointview.endpoint_job``'s job dicts, so phases and reasons read
as the local backend's.

- ``submit`` runs in the namespace's admission turn (``admission.py``): the pod the Deployment will
  make is pre-checked with ``quota.admit_pod`` against the ResourceQuotas read from the API server
  and the cached LimitRanges (a refusal is the same 403 text a Job's gets), then the Deployment
  and the Service are created, and the turn lasts until the ReplicaSet's pod exists (or was
  refused), so that the next pre-check reads the quota with it charged. A Service the API server
  refuses deletes the Deployment again: nothing is left half-made.
- ``cancel`` (DELETE, idle stop) deletes both; the pod's requests leave the quota when the pod
  goes. The stopped endpoint is remembered by this process (as cancelled Jobs are).
- A server that ended (crash, OOM kill) or an image the node cannot get fails the endpoint: the
  first read that sees it deletes the Deployment and Service, so a failed endpoint holds no quota
  while Kubernetes would restart it for ever, and remembers the failure with its reason. A crash
  fails it with the last lines of the server's log, so that read must get them: right after the
  crash the kubelet may still be creating the container it restarts (its log: an error, or empty
  while the cached status still names the ended one). Such a read leaves the endpoint as the pod
  is (restarting) and the next read (the service's watch loop reads every second) reads the log
  again; after ``LOG_TAIL_PATIENCE`` seconds of reads that got nothing it fails without its log.
- ``base_url`` is the Running pod's IP and port. Why not the Service: a ClusterIP routes only where
  kube-proxy (or a CNI that replaces it) runs, and the API server's ``services/proxy`` sends every
  completion through the API server and needs a right that reaches any Service of the namespace.
  A pod IP is reachable from the hub's pod in any conformant cluster (the Kubernetes network
  model: pods reach pods without NAT), streams, and needs no right beyond the pod watch the backend
  already has. The Service stays for in-cluster callers (``<name>.<namespace>.svc:8000``).
"""

from __future__ import annotations

import copy
import threading
import time

from ... import errors, labels, quota, reasons
from ...endpoints import port_of
from ...endpointspec import PORT, build_deployment, build_service, selector, served_request
from ...times import rfc3339
from . import endpointview
from .bounded import bounded
from .client import KubeError, ns_path
from .refusals import refusal

#: The kinds an endpoint is made of, as the API server names them in its messages.
DEPLOYMENTS = "deployments.apps"
#: The cached kinds an endpoint's view reads.
ENDPOINT_KINDS = ("deployments", "pods")
#: Lines of a failed server's log its message carries.
LOG_TAIL_LINES = 20
#: Seconds a crashed server's log may stay unreadable before its endpoint fails without it. The
#: kubelet keeps an ended container's log as long as its pod exists, so a read gets nothing only
#: while the status the API server holds lags the kubelet (seconds, even on a loaded node; the
#: restart's first back-off is 10 s) or when the log cannot be reached at all (no kubelet at the
#: node's address, no right to ``pods/log``): this covers the first with margin, and bounds what
#: the second holds of the quota, that Kubernetes would hold for ever.
LOG_TAIL_PATIENCE = 30.0
_BACKGROUND = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}


class KubeEndpoints:
    """The endpoint half of a ``KubeBackend`` (its client, cache, turns and job settings)."""

    def __init__(self, backend):
        self.backend = backend
        self.kube = backend.kube
        self.cache = backend.cache
        self.log = backend.log
        self._ended: dict[tuple[str, str], dict] = {}  # stopped or failed, with the uid they had
        self._log_tails: dict[tuple[str, int], str] = {}  # read, by (pod uid, restarts)
        # by Deployment uid (its pods may be replaced): when a read of its log first got nothing
        self._log_unread_since: dict[str, float] = {}
        self.log_tail_patience = LOG_TAIL_PATIENCE
        self.clock = time.monotonic
        self._lock = threading.Lock()

    # -- building and creating -----------------------------------------------------------------

    def build_job(self, profile, request, owner: str, command: list[str]) -> dict:
        """The Deployment for ``request`` (its args get ``--host 0.0.0.0 --port 8000``)."""
        return build_deployment(profile, served_request(request), owner, command, self.backend.job_settings)

    def submit(self, profile, deployment: dict, owner: str) -> dict:
        namespace = self._synced(profile)
        name = deployment["metadata"]["name"]
        self.backend._require_synced(namespace)
        if self.cache["deployments"].get(namespace, name) is not None:
            raise errors.Conflict(f'{DEPLOYMENTS} "{name}" already exists')
        with self.backend.turns.turn(namespace):
            quotas = self.backend._quotas_from_server(namespace)
            limit_ranges = self.cache["limitranges"].items(namespace)
            pod = _template_pod(deployment)
            try:
                admitted = quota.admit_pod(pod, quotas, limit_ranges)
            except (errors.AdmissionDenied, errors.Invalid) as e:
                e.resource, e.name = "pods", pod["metadata"]["generateName"]
                raise
            created = self._create(namespace, name, deployment)
            self._settle(namespace, name)
        with self._lock:
            self._ended.pop((namespace, name), None)
        self.log.info("endpoint %s/%s created for %s (Deployment and Service)", namespace, name, owner)
        return endpointview.endpoint_job(created, [], profile.gpuResource, template_pod=admitted)

    def _create(self, namespace: str, name: str, deployment: dict) -> dict:
        try:
            with self.backend._reported(f"create deployment {namespace}/{name}"):
                created = self.kube.post(ns_path(namespace, "deployments", group="apps/v1"), deployment)
        except KubeError as e:
            raise refusal(e, name, DEPLOYMENTS) from None
        created = bounded("deployments", created)
        self.cache["deployments"].remember(created)
        service = build_service(created)
        service["metadata"]["ownerReferences"] = [_owned_by(created)]  # the garbage collector's safety net
        try:
            with self.backend._reported(f"create service {namespace}/{name}"):
                self.kube.post(ns_path(namespace, "services"), service)
        except KubeError as e:
            self._delete(namespace, name)
            raise refusal(e, name, "services") from None
        return created

    def _settle(self, namespace: str, name: str) -> None:
        """Wait (within the turn) until the Deployment's pod exists or was refused."""

        def settled():
            deployment = self.cache["deployments"].get(namespace, name) or {}
            pods = endpointview.pods_of(self.cache["pods"].items(namespace), name)
            return bool(pods) or endpointview.replica_failure(deployment) is not None

        if not self.cache.wait(settled, self.backend.sync_timeout):
            self.log.warning("endpoint %s/%s: no pod seen %gs after create", namespace, name, self.backend.sync_timeout)

    # -- reads ---------------------------------------------------------------------------------------

    def list_jobs(self, profile) -> list[dict]:
        namespace = self._synced(profile)
        names = {d["metadata"]["name"] for d in self.cache["deployments"].items(namespace) if _is_endpoint(d)}
        with self._lock:
            names |= {n for (ns, n) in self._ended if ns == namespace}
        views = [self.get_job(profile, n) for n in names]
        return sorted(views, key=lambda v: (v.get("createdAt") or "", v["name"]), reverse=True)

    def get_job(self, profile, name: str) -> dict:
        namespace = self.backend._watched(profile)
        deployment = self.cache["deployments"].get(namespace, name)
        with self._lock:
            ended = self._ended.get((namespace, name))
        if ended is not None and not _replaced(deployment, ended):
            return _shown(ended)
        if deployment is None:
            deployment = self._from_server(namespace, name)
        if not _is_endpoint(deployment):
            raise errors.NotFound(f'endpoint "{name}" not found in namespace {namespace}')
        pods = endpointview.pods_of(self.cache["pods"].items(namespace), name)
        limit_ranges = self.cache["limitranges"].items(namespace)
        template = None if pods else quota.apply_limit_ranges(_template_pod(deployment), limit_ranges)
        view = endpointview.endpoint_job(deployment, pods, profile.gpuResource, template_pod=template)
        if view["phase"] == "Failed" and view.get("reason") != reasons.TERMINATING:
            if view.get("reason") == reasons.ERROR:
                tail = self._log_tail(namespace, deployment, endpointview.live_pod(pods))
                if tail is None:  # not readable yet: shown as the pod is, and the next read tries again
                    return endpointview.endpoint_job(deployment, pods, profile.gpuResource, show_ended=False)
                view = endpointview.endpoint_job(deployment, pods, profile.gpuResource, log_tail=tail)
            try:
                self._end(namespace, name, deployment, view)  # a failed server holds no quota
            except errors.QuotaError as e:  # the read still answers; the next one tries again
                self.log.warning("endpoint %s/%s failed, and deleting it failed: %s", namespace, name, e)
        return view

    def base_url(self, job: dict) -> str | None:
        """Where the proxy reaches the endpoint's server: its Running pod's IP (see the module doc)."""
        pods = endpointview.pods_of(self.cache["pods"].items(job["namespace"]), job["name"])
        pod = endpointview.live_pod(pods)
        status = (pod or {}).get("status") or {}
        if status.get("phase") != "Running" or not status.get("podIP"):
            return None
        host = status["podIP"]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port_of(job) or PORT}"

    # -- stopping ------------------------------------------------------------------------------------

    def cancel(self, profile, name: str, by: str, reason: str = reasons.CANCELLED, message: str = "") -> dict:
        """Delete the endpoint's Deployment and Service; it shows Stopped with ``reason``."""
        namespace = profile.namespace
        current = self.get_job(profile, name)
        if current["phase"] in ("Succeeded", "Failed") or current.get("reason") == reasons.TERMINATING:
            return current
        deployment = self.cache["deployments"].get(namespace, name) or {}
        stopped = dict(current, phase="Failed", reason=reason, message=message or f"stopped by {by}")
        stopped["finishedAt"] = rfc3339(time.time())
        stopped.pop("exitCode", None)
        self._end(namespace, name, deployment, stopped)
        self.log.info("endpoint %s/%s stopped by %s (%s)", namespace, name, by, reason)
        return _shown(stopped)

    def _end(self, namespace: str, name: str, deployment: dict, view: dict) -> None:
        """Delete the endpoint's objects, then remember how it ended (not before: a delete the
        API server did not take leaves it live, and the next read or DELETE tries again)."""
        self._delete(namespace, name)
        remembered = dict(view, _uid=(deployment.get("metadata") or {}).get("uid", ""))
        with self._lock:
            self._ended[(namespace, name)] = remembered

    def _delete(self, namespace: str, name: str) -> None:
        for path, what in (
            (ns_path(namespace, "deployments", name, group="apps/v1"), "deployment"),
            (ns_path(namespace, "services", name), "service"),
        ):
            try:
                with self.backend._reported(f"delete {what} {namespace}/{name}"):
                    self.kube.delete(path, body=_BACKGROUND)
            except KubeError as e:
                if e.code != 404:
                    raise

    # -- helpers -------------------------------------------------------------------------------------

    def _synced(self, profile) -> str:
        """The profile's namespace, once its Deployments and pods were listed (a restarted service
        lists the endpoints it finds at start, before its first watch has answered)."""
        namespace = self.backend._watched(profile)
        self.backend.start()
        self.cache.wait(lambda: self.cache.synced(ENDPOINT_KINDS, namespace), self.backend.sync_timeout)
        return namespace

    def _from_server(self, namespace: str, name: str) -> dict:
        try:
            with self.backend._reported(f"read deployment {namespace}/{name}"):
                return bounded("deployments", self.kube.get(ns_path(namespace, "deployments", name, group="apps/v1")))
        except KubeError as e:
            if e.code == 404:
                raise errors.NotFound(f'endpoint "{name}" not found in namespace {namespace}') from None
            raise

    def _log_tail(self, namespace: str, deployment: dict, pod: dict | None) -> str | None:
        """The last lines the ended server wrote (its previous container's log, once per restart);
        None while the read gets nothing (an error, or an empty log) for less than
        ``log_tail_patience`` seconds, then "" (see ``LOG_TAIL_PATIENCE``)."""
        if pod is None:
            return ""
        statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
        restarted = int(statuses[0].get("restartCount") or 0)
        key = (pod["metadata"].get("uid", ""), restarted)
        with self._lock:
            if key in self._log_tails:
                return self._log_tails[key]
        query = {"container": "train", "tailLines": LOG_TAIL_LINES}
        if restarted and not ((statuses[0].get("state") or {}).get("terminated")):
            query["previous"] = True
        try:
            with self.backend._reported(f"logs of pod {namespace}/{pod['metadata']['name']}"):
                tail = self.kube.request(
                    "GET", ns_path(namespace, "pods", pod["metadata"]["name"]) + "/log", query=query, raw=True
                )
        except KubeError as e:
            tail, why = "", str(e)
        else:
            why = "empty"
        uid = deployment["metadata"].get("uid", "")
        with self._lock:
            if tail.strip():
                self._log_tails[key] = tail
                self._log_unread_since.pop(uid, None)
                return tail
            first = uid not in self._log_unread_since
            waited = self.clock() - self._log_unread_since.setdefault(uid, self.clock())
            if waited < self.log_tail_patience:
                if first:
                    self.log.info(
                        "endpoint pod %s/%s: its server ended; its log is not readable yet (%s)",
                        namespace,
                        pod["metadata"]["name"],
                        why,
                    )
                return None
            self._log_unread_since.pop(uid, None)
        self.log.warning(
            "endpoint pod %s/%s: its server ended; its log was not readable for %gs (%s): it fails without it",
            namespace,
            pod["metadata"]["name"],
            self.log_tail_patience,
            why,
        )
        return ""


def _is_endpoint(deployment: dict) -> bool:
    meta_labels = (deployment.get("metadata") or {}).get("labels") or {}
    return all(meta_labels.get(k) == v for k, v in selector(meta_labels.get(labels.JOB, "")).items())


def _template_pod(deployment: dict) -> dict:
    """The pod the ReplicaSet makes from the Deployment (``<name>-`` prefix, the template's labels)."""
    meta = deployment["metadata"]
    template = copy.deepcopy(deployment["spec"]["template"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **template.get("metadata", {}),
            "generateName": f"{meta['name']}-",
            "namespace": meta["namespace"],
        },
        "spec": template["spec"],
    }


def _owned_by(deployment: dict) -> dict:
    meta = deployment["metadata"]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": meta["name"], "uid": meta["uid"], "controller": True}


def _replaced(deployment: dict | None, ended: dict) -> bool:
    if deployment is None:
        return False
    meta = deployment.get("metadata") or {}
    return bool(meta.get("uid")) and meta["uid"] != ended.get("_uid") and not meta.get("deletionTimestamp")


def _shown(ended: dict) -> dict:
    return copy.deepcopy({k: v for k, v in ended.items() if k != "_uid"})
