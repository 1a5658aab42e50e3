"""Helpers shared by the test modules (importable as ``quota_testing``: tests/ is on pytest's path)."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

from jupyter_server.auth.identity import IdentityProvider, User
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

ROOT = Path(__file__).resolve().parent.parent
DEMO_CONFIG = ROOT / "binder" / "jupyter_server_config.py"
FAKE_TRAINER = Path(__file__).resolve().parent / "fake_trainer.py"
#: the hub token a user server in service mode forwards with (tests stand in for JupyterHub)
SERVER_TOKEN = "test-server-token"
#: the two ways a Jupyter server serves the quota API (``quota_mode`` in conftest.py)
QUOTA_MODES = ("embedded", "service")


def free_port() -> int:
    """A loopback port nothing listens on right now (the OS picks it; the socket is closed again)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def demo_config() -> Config:
    """The very config binder and the quick start use."""
    return PyFileConfigLoader(DEMO_CONFIG.name, path=str(DEMO_CONFIG.parent)).load_config()


def teams_config(state_dir, teams: int, hard: dict, inventory: dict | None = None) -> Config:
    """A local-backend service of ``teams`` teams ``t{i}`` (namespace ``team-{i}``, group ``g{i}``,
    ``i`` zero-padded to the width of ``teams - 1``), each with the quota ``hard``, running the
    fake trainer, on a machine of no GPUs."""
    width = len(str(max(0, teams - 1)))
    c = Config()
    c.JupyterQuota.state_dir = str(state_dir)
    c.JupyterQuota.job_command = [sys.executable, str(FAKE_TRAINER)]
    c.JupyterQuota.inventory = inventory or {"gpus": 0, "cpu": "100", "memory": "100Gi"}
    c.JupyterQuota.profiles = [
        {"team": f"t{i:0{width}d}", "namespace": f"team-{i:0{width}d}", "groups": [f"g{i:0{width}d}"], "hard": hard}
        for i in range(teams)
    ]
    return c


class HeaderIdentityProvider(IdentityProvider):
    """Token auth as usual, then the user named by ``X-Test-User`` (tests act as many users)."""

    async def get_user(self, handler):
        user = await super().get_user(handler)
        if user is None:
            return None
        name = handler.request.headers.get("X-Test-User")
        return User(username=name) if name else user


class ServerTokenIdentityProvider(IdentityProvider):
    """The quota service's callers in tests: ``token`` is the forwarding server's, whose owner is
    ``owner`` (as JupyterHub would answer for that server's token); nothing else signs in."""

    def __init__(self, token: str, owner: str, **kwargs):
        super().__init__(**kwargs)
        self._token, self._owner = token, owner

    async def get_user(self, handler):
        from jupyter_quota.hubservice.identity import HubUser

        if handler.request.headers.get("Authorization") != f"token {self._token}":
            return None
        handler._token_authenticated = True
        return HubUser({"kind": "user", "name": self._owner, "groups": [], "admin": False, "scopes": []})

    def is_token_authenticated(self, handler) -> bool:
        return bool(getattr(handler, "_token_authenticated", False))


def start_quota_service(config: Config, token: str):
    """Run ``hubservice.app`` on a free loopback port in the current IO loop: (its URL, stop)."""
    import logging

    from jupyter_quota.config import JupyterQuota
    from jupyter_quota.hubservice.app import make_app
    from jupyter_quota.service.app import build_service

    quota = JupyterQuota(config=config)
    service = build_service(quota)
    service.start()
    prefix = "/services/jupyter-quota/"
    app = make_app(service, ServerTokenIdentityProvider(token, quota.owner), prefix, logging.getLogger("test-service"))
    port = free_port()
    server = app.listen(port, address="127.0.0.1")

    def stop():
        server.stop()
        service.close()

    return f"http://127.0.0.1:{port}{prefix}", stop


def ipython_shell():
    """The process's test IPython shell with ``jupyter_quota`` loaded. IPython's
    ``start_ipython`` makes it once and answers None after that, so every test module that
    needs a shell gets it here (``tests/test_magics*.py`` run in one process)."""
    from IPython.terminal.interactiveshell import TerminalInteractiveShell
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython() or TerminalInteractiveShell.instance()
    shell.run_line_magic("load_ext", "jupyter_quota")  # once: a second load says so and does nothing
    return shell


async def eventually(read, done, describe, timeout: float = 120.0, pause: float = 0.1):
    """Await ``read()`` until ``done(value)``, and return that value. Past ``timeout`` (a bound
    for a hung server, not a pace) an AssertionError says ``describe(last value)``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await read()
        if done(value):
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(describe(value))
        await asyncio.sleep(pause)


async def wait_for_phase(api, namespace: str, name: str, phases, timeout: float = 120.0) -> dict:
    """The job ``name`` once its phase is one of ``phases`` (``api`` as in tests/conftest.py)."""

    async def read():
        status, job = await api("GET", "namespaces", namespace, "jobs", name)
        assert status == 200, job
        return job

    return await eventually(
        read, lambda job: job["phase"] in phases, lambda job: f"job {name} stayed {job['phase']}: {job}", timeout
    )
