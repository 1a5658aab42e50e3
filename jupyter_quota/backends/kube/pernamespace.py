"""One kind watched namespace by namespace, read like one :class:`cache.Reflector`.

A cluster-wide list or watch needs a ClusterRole; the quota service's Role exists only in the
team namespaces (``jupyter_quota/rbac.py``). So, with ``kube_watch_scope = "namespaces"``, each
kind has one reflector per team namespace, added the first time the backend serves that
namespace (a team an admin adds later is watched from its first request on).
"""

from __future__ import annotations

import threading


class PerNamespace:
    """Reflectors of one kind by namespace; ``make(namespace)`` builds one (not started)."""

    def __init__(self, kind: str, make):
        self.kind = kind
        self._make = make
        self._by_namespace: dict = {}
        self._lock = threading.Lock()
        self._started = False

    def add(self, namespace: str) -> bool:
        """Watch ``namespace`` too (started if the others are); True if it was new."""
        with self._lock:
            if namespace in self._by_namespace:
                return False
            reflector = self._by_namespace[namespace] = self._make(namespace)
            if self._started:
                reflector.start()
            return True

    def reflectors(self, namespace: str | None = None) -> list:
        """The reflector of ``namespace`` (none if it is not watched), or all of them."""
        with self._lock:
            if namespace is None:
                return list(self._by_namespace.values())
            found = self._by_namespace.get(namespace)
            return [found] if found is not None else []

    # -- the reader interface of a Reflector --------------------------------------------------------

    def items(self, namespace: str) -> list[dict]:
        return [item for r in self.reflectors(namespace) for item in r.items(namespace)]

    def get(self, namespace: str, name: str) -> dict | None:
        return next((found for r in self.reflectors(namespace) if (found := r.get(namespace, name))), None)

    def remember(self, obj: dict) -> None:
        for r in self.reflectors((obj.get("metadata") or {}).get("namespace", "")):
            r.remember(obj)

    def forget(self, namespace: str, name: str) -> None:
        for r in self.reflectors(namespace):
            r.forget(namespace, name)

    def count(self) -> int:
        return sum(r.count() for r in self.reflectors())

    def namespaces(self) -> list[str]:
        return sorted({ns for r in self.reflectors() for ns in r.namespaces()})

    @property
    def lists(self) -> int:
        return sum(r.lists for r in self.reflectors())

    # -- running ------------------------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            self._started = True
            reflectors = list(self._by_namespace.values())
        for r in reflectors:
            r.start()

    def stop(self) -> None:
        with self._lock:
            self._started = False
            reflectors = list(self._by_namespace.values())
        for r in reflectors:
            r.stop()
