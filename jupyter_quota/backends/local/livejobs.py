"""The scheduler's copy of the ledger's live jobs, so that a pass costs what changed, not the queue.

A scheduling pass used to read and decide every Pending job, so each admission cost time linear
in the queue. This copy holds, per Pending job, its requests as exact numbers and the reason and
message the ledger shows, and per Running job what it holds. ``refresh`` brings it up to date
from the rows whose ``rev`` is past the generation it last saw (``ledger.changed_since``), so a
change by any thread or server process is seen, and only once. It also says which jobs a pass
must try (``candidates``):

- a job not tried by this copy yet (newly submitted, or new to this process);
- every waiting job, once capacity was freed (a Running job ended) since the last pass, as
  kube-scheduler moves its unschedulable pods back to the active queue when a pod is deleted;
  jobs this copy found ``Unschedulable`` (they do not fit the empty machine, which does not
  change while the server runs) are not tried again.

Between those events no waiting job can start: capacity only shrank, so a job that did not fit
still does not. Its message keeps the insufficient resources of its last try, as a pod's
condition keeps those of kube-scheduler's last attempt.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from ... import quota, reasons
from . import elasticpass, ledger, scheduler


@dataclass
class Elastic:
    """What the elastic policy needs of a live job (``elasticpass``)."""

    key: elasticpass.Key
    namespace: str
    priority: str
    usage: dict  # quota key -> exact amount: what it was charged
    preempted_for: elasticpass.Key | None  # Running, being preempted: for whom (None: not, or no one)
    preempting: bool


@dataclass
class Waiting:
    """A Pending job as the scheduler knows it."""

    requests: dict  # resource -> exact amount (Fraction)
    reason: str | None
    message: str | None


class LiveJobs:
    """Pending and Running jobs as of ledger generation ``generation`` (None: not read yet)."""

    def __init__(self):
        self.generation: int | None = None
        self.pending: dict[int, Waiting] = {}  # id -> job, in id (submission) order
        self.running: dict[int, scheduler.Running] = {}
        self.invalid: dict[int, tuple[str, Exception]] = {}  # id -> ("ns/name", why its requests cannot be read)
        self._untried: set[int] = set()
        self._unschedulable: set[int] = set()  # found Unschedulable by this copy: never tried again
        self._freed = False
        self.elastic: dict[int, Elastic] = {}  # id -> the policy's view of every live job

    def refresh(self, con: sqlite3.Connection, held: Callable[[sqlite3.Row], scheduler.Running]) -> int:
        """Catch up with the ledger as ``con`` sees it; return the generation seen.

        ``held(row)`` is what a Running row holds (the caller decides how to read a bad one).
        """
        seen = ledger.generation(con)
        if self.generation is None:
            self._freed = True  # a new copy tries every job once
            rows = ledger.live(con)
        else:  # even at the same generation: this transaction may have written rows (an admission)
            rows = ledger.changed_since(con, self.generation)
        for row in rows:
            self._apply(row, held)
        self.generation = seen
        return seen

    def has_work(self) -> bool:
        return bool(self.invalid or self._untried or (self._freed and self.pending))

    def candidates(self) -> list[scheduler.Pending]:
        """The Pending jobs a pass tries, oldest first, keyed by id."""
        if self._freed:
            ids = [i for i in self.pending if i not in self._unschedulable]
        else:
            ids = sorted(self._untried)
        return [scheduler.Pending(i, self.pending[i].requests) for i in ids]

    def tried(self) -> None:
        """The candidates were all decided (and the decisions written)."""
        self._untried.clear()
        self._freed = False

    def decided(self, job_id: int, reason: str, message: str) -> None:
        job = self.pending[job_id]
        job.reason, job.message = reason, message
        if reason == reasons.UNSCHEDULABLE:
            self._unschedulable.add(job_id)

    def started(self, job_id: int, holding: scheduler.Running) -> None:
        self._forget(job_id)
        self.running[job_id] = holding

    def ended(self, job_id: int, freed: bool = False) -> None:
        """A Pending job left the queue (failed, cancelled, gone); ``freed`` if capacity it was
        counted as taking is free again (it was decided to start but could not)."""
        self._forget(job_id)
        self.elastic.pop(job_id, None)
        self._freed = self._freed or freed

    def _apply(self, row: sqlite3.Row, held) -> None:
        job_id, phase = row["id"], row["phase"]
        if phase in ledger.LIVE:
            self.elastic[job_id] = _elastic(row)
        else:
            self.elastic.pop(job_id, None)
        if phase == "Pending":
            if self.running.pop(job_id, None) is not None:
                self._freed = True  # requeued after a preemption: what it held is free
            job = self.pending.get(job_id)
            if job is not None:  # decided by another process, or our own write read back
                job.reason, job.message = row["reason"], row["message"]
                return
            try:
                requests = exact_requests(row)
            except Exception as e:  # noqa: BLE001 - one bad row must not stop every team's jobs
                self.invalid[job_id] = (f"{row['namespace']}/{row['name']}", e)
                return
            self.pending[job_id] = Waiting(requests, row["reason"], row["message"])
            self._untried.add(job_id)
            return
        self._forget(job_id)
        if phase == "Running":
            self.running[job_id] = held(row)
        elif self.running.pop(job_id, None) is not None:
            self._freed = True

    def _forget(self, job_id: int) -> None:
        self.pending.pop(job_id, None)
        self.invalid.pop(job_id, None)
        self._untried.discard(job_id)
        self._unschedulable.discard(job_id)


def _elastic(row: sqlite3.Row) -> Elastic:
    try:
        usage = elasticpass.usage(row)
    except Exception:  # noqa: BLE001 - unreadable: it counts as no GPUs; its requests fail it as InvalidJob
        usage = {}
    return Elastic(
        elasticpass.Key(row["id"], f"{row['namespace']}/{row['name']}"),
        row["namespace"],
        row["priority"],
        usage,
        elasticpass.preempted_for(row),
        row["phase"] == "Running" and row["preempted"] is not None,
    )


def exact_requests(row: sqlite3.Row) -> dict:
    """The job's pod requests as exact numbers; raises for a row they cannot be read from."""
    return scheduler.amounts(quota.pod_requests(ledger.loads(row["pod"])))
