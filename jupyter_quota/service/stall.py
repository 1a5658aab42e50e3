"""The admin's policy for stalled jobs (``JupyterQuota.stalled_job_action``): ``flag`` shows
them only; ``cancel`` also cancels each one, as an admin would, and records every cancel in the
audit log (``audit.record``). A Ticker applies it every ``INTERVAL`` seconds.
"""

from __future__ import annotations

import logging

from .. import audit
from ..errors import QuotaError
from ..ticker import Ticker

#: the audit action of a cancel by this policy
STALLED_JOB_CANCELLED = "job.cancelled.stalled"
#: who a cancelled job says cancelled it (``cancelled by ...``)
POLICY = "the stalled-job policy"
INTERVAL = 30.0  # seconds between two applications of the policy


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
