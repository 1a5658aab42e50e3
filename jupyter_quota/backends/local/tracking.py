"""Every process of a running job, as the server finds and signals them.

While a job's supervisor lives it owns them all (its descendants, see ``supervise``): a cancel
is a SIGTERM to it, which it forwards. When it is gone but processes of the job still run (it
was killed, and its orphans went to init), they are found by the marker in their environment
(``procfs.MARKER``) and by the job's cgroup (``cgroup``, where jobs have one), and SIGKILLed;
the job keeps its GPUs until none is left.
"""

from __future__ import annotations

import os
import signal

from . import cgroup, procfs
from .runner import CGROUP_FILE


def terminate(supervisor: procfs.ProcessId) -> bool:
    """SIGTERM the job: its supervisor forwards the signal to every process of the job."""
    return supervisor.boot == procfs.boot_id() and procfs.send(supervisor, signal.SIGTERM)


def kill_processes(supervisor: procfs.ProcessId, directory: str) -> int:
    """SIGKILL every process of a running job but its supervisor (which then records the end).

    Returns how many were signalled.
    """
    if supervisor.boot != procfs.boot_id():
        return 0
    group = job_cgroup(supervisor, directory)
    if group is not None:
        cgroup.kill(group)
    table = procfs.processes(markers=True)
    marker = procfs.marker(supervisor)
    job = {p.pid: p for p in procfs.descendants(supervisor.pid, table)}
    job.update((p.pid, p) for p in table if p.marker == marker and p.pid != supervisor.pid)
    return sum(procfs.send(p, signal.SIGKILL) for p in job.values())


def reap_leftovers(jobs: dict[procfs.ProcessId, str]) -> dict[procfs.ProcessId, int]:
    """For jobs whose supervisor is gone (``{supervisor: job directory}``): SIGKILL what still
    runs of each, remove the cgroups of those of which nothing runs, and return how many
    processes each job still had (jobs with none are absent: they have ended).
    """
    boot = procfs.boot_id()
    jobs = {s: d for s, d in jobs.items() if s.boot == boot}  # nothing outlives a reboot
    if not jobs:
        return {}
    by_marker = {procfs.marker(s): s for s in jobs}
    found: dict[procfs.ProcessId, dict[int, procfs.Process | None]] = {s: {} for s in jobs}
    for proc in procfs.processes(markers=True):
        if proc.marker in by_marker:
            found[by_marker[proc.marker]][proc.pid] = proc
    left = {}
    for supervisor, directory in jobs.items():
        procs = found[supervisor]
        group = job_cgroup(supervisor, directory)
        if group is not None:
            procs.update((pid, procs.get(pid)) for pid in cgroup.members(group))
            if procs:
                cgroup.kill(group)
            else:
                cgroup.remove(group)
        for pid, proc in procs.items():
            proc = proc or procfs.identify(pid)
            if proc is not None:
                procfs.send(proc, signal.SIGKILL)
        if procs:
            left[supervisor] = len(procs)
    return left


def job_cgroup(supervisor: procfs.ProcessId, directory: str) -> str | None:
    """The job's cgroup as its supervisor recorded it, if it is that supervisor's and exists.

    The name is checked against the ledger's supervisor, so a stale or altered file can never
    point the server at another cgroup.
    """
    try:
        with open(os.path.join(directory, CGROUP_FILE), encoding="utf-8") as f:
            path = f.read().strip()
    except OSError:
        return None
    return path if cgroup.is_job_cgroup(path, cgroup.name(supervisor.pid, supervisor.start)) else None
