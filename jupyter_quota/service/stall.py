"""The admin's policy for stalled jobs (``JupyterQuota.stalled_job_action``): ``flag`` shows
them only; ``cancel`` also cancels each one, as an admin would, and records every cancel in the
audit log (``audit.record``). A Ticker applies it every ``INTERVAL`` seconds.
"""

from __future__ import annotations

import logging

from traitlets import Enum, Float
from traitlets.config import Configurable

from .. import audit
from ..errors import QuotaError
from ..ticker import Ticker

#: the audit action of a cancel by this policy
STALLED_JOB_CANCELLED = "job.cancelled.stalled"
#: who a cancelled job says cancelled it (``cancelled by ...``)
POLICY = "the stalled-job policy"
INTERVAL = 30.0  # seconds between two applications of the policy


class StallSettings(Configurable):
    """The stalled-job check and policy (``c.JupyterQuota.<name>``: ``config.JupyterQuota`` is
    composed of it); the backends' stall watches read the first two."""

    stalled_job_minutes = Float(
        30.0,
        help="Minutes a Running job may go without writing to its log (or, where ``nvidia-smi`` "
        "reports it, keep its GPUs under ``stalled_gpu_utilization`` percent busy) before it is "
        "flagged as stalled (the job's ``stalled`` field, the metric "
        "``jupyter_quota_stalled_jobs``). 0 turns the check off. Default: 30.",
    ).tag(config=True)

    stalled_gpu_utilization = Float(
        5.0,
        help="GPU utilisation, in percent, under which a Running job's GPUs count as idle for "
        "``stalled_job_minutes`` (local backend, where ``nvidia-smi`` is present). Default: 5.",
    ).tag(config=True)

    stalled_job_action = Enum(
        ("flag", "cancel"),
        "flag",
        help="What happens to a stalled job: ``flag`` only shows it (job field, metrics, sidebar); "
        "``cancel`` also cancels it, as an admin would, and logs each cancel. Default: ``flag``.",
    ).tag(config=True)


class StalledJobs:
    """The policy over the backend's stalled jobs: :meth:`cancel_stalled` once, or every
    ``interval`` seconds from :meth:`start` (only with ``action = "cancel"``)."""

    def __init__(self, action: str, registry, backend, state_dir: str, log: logging.Logger, interval: float = INTERVAL):
        self.action = action
        self.registry = registry
        self.backend = backend
        self.state_dir = state_dir
        self.log = log
        self.interval = interval
        self._ticker: Ticker | None = None

    def start(self) -> None:
        if self._ticker is None and self.action == "cancel":
            self._ticker = Ticker(
                self.cancel_stalled,
                self.interval,
                name="jupyter-quota-stall-policy",
                log=self.log,
                first_pass_now=False,
            )
            self._ticker.start()

    def close(self) -> None:
        if self._ticker is not None:
            self._ticker.close()
            self._ticker = None

    def cancel_stalled(self) -> list[dict]:
        """With ``cancel``, cancel every stalled job and audit each cancel; with ``flag``, nothing.
        The jobs cancelled."""
        if self.action != "cancel":
            return []
        cancelled = []
        for flagged in self.backend.stalled():
            target = f"job/{flagged['namespace']}/{flagged['name']}"
            try:
                job = self.backend.cancel(self.registry.get(flagged["team"]), flagged["name"], POLICY)
            except QuotaError as e:  # it ended, or its team is gone: nothing to cancel
                self.log.info("jupyter_quota: stalled %s not cancelled: %s", target, e.message)
                continue
            audit.record(self.state_dir, audit.SYSTEM, STALLED_JOB_CANCELLED, target, flagged["stalled"]["message"])
            self.log.warning("jupyter_quota: cancelled stalled %s: %s", target, flagged["stalled"]["message"])
            cancelled.append(job)
        return cancelled
