"""The local backend's measures of a Running job's progress, judged by ``stall.stalled``.

Log progress is the job's log file's modification time (one ``stat`` when a job is shown).
GPU idleness comes from ``nvidia-smi`` samples the reaper takes every ``SAMPLE_INTERVAL``
seconds, where ``nvidia-smi`` is present. ``clock`` (``time.time``) and ``measure`` (``nvidia-smi``)
are attributes a test may drive.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable

from ... import labels, stall
from ...times import epoch_of
from . import inventory, ledger, runner

SAMPLE_INTERVAL = 30.0  # seconds between nvidia-smi samples


class StallWatch:
    def __init__(
        self,
        policy: stall.StallPolicy,
        job_dir: Callable[[sqlite3.Row], str],
        sample: Callable[[], dict[int, float] | None] = inventory.gpu_utilization,
        clock: Callable[[], float] = time.time,
    ):
        self.policy = policy
        self._job_dir, self.measure, self.clock = job_dir, sample, clock
        self._idle = stall.IdleGpus(policy.gpu_utilization)
        self._sampled_at: float | None = None
        self._lock = threading.Lock()

    def sample(self) -> None:
        """Take an ``nvidia-smi`` sample if one is due (the reaper calls this every pass)."""
        now = self.clock()
        if self.policy.minutes <= 0 or (self._sampled_at is not None and now - self._sampled_at < SAMPLE_INTERVAL):
            return
        self._sampled_at = now
        utilization = self.measure()
        if utilization is not None:
            with self._lock:
                self._idle.observe(now, utilization)

    def of(self, row: sqlite3.Row) -> dict | None:
        """The ``stalled`` field of a job's row: None unless it is Running (and not being cancelled)."""
        if row["phase"] != "Running" or row["cancelled_by"] or not row["started_at"]:
            return None
        if _serves(row):  # an endpoint waits for requests: its idleness is the idle policy's
            return None
        started = epoch_of(row["started_at"])
        try:
            last_output = max(started, os.stat(os.path.join(self._job_dir(row), runner.LOG_FILE)).st_mtime)
        except OSError:
            last_output = started
        with self._lock:
            idle = self._idle.since(ledger.loads(row["gpu_indices"], []), started)
        return stall.stalled(self.policy, self.clock(), last_output, idle)


def _serves(row: sqlite3.Row) -> bool:
    """Whether the job is an endpoint (``labels.KIND``), from its admitted pod."""
    pod_labels = (ledger.loads(row["pod"], {}).get("metadata") or {}).get("labels") or {}
    return pod_labels.get(labels.KIND) == labels.KIND_ENDPOINT
