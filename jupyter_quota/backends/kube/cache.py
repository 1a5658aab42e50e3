"""An informer-like cache: list once, then watch, for the kinds the backend reads.

One :class:`Reflector` per kind (ResourceQuota, LimitRange, Pod, Job, Event, Deployment) keeps a store of
plain dicts, indexed by namespace, current through a watch that resumes from the last
``resourceVersion`` it saw (``allowWatchBookmarks`` keeps that version fresh on quiet kinds).
When the server answers that the version is too old (``410``/``Expired``, as an HTTP status or
as an ``ERROR`` event), the reflector lists again and replaces its store. Any other failure
(refused connection, timeout, 5xx) marks the reflector broken, is logged as one line, and is
retried after a backoff that doubles up to ``backoff_max``.

Readers never call the API: they read the store under a lock. ``observed_at`` is the moment the
last data came from the API server for that kind: a list, the watch's response, any event or
bookmark, or the server ending the watch. A reflector is ``stale`` after a failure, and also
when nothing has come for ``stale_after`` seconds (:data:`STALE_AFTER`, 15 by default).

The second rule is what notices a hung API server or a network partition, where the connection
stays open and simply goes silent (a refused connection is noticed at once). Silence alone must
not mean trouble on a quiet, healthy cluster, so each watch asks the server to end it after
``watch_timeout`` seconds (``timeoutSeconds``, at most two thirds of ``stale_after``: 10 s by
default), and renews it from the last ``resourceVersion``. The server sends a bookmark 2 s
before that end and then closes the stream, both of which count as data: a healthy kind is
never silent for longer than about ``watch_timeout``. (Bookmarks alone would not do: an API
server sends them about once a minute, and kube-apiserver 1.20 only before a watch's end.)
Renewing six watches every 10 s costs the API server little: most resume from its watch cache.
The socket's read timeout is ``stale_after`` too, so a silent connection is dropped and opened
again instead of waiting forever. Hence the bound: ``stale`` turns true at most ``stale_after``
seconds after the last data, and so at most 15 s into a hang. 15 s is long enough that a loaded
API server's pauses do not flap the badge, and short enough that a user reading the balance
learns within a few polls that it may be out of date.
"""

from __future__ import annotations

import json
import logging
import threading
import time

from ... import labels, reasons
from ...times import rfc3339
from .bounded import bounded
from .client import ClusterUnavailable, Kube, KubeError, ns_path, status_error, unavailable
from .pernamespace import PerNamespace

#: What the backend watches: resource -> (API group version, "" for core; label selector; field
#: selector). Pods and Jobs are the ones this server labelled; events only those about Jobs.
#: ``jupyter_quota/rbac.py`` grants exactly list and watch of these in each team namespace.
KINDS = {
    "resourcequotas": ("", "", ""),
    "limitranges": ("", "", ""),
    "pods": ("", labels.MANAGED_SELECTOR, ""),
    "jobs": ("batch/v1", labels.MANAGED_SELECTOR, ""),
    # endpoints (``endpoints.py``): their Deployments; their pods are among the pods above
    "deployments": ("apps/v1", labels.MANAGED_SELECTOR, ""),
    "events": ("", "", "involvedObject.kind=Job"),
    # the scheduler's events on the pods it deleted for higher-priority ones (``preemption.py``)
    "preemptions": ("", "", f"involvedObject.kind=Pod,reason={reasons.PREEMPTED}"),
}
#: The API resource of a kind whose name above is not its resource's.
RESOURCES = {"preemptions": "events"}
BACKOFF_START = 0.2
#: Seconds without data from the API server after which a kind reads stale (see above).
STALE_AFTER = 15.0


def renewal_period(stale_after: float) -> int:
    """The longest ``timeoutSeconds`` a watch may ask for so that a quiet kind never reads stale."""
    return max(1, int(stale_after * 2 / 3))


class Expired(Exception):
    """The watch's resourceVersion is older than the server keeps: list again."""


