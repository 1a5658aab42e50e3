"""A cgroup (v2) per job, where the machine lets the server make one; None where it does not.

Every process of a job is in its cgroup from its start, forks included, whatever its session,
parent or environment, so a cgroup finds what neither the supervisor's process tree (gone when
the supervisor is killed) nor the environment marker (gone when a process execs with a clean
environment) can. The job's cgroup is a child of the supervisor's own (the server's) cgroup:
that needs cgroup2 mounted and that cgroup writable (root, or a delegated subtree such as a
systemd unit with ``Delegate=yes``). Where it is not, jobs are tracked through ``/proc`` alone
(see ``supervise``).

Only the job's main process joins the cgroup (before exec), not the supervisor, so the
supervisor can kill the cgroup and outlive it. Standard library only: the supervisor loads
this file by path.
"""

from __future__ import annotations

import os

PREFIX = "jupyter-quota-"


def name(pid: int, start: int) -> str:
    """The cgroup name of the job whose supervisor is ``(pid, start)``."""
    return f"{PREFIX}{pid}-{start}"


def create(cgroup_name: str) -> str | None:
    """Make ``cgroup_name`` under this process's cgroup; its path, or None where it cannot be."""
    own = path_of("self")
    if own is None:
        return None
    path = os.path.join(own, cgroup_name)
    try:
        os.mkdir(path)
    except OSError:
        return None
    return path


def join(path: str) -> bool:
    """Move the calling process into the cgroup at ``path`` (its children follow it)."""
    try:
        fd = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)
        return True
    except OSError:
        return False


def members(path: str) -> list[int]:
    """Pids in the cgroup (live ones: the kernel drops a process from it when it exits)."""
    try:
        with open(os.path.join(path, "cgroup.procs"), encoding="ascii") as f:
            return [int(line) for line in f if line.strip()]
    except OSError:
        return []


def kill(path: str) -> bool:
    """SIGKILL every process in the cgroup at once, forks included (``cgroup.kill``, Linux 5.14)."""
    try:
        fd = os.open(os.path.join(path, "cgroup.kill"), os.O_WRONLY)  # never create it
        try:
            os.write(fd, b"1")
        finally:
            os.close(fd)
        return True
    except OSError:  # an older kernel, or the cgroup is gone: the caller signals the members
        return False


def is_job_cgroup(path: str, cgroup_name: str) -> bool:
    """Whether ``path`` is an existing cgroup named ``cgroup_name`` under the cgroup2 mount."""
    root = _mount()
    return (
        root is not None
        and os.path.basename(path) == cgroup_name
        and os.path.realpath(path).startswith(os.path.realpath(root) + os.sep)
        and os.path.isfile(os.path.join(path, "cgroup.procs"))
    )


def remove(path: str) -> None:
    """Remove an empty job cgroup; a busy or missing one is left as it is."""
    try:
        os.rmdir(path)
    except OSError:
        pass


def path_of(pid: int | str) -> str | None:
    """The directory of ``pid``'s cgroup v2, or None (gone, no cgroup2, not a cgroup2 member)."""
    root = _mount()
    if root is None:
        return None
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8") as f:
            relative = next((line[3:].strip() for line in f if line.startswith("0::")), None)
    except OSError:
        return None
    if relative is None or relative.endswith(" (deleted)"):
        return None
    return os.path.join(root, relative.lstrip("/"))


_MOUNT: list[str | None] = []


def _mount() -> str | None:
    """Where cgroup2 is mounted (``/sys/fs/cgroup``, or ``.../unified`` on hybrid systems)."""
    if not _MOUNT:
        found = None
        try:
            with open("/proc/self/mountinfo", encoding="utf-8") as f:
                for line in f:
                    head, _, tail = line.partition(" - ")
                    if tail.split(" ", 1)[0] == "cgroup2":
                        found = head.split()[4]
                        break
        except OSError:
            pass
        _MOUNT.append(found)
    return _MOUNT[0]
