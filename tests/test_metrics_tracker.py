"""The metrics' JobTracker: each start and each end of a job counted once, whatever order the
looks come in; and a job that reports its estimated and measured peak GPU memory feeds the
estimator histogram (the job fields of CONTRACTS: ``memory.estimatedGib``/``measuredGib``)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from quota_testing import demo_config

from jupyter_quota.backends.base import JobChanges
from jupyter_quota.config import JupyterQuota
from jupyter_quota.metrics.tracker import JobTracker
from jupyter_quota.service.app import build_service

SINCE = "2026-11-30T10:00:00Z"


def job(name, phase, created="2026-11-30T10:00:00Z", started=None, finished=None, **more):
    out = {"name": name, "namespace": "team-alpha", "team": "alpha", "phase": phase, "createdAt": created, **more}
    if started:
        out["startedAt"] = started
    if finished:
        out["finishedAt"] = finished
    return out


def tracker():
    seen = []
    t = JobTracker(lambda j: seen.append(("started", j["name"])), lambda j: seen.append(("ended", j["name"])), SINCE)
    return t, seen


def test_each_start_and_end_is_counted_once():
    t, seen = tracker()
    t.update(JobChanges([job("a", "Pending"), job("old", "Running", started="2026-11-30T09:00:00Z")], 1, True))
    assert seen == [], "the first look only learns what is there"
    t.update(JobChanges([job("a", "Running", started="2026-11-30T10:00:05Z")], 2, False))
    t.update(JobChanges([job("a", "Running", started="2026-11-30T10:00:05Z")], 3, False))
    assert seen == [("started", "a")]
    ended = job("a", "Succeeded", started="2026-11-30T10:00:05Z", finished="2026-11-30T10:05:00Z")
    t.update(JobChanges([ended], 4, False))
    t.update(JobChanges([{**ended, "message": "changed again"}], 5, False))
    assert seen == [("started", "a"), ("ended", "a")]
    # Started and ended between two looks: both counted, start first.
    t.update(
        JobChanges([job("b", "Failed", started="2026-11-30T10:06:00Z", finished="2026-11-30T10:07:00Z")], 6, False)
    )
    # Ended before the tracker began, first seen now (its row changed): not counted.
    t.update(
        JobChanges([job("c", "Failed", created="2026-11-29T10:00:00Z", finished="2026-11-29T11:00:00Z")], 7, False)
    )
    assert seen == [("started", "a"), ("ended", "a"), ("started", "b"), ("ended", "b")]
    assert set(t.live) == {("team-alpha", "old", "2026-11-30T10:00:00Z")}
    assert t.cursor == 7


def test_a_snapshot_forgets_live_jobs_that_are_gone():
    t, seen = tracker()
    t.update(JobChanges([job("a", "Running", started=SINCE), job("b", "Pending")], None, True))
    t.update(JobChanges([job("b", "Pending")], None, True))  # a was deleted (a kube Job past its TTL)
    assert [k[1] for k in t.live] == ["b"] and seen == []
    # A name used again is another job: its own start.
    t.update(
        JobChanges([job("a", "Running", created="2026-11-30T11:00:00Z", started="2026-11-30T11:00:01Z")], None, True)
    )
    assert seen == [("started", "a")]


def test_the_estimators_error_is_observed_for_a_job_that_reports_both(tmp_path):
    config = demo_config()
    config.JupyterQuota.state_dir = str(tmp_path / "state")
    service = build_service(JupyterQuota(config=config))
    metrics = service.metrics
    metrics.scrape()  # the first look
    run = {"started": "2099-01-01T10:00:00Z", "finished": "2099-01-01T11:00:00Z"}
    measured = job("m", "Succeeded", memory={"estimatedGib": 40.0, "rangeGib": [36, 44], "measuredGib": 50.0}, **run)
    unmeasured = job("u", "Succeeded", memory={"estimatedGib": 40.0, "measuredGib": None}, **run)
    metrics.tracker.update(JobChanges([measured, unmeasured, job("n", "Failed", memory=None, **run)], None, False))
    found = {
        (s.name, s.labels.get("le"), s.labels.get("phase")): s.value
        for family in text_string_to_metric_families(metrics.scrape().decode())
        for s in family.samples
        if s.labels.get("team") == "alpha"
    }
    assert found[("jupyter_quota_estimator_peak_ratio_count", None, None)] == 1
    assert found[("jupyter_quota_estimator_peak_ratio_sum", None, None)] == 1.25
    assert found[("jupyter_quota_estimator_peak_ratio_bucket", "1.1", None)] == 0
    assert found[("jupyter_quota_estimator_peak_ratio_bucket", "1.25", None)] == 1
    assert found[("jupyter_quota_job_duration_seconds_count", None, "Succeeded")] == 2
    assert found[("jupyter_quota_job_duration_seconds_bucket", "3600.0", "Succeeded")] == 2
    assert found[("jupyter_quota_finished_jobs_total", None, "Failed")] == 1
