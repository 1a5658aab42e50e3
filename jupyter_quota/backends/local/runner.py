"""Start a job's processes, signal them, and read how they ended.

A job runs as ``supervise.py`` (which runs the job's argv) in a new session, so the server can
stop and start without taking jobs down. The supervisor owns every process of the job and
outlives them all (see ``supervise``; ``tracking`` finds and signals them). The supervisor is
started held at a gate: the caller commits the pid to the ledger first, then ``release``s it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass

from . import procfs

LOG_FILE = "output.log"
EXIT_FILE = "exit.json"
CGROUP_FILE = "cgroup"  # the path of the job's cgroup, when it has one
# Run by path, not imported: ``python -m ...supervise`` must not find it already in sys.modules.
SUPERVISOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "supervise.py")


@dataclass(frozen=True)
class Settings:
    """How jobs are run: log rotation (see ``supervise.RotatingLog``), a cgroup per job."""

    log_max_bytes: int = 10 * 1024 * 1024
    log_backups: int = 2
    cgroups: bool = True  # where the machine allows it (see ``cgroup``)


@dataclass
class Launch:
    """A supervisor waiting at its gate."""

    popen: subprocess.Popen
    proc: procfs.ProcessId


def job_dir(state_dir: str, namespace: str, name: str) -> str:
    """Where a job's log and exit record live: ``state_dir/jobs/<namespace>/<name>``."""
    return os.path.join(state_dir, "jobs", namespace, name)


def launch(
    directory: str,
    command: list[str],
    env: dict[str, str],
    workdir: str,
    settings: Settings,
    run_as: str | None = None,
    keep_log: bool = False,
) -> Launch:
    """Start the supervisor for ``command`` (an argv list), held at its gate.

    The job's output goes to ``LOG_FILE``, rotated at ``settings.log_max_bytes`` into
    ``settings.log_backups`` older files (``output.log.1`` ...). ``run_as``
    (``account.Account.run_as``): the account the job's processes run as; the supervisor stays
    the server's. ``keep_log``: the job ran before (it was preempted), and its log goes on where
    it stopped. Raises OSError when it cannot be started (a missing workdir, no interpreter).
    """
    os.makedirs(directory, mode=0o700, exist_ok=True)
    stale_files = (EXIT_FILE, CGROUP_FILE) if keep_log else (EXIT_FILE, LOG_FILE + ".", CGROUP_FILE)
    for stale in os.listdir(directory):  # left by a ledger that was lost, or by the run before
        if stale.startswith(stale_files):
            os.unlink(os.path.join(directory, stale))
    log = os.open(
        os.path.join(directory, LOG_FILE),
        os.O_WRONLY | os.O_CREAT | (0 if keep_log else os.O_TRUNC) | os.O_APPEND | os.O_CLOEXEC,
        0o600,
    )
    argv = [
        sys.executable,
        "-I",  # isolated: the job's PYTHONPATH or workdir cannot shadow the supervisor's imports
        SUPERVISOR,
        "--exit-file",
        os.path.join(directory, EXIT_FILE),
        "--log",
        os.path.join(directory, LOG_FILE),
        f"--log-max-bytes={settings.log_max_bytes}",
        f"--log-backups={settings.log_backups}",
        *(["--cgroup-file", os.path.join(directory, CGROUP_FILE)] if settings.cgroups else []),
        *(["--run-as", run_as] if run_as else []),
        "--",
        *command,
    ]
    try:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=log,  # the supervisor's own errors; the job's output goes through its pipe
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(log)
    proc = procfs.identify(popen.pid)
    if proc is None:
        popen.wait()
        raise OSError(f"the job supervisor exited at once (exit code {popen.returncode})")
    return Launch(popen, proc)


def release(launch: Launch) -> None:
    """Let the supervisor run the job (after the ledger has recorded it)."""
    try:
        launch.popen.stdin.write(b"go\n")
        launch.popen.stdin.flush()
    except BrokenPipeError:
        pass  # it died at the gate; the reaper finds it gone without an exit record
    finally:
        _close_stdin(launch.popen)


def abort(launch: Launch) -> None:
    """Dismiss a supervisor whose job the ledger did not record: it exits without running it."""
    _close_stdin(launch.popen)
    launch.popen.wait()


def read_exit(directory: str) -> dict | None:
    """The supervisor's exit record, or None when it wrote none (killed, or never ran)."""
    try:
        with open(os.path.join(directory, EXIT_FILE), encoding="utf-8") as f:
            record = json.load(f)
    except (FileNotFoundError, ValueError):
        return None
    return record if isinstance(record, dict) and "exitCode" in record else None


def job_environment(
    base: dict[str, str], container: dict, namespace: str, name: str, gpu_indices: list[int]
) -> dict[str, str]:
    """The job's environment: the server's, the container's literal ``env``, then ours.

    ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` makes CUDA number devices as ``nvidia-smi`` does, so
    the indices in ``CUDA_VISIBLE_DEVICES`` mean the GPUs the ledger assigned.
    """
    env = dict(base)
    for var in container.get("env") or []:
        if "value" in var and "name" in var:
            env[var["name"]] = str(var["value"])
    env.update(
        CUDA_VISIBLE_DEVICES=",".join(str(i) for i in gpu_indices),
        CUDA_DEVICE_ORDER="PCI_BUS_ID",
        JUPYTER_QUOTA_JOB=name,
        JUPYTER_QUOTA_NAMESPACE=namespace,
    )
    return env


def signal_name(sig: int) -> str:
    return signal.Signals(sig).name


def _close_stdin(popen: subprocess.Popen) -> None:
    try:
        popen.stdin.close()
    except (BrokenPipeError, OSError):
        pass
