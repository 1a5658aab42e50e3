"""Who a process is, read from ``/proc``: its start time, whether it still runs, the boot.

A pid alone is not an identity: after a restart (or a long uptime) the kernel hands the same
number to another program. The ledger therefore records ``(boot id, pid, start time)`` and a
job's process counts as alive only while all three still match, so a restarted server never
signals or waits on a stranger.
"""

from __future__ import annotations

from dataclasses import dataclass

_BOOT_ID = "/proc/sys/kernel/random/boot_id"


@dataclass(frozen=True)
class ProcessId:
    """A process as the ledger remembers it."""

    pid: int
    start: int  # /proc/<pid>/stat field 22: clock ticks since boot
    boot: str


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


def boot_id() -> str:
    """This boot's random id; empty where the kernel does not offer one."""
    try:
        with open(_BOOT_ID, encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


def _stat(pid: int) -> list[str] | None:
    """Fields 3.. of ``/proc/<pid>/stat`` (state first), or None when there is no such pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("ascii", "replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    # Field 2 is "(comm)" and comm may hold spaces and parentheses: split after the last ")".
    return raw[raw.rindex(")") + 2 :].split()

