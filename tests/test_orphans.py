"""Every process of a job ends with it, and its GPUs are not handed out while one still runs.

Real processes on a real ledger: jobs run ``fake_trainer.py --spawn ...``, which leaves a
child that ignores SIGTERM, a grandchild in a session of its own (``setsid``), or a background
worker. Each test marks its processes with ``FAKE_TRAINER_RUN`` (the container's ``env``) and
looks for them in ``/proc`` itself, so it sees what is left whatever the backend tracks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid

import pytest
from fake_trainer import RUN, run_processes
from local_testing import (  # noqa: F401 (make_backend is a fixture)
    GPU_KEY,
    INVENTORY,
    UNTIL_CANCELLED,
    Profile,
    ledger_rows,
    make_backend,
    make_job,
    phase_is,
    wait_for,
    wait_log,
)

from jupyter_quota.backends.local import cgroup, procfs

ONE_GPU = dict(INVENTORY, gpus=INVENTORY["gpus"][:1])


def cgroups_usable() -> bool:
    """Whether this process may make a child cgroup (v2) of its own and move a process into it."""
    try:
        with open("/proc/self/mountinfo") as f:
            mount = next(line.split()[4] for line in f if line.split(" - ")[1].startswith("cgroup2 "))
        with open("/proc/self/cgroup") as f:
            own = next(line[3:].strip() for line in f if line.startswith("0::"))
    except (OSError, StopIteration, IndexError):
        return False
    probe = os.path.join(mount + own, f"probe-{uuid.uuid4().hex}")
    try:
        os.mkdir(probe)
    except OSError:
        return False
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        with open(os.path.join(probe, "cgroup.procs"), "w") as f:
            f.write(str(sleeper.pid))
        return True
    except OSError:
        return False
    finally:
        sleeper.kill()
        sleeper.wait()
        os.rmdir(probe)


CGROUPS = cgroups_usable()


@pytest.fixture(params=[True, False], ids=["cgroup", "proc-only"])
def cgroups(request):
    """Each test runs with a cgroup per job (where this machine allows it) and with /proc alone."""
    if request.param and not CGROUPS:
        pytest.skip("no writable cgroup v2 here: only /proc tracking")
    return request.param


@pytest.fixture
def run():
    """This test's marker; at the end, SIGKILL whatever still carries it (a failed test's orphans)."""
    marker = uuid.uuid4().hex
    yield marker
    for proc in run_processes(marker):
        try:
            os.kill(proc["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass


def marked_job(run, name, *trainer_args, gpus=1):
    job = make_job(name, *trainer_args, gpus=gpus)
    job["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": RUN, "value": run}]
    return job


def of_job(run, name):
    return [p for p in run_processes(run) if p["job"].endswith(f"/{name}")]


def spawning(tmp_path, name, *kinds):
    pid_dir = tmp_path / f"pids-{name}"
    pid_dir.mkdir()
    return [arg for kind in kinds for arg in ("--spawn", kind)] + ["--pid-dir", str(pid_dir)]


@pytest.mark.parametrize("kind", ["ignore-term", "setsid"])
def test_cancel_ends_every_process_of_the_job(make_backend, cgroups, run, tmp_path, kind):
    backend, profile = make_backend(grace_period=2.0, cgroups=cgroups), Profile()
    job = marked_job(run, "left", *spawning(tmp_path, "left", kind), *UNTIL_CANCELLED)
    backend.submit(profile, job, owner="alice")
    wait_log(backend, profile, "left", "ready", timeout=60)
    assert len(of_job(run, "left")) >= 3  # supervisor, main process, what it spawned
    supervisor = ledger_rows(make_backend.ledger_path)[0]["pid"]
    groups = {cgroup.path_of(p["pid"]) for p in of_job(run, "left") if p["pid"] != supervisor}
    if cgroups:  # one cgroup of its own holds every process of the job, not the supervisor
        assert len(groups) == 1 and os.path.basename(groups.pop()).startswith(cgroup.PREFIX)
    else:
        assert groups == {cgroup.path_of(supervisor)}
    backend.cancel(profile, "left", by="bob")
    job = wait_for(backend, profile, "left", phase_is("Succeeded", "Failed"), timeout=60)
    assert (job["phase"], job["reason"]) == ("Failed", "Cancelled")
    assert of_job(run, "left") == []  # recorded as ended only once nothing of it runs
    assert not any(os.path.basename(g).startswith(cgroup.PREFIX) and os.path.exists(g) for g in groups)
    assert backend.balance(profile)["resources"][GPU_KEY]["used"] == "0"


def test_a_job_that_exits_0_takes_its_background_worker_with_it(make_backend, cgroups, run, tmp_path):
    backend, profile = make_backend(cgroups=cgroups), Profile()
    backend.submit(profile, marked_job(run, "bg", *spawning(tmp_path, "bg", "worker")), owner="alice")
    job = wait_for(backend, profile, "bg", phase_is("Succeeded", "Failed"), timeout=60)
    assert (job["phase"], job["exitCode"]) == ("Succeeded", 0)
    assert of_job(run, "bg") == []


def test_no_gpu_goes_to_the_next_job_while_a_process_of_the_last_one_runs(make_backend, cgroups, run, tmp_path):
    backend, profile = make_backend(ONE_GPU, grace_period=2.0, cgroups=cgroups), Profile()
    first = spawning(tmp_path, "first", "ignore-term", "setsid", "worker")
    backend.submit(profile, marked_job(run, "first", *first, *UNTIL_CANCELLED), owner="alice")
    wait_log(backend, profile, "first", "ready", timeout=60)
    check = tmp_path / "second-conflicts.json"
    backend.submit(profile, marked_job(run, "second", "--check-gpus", str(check)), owner="alice")
    assert backend.get_job(profile, "second")["phase"] == "Pending"
    backend.cancel(profile, "first", by="bob")
    job = wait_for(backend, profile, "second", phase_is("Succeeded", "Failed"), timeout=60)
    assert job["phase"] == "Succeeded" and job["gpuIndices"] == [0]
    assert json.loads(check.read_text()) == []  # at its start, nothing of "first" held GPU 0
    assert of_job(run, "first") == []


def test_processes_left_by_a_killed_supervisor_are_found_killed_and_hold_the_gpu(make_backend, cgroups, run, tmp_path):
    backend, profile = make_backend(cgroups=cgroups), Profile()
    args = spawning(tmp_path, "cut", "setsid", "worker")
    backend.submit(profile, marked_job(run, "cut", *args, *UNTIL_CANCELLED), owner="alice")
    wait_log(backend, profile, "cut", "ready", timeout=60)
    group_file = make_backend.state_dir / "jobs" / profile.namespace / "cut" / "cgroup"
    group = group_file.read_text() if cgroups else None
    assert group_file.exists() == cgroups
    os.kill(ledger_rows(make_backend.ledger_path)[0]["pid"], signal.SIGKILL)  # the supervisor only
    job = wait_for(backend, profile, "cut", phase_is("Succeeded", "Failed"), timeout=60)
    assert (job["phase"], job["reason"]) == ("Failed", "Lost")
    assert of_job(run, "cut") == []
    assert group is None or not os.path.exists(group)  # the reaper removed the emptied cgroup


@pytest.mark.skipif(not CGROUPS, reason="no writable cgroup v2 here: only /proc tracking")
def test_a_process_that_left_no_trace_but_its_cgroup_is_killed_with_the_job(make_backend, tmp_path):
    """Re-parented to init, own session, empty environment: only the job's cgroup finds it."""
    backend, profile = make_backend(), Profile()
    args = spawning(tmp_path, "gone", "clean-env")
    backend.submit(profile, make_job("gone", *args, *UNTIL_CANCELLED), owner="alice")
    wait_log(backend, profile, "gone", "ready", timeout=60)
    pid = int((tmp_path / "pids-gone" / "clean-env.pid").read_text())
    proc = procfs.identify(pid)
    try:
        os.kill(ledger_rows(make_backend.ledger_path)[0]["pid"], signal.SIGKILL)  # the supervisor only
        job = wait_for(backend, profile, "gone", phase_is("Succeeded", "Failed"), timeout=60)
        assert (job["phase"], job["reason"]) == ("Failed", "Lost")
        deadline = time.monotonic() + 60  # its parent (init) may reap it a moment later
        while procfs.is_running(proc) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not procfs.is_running(proc)
    finally:
        if procfs.is_running(proc):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_cancel_and_submit_from_threads_leaves_no_orphan_and_no_shared_gpu(make_backend, run, tmp_path):
    """A smaller ``benchmarks/orphan_check.py``: threads cancel and submit on 2 GPUs."""
    backend, profile = make_backend(grace_period=1.0, poll_interval=0.05), Profile(hard={GPU_KEY: "100"})
    backend.start()
    kinds = ["ignore-term", "setsid", "worker"]
    checks, errors = [], []

    def client(t):
        try:
            for i in range(2):
                name = f"j{t}-{i}"
                check = tmp_path / f"{name}.json"
                checks.append(check)
                args = spawning(tmp_path, name, kinds[(t + i) % 3]) + ["--check-gpus", str(check)]
                exits = i == 1 and t % 2 == 0  # some end by themselves, leaving their worker
                args += ["--exit", "0"] if exits else list(UNTIL_CANCELLED)
                backend.submit(profile, marked_job(run, name, *args), owner="alice")
                wait_for(backend, profile, name, phase_is("Running", "Succeeded", "Failed"), timeout=120)
                if not exits:
                    wait_log(backend, profile, name, "ready", timeout=120)
                    backend.cancel(profile, name, by="bob")
                wait_for(backend, profile, name, phase_is("Succeeded", "Failed"), timeout=120)
        except Exception as e:  # noqa: BLE001 - reported below, with the thread's job
            errors.append(e)

    threads = [threading.Thread(target=client, args=(t,)) for t in range(4)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        backend.close()
    assert errors == []
    assert run_processes(run) == []
    assert {str(c.name): json.loads(c.read_text()) for c in checks} == {str(c.name): [] for c in checks}
