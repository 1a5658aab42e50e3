"""Keeps the usage store (``usagestore.py``) current from the watch cache's pods.

A Ticker (``jupyter_quota/ticker.py``) wakes on every change to the cache (at least every
``interval`` seconds) and writes what changed: pods that started, and the finish of pods that
finished. A recorded pod that is no longer in its namespace's synced pod list was deleted: it is
finished at the moment the recorder saw it gone (within ``interval`` while the service runs;
after a restart, at the first list, so a pod deleted while the service was down is charged until
the service came back).

Records are idempotent per pod uid, so re-lists and restarts count nothing twice. With
``kube_watch_scope = "namespaces"`` the recorder watches the namespaces of its running records
and those the service hands it (``track``: every team's), so pods are seen from the start.
"""

from __future__ import annotations

import logging
import time

from ... import labels
from ...ticker import Ticker
from .cache import ClusterCache
from .usagestore import PodRecord, UsageStore, pod_record


class UsageRecorder:
    def __init__(self, cache: ClusterCache, store: UsageStore, log: logging.Logger, interval: float = 1.0):
        self.cache = cache
        self.store = store
        self.log = log
        self.interval = interval
        self._written: dict[str, int | None] = {}  # uid -> finish as last written (None: running)
        self._ticker: Ticker | None = None

    def track(self, namespaces) -> None:
        for namespace in namespaces:
            self.cache.watch(namespace)

    def start(self) -> None:
        self.track(set(self.store.running().values()))
        if self._ticker is None:
            # a change to the cache (its ``changed`` condition) runs a sweep at once
            self._ticker = Ticker(
                self.sweep, self.interval, name="jupyter-quota-usage", log=self.log, condition=self.cache.changed
            )
            self._ticker.start()

    def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.close(timeout=5)
            self._ticker = None

    def sweep(self, now: int | None = None) -> None:
        """Write what changed since the last sweep; finish recorded pods that are gone."""
        now = int(time.time()) if now is None else now
        # Which namespaces can tell "gone" is decided before their pods are read: a watch that starts
        # (after a restart) between the read and the check would make every pod of it look gone.
        running = self.store.running()
        ready = {ns for ns in set(running.values()) if self._watching(ns) and self.cache.synced(["pods"], ns)}
        pods = self.cache["pods"]
        seen, changed = set(), []
        for namespace in pods.namespaces():
            for pod in pods.items(namespace):
                record = pod_record(pod, self._owner(pod))
                if record is None:
                    continue
                seen.add(record.uid)
                if record.uid not in self._written or self._written[record.uid] != record.span.end:
                    changed.append(record)
        self.store.record(changed)
        self._remember(changed)
        self._written = {uid: end for uid, end in self._written.items() if uid in seen}  # gone: forgotten
        gone = [uid for uid, namespace in running.items() if uid not in seen and namespace in ready]
        if gone:
            self.store.finish(gone, now)
            for uid in gone:
                self._written.pop(uid, None)

    def _remember(self, records: list[PodRecord]) -> None:
        for record in records:
            self._written[record.uid] = record.span.end

    def _watching(self, namespace: str) -> bool:
        return not self.cache.namespaced or bool(self.cache["pods"].reflectors(namespace))

    def _owner(self, pod: dict) -> str:
        """The submitting user as given (the Job's annotation); the pod has only its label form."""
        meta = pod.get("metadata") or {}
        name = (meta.get("labels") or {}).get(labels.JOB) or (meta.get("labels") or {}).get(labels.JOB_NAME)
        job = self.cache["jobs"].get(meta.get("namespace", ""), name) if name else None
        return ((job or {}).get("metadata") or {}).get("annotations", {}).get(labels.OWNER, "")
