"""The stalled-job policy on a real service (local backend, the demo teams): a stalled job shows
in the metrics; ``flag`` leaves it running; ``cancel`` cancels it and audits the cancel."""

from __future__ import annotations

import getpass
import sys
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families
from quota_testing import FAKE_TRAINER, demo_config

from jupyter_quota import audit
from jupyter_quota.config import JupyterQuota
from jupyter_quota.identity import Identity
from jupyter_quota.service.app import build_service
from jupyter_quota.service.stall import STALLED_JOB_CANCELLED


@pytest.fixture
def service(tmp_path, request):
    config = demo_config()
    config.JupyterQuota.state_dir = str(tmp_path / "state")
    config.JupyterQuota.job_command = [sys.executable, str(FAKE_TRAINER)]
    config.JupyterQuota.reap_interval = 0.1
    config.JupyterQuota.cancel_grace_period = 2.0
    config.JupyterQuota.stalled_job_action = request.param
    built = build_service(JupyterQuota(config=config))
    built.backend.start()  # the reaper only: the test applies the policy itself, not a timer
    yield built
    built.backend.close()


def wait_job(service, who, name, predicate):
    deadline = time.monotonic() + 120
    while not predicate(job := service.get_job(who, "team-alpha", name)):
        assert time.monotonic() < deadline, job
        time.sleep(0.05)
    return job


def stalled_gauge(service) -> float:
    for family in text_string_to_metric_families(service.scrape(None).decode()):
        for s in family.samples:
            if s.name == "jupyter_quota_stalled_jobs" and s.labels == {
                "namespace": "team-alpha",
                "team": "alpha",
                "reason": "NoLogProgress",
            }:
                return s.value
    raise AssertionError("no jupyter_quota_stalled_jobs for team-alpha")


def stall(service, who, hold) -> dict:
    """A running job that went quiet 31 minutes ago, as the watch's clock sees it (``hold``: it runs
    until cancelled, or until the test ends even when an assertion failed first)."""
    job = service.submit(who, "team-alpha", {"args": hold, "gpus": 1})
    wait_job(service, who, job["name"], lambda j: j["phase"] == "Running")
    assert stalled_gauge(service) == 0
    service.backend.stall_watch.clock = lambda: time.time() + 31 * 60
    return job


@pytest.mark.parametrize("service", ["flag"], indirect=True)
def test_flag_only_shows_a_stalled_job(service, hold):
    who = Identity(getpass.getuser())
    job = stall(service, who, hold)
    assert stalled_gauge(service) == 1
    assert service.cancel_stalled() == []
    shown = service.get_job(who, "team-alpha", job["name"])
    assert shown["phase"] == "Running" and shown["stalled"]["reason"] == "NoLogProgress"
    assert audit.entries(service.config.state_dir) == []
    service.cancel(who, "team-alpha", job["name"])


@pytest.mark.parametrize("service", ["cancel"], indirect=True)
def test_cancel_cancels_a_stalled_job_and_audits_it(service, hold):
    who = Identity(getpass.getuser())
    job = stall(service, who, hold)
    (cancelled,) = service.cancel_stalled()
    assert cancelled["name"] == job["name"]
    ended = wait_job(service, who, job["name"], lambda j: j["phase"] == "Failed")
    assert ended["reason"] == "Cancelled" and "stalled-job policy" in ended["message"]
    assert ended["stalled"] is None
    (entry,) = audit.entries(service.config.state_dir)
    assert entry["who"] == audit.SYSTEM and entry["action"] == STALLED_JOB_CANCELLED
    assert entry["target"] == f"job/team-alpha/{job['name']}" and "no log output for 31 minutes" in entry["detail"]
    assert service.cancel_stalled() == [], "nothing left to cancel"
    assert stalled_gauge(service) == 0
