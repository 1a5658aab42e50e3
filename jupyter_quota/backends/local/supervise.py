"""The wrapper every local job runs under: start the command, wait, record its exit durably.

Run as ``python -I supervise.py --exit-file PATH -- argv...`` (or ``python -m
jupyter_quota.backends.local.supervise``), in a session of its own, with stdout and stderr
already pointed at the job's log. It exists so that a job's exit code survives the server:
the server may be stopped or restarted while the job runs, and the child is not its child
then, so only this process can wait for it and write ``exit.json`` (temp file, fsync, rename).

Two more duties:
- It waits for ``go`` on stdin before starting the command. The server sends it only after the
  ledger has committed the job as Running with this process's pid, so a server that dies in
  between leaves no unrecorded process behind (stdin closes, this exits, nothing ran).
- It ignores SIGTERM/SIGINT/SIGHUP (the signal reaches the whole process group, so the child
  gets it anyway) and outlives the child to record its end; the child is asked to die with it
  (``PR_SET_PDEATHSIG``) should it ever be killed first.

Standard library only: it runs in isolated mode, without the package on its path.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
import subprocess
import sys
import time

_PR_SET_PDEATHSIG = 1


def main(argv: list[str] | None = None) -> int:
    """Run the command once; return (and exit with) its exit code, 128+N for signal N."""
    exit_file, command = _parse(sys.argv[1:] if argv is None else argv)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _ignore)  # a handler, not SIG_IGN: handlers reset on exec
    if sys.stdin.buffer.readline() != b"go\n":
        return 0  # the server never confirmed: run nothing
    try:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent())
    except OSError as e:
        code = 127 if e.errno == errno.ENOENT else 126  # as a shell reports it
        error = f"cannot run {command[0]!r}: {e.strerror}"
        print(f"supervise: {error}", file=sys.stderr, flush=True)
        write_exit(exit_file, {"exitCode": code, "error": error, "finishedAt": _now()})
        return code
    returncode = child.wait()
    record = {"exitCode": returncode, "finishedAt": _now()}
    if returncode < 0:
        record["exitCode"] = 128 - returncode
        record["signal"] = signal.Signals(-returncode).name
    write_exit(exit_file, record)
    return record["exitCode"]


def write_exit(path: str, record: dict) -> None:
    """Write ``record`` as JSON so that ``path`` is either absent or complete, even on power loss."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dirfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dirfd)
    finally:
        os.close(dirfd)


def _parse(argv: list[str]) -> tuple[str, list[str]]:
    if len(argv) < 4 or argv[0] != "--exit-file" or argv[2] != "--":
        sys.exit("usage: supervise --exit-file PATH -- COMMAND [ARG...]")
    return argv[1], argv[3:]


def _ignore(signum, frame) -> None:
    """Stay alive to record the child's end; the child got the same signal from the group."""


def _die_with_parent():
    """A preexec hook that has the kernel SIGKILL the child when this process dies."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: nothing to arm
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # died before the hook was armed
            os._exit(1)

    return arm


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


if __name__ == "__main__":
    sys.exit(main())
