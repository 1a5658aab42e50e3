"""A kube job's log progress (``backends/kube/logprogress.py``), judged by ``stall.stalled``.

The pod log API is a stand-in here that answers what the kubelet answers to
``tailLines=1&timestamps=true`` (an RFC 3339 timestamp with nanoseconds, a space, the line);
``tests/kube/test_real_node.py`` asks a real kubelet.
"""

from __future__ import annotations

import threading

from jupyter_quota.backends.kube.client import KubeError
from jupyter_quota.backends.kube.logprogress import LogProgress, _epoch
from jupyter_quota.stall import NO_LOG_PROGRESS, StallPolicy

START = "2026-12-01T10:00:00Z"
T0 = _epoch(START)


class PodLog:
    """The pod log API: the last line's timestamp, or an error; counts the calls."""

    def __init__(self, stamp: str | None):
        self.stamp = stamp
        self.calls: list[dict] = []
        self.fail = False
        self.gate = threading.Event()
        self.gate.set()

    def request(self, method, path, *, query=None, raw=False, **_):
        self.gate.wait(5)
        self.calls.append({"method": method, "path": path, **(query or {})})
        if self.fail:
            raise KubeError(502, "BadGateway", "the kubelet did not answer")
        return f"{self.stamp} step 3\n" if self.stamp else ""


def running_pod(uid: str = "u1") -> dict:
    return {
        "metadata": {"name": "tune-abcde", "namespace": "team-a", "uid": uid},
        "status": {"phase": "Running", "startTime": START},
    }


def test_the_kubelets_nanosecond_timestamps_are_read():
    assert _epoch("2026-12-01T10:00:00.123456789Z") == T0 + 0.123456
    assert _epoch(START) == T0


def test_a_pod_silent_for_the_policys_minutes_is_flagged_since_its_last_line():
    log = PodLog("2026-12-01T10:05:00.5Z")
    progress = LogProgress(log, StallPolicy(minutes=30), clock=lambda: T0 + 5 * 60 + 30 * 60 + 1)
    flag = progress.stalled(running_pod())
    assert flag["reason"] == NO_LOG_PROGRESS and flag["since"] == "2026-12-01T10:05:00Z"
    assert log.calls == [
        {
            "method": "GET",
            "path": "/api/v1/namespaces/team-a/pods/tune-abcde/log",
            "container": "train",
            "tailLines": 1,
            "timestamps": "true",
        }
    ]


def test_a_pod_that_logged_recently_is_not_flagged_and_the_log_is_read_once_per_ttl():
    now = [T0 + 40 * 60]
    log = PodLog("2026-12-01T10:39:00Z")
    progress = LogProgress(log, StallPolicy(minutes=30), clock=lambda: now[0], ttl=30)
    assert progress.stalled(running_pod()) is None
    now[0] += 10
    assert progress.stalled(running_pod()) is None
    assert len(log.calls) == 1  # within the ttl: no second call
    now[0] += 30 * 60
    assert progress.stalled(running_pod())["reason"] == NO_LOG_PROGRESS
    assert len(log.calls) == 2


def test_a_pod_with_no_log_or_an_unreadable_one_counts_from_its_start():
    log = PodLog(None)
    progress = LogProgress(log, StallPolicy(minutes=30), clock=lambda: T0 + 31 * 60)
    assert progress.stalled(running_pod("a"))["since"] == START
    log.fail = True
    assert progress.stalled(running_pod("b"))["since"] == START


def test_only_running_pods_are_judged_and_zero_minutes_turns_it_off():
    log = PodLog(None)
    late = lambda: T0 + 3600  # noqa: E731
    pending = {"metadata": {"name": "p", "namespace": "n", "uid": "p"}, "status": {"phase": "Pending"}}
    assert LogProgress(log, StallPolicy(minutes=30), clock=late).stalled(pending) is None
    assert LogProgress(log, StallPolicy(minutes=30), clock=late).stalled(None) is None
    assert LogProgress(log, StallPolicy(minutes=0), clock=late).stalled(running_pod()) is None
    assert log.calls == []


def test_a_read_that_must_not_wait_asks_in_the_background_and_flags_nothing_until_answered():
    log = PodLog("2026-12-01T10:00:01Z")
    log.gate.clear()  # the API server hangs
    progress = LogProgress(log, StallPolicy(minutes=30), clock=lambda: T0 + 3600)
    assert progress.stalled(running_pod(), wait=False) is None  # returns at once, unknown
    assert progress.stalled(running_pod(), wait=False) is None  # one read in flight, not two
    log.gate.set()
    deadline = threading.Event()
    for _ in range(100):
        if progress._seen:
            break
        deadline.wait(0.05)
    assert progress.stalled(running_pod(), wait=False)["since"] == "2026-12-01T10:00:01Z"
    assert len(log.calls) == 1