class Reflector:
    """List-and-watch of one kind across all namespaces into a namespace-indexed store."""

    def __init__(
        self,
        kube: Kube,
        kind: str,
        path: str,
        *,
        label_selector: str = "",
        field_selector: str = "",
        watch_timeout: int = 10,
        stale_after: float = STALE_AFTER,
        backoff_max: float = 30.0,
        log: logging.Logger | None = None,
        changed: threading.Condition | None = None,
    ):
        self.kube = kube
        self.kind = kind
        self.path = path
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.stale_after = float(stale_after)
        self.watch_timeout = max(1, min(int(watch_timeout), renewal_period(self.stale_after)))
        self.backoff_max = max(BACKOFF_START, float(backoff_max))
        self.log = log or logging.getLogger(__name__)
        self.changed = changed or threading.Condition()
        self.resource_version = ""
        self.synced = False
        self.healthy = False
        self.error = "not started"
        self._logged = ""  # the last failure logged, so a retry loop logs it once
        self.lists = 0  # how many times the store was (re)built from a list: relists show here
        self._heard_at = 0.0  # time.time() of the last data from the server; 0: none yet
        self._heard_clock = 0.0  # the same moment on the monotonic clock, for ``stale``
        self._store: dict[str, dict[str, dict]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._response = None

    # -- reading -----------------------------------------------------------------------------------

    def items(self, namespace: str) -> list[dict]:
        """The objects of ``namespace`` (shared: callers must not change them)."""
        with self._lock:
            return list((self._store.get(namespace) or {}).values())

    def get(self, namespace: str, name: str) -> dict | None:
        with self._lock:
            return (self._store.get(namespace) or {}).get(name)

    def count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._store.values())

    def namespaces(self) -> list[str]:
        with self._lock:
            return sorted(self._store)

    def observed_at(self) -> float:
        """Epoch seconds of the last data from the API server (0: none yet)."""
        return self._heard_at

    def stale(self) -> bool:
        """Broken, or silent for longer than ``stale_after`` seconds."""
        return not self.healthy or time.monotonic() - self._heard_clock > self.stale_after

    def remember(self, obj: dict) -> None:
        """Put an object this process just wrote, unless the watch already has a newer one."""
        self._apply("ADDED", obj, only_if_newer=True)

    def forget(self, namespace: str, name: str) -> None:
        with self._lock:
            (self._store.get(namespace) or {}).pop(name, None)
        with self.changed:
            self.changed.notify_all()

    # -- running -----------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=f"jupyter-quota-watch-{self.kind}", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            try:
                response.shutdown() if hasattr(response, "shutdown") else response.close()
            except Exception:  # noqa: BLE001 - closing a dying socket may fail; the thread ends anyway
                pass
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        backoff = BACKOFF_START
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                self._watch()
                backoff = BACKOFF_START
            except Expired as e:
                self.log.info("kube cache: %s watch expired (%s); listing again", self.kind, e)
                need_list = True
                continue
            except Exception as e:  # noqa: BLE001 - never let the thread die; say what happened once
                if self._stop.is_set():
                    break
                self._broke(e, backoff)
            else:
                continue
            if self._stop.wait(backoff):
                break
            backoff = min(self.backoff_max, backoff * 2)

    def _broke(self, error: Exception, backoff: float) -> None:
        """Mark the kind broken; log the details (addresses included) once per distinct failure.

        ``error`` (what :meth:`ClusterCache.errors` reports) is the user's text: a
        :class:`ClusterUnavailable` names no address.
        """
        if isinstance(error, ClusterUnavailable):
            shown, detail = error.message, error.detail
        elif isinstance(error, KubeError):
            shown = detail = str(error)
        else:
            shown = detail = f"{type(error).__name__}: {error}"
        detail = (detail.splitlines() or ["unknown error"])[0][:300]
        if self.healthy or self._logged != detail:
            self.log.warning("kube cache: %s list/watch failed: %s; retrying in %.1fs", self.kind, detail, backoff)
        self._logged = detail
        self.healthy = False
        self.error = (shown.splitlines() or ["unknown error"])[0][:300]
        with self.changed:
            self.changed.notify_all()

    def _list(self) -> None:
        query = {"labelSelector": self.label_selector or None, "fieldSelector": self.field_selector or None}
        data = self.kube.get(self.path, **query)
        store: dict[str, dict[str, dict]] = {}
        for item in data.get("items") or []:
            item = trim(item, self.kind)
            meta = item["metadata"]
            store.setdefault(meta.get("namespace", ""), {})[meta["name"]] = item
        with self._lock:
            self._store = store
            self.resource_version = (data.get("metadata") or {}).get("resourceVersion", "")
        self.lists += 1
        self._healthy()

    def _watch(self) -> None:
        query = {
            "watch": True,
            "allowWatchBookmarks": True,
            "resourceVersion": self.resource_version,
            "timeoutSeconds": self.watch_timeout,
            "labelSelector": self.label_selector or None,
            "fieldSelector": self.field_selector or None,
        }
        # A connection silent for ``stale_after`` is dropped: a healthy one never is (module doc).
        timeout = (self.kube.request_timeout, self.stale_after)
        response = self.kube.open("GET", self.path, query=query, timeout=timeout)
        self._response = response
        try:
            if response.status == 410:
                raise Expired(status_error(410, response.data).message)
            if response.status >= 400:
                raise status_error(response.status, response.data)
            self._healthy()
            try:
                for line in _lines(response, self._heard):
                    if self._stop.is_set():
                        return
                    if line:
                        self._event(json.loads(line))
            except (ClusterUnavailable, KubeError, Expired, ValueError):
                raise
            except Exception as e:  # noqa: BLE001 - urllib3's read timeout, reset connection, ...
                raise unavailable(e, f"watch {self.kube.host}{self.path}", timeout) from None
            self._heard()  # the server ended the watch at timeoutSeconds: it is alive
        finally:
            self._response = None
            response.release_conn()

    def _event(self, event: dict) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410 or obj.get("reason") in ("Expired", "Gone"):
                raise Expired(obj.get("message") or "resource version too old")
            raise KubeError(int(obj.get("code") or 500), obj.get("reason") or "", obj.get("message") or "")
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if kind == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return
        self._apply(kind, obj)
        if rv:
            self.resource_version = rv

    def _apply(self, kind: str, obj: dict, only_if_newer: bool = False) -> None:
        obj = trim(obj, self.kind)
        meta = obj.get("metadata") or {}
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        with self._lock:
            bucket = self._store.setdefault(namespace, {})
            if kind == "DELETED":
                bucket.pop(name, None)
                if not bucket:
                    self._store.pop(namespace, None)
            else:
                old = bucket.get(name)
                if only_if_newer and old is not None and _rv(old) >= _rv(obj):
                    return
                bucket[name] = obj
        with self.changed:
            self.changed.notify_all()

    def _heard(self) -> None:
        self._heard_at, self._heard_clock = time.time(), time.monotonic()

    def _healthy(self) -> None:
        self._heard()
        was = self.healthy
        self.synced = True
        self.healthy = True
        self.error = ""
        if not was:
            with self.changed:
                self.changed.notify_all()


