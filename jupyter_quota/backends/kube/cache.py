"""An informer-like cache: list once, then watch, for the kinds the backend reads.

One :class:`Reflector` per kind (ResourceQuota, LimitRange, Pod, Job, Event) keeps a store of
plain dicts, indexed by namespace, current through a watch that resumes from the last
``resourceVersion`` it saw (``allowWatchBookmarks`` keeps that version fresh on quiet kinds).
When the server answers that the version is too old (``410``/``Expired``, as an HTTP status or
as an ``ERROR`` event), the reflector lists again and replaces its store. Any other failure
(refused connection, timeout, 5xx) marks the reflector broken, is logged as one line, and is
retried after a backoff that doubles up to ``backoff_max``.

Readers never call the API: they read the store under a lock. ``healthy`` and ``observed_at``
say how much to trust it: a reflector is healthy from a successful list or watch answer until
a failure; ``observed_at`` is "now" while healthy, and the moment it broke while not.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import datetime, timezone

from .client import ClusterUnavailable, Kube, KubeError, status_error

#: What the backend watches: name -> (list path, label selector, field selector).
#: Pods and Jobs are the ones this server labelled; events only those about Jobs.
MANAGED_SELECTOR = "app.kubernetes.io/managed-by=jupyter-quota"
KINDS = {
    "resourcequotas": ("/api/v1/resourcequotas", "", ""),
    "limitranges": ("/api/v1/limitranges", "", ""),
    "pods": ("/api/v1/pods", MANAGED_SELECTOR, ""),
    "jobs": ("/apis/batch/v1/jobs", MANAGED_SELECTOR, ""),
    "events": ("/api/v1/events", "", "involvedObject.kind=Job"),
}
BACKOFF_START = 0.2


class Expired(Exception):
    """The watch's resourceVersion is older than the server keeps: list again."""


class Reflector:
    """List-and-watch of one kind across all namespaces into a namespace-indexed store."""

    def __init__(self, kube: Kube, kind: str, path: str, *, label_selector: str = "", field_selector: str = "",
                 watch_timeout: int = 300, backoff_max: float = 30.0, log: logging.Logger | None = None,
                 changed: threading.Condition | None = None):
        self.kube = kube
        self.kind = kind
        self.path = path
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.watch_timeout = max(1, int(watch_timeout))
        self.backoff_max = max(BACKOFF_START, float(backoff_max))
        self.log = log or logging.getLogger(__name__)
        self.changed = changed or threading.Condition()
        self.resource_version = ""
        self.synced = False
        self.healthy = False
        self.error = "not started"
        self.lists = 0  # how many times the store was (re)built from a list: relists show here
        self._broken_at = 0.0
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
        """Epoch seconds up to which the store is known current."""
        return time.time() if self.healthy else self._broken_at

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
            except (ClusterUnavailable, KubeError, OSError, ValueError) as e:
                if self._stop.is_set():
                    break
                self._broke(str(e) or type(e).__name__, backoff)
            except Exception as e:  # noqa: BLE001 - never let the thread die; say what happened once
                if self._stop.is_set():
                    break
                self._broke(f"{type(e).__name__}: {e}", backoff)
            else:
                continue
            if self._stop.wait(backoff):
                break
            backoff = min(self.backoff_max, backoff * 2)

    def _broke(self, message: str, backoff: float) -> None:
        line = message.splitlines()[0][:300] if message else "unknown error"
        if self.healthy or self.error != line:
            self.log.warning("kube cache: %s list/watch failed: %s; retrying in %.1fs", self.kind, line, backoff)
        if self.healthy:
            self._broken_at = time.time()
        self.healthy = False
        self.error = line
        with self.changed:
            self.changed.notify_all()

    def _list(self) -> None:
        query = {"labelSelector": self.label_selector or None, "fieldSelector": self.field_selector or None}
        data = self.kube.get(self.path, **query)
        store: dict[str, dict[str, dict]] = {}
        for item in data.get("items") or []:
            item = trim(item)
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
        response = self.kube.open("GET", self.path, query=query,
                                  timeout=(self.kube.request_timeout, self.watch_timeout + 30))
        self._response = response
        try:
            if response.status == 410:
                raise Expired(status_error(410, response.data).message)
            if response.status >= 400:
                raise status_error(response.status, response.data)
            self._healthy()
            for line in _lines(response):
                if self._stop.is_set():
                    return
                if line:
                    self._event(json.loads(line))
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
        obj = trim(obj)
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

    def _healthy(self) -> None:
        was = self.healthy
        self.synced = True
        self.healthy = True
        self.error = ""
        if not was:
            with self.changed:
                self.changed.notify_all()


class ClusterCache:
    """The five reflectors the backend reads from, started and stopped together."""

    def __init__(self, kube: Kube, *, watch_timeout: int = 300, backoff_max: float = 30.0,
                 log: logging.Logger | None = None, kinds: dict | None = None):
        self.log = log or logging.getLogger(__name__)
        self.changed = threading.Condition()
        self.reflectors = {
            kind: Reflector(kube, kind, path, label_selector=labels, field_selector=fields,
                            watch_timeout=watch_timeout, backoff_max=backoff_max, log=self.log,
                            changed=self.changed)
            for kind, (path, labels, fields) in (kinds or KINDS).items()
        }

    def __getitem__(self, kind: str) -> Reflector:
        return self.reflectors[kind]

    def start(self) -> None:
        for r in self.reflectors.values():
            r.start()

    def stop(self) -> None:
        for r in self.reflectors.values():
            r.stop()

    def stale(self, kinds=None) -> bool:
        return any(not r.healthy for r in self._some(kinds))

    def synced(self, kinds=None) -> bool:
        return all(r.synced for r in self._some(kinds))

    def observed_at(self, kinds=None) -> str:
        """RFC 3339 UTC: the oldest moment up to which every kind named is known current."""
        moments = [r.observed_at() for r in self._some(kinds)]
        moment = min(moments) if moments else 0.0
        return rfc3339(moment) if moment else ""

    def errors(self, kinds=None) -> dict:
        return {r.kind: r.error for r in self._some(kinds) if not r.healthy}

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

    def _some(self, kinds):
        return [self.reflectors[k] for k in (kinds or self.reflectors)]


def trim(obj: dict) -> dict:
    """The object without ``managedFields`` (large, and nothing here reads them)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = dict(obj)
        obj["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return obj


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _rv(obj: dict) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:  # resourceVersions are opaque; etcd's are integers, others compare equal
        return 0


def _lines(response):
    """Newline-delimited watch events from a chunked response, as they arrive."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=False):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield line.strip()
    if buffer.strip():
        yield buffer.strip()


