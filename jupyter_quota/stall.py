"""When a Running job counts as stalled (a "zombie": it holds GPUs and does nothing).

Pure: the backend measures (the time of a job's last log output, since when its GPUs have been
idle) and this module judges, against the admin's ``StallPolicy`` (``JupyterQuota.stalled_*``).
A stalled job is only flagged (the job's ``stalled`` field, the ``jupyter_quota_stalled_jobs``
metric, the sidebar); whether it is also cancelled is ``JupyterQuota.stalled_job_action``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .times import rfc3339

#: the job wrote nothing to its log for the policy's minutes
NO_LOG_PROGRESS = "NoLogProgress"
#: every GPU of the job stayed under the policy's utilisation for its minutes
LOW_GPU_UTILIZATION = "LowGpuUtilization"
REASONS = (NO_LOG_PROGRESS, LOW_GPU_UTILIZATION)


@dataclass(frozen=True)
class StallPolicy:
    #: minutes without progress before a job is flagged; 0 turns the check off
    minutes: float = 30.0
    #: percent of GPU utilisation under which a GPU counts as idle
    gpu_utilization: float = 5.0

    @property
    def seconds(self) -> float:
        return self.minutes * 60.0


def stalled(policy: StallPolicy, now: float, last_output: float, idle_since: float | None = None) -> dict | None:
    """The job's ``stalled`` field: None, or ``{"since", "reason", "message"}``.

    ``last_output``: epoch seconds of the job's last log output (its start when it wrote none);
    ``idle_since``: since when all its GPUs have been idle (None: busy, none, or not measured).
    ``since`` is when the progress stopped.
    """
    if policy.minutes <= 0:
        return None
    if now - last_output >= policy.seconds:
        return {
            "since": rfc3339(last_output),
            "reason": NO_LOG_PROGRESS,
            "message": f"no log output for {_duration(now - last_output)} "
            f"(the limit is {policy.minutes:g} minutes): the job may hang",
        }
    if idle_since is not None and now - idle_since >= policy.seconds:
        return {
            "since": rfc3339(idle_since),
            "reason": LOW_GPU_UTILIZATION,
            "message": f"its GPUs were under {policy.gpu_utilization:g}% busy for {_duration(now - idle_since)} "
            f"(the limit is {policy.minutes:g} minutes): they may be held for nothing",
        }
    return None


class IdleGpus:
    """Since when each GPU has been idle, from utilisation samples (``nvidia-smi``)."""

    def __init__(self, threshold: float):
        self.threshold = threshold
        self._since: dict[int, float] = {}

    def observe(self, now: float, utilization: dict[int, float]) -> None:
        for index, percent in utilization.items():
            if percent < self.threshold:
                self._since.setdefault(index, now)
            else:
                self._since.pop(index, None)
        for index in set(self._since) - set(utilization):  # a GPU no longer reported is not idle
            del self._since[index]

    def since(self, indices, started: float) -> float | None:
        """Since when all of ``indices`` have been idle, not before ``started``; None if one is busy."""
        if not indices or any(i not in self._since for i in indices):
            return None
        return max(started, *(self._since[i] for i in indices))


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} minutes" if seconds >= 120 else f"{seconds:.0f} seconds"
