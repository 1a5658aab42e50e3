"""The long-running processes of the test cluster (:mod:`kubecluster`) and its node (:mod:`kubenode`).

Each process runs in its own session (a test's Ctrl-C reaches pytest, not etcd), appends to
``WORKDIR/NAME.log``, and is stopped with SIGTERM, then SIGKILL once ``stop_timeout`` has passed.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path


def utcnow() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ProcessGroup(Mapping[str, subprocess.Popen]):
    """The running processes by name; ``error`` is what :meth:`check_alive` raises."""

    def __init__(self, workdir: Path, *, error: type[Exception], stop_timeout: float):
        self.workdir = Path(workdir)
        self.error = error
        self.stop_timeout = stop_timeout
        #: the arguments each name was last started with (:meth:`restart` uses them again)
        self.args: dict[str, list[str]] = {}
        self._running: dict[str, subprocess.Popen] = {}

    def __getitem__(self, name: str) -> subprocess.Popen:
        return self._running[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._running)

    def __len__(self) -> int:
        return len(self._running)

    def spawn(self, name: str, args: list[str]) -> None:
        self.args[name] = args
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the process
        log.write(f"\n--- {utcnow()} {shlex.join(args)}\n".encode())
        log.flush()
        self._running[name] = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        log.close()

    def restart(self, name: str) -> None:
        """Start ``name`` again with the arguments it was last started with."""
        self.spawn(name, self.args[name])

    def terminate(self, name: str) -> None:
        proc = self._running.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(self.stop_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def log_tail(self, name: str, lines: int = 25) -> str:
        path = self.workdir / f"{name}.log"
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def check_alive(self, name: str) -> None:
        """Raise ``error`` with the log's tail if ``name`` was started and has exited."""
        proc = self._running.get(name)
        if proc is not None and proc.poll() is not None:
            raise self.error(f"{name} exited with code {proc.returncode}:\n{self.log_tail(name)}")
