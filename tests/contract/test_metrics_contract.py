"""Both backends feed the metrics: ``Backend.job_changes`` shows each job's start and end to the
``JobTracker`` exactly once, on ``local`` (ledger rows changed) and on ``kube`` (watch-cache
snapshots); and every job carries the ``stalled`` field."""

from __future__ import annotations

import time

from jupyter_quota.metrics.tracker import JobTracker
from jupyter_quota.times import rfc3339


def test_job_changes_show_each_start_and_end_once(harness):
    profile = harness.profile()
    backend = harness.backend(profile)
    seen = []
    tracker = JobTracker(
        lambda j: seen.append(("started", j["name"])),
        lambda j: seen.append(("ended", j["name"], j["phase"])),
        since=rfc3339(time.time() - 1),
    )
    tracker.update(backend.job_changes([profile], tracker.cursor))  # the first look
    job = backend.submit(profile, harness.job(profile, "quick", "--sleep", "0.5"), owner="alice")
    assert job["stalled"] is None
    deadline = time.monotonic() + 120
    while ("ended", "quick", "Succeeded") not in seen:
        assert time.monotonic() < deadline, (seen, backend.get_job(profile, "quick"))
        tracker.update(backend.job_changes([profile], tracker.cursor))
        time.sleep(0.05)
    for _ in range(3):  # later looks add nothing
        tracker.update(backend.job_changes([profile], tracker.cursor))
    assert seen == [("started", "quick"), ("ended", "quick", "Succeeded")]
    assert tracker.live == {}
    assert backend.get_job(profile, "quick")["stalled"] is None
