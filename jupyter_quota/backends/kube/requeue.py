"""The kube backend's answer to priority preemption (``preemption.py`` says what and why): a
Ticker, woken by every change to the watch cache, follows Running job pods' logs for their
checkpoints and requeues each Job whose pod the scheduler preempted."""

from __future__ import annotations

import json
import logging
import threading
import time

from ... import jobfields, labels
from ...ticker import Ticker
from ...times import rfc3339
from . import jobview
from .cache import ClusterCache
from .client import Kube, KubeError, ns_path
from .preemption import Progress, answer, preemption, requeued_here

#: Seconds a deleted pod's progress is kept (its Preempted event may come after the pod is gone).
FORGET_AFTER = 600.0
#: Seconds between two reads of a Running pod's log for its checkpoints.
CHECKPOINT_INTERVAL = 30.0
#: Lines of a pod's log read for its step and checkpoints.
LOG_LINES = 5000


class Requeuer:
    def __init__(
        self,
        kube: Kube,
        cache: ClusterCache,
        log: logging.Logger,
        *,
        interval: float = 1.0,
        checkpoint_interval: float = CHECKPOINT_INTERVAL,
        clock=time.time,
    ):
        self.kube = kube
        self.cache = cache
        self.log = log
        self.interval = interval
        self.checkpoint_interval = checkpoint_interval
        self.clock = clock
        self._progress: dict[str, Progress] = {}  # pod name@namespace -> what its log said
        self._lock = threading.Lock()
        self._ticker: Ticker | None = None

    def start(self) -> None:
        if self._ticker is None:
            self._ticker = Ticker(
                self.sweep, self.interval, name="jupyter-quota-requeue", log=self.log, condition=self.cache.changed
            )
            self._ticker.start()

    def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.close(timeout=5)
            self._ticker = None

    def sweep(self) -> None:
        live = set()
        for namespace in self.cache["jobs"].namespaces():
            events = self.cache["preemptions"].items(namespace)
            pods = self.cache["pods"].items(namespace)
            for job in self.cache["jobs"].items(namespace):
                meta = job["metadata"]
                if meta.get("deletionTimestamp") or not requeued_here(job):
                    continue
                mine = jobview.pods_of(pods, meta["name"], meta.get("uid"))
                for pod in mine:
                    live.add(_key(pod))
                    if ((pod.get("status") or {}).get("phase")) == "Running":
                        self._follow(pod)
                event = preemption(job, events)
                if event is not None and not _completed(job):
                    self._requeue(job, event, mine)
        with self._lock:  # pods long gone: their progress is not needed again
            old = self.clock() - FORGET_AFTER
            self._progress = {k: v for k, v in self._progress.items() if k in live or v.read_at > old}

    def _follow(self, pod: dict, now: bool = False) -> Progress:
        key = _key(pod)
        with self._lock:
            progress = self._progress.setdefault(key, Progress())
        if now or self.clock() - progress.read_at >= self.checkpoint_interval:
            text = self._log(pod)
            if text is not None:
                progress.update(text)
                progress.read_at = self.clock()
        return progress

    def _log(self, pod: dict) -> str | None:
        meta = pod["metadata"]
        try:
            return self.kube.request(
                "GET",
                ns_path(meta.get("namespace", ""), "pods", meta["name"]) + "/log",
                query={"container": jobfields.TRAIN, "tailLines": LOG_LINES},
                raw=True,
            )
        except KubeError:
            return None  # not served (yet, or any more): what was read before stands

    def _requeue(self, job: dict, event: dict, pods: list[dict]) -> None:
        meta = job["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        victim = (event.get("involvedObject") or {}).get("name")
        pod = next((p for p in pods if p["metadata"]["name"] == victim), None)
        if pod is not None:
            progress = self._follow(pod, now=True)  # the last checkpoint, while the kubelet serves the log
        else:
            with self._lock:
                progress = self._progress.get(f"{namespace}/{victim}", Progress())
        again = answer(job, event, progress, rfc3339(self.clock()))
        path = ns_path(namespace, "jobs", name, group="batch/v1")
        try:
            self.kube.delete(
                path,
                body={
                    "apiVersion": "v1",
                    "kind": "DeleteOptions",
                    "propagationPolicy": "Background",
                    "preconditions": {"uid": meta.get("uid")},
                },
            )
        except KubeError as e:
            if e.code not in (404, 409):
                raise
            return  # gone or replaced already: the next sweep sees what is there now
        self.cache["jobs"].forget(namespace, name)
        created = self._create(namespace, again)
        history = json.loads(again["metadata"]["annotations"][labels.HISTORY])
        self.log.info("job %s/%s preempted (%s); %s", namespace, name, victim, history[-1]["message"])
        if created is not None:
            self.cache["jobs"].remember(created)

    def _create(self, namespace: str, job: dict, attempts: int = 20) -> dict | None:
        """Create the requeued Job; the name may be held a moment by the Job just deleted."""
        for attempt in range(attempts):
            try:
                return self.kube.post(ns_path(namespace, "jobs", group="batch/v1"), job)
            except KubeError as e:
                if e.code != 409 or attempt == attempts - 1:
                    self.log.error(
                        "job %s/%s was preempted and deleted, but could not be created again: %s",
                        namespace,
                        job["metadata"]["name"],
                        e,
                    )
                    return None
                time.sleep(0.25)
        return None


def _key(pod: dict) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _completed(job: dict) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Complete" and c.get("status") == "True" for c in conditions)
