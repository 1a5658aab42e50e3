"""The admin's policy for stalled jobs (``JupyterQuota.stalled_job_action``): ``flag`` shows
them only; ``cancel`` also cancels each one, as an admin would, and records every cancel in the
audit log (``audit.record``). A thread of the service applies it every ``INTERVAL`` seconds.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

#: the audit action of a cancel by this policy
STALLED_JOB_CANCELLED = "job.cancelled.stalled"
#: who a cancelled job says cancelled it (``cancelled by ...``)
POLICY = "the stalled-job policy"
INTERVAL = 30.0  # seconds between two applications of the policy


class StallPolicyTimer:
    """Calls ``apply`` every ``interval`` seconds on a daemon thread until :meth:`close`."""

    def __init__(self, apply: Callable[[], object], log: logging.Logger, interval: float = INTERVAL):
        self._apply, self._log, self._interval = apply, log, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jupyter-quota-stall-policy", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._apply()
            except Exception:  # noqa: BLE001 - the next pass tries again; the log has this one
                self._log.exception("jupyter_quota: applying the stalled-job policy failed")
