"""The kube backend's measure of a Running job's progress, judged by ``stall.stalled``.

Log progress is the time of the pod's last log line, as the kubelet stamped it: one
``GET .../pods/NAME/log?tailLines=1&timestamps=true`` per Running pod, kept ``ttl`` seconds (a
stall is minutes long, so a job list does not ask the API server for every job on every read).
A pod whose log cannot be read is judged from what was last read, else from its start. A job
shown to a user never waits for that call (``wait=False``): it is made in the background, and
until its first answer the job is not flagged. GPU
idleness is not measured on a cluster (it needs the node's DCGM exporter), so only
``NoLogProgress`` is flagged here. ``clock`` is an attribute a test may drive.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime

from ... import jobfields, stall
from .client import Kube, KubeError, ns_path

TTL = 30.0  # seconds a pod's last-output time is reused


class LogProgress:
    def __init__(self, kube: Kube, policy: stall.StallPolicy, clock: Callable[[], float] = time.time, ttl: float = TTL):
        self.kube = kube
        self.policy = policy
        self.clock = clock
        self.ttl = ttl
        self._seen: dict[str, tuple[float, float]] = {}  # pod uid -> (asked at, last output)
        self._asking: set[str] = set()  # pod uids being read in the background
        self._lock = threading.Lock()

    def stalled(self, pod: dict | None, wait: bool = True) -> dict | None:
        """The ``stalled`` field of a job whose newest pod is ``pod``: None unless it is Running.
        ``wait=False``: a due read of the log is made in the background (None until it answered)."""
        status = (pod or {}).get("status") or {}
        if self.policy.minutes <= 0 or status.get("phase") != "Running" or not status.get("startTime"):
            return None
        started = _epoch(status["startTime"])
        now = self.clock()
        uid = pod["metadata"].get("uid", "")
        with self._lock:
            asked, last = self._seen.get(uid, (None, started))
        if asked is None or now - asked >= self.ttl:
            if not wait:
                self._ask_later(pod, started, last)
                if asked is None:
                    return None
            else:
                last = self._ask(pod, started, last)
        return stall.stalled(self.policy, now, last)

    def _ask(self, pod: dict, started: float, last: float) -> float:
        now = self.clock()
        last = max(started, self._last_line(pod) or last)
        with self._lock:
            self._seen[pod["metadata"].get("uid", "")] = (now, last)
            if len(self._seen) > 10000:  # pods long gone
                self._seen = dict(list(self._seen.items())[-5000:])
        return last

    def _ask_later(self, pod: dict, started: float, last: float) -> None:
        uid = pod["metadata"].get("uid", "")
        with self._lock:
            if uid in self._asking:
                return
            self._asking.add(uid)

        def ask():
            try:
                self._ask(pod, started, last)
            finally:
                with self._lock:
                    self._asking.discard(uid)

        threading.Thread(target=ask, name="kube-log-progress", daemon=True).start()

    def _last_line(self, pod: dict) -> float | None:
        meta = pod["metadata"]
        try:
            text = self.kube.request(
                "GET",
                ns_path(meta.get("namespace", ""), "pods", meta["name"]) + "/log",
                query={"container": jobfields.TRAIN, "tailLines": 1, "timestamps": "true"},
                raw=True,
            )
        except KubeError:
            return None
        stamp = text.strip().split(" ", 1)[0] if text.strip() else ""
        try:
            return _epoch(stamp) if stamp else None
        except ValueError:
            return None


def _epoch(stamp: str) -> float:
    """RFC 3339, with or without the kubelet's nanoseconds, in epoch seconds."""
    head, _, frac = stamp.rstrip("Z").partition(".")
    seconds = datetime.fromisoformat(head + "+00:00").timestamp()
    return seconds + (float("0." + frac[:6]) if frac.isdigit() else 0.0)
