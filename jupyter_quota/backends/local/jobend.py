"""How a Running job ended, from what its supervisor left: the phase, reason and message the
ledger records (``Lifecycle.reap`` writes them)."""

from __future__ import annotations

import os
import sqlite3
import subprocess

from ... import reasons
from . import clock, logtail, runner


def outcome(row: sqlite3.Row, directory: str, child: subprocess.Popen | None) -> tuple[str, dict]:
    """The phase and fields of a Running job whose process is gone.

    ``directory`` is the job's directory (its exit record and log); ``child`` its supervisor when
    this process started it (its return code explains a missing exit record).
    """
    record = runner.read_exit(directory)
    code = record.get("exitCode") if record else None
    values = {
        "exit_code": code,
        "finished_at": (record or {}).get("finishedAt") or clock.now(),
        "kill_after": None,
    }
    if row["cancelled_by"] and row["reason"] == reasons.IDLE:  # stopped by the idle policy, which said why
        return "Failed", dict(values, reason=row["reason"], message=row["message"])
    if row["cancelled_by"]:
        return "Failed", dict(values, reason=reasons.CANCELLED, message=f"cancelled by {row['cancelled_by']}")
    if record is None:
        return "Failed", dict(values, reason=reasons.LOST, message=lost_message(row, child))
    if record.get("error"):
        return "Failed", dict(values, reason=reasons.START_ERROR, message=record["error"])
    if code == 0:
        return "Succeeded", dict(values, reason=None, message=None)
    message = f"exit code {code}"
    if record.get("signal"):
        message += f" ({record['signal']})"
    last = logtail.last_line(os.path.join(directory, runner.LOG_FILE))
    if last:
        message += f": {last}"
    return "Failed", dict(values, reason=reasons.ERROR, message=message)


def lost_message(row: sqlite3.Row, child: subprocess.Popen | None) -> str:
    """Why a job has no exit record, as far as its supervisor's return code tells."""
    if child is not None and child.returncode is not None:
        if child.returncode < 0:
            how = runner.signal_name(-child.returncode)
            return f"the job's processes (pid {row['pid']}) were killed ({how}) before recording an exit code"
        return (
            f"the job's supervisor (pid {row['pid']}) exited with code {child.returncode}"
            " without recording the job's exit code; see the job's log"
        )
    return (
        f"the job's process (pid {row['pid']}) disappeared while the server was not watching; no exit code was recorded"
    )


def orphans_message(count: int) -> str:
    return (
        f"the job's supervisor is gone but {count} of its processes still ran; they were sent"
        " SIGKILL and the job keeps its GPUs until they have exited"
    )
