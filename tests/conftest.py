"""Shared fixtures: a real jupyter-server with the extension and the demo configuration."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from quota_testing import FAKE_TRAINER, SERVER_TOKEN, demo_config

pytest_plugins = ("pytest_jupyter.jupyter_server",)


@pytest.fixture
def hold(tmp_path):
    """``fake_trainer`` args for a job that runs until the test ends: it waits for a file made
    at teardown (a job outlives its server by design, so nothing else would end it). A job on
    ``--sleep N`` races the test's own steps instead: on a loaded machine a restart of the
    server took 6.7-19.5 s, and a job that ends early frees its quota mid-test."""
    release = tmp_path / "release-at-teardown"
    yield ["--until-file", str(release)]
    release.touch()


@pytest.fixture
def quota_state(tmp_path) -> Path:
    return tmp_path / "quota-state"


@pytest.fixture
def extra_quota_config() -> dict:
    """Override in a test module to add to the JupyterQuota config."""
    return {}


def quota_test_config(quota_state, extra_quota_config):
    """The demo config with the tests' state dir, fake trainer and quick reaper."""
    c = demo_config()
    c.JupyterQuota.state_dir = str(quota_state)
    c.JupyterQuota.job_command = [sys.executable, str(FAKE_TRAINER)]
    c.JupyterQuota.reap_interval = 0.1
    c.JupyterQuota.cancel_grace_period = 2.0
    for key, value in extra_quota_config.items():
        setattr(c.JupyterQuota, key, value)
    return c


@pytest.fixture
def quota_mode() -> str:
    """``embedded`` (the server is the quota authority) or ``service`` (the server forwards to a
    quota service, as under a hub). A module runs its tests in both with
    ``@pytest.fixture(params=QUOTA_MODES)`` over this name."""
    return "embedded"


@pytest.fixture
def jp_server_config(quota_state, extra_quota_config, quota_mode, request):
    c = quota_test_config(quota_state, extra_quota_config)
    c.ServerApp.jpserver_extensions = {"jupyter_quota": True}
    c.ServerApp.allow_unauthenticated_access = False
    if quota_mode == "service":
        c.JupyterQuota.service_url = request.getfixturevalue("quota_service_url")
    return c


@pytest.fixture
def jp_serverapp(jp_serverapp):
    """pytest-jupyter's server, whose quota service is closed after the test. jupyter-server stops
    only extension *apps* when it stops, not a module extension like this one, so each test's
    service (its reaper, timers and event pass) would otherwise run on in this process: about 200
    of them once slowed the whole suite (1,100 threads, load 49)."""
    yield jp_serverapp
    service = jp_serverapp.web_app.settings.get("jupyter_quota_service")
    if service is not None:
        service.close()


@pytest.fixture
def quota_service_url(quota_state, extra_quota_config, io_loop, monkeypatch):
    """A quota service app (``hubservice.app``) in this process, on the demo config, whose
    callers are this server's owner (the token the server forwards with); the real one, behind
    a real JupyterHub, is in tests/hub/."""
    from quota_testing import start_quota_service

    c = quota_test_config(quota_state, extra_quota_config)
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", SERVER_TOKEN)
    url, stop = start_quota_service(c, SERVER_TOKEN)
    yield url
    stop()


@pytest.fixture
def api(jp_fetch):
    """Call ``quota/v1/...`` and get ``(status, json)`` back, errors included."""

    async def call(method: str, *path: str, body=None, user: str | None = None, params=None):
        headers = {"X-Test-User": user} if user else {}
        # a bound for a hung server, not a pace: a replay or a capacity curve on a loaded CI
        # machine takes longer than tornado's default 20 s
        kwargs = {"method": method, "headers": headers, "raise_error": False, "request_timeout": 300}
        if body is not None:
            kwargs["body"] = body if isinstance(body, (str, bytes)) else json.dumps(body)
        elif method in ("POST", "PUT"):
            kwargs["body"] = ""
        if params:
            kwargs["params"] = params
        response = await jp_fetch("quota", "v1", *path, **kwargs)
        text = response.body.decode() if response.body else ""
        return response.code, (json.loads(text) if text else None)

    return call
