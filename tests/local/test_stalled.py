"""Stalled ("zombie") jobs on the local backend: a Running job whose log has not grown for the
policy's minutes, or whose GPUs stayed idle that long, carries ``stalled``; new output, busy
GPUs or its end clear it. The watch's clock and GPU measure are driven by the test."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from local_testing import NS, UNTIL_CANCELLED, Profile, make_job, phase_is, wait_for, wait_log

from jupyter_quota import stall
from jupyter_quota.backends.local import runner
from jupyter_quota.backends.local.inventory import parse_utilization
from jupyter_quota.backends.local.stallwatch import SAMPLE_INTERVAL
from jupyter_quota.times import rfc3339


def running_quiet_job(backend, name="quiet"):
    profile = Profile()
    backend.submit(profile, make_job(name, *UNTIL_CANCELLED), owner="alice")
    job = wait_for(backend, profile, name, phase_is("Running"))
    wait_log(backend, profile, name, "ready")  # its last output until the test says otherwise
    return profile, job


def log_of(make_backend, name) -> Path:
    return Path(runner.job_dir(str(make_backend.state_dir), NS, name)) / runner.LOG_FILE


def test_no_log_output_for_the_policys_minutes_flags_the_job(make_backend):
    backend = make_backend(stall_policy=stall.StallPolicy(minutes=30))
    profile, job = running_quiet_job(backend)
    assert job["stalled"] is None
    last = log_of(make_backend, "quiet").stat().st_mtime
    backend.stall_watch.clock = lambda: last + 29 * 60
    assert backend.get_job(profile, "quiet")["stalled"] is None and backend.stalled() == []

    backend.stall_watch.clock = lambda: last + 31 * 60
    flagged = backend.get_job(profile, "quiet")["stalled"]
    assert flagged["reason"] == stall.NO_LOG_PROGRESS and flagged["since"] == rfc3339(last)
    assert "no log output for 31 minutes" in flagged["message"]
    assert backend.stalled() == [{"namespace": NS, "team": "a", "name": "quiet", "stalled": flagged}]
    assert [j["stalled"] for j in backend.list_jobs(profile)] == [flagged]

    os.utime(log_of(make_backend, "quiet"), (last + 31 * 60, last + 31 * 60))  # it wrote again
    assert backend.get_job(profile, "quiet")["stalled"] is None

    backend.stall_watch.clock = lambda: last + 120 * 60
    backend.cancel(profile, "quiet", by="alice")  # a job being cancelled or ended is not flagged
    assert backend.get_job(profile, "quiet")["stalled"] is None


def test_idle_gpus_flag_a_job_that_still_writes(make_backend):
    backend = make_backend(stall_policy=stall.StallPolicy(minutes=10, gpu_utilization=5))
    profile, job = running_quiet_job(backend, "idle")
    (mine,) = job["gpuIndices"]
    other = 1 - mine
    watch, log, t0 = backend.stall_watch, log_of(make_backend, "idle"), time.time()
    busy = {mine: 3.0, other: 97.0}
    watch.measure = lambda: dict(busy)

    def at(minutes: float) -> dict | None:
        now = t0 + minutes * 60
        watch.clock = lambda: now
        os.utime(log, (now, now))  # the job keeps logging: only its GPUs say it idles
        watch.sample()
        return backend.get_job(profile, "idle")["stalled"]

    assert at(0) is None
    assert at(SAMPLE_INTERVAL / 60 + 5) is None
    flagged = at(11)
    assert flagged["reason"] == stall.LOW_GPU_UTILIZATION and flagged["since"] == rfc3339(t0)
    assert "under 5% busy for 11 minutes" in flagged["message"]
    busy[mine] = 60.0
    assert at(12) is None, "a busy sample clears the flag"
    busy[mine] = 0.0
    assert at(13) is None
    assert at(22) is None, "idle again, but only since minute 13"
    assert at(24)["since"] == rfc3339(t0 + 13 * 60)


def test_the_judgement_is_pure():
    policy = stall.StallPolicy(minutes=1)
    assert stall.stalled(policy, now=100.0, last_output=41.0) is None
    assert stall.stalled(policy, now=100.0, last_output=40.0)["reason"] == stall.NO_LOG_PROGRESS
    assert stall.stalled(policy, now=100.0, last_output=90.0, idle_since=30.0)["reason"] == stall.LOW_GPU_UTILIZATION
    assert stall.stalled(stall.StallPolicy(minutes=0), now=1e9, last_output=0.0) is None, "0 turns it off"
    idle = stall.IdleGpus(threshold=5)
    idle.observe(10.0, {0: 1.0, 1: 50.0})
    assert idle.since([0], started=0.0) == 10.0 and idle.since([0, 1], started=0.0) is None
    assert idle.since([0], started=20.0) == 20.0, "not idle before the job started"
    idle.observe(20.0, {1: 1.0})  # GPU 0 no longer reported: not known to idle
    assert idle.since([0], started=0.0) is None and idle.since([1], started=0.0) == 20.0


def test_nvidia_smi_utilization_is_parsed():
    assert parse_utilization("0, 3\n1, 97\n2, [N/A]\n\n") == {0: 3.0, 1: 97.0}
    with pytest.raises(ValueError, match="unexpected nvidia-smi line"):
        parse_utilization("GPU 0, 3 %")
