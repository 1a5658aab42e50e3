"""Jobs as real processes under the supervisor (``lifecycle``, ``runner``, ``command``): they run, see
their GPUs, succeed or fail with their exit code, or fail to start."""

from __future__ import annotations

import os
import sys

import pytest
from local_testing import GPU_KEY, NS, Profile, ledger_rows, make_job, phase_is, wait_for


def test_job_runs_succeeds_and_sees_its_gpus(make_backend):
    backend, profile = make_backend(), Profile()
    backend.submit(profile, make_job("ft-1", "--env", "--lines", "3", gpus=2), owner="alice")
    job = wait_for(backend, profile, "ft-1", phase_is("Succeeded", "Failed"))
    assert job["phase"] == "Succeeded", job
    assert job["exitCode"] == 0
    assert job["gpuIndices"] == [0, 1]
    assert job["startedAt"].endswith("Z") and job["finishedAt"].endswith("Z")
    assert "reason" not in job
    log = backend.logs(profile, "ft-1")
    assert "CUDA_VISIBLE_DEVICES=0,1\n" in log
    assert "JUPYTER_QUOTA_JOB=ft-1\n" in log and f"JUPYTER_QUOTA_NAMESPACE={NS}\n" in log
    assert f"cwd={make_backend.state_dir.parent}\n" in log
    assert log.endswith("line 2\nready\nexiting with 0\n")
    assert os.path.exists(make_backend.state_dir / "jobs" / NS / "ft-1" / "output.log")
    # The GPUs are free again: a 2-GPU job starts at once.
    backend.submit(profile, make_job("ft-2", gpus=2), owner="alice")
    assert backend.get_job(profile, "ft-2")["phase"] == "Running"


def test_job_without_gpus_gets_an_empty_cuda_visible_devices(make_backend):
    backend, profile = make_backend(), Profile()
    backend.submit(profile, make_job("cpu-only", "--env", gpus=0), owner="alice")
    wait_for(backend, profile, "cpu-only", phase_is("Succeeded"))
    assert "CUDA_VISIBLE_DEVICES=\n" in backend.logs(profile, "cpu-only")


def test_job_fails_with_its_exit_code_and_last_log_line(make_backend):
    backend, profile = make_backend(), Profile()
    backend.submit(profile, make_job("ft-1", "--exit", "3"), owner="alice")
    job = wait_for(backend, profile, "ft-1", phase_is("Succeeded", "Failed"))
    assert job["phase"] == "Failed"
    assert job["exitCode"] == 3
    assert job["reason"] == "Error"
    assert job["message"] == "exit code 3: exiting with 3"
    assert backend.logs(profile, "ft-1", tail_lines=2) == "ready\nexiting with 3\n"


@pytest.mark.parametrize("command", [["/nonexistent/swift", "sft"], ["no-such-trainer", "sft"]])
def test_a_command_that_cannot_be_found_fails_at_submit_and_is_never_running(make_backend, command):
    backend, profile = make_backend(), Profile()
    job = backend.submit(profile, make_job("nope", command=command), owner="alice")
    assert (job["phase"], job["reason"]) == ("Failed", "StartError")
    assert f"cannot run {command[0]!r}" in job["message"] and "JupyterQuota.job_command" in job["message"]
    assert job.get("startedAt") is None and ledger_rows(make_backend.ledger_path)[0]["pid"] is None
    assert backend.balance(profile)["resources"][GPU_KEY]["used"] == "0"


def test_the_job_command_resolves_in_the_servers_environment_without_it_on_path(make_backend, monkeypatch):
    """A server started as ``.venv/bin/jupyter lab`` without activating the venv: PATH lacks its bin."""
    monkeypatch.setenv("PATH", "/nonexistent-bin")
    backend, profile = make_backend(), Profile()
    script = "import os, sys; print('prefix', sys.prefix); print('path', os.environ['PATH'])"
    backend.submit(profile, make_job("venv", command=["python", "-c", script]), owner="alice")
    job = wait_for(backend, profile, "venv", phase_is("Succeeded", "Failed"))
    log = backend.logs(profile, "venv")
    assert job["phase"] == "Succeeded", (job, log)
    assert f"prefix {sys.prefix}\n" in log
    path = log.split("path ", 1)[1].splitlines()[0].split(os.pathsep)
    assert os.path.dirname(sys.executable) in path and path[-1] == "/nonexistent-bin"
