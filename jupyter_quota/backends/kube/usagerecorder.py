"""Keeps the usage store (``usagestore.py``) current from the watch cache's pods.

A Ticker (``jupyter_quota/ticker.py``) wakes on every change to the cache (at least every
``interval`` seconds) and writes what changed: pods that started, and the finish of pods that
finished. A recorded pod that is no longer in its namespace's synced pod list was deleted: it is
finished at the moment the recorder saw it gone (within ``interval`` while the service runs;
after a restart, at the first list, so a pod deleted while the service was down is charged until
the service came back).

It also writes the demand that has not started (``usagestore.Waiting``): each Job seen with no
pod started yet, from its ``creationTimestamp``, until a pod of it starts (its pods' rows then
carry the submission), it ends, or it is gone from its synced namespace (deleted: at that moment).

Records are idempotent per pod and Job uid, so re-lists and restarts count nothing twice. With
``kube_watch_scope = "namespaces"`` the recorder watches the namespaces of its running records
and those the service hands it (``track``: every team's), so pods are seen from the start.
"""

from __future__ import annotations

import logging
import time

from ... import labels
from ...ticker import Ticker
from . import jobview
from .cache import ClusterCache
from .usagestore import PodRecord, UsageStore, _epoch, job_waiting, pod_record


class UsageRecorder:
    def __init__(self, cache: ClusterCache, store: UsageStore, log: logging.Logger, interval: float = 1.0):
        self.cache = cache
        self.store = store
        self.log = log
        self.interval = interval
        self._written: dict[str, int | None] = {}  # uid -> finish as last written (None: running)
        self._jobs_written: dict[str, str] = {}  # Job uid -> "waiting", "started" or "ended", as written
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
        # Pods and Jobs are read together: a pod recorded before its Job is listed would lose its
        # submission, and a Job judged before its pods are listed would look like it waits.
        running, waiting = self.store.running(), self.store.waiting()
        ready = {ns for ns in {*running.values(), *waiting.values()} if self._watching(ns) and self._synced(ns)}
        pods = self.cache["pods"]
        seen, changed, started_jobs, read = set(), [], set(), set()
        for namespace in pods.namespaces():
            if not self._synced(namespace):
                continue
            read.add(namespace)
            for pod in pods.items(namespace):
                owner, submitted = self._job_of(pod)
                record = pod_record(pod, owner, submitted)
                if record is None:
                    continue
                seen.add(record.uid)
                started_jobs.add(_controller_uid(pod))
                if record.uid not in self._written or self._written[record.uid] != record.span.end:
                    changed.append(record)
        self.store.record(changed)
        self._remember(changed)
        self._written = {uid: end for uid, end in self._written.items() if uid in seen}  # gone: forgotten
        ready &= read
        gone = [uid for uid, namespace in running.items() if uid not in seen and namespace in ready]
        if gone:
            self.store.finish(gone, now)
            for uid in gone:
                self._written.pop(uid, None)
        self._sweep_jobs(started_jobs, waiting, ready, now)

    def _sweep_jobs(self, started: set, waiting: dict[str, str], ready: set, now: int) -> None:
        """Jobs with no pod started are demand that waits; it ends at a start, an end or a delete."""
        jobs = self.cache["jobs"]
        seen, asked, begun = set(), [], []
        for namespace in jobs.namespaces():
            if not self._synced(namespace):
                continue
            limit_ranges = None
            for job in jobs.items(namespace):
                meta = job.get("metadata") or {}
                uid = meta.get("uid")
                if not uid:
                    continue
                seen.add(uid)
                if uid in started:
                    state = "started"
                    if self._jobs_written.get(uid) != state:
                        begun.append(uid)
                elif (ended := jobview.end_condition(job)) is not None:
                    state = "ended"  # a Job first seen ended is not added: it ran, or ended before us
                    if self._jobs_written.get(uid) == "waiting" or uid in waiting:
                        if limit_ranges is None:
                            limit_ranges = self.cache["limitranges"].items(namespace)
                        end = _epoch(ended["lastTransitionTime"]) if ended.get("lastTransitionTime") else now
                        asked.append(job_waiting(job, limit_ranges, _annotated_owner(job), end))
                else:
                    state = "waiting"
                    if self._jobs_written.get(uid) is None:
                        if limit_ranges is None:
                            limit_ranges = self.cache["limitranges"].items(namespace)
                        asked.append(job_waiting(job, limit_ranges, _annotated_owner(job)))
                self._jobs_written[uid] = state
        self.store.wait([w for w in asked if w is not None])
        if begun:
            self.store.started(begun, now)
        self._jobs_written = {uid: state for uid, state in self._jobs_written.items() if uid in seen}
        gone = [key for key, namespace in waiting.items() if key not in seen and namespace in ready]
        if gone:
            self.store.end_waiting(gone, now)

    def _remember(self, records: list[PodRecord]) -> None:
        for record in records:
            self._written[record.uid] = record.span.end

    def _synced(self, namespace: str) -> bool:
        return self.cache.synced(["pods", "jobs"], namespace)

    def _watching(self, namespace: str) -> bool:
        return not self.cache.namespaced or bool(self.cache["pods"].reflectors(namespace))

    def _job_of(self, pod: dict) -> tuple[str, int | None]:
        """The submitting user as given (the Job's annotation; the pod has only its label form)
        and when the Job was submitted (its creationTimestamp), as far as the cache knows the Job."""
        meta = pod.get("metadata") or {}
        name = (meta.get("labels") or {}).get(labels.JOB) or (meta.get("labels") or {}).get(labels.JOB_NAME)
        job = self.cache["jobs"].get(meta.get("namespace", ""), name) if name else None
        if job is None and name and (meta.get("labels") or {}).get(labels.KIND) == labels.KIND_ENDPOINT:
            job = self.cache["deployments"].get(meta.get("namespace", ""), name)  # an endpoint's pod
        if job is None:
            return "", None
        created = job["metadata"].get("creationTimestamp")
        same = _controller_uid(pod) in (None, job["metadata"].get("uid"))  # not a Job of the same name since
        return _annotated_owner(job), _epoch(created) if created and same else None


def _annotated_owner(job: dict) -> str:
    return ((job.get("metadata") or {}).get("annotations") or {}).get(labels.OWNER, "")


def _controller_uid(pod: dict) -> str | None:
    """The uid of the Job that owns the pod (its controller reference)."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "Job":
            return ref.get("uid")
    return None
