"""Job transitions for the metrics, from what a backend's ``job_changes`` answers.

Both backends feed the same tracker: the local one with the ledger rows changed since the last
look, the kube one with a snapshot of its watch cache. The tracker keeps the live jobs (the
gauges read them) and calls ``started`` once when a job first shows ``startedAt`` and
``finished`` once when it first shows a finished phase. The first look only learns what is
there: counters start at zero when the service starts, as Prometheus expects of a restart.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from ..backends.base import JobChanges

LIVE = ("Pending", "Running")
#: finished jobs remembered, so that a finished row changed again is not counted twice
FINISHED_MEMORY = 100_000


def job_key(job: dict) -> tuple[str, str, str]:
    """A job's identity across looks: a name may be reused once its job is gone."""
    return job.get("namespace", ""), job.get("name", ""), job.get("createdAt", "")


class JobTracker:
    def __init__(self, started: Callable[[dict], None], finished: Callable[[dict], None], since: str):
        self._started, self._finished = started, finished
        #: RFC 3339: a job not seen before that finished earlier ended before the tracker began
        self.since = since
        self.cursor = None
        self.live: dict[tuple, dict] = {}
        self._ended: OrderedDict[tuple, None] = OrderedDict()
        self._primed = False

    def update(self, changes: JobChanges) -> None:
        for job in changes.jobs:
            key, live = job_key(job), job.get("phase") in LIVE
            if not live and key in self._ended:
                continue  # a finished job's row changed again: counted once already
            before = self.live.pop(key, None)
            fresh = self._primed and (before is not None or live or self._new_end(job))
            if fresh and job.get("startedAt") and not (before and before.get("startedAt")):
                self._started(job)  # also a job that started and ended between two looks
            if live:
                self.live[key] = job
                continue
            self._ended[key] = None
            if len(self._ended) > FINISHED_MEMORY:
                self._ended.popitem(last=False)
            if fresh:
                self._finished(job)
        if changes.snapshot:
            present = {job_key(job) for job in changes.jobs}
            self.live = {k: v for k, v in self.live.items() if k in present}
            self._ended = OrderedDict((k, None) for k in self._ended if k in present)
        self.cursor = changes.cursor
        self._primed = True

    def _new_end(self, job: dict) -> bool:
        """A job first seen finished ended after the tracker began (not a row changed again)."""
        return (job.get("finishedAt") or "") >= self.since
