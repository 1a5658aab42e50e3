"""Whole-job admission on a cluster: submits to one namespace take turns.

The API server charges a Job's pods to the namespace's ResourceQuota only when the job
controller creates them, a moment after the Job itself is created. Two submits close together
could otherwise both pass the pre-check against the same ``status.used``, and the second Job's
pods be refused later (``FailedCreate``), which is what whole-job admission exists to prevent.

So a submit runs in its namespace's turn (:meth:`Turns.turn`). A turn starts by waiting until
the Jobs created in earlier turns are charged: each has as many pods as it asked for, or was
refused some (its ``FailedCreate`` event), or ended, or is gone. The pods' creation is what
charged the quota, so a ResourceQuota read from the API server after that (not from the watch,
which may lag the pods' watch) holds their usage, and the pre-check runs against it. A turn ends
when the new Job is created. Turns are per server process: replicas of this server do not see
each other's, and there the API server stays the authority (a refusal of the pods shows on the
job as ``FailedCreate``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass

from ... import errors
from . import jobview


class AdmissionBusy(errors.QuotaError):
    """A submit could not get its turn, or the previous turn's Job is not charged yet (503)."""

    status = 503
    reason = "ServiceUnavailable"


@dataclass(frozen=True)
class Created:
    """A Job created in an earlier turn, and how many pods it asked for."""

    name: str
    uid: str
    pods: int
    at: float


class Turns:
    """One lock per namespace, and the Jobs whose pods the quota may not have charged yet.

    ``cache`` is the backend's :class:`cache.ClusterCache` (jobs, pods and events are read from
    it); ``settle_timeout`` bounds the wait for earlier Jobs' pods; ``turn_timeout`` the wait
    for the turn itself.
    """

    def __init__(self, cache, *, settle_timeout: float, turn_timeout: float):
        self.cache = cache
        self.settle_timeout = settle_timeout
        self.turn_timeout = turn_timeout
        self._locks: dict[str, threading.Lock] = {}
        self._uncharged: dict[str, list[Created]] = {}
        self._guard = threading.Lock()

    @contextlib.contextmanager
    def turn(self, namespace: str):
        """Hold ``namespace``'s turn, once the Jobs of earlier turns are charged."""
        with self._guard:
            lock = self._locks.setdefault(namespace, threading.Lock())
        if not lock.acquire(timeout=self.turn_timeout):
            raise AdmissionBusy(
                f'another submit to namespace "{namespace}" has been waiting for the Kubernetes '
                f"API server for over {self.turn_timeout:g} s; try again in a moment"
            )
        try:
            self._settle(namespace)
            yield
        finally:
            lock.release()

    def created(self, namespace: str, job: dict, pods: int) -> None:
        """Remember a Job just created in this turn (``pods``: how many it asks for at once)."""
        meta = job.get("metadata") or {}
        if pods > 0:
            self._uncharged.setdefault(namespace, []).append(
                Created(meta.get("name", ""), meta.get("uid", ""), pods, time.monotonic())
            )

    def _settle(self, namespace: str) -> None:
        waiting = self._uncharged.get(namespace) or []
        if not waiting:
            return
        self.cache.wait(lambda: not [c for c in waiting if not self._charged(namespace, c)], self.settle_timeout)
        left = [c for c in waiting if not self._charged(namespace, c)]
        self._uncharged[namespace] = left
        if left:
            first = left[0]
            raise AdmissionBusy(
                f'the cluster has not created the pods of job "{first.name}" (submitted '
                f"{time.monotonic() - first.at:.0f} s ago) yet, so the quota they will use is not known; "
                "try again in a moment; if this lasts, an admin can check the job controller"
            )

    def _charged(self, namespace: str, created: Created) -> bool:
        """Whether the quota holds what ``created``'s pods use (or they will never use any)."""
        job = self.cache["jobs"].get(namespace, created.name)
        if job is None or (job.get("metadata") or {}).get("uid") != created.uid:
            return True  # deleted, or replaced by another Job of that name
        if jobview.end_condition(job) is not None:
            return True  # ended: its pods use nothing
        if len(jobview.pods_of(self.cache["pods"].items(namespace), created.name, created.uid)) >= created.pods:
            return True
        return jobview.failed_create(self.cache["events"].items(namespace), job["metadata"]) is not None