class ClusterCache:
    """The six kinds the backend reads from, started and stopped together.

    ``namespaced``: one reflector per kind and team namespace (:meth:`watch` adds a namespace),
    as the per-namespace Role allows; otherwise one per kind across all namespaces.
    """

    def __init__(
        self,
        kube: Kube,
        *,
        watch_timeout: int = 10,
        stale_after: float = STALE_AFTER,
        backoff_max: float = 30.0,
        log: logging.Logger | None = None,
        kinds: dict | None = None,
        namespaced: bool = False,
    ):
        self.log = log or logging.getLogger(__name__)
        self.changed = threading.Condition()
        self.namespaced = namespaced
        self.watch_timeout = max(1, min(int(watch_timeout), renewal_period(stale_after)))
        if int(watch_timeout) > renewal_period(stale_after):
            self.log.warning(
                "kube cache: watches are renewed every %ds, not every %ds (kube_watch_timeout), so that "
                "a quiet cluster never reads stale (kube_stale_after=%gs)",
                renewal_period(stale_after),
                watch_timeout,
                stale_after,
            )

        def reflector(kind, group, labels, fields, namespace=None):
            resource = RESOURCES.get(kind, kind)
            path = (
                ns_path(namespace, resource, group=group)
                if namespace
                else (f"/apis/{group}/{resource}" if group else f"/api/v1/{resource}")
            )
            return Reflector(
                kube,
                kind,
                path,
                label_selector=labels,
                field_selector=fields,
                watch_timeout=watch_timeout,
                stale_after=stale_after,
                backoff_max=backoff_max,
                log=self.log,
                changed=self.changed,
            )

        self.reflectors = {
            kind: PerNamespace(kind, lambda ns, spec=(kind, *spec): reflector(*spec, namespace=ns))
            if namespaced
            else reflector(kind, *spec)
            for kind, spec in (kinds or KINDS).items()
        }

    def watches(self) -> int:
        """How many list-and-watch loops run (one per kind, or per kind and team namespace)."""
        return len(self._some(None))

    def watch(self, namespace: str) -> bool:
        """Namespaced: watch ``namespace`` too; True if it was new (always False cluster-wide)."""
        if not self.namespaced:
            return False
        return any([r.add(namespace) for r in self.reflectors.values()])

    def __getitem__(self, kind: str) -> Reflector:
        return self.reflectors[kind]

    def start(self) -> None:
        for r in self.reflectors.values():
            r.start()

    def stop(self) -> None:
        for r in self.reflectors.values():
            r.stop()

    def stale(self, kinds=None, namespace: str | None = None) -> bool:
        return any(r.stale() for r in self._some(kinds, namespace))

    def synced(self, kinds=None, namespace: str | None = None) -> bool:
        return all(r.synced for r in self._some(kinds, namespace))

    def observed_at(self, kinds=None, namespace: str | None = None) -> str:
        """RFC 3339 UTC: the oldest of the kinds' last data from the API server ("" before any)."""
        moments = [r.observed_at() for r in self._some(kinds, namespace)]
        moment = min(moments) if moments else 0.0
        return rfc3339(moment) if moment else ""

    def errors(self, kinds=None, namespace: str | None = None) -> dict:
        """Why each stale kind is stale, in words for a user."""
        return {
            r.kind: r.error or f"no data from the Kubernetes API server for over {r.stale_after:g} s"
            for r in self._some(kinds, namespace)
            if r.stale()
        }

    def wait(self, predicate, timeout: float) -> bool:
        """Block until ``predicate()`` holds (re-checked on every change), or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, 0.5))
        return True

    def wait_synced(self, timeout: float) -> bool:
        return self.wait(self.synced, timeout)

    def _some(self, kinds, namespace: str | None = None) -> list[Reflector]:
        """The reflectors of ``kinds`` (all kinds if None), only ``namespace``'s when namespaced."""
        chosen = [self.reflectors[k] for k in (kinds or self.reflectors)]
        if not self.namespaced:
            return chosen
        return [r for group in chosen for r in group.reflectors(namespace)]


def trim(obj: dict, kind: str) -> dict:
    """The object as stored: without ``managedFields`` (large, and nothing here reads them), and
    its quantities bounded (``bounded.py``: a value written with kubectl may be any size)."""
    obj = bounded(kind, obj)
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = dict(obj)
        obj["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return obj


def _rv(obj: dict) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:  # resourceVersions are opaque; etcd's are integers, others compare equal
        return 0


def _lines(response, heard):
    """Newline-delimited watch events from a chunked response, as they arrive; ``heard()`` per chunk."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=False):
        heard()
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield line.strip()
    if buffer.strip():
        yield buffer.strip()
