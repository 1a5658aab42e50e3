"""Who a process is, read from ``/proc``: its start time, whether it still runs, the boot.

A pid alone is not an identity: after a restart (or a long uptime) the kernel hands the same
number to another program. The ledger therefore records ``(boot id, pid, start time)`` and a
job's process counts as alive only while all three still match, so a restarted server never
signals or waits on a stranger.

It also finds every process of a job (see ``supervise`` for why both ways are needed): the
descendants of its supervisor, and processes whose environment carries the job's ``MARKER``.
Signals go through a pidfd opened before the start time is checked, so a pid reused between
the scan and the signal is never hit.

Standard library only: the supervisor, which runs without the package, loads this file by path.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

_BOOT_ID = "/proc/sys/kernel/random/boot_id"
#: The environment variable every process of a job inherits: ``marker(supervisor)``.
MARKER = "JUPYTER_QUOTA_JOB_UID"
_MARKER_PREFIX = MARKER.encode() + b"="


@dataclass(frozen=True)
class ProcessId:
    """A process as the ledger remembers it."""

    pid: int
    start: int  # /proc/<pid>/stat field 22: clock ticks since boot
    boot: str


def process_of(row) -> ProcessId:
    """A job's supervisor, as its ledger row names it."""
    return ProcessId(row["pid"], row["pid_start"], row["boot_id"])


def identify(pid: int) -> ProcessId | None:
    """The identity of a running ``pid`` now, or None when it is gone (or a zombie)."""
    stat = _stat(pid)
    if stat is None or stat[0] in ("Z", "X"):
        return None
    return ProcessId(pid, int(stat[19]), boot_id())


def is_running(proc: ProcessId) -> bool:
    """Whether the process the ledger remembers still runs (not exited, not a zombie)."""
    if proc.boot != boot_id():
        return False
    return identify(proc.pid) == proc


@dataclass(frozen=True)
class Process:
    """A live process as one scan of ``/proc`` saw it."""

    pid: int
    ppid: int
    start: int
    marker: str | None = None  # the job marker in its environment, when asked for and present


def marker(supervisor: ProcessId) -> str:
    """The job marker of a supervisor: unique across boots, pids and time."""
    return f"{supervisor.boot}/{supervisor.pid}/{supervisor.start}"


def processes(markers: bool = False) -> list[Process]:
    """Every live process (zombies hold nothing and are left out); ``markers`` reads environments.

    A process whose environment cannot be read (another user's) has no marker.
    """
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _stat(int(entry))
        if stat is None or stat[0] in ("Z", "X"):
            continue
        found.append(Process(int(entry), int(stat[1]), int(stat[19]), _marker(int(entry)) if markers else None))
    return found


def descendants(pid: int, table: list[Process]) -> list[Process]:
    """The processes below ``pid`` in ``table`` (children, their children, ...)."""
    children: dict[int, list[Process]] = {}
    for proc in table:
        children.setdefault(proc.ppid, []).append(proc)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child.pid)
    return found


def send(proc: Process | ProcessId, sig: int) -> bool:
    """Send ``sig`` to ``proc`` if it is still the process that was seen; False when it is gone."""
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return False
    except (AttributeError, OSError):  # no pidfd (old kernel): check, then signal by pid
        fd = None
    try:
        stat = _stat(proc.pid)
        if stat is None or int(stat[19]) != proc.start:
            return False  # the pid now belongs to another process
        if fd is None:
            os.kill(proc.pid, sig)
        else:
            signal.pidfd_send_signal(fd, sig)
        return True
    except ProcessLookupError:
        return False
    finally:
        if fd is not None:
            os.close(fd)


def boot_id() -> str:
    """This boot's random id; empty where the kernel does not offer one."""
    try:
        with open(_BOOT_ID, encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


def _marker(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:  # gone, or not ours to read
        return None
    for item in raw.split(b"\0"):
        if item.startswith(_MARKER_PREFIX):
            return item[len(_MARKER_PREFIX) :].decode("ascii", "replace")
    return None


def _stat(pid: int) -> list[str] | None:
    """Fields 3.. of ``/proc/<pid>/stat`` (state first), or None when there is no such pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("ascii", "replace")
    except OSError:  # no such pid (or ESRCH while it is being reaped)
        return None
    # Field 2 is "(comm)" and comm may hold spaces and parentheses: split after the last ")".
    return raw[raw.rindex(")") + 2 :].split()
