"""A real ``jupyter server`` in its own process, for tests that kill and restart it."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from quota_testing import DEMO_CONFIG, FAKE_TRAINER, free_port


class ServerProcess:
    """``jupyter server`` with the demo teams on a state dir that outlives the process."""

    def __init__(self, state_dir: Path, root_dir: Path, extra_config: str = ""):
        self.state_dir = state_dir
        self.root_dir = root_dir
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.config_file = root_dir / "server_config.py"
        self.log_file = root_dir / "server.log"
        self.config_file.write_text(
            f"c = get_config()\n"
            f"load_subconfig({str(DEMO_CONFIG)!r})\n"
            f"c.ServerApp.jpserver_extensions = {{'jupyter_quota': True}}\n"
            f"c.ServerApp.allow_unauthenticated_access = False\n"
            f"c.ServerApp.open_browser = False\n"
            f"c.ServerApp.allow_root = True\n"
            f"c.JupyterQuota.state_dir = {str(state_dir)!r}\n"
            f"c.JupyterQuota.job_command = [{sys.executable!r}, {str(FAKE_TRAINER)!r}]\n"
            f"c.JupyterQuota.reap_interval = 0.1\n" + extra_config
        )
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/quota/v1"

    def start(self, timeout: float = 120.0) -> ServerProcess:
        """Start the server and wait until it answers as this server (200 to our token). A restart
        may find its old port taken by another process meanwhile (other tests' servers ask the OS
        for ports too): it then takes a new one, so that calls never reach a stranger."""
        for _attempt in range(3):
            if self._start_on_port(timeout):
                return self
            self.port = free_port()
        raise RuntimeError(f"jupyter server found its port taken three times:\n{self.log()}")

    def _start_on_port(self, timeout: float) -> bool:
        """Whether the server came up on ``self.port``; False when the port was taken."""
        env = {**os.environ, "JUPYTER_TOKEN": self.token}
        log = open(self.log_file, "ab")  # noqa: SIM115 - the server process writes it as long as it runs
        start_at = log.tell()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter_server",
                f"--config={self.config_file}",
                f"--port={self.port}",
                "--ServerApp.port_retries=0",
                f"--ServerApp.root_dir={self.root_dir}",
                "--ip=127.0.0.1",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.root_dir,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                with open(self.log_file, "rb") as f:
                    f.seek(start_at)
                    if b"already in use" in f.read():
                        return False
                raise RuntimeError(f"jupyter server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                status, _ = self.call("GET", "/identity")
            except (urllib.error.URLError, ConnectionError, OSError, ValueError):
                status = None  # not listening yet (or a stranger's non-JSON answer)
            if status == 200:
                return True
            time.sleep(0.2)
        raise RuntimeError(f"jupyter server did not answer within {timeout}s:\n{self.log()}")

    def call(self, method: str, path: str, body=None, timeout: float = 30.0):
        data = json.dumps(body).encode() if body is not None else (b"" if method in ("POST", "PUT") else None)
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Authorization": f"token {self.token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def kill(self, sig=signal.SIGKILL) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)

    def memory_kb(self) -> dict[str, int]:
        """The server's resident memory now (``VmRSS``) and its peak (``VmHWM``), in kB."""
        figures = {}
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    figures[key] = int(value.split()[0])
        return figures

    def reset_peak_memory(self) -> None:
        """Reset ``VmHWM`` to the current ``VmRSS`` (``clear_refs``, see proc(5))."""
        with open(f"/proc/{self.proc.pid}/clear_refs", "w") as f:
            f.write("5")

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""


def wait_phase(srv, namespace, name, phases, timeout=120.0):
    """Poll a job until its phase is one of ``phases`` (a deadline, not a sleep to race).

    The deadlines here are generous: they only bound a failing test, and a start of the server
    took up to 20 s on a loaded 2-core machine."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, job = srv.call("GET", f"/namespaces/{namespace}/jobs/{name}")
        if status == 200 and job["phase"] in phases:
            return job
        time.sleep(0.1)
    raise AssertionError(f"{name} never reached {phases}: {job}")
