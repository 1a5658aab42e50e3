"""Fixtures for the browser tests: a real ``jupyter lab`` and Debian's headless Chromium.

The server is the virtualenv's JupyterLab, started as a subprocess on a free loopback port with
a generated config file (no token, the app exposed as ``window.jupyterapp``) that first loads
the demo config ``binder/jupyter_server_config.py`` when it exists. Chromium is the
system binary (``scripts/install-chromium.sh``), launched through Playwright's
``executable_path``; Playwright's own browser download is never used.

Artifacts (screenshots, the server log) go to ``$JUPYTER_QUOTA_TEST_OUTPUT/ui``, by default
``test-output/ui`` at the repository root.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from quota_ui import chromium

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_CONFIG = REPO_ROOT / "binder" / "jupyter_server_config.py"
#: Jobs run this stand-in for ``swift sft`` (``--sleep S`` keeps one running).
FAKE_TRAINER = REPO_ROOT / "tests" / "fake_trainer.py"

#: Seconds to wait for the server to answer ``/api/status``, and for the page to start.
SERVER_START_TIMEOUT = 90
APP_START_TIMEOUT_MS = 90_000


@dataclasses.dataclass
class LabServer:
    """A running ``jupyter lab``: its URL (ending in ``/``), process and log file."""

    url: str
    process: subprocess.Popen
    log_path: Path

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


@dataclasses.dataclass
class LabPage:
    """A Playwright page on ``/lab`` with every console message and page error it produced."""

    page: object  # playwright.sync_api.Page
    console: list[str]
    errors: list[str]

    def console_count(self, text: str) -> int:
        return sum(1 for message in self.console if message == text)

    def wait_for_console(self, predicate, timeout: float = 10.0) -> list[str]:
        """Console messages matching ``predicate``, waiting up to ``timeout`` s for the first.

        Console events reach Python asynchronously; ``wait_for_timeout`` lets them arrive.
        """
        deadline = time.monotonic() + timeout
        while True:
            found = [message for message in self.console if predicate(message)]
            if found or time.monotonic() > deadline:
                return found
            self.page.wait_for_timeout(100)


@pytest.fixture(autouse=True)
def jp_asyncio_loop():
    """Turn off pytest-jupyter's autouse loop fixture for the browser tests.

    Playwright's sync API runs its own asyncio loop in this thread; that fixture would pick
    the loop up as "the" loop and fail closing it while it runs. These tests need no loop.
    """
    return None


@pytest.fixture(autouse=True)
def jp_server_cleanup():
    """Turn off pytest-jupyter's autouse cleanup: the server here is a subprocess."""


@pytest.fixture(scope="session")
def ui_output_dir() -> Path:
    """Where screenshots and logs go: ``$JUPYTER_QUOTA_TEST_OUTPUT/ui``."""
    base = Path(os.environ.get("JUPYTER_QUOTA_TEST_OUTPUT", REPO_ROOT / "test-output"))
    path = base / "ui"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory, ui_output_dir) -> Iterator[LabServer]:
    """Start ``jupyter lab`` on a free port, wait until it answers, stop it afterwards."""
    with _running_lab(tmp_path_factory.mktemp("lab"), ui_output_dir / "jupyter-lab.log") as server:
        yield server


@pytest.fixture(scope="module")
def admin_lab_server(tmp_path_factory, ui_output_dir) -> Iterator[LabServer]:
    """A ``jupyter lab`` of its own (own state directory) whose user is a quota admin
    (``JupyterQuota.admin_users``), so an admin's profile edits reach no other test."""
    extra = ["import getpass", "c.JupyterQuota.admin_users = [getpass.getuser()]"]
    with _running_lab(tmp_path_factory.mktemp("adminlab"), ui_output_dir / "jupyter-lab-admin.log", extra) as server:
        yield server


@pytest.fixture(scope="module")
def shared_state_labs(tmp_path_factory, ui_output_dir) -> Iterator[tuple[LabServer, LabServer]]:
    """Two ``jupyter lab`` servers on one quota state directory (as embedded servers on one
    machine share their ledger): a member's (the OS user, team alpha) and an admin's (user
    ``quota-admin``, in ``JupyterQuota.admin_users``), so one may ask and the other decide."""
    state = tmp_path_factory.mktemp("shared-state")
    shared = [f"c.JupyterQuota.state_dir = {str(state)!r}"]
    admin = [*shared, "c.JupyterQuota.owner = 'quota-admin'", "c.JupyterQuota.admin_users = ['quota-admin']"]
    with (
        _running_lab(tmp_path_factory.mktemp("memberlab"), ui_output_dir / "jupyter-lab-member.log", shared) as member,
        _running_lab(
            tmp_path_factory.mktemp("deciderlab"), ui_output_dir / "jupyter-lab-decider.log", admin
        ) as decider,
    ):
        yield member, decider


@pytest.fixture
def member_and_admin_pages(shared_state_labs, chromium_browser) -> Iterator[tuple[LabPage, LabPage]]:
    """A page on each of ``shared_state_labs``: the member's and the admin's."""
    member_server, admin_server = shared_state_labs
    with (
        open_lab_page(chromium_browser, member_server) as member,
        open_lab_page(chromium_browser, admin_server) as admin,
    ):
        yield member, admin


@contextlib.contextmanager
def _running_lab(home: Path, log_path: Path, extra_config: Sequence[str] = ()) -> Iterator[LabServer]:
    root_dir = home / "root"
    root_dir.mkdir()
    port = _free_port()
    config_path = home / "jupyter_server_test_config.py"
    config_path.write_text(_server_config(port, root_dir, home / "workspaces", extra_config))

    env = dict(os.environ)
    env.update(
        {
            # Keep the user's own config and settings out of the test.
            "JUPYTER_CONFIG_DIR": str(home / "config"),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
            # The demo config keeps its job ledger here instead of inside the checkout.
            "JUPYTER_QUOTA_STATE_DIR": str(home / "state"),
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        }
    )
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", f"--config={config_path}"],
            cwd=root_dir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = LabServer(url=f"http://127.0.0.1:{port}/", process=process, log_path=log_path)
    try:
        _wait_for_status(server)
        yield server
    finally:
        _stop(process)


@pytest.fixture(scope="module")
def chromium_browser():
    """Debian's Chromium under Playwright; fails (not skips) when it is not installed.

    Module scope: while Playwright's sync API is open its asyncio loop stays current in this
    thread, which would confuse the async tests of other modules that run afterwards.
    """
    with chromium() as browser:
        yield browser


@pytest.fixture
def lab_page(lab_server, chromium_browser) -> Iterator[LabPage]:
    """A fresh browser context on ``/lab``, once the app has started and the splash is gone."""
    with open_lab_page(chromium_browser, lab_server) as lab:
        yield lab


@pytest.fixture
def admin_lab_page(admin_lab_server, chromium_browser) -> Iterator[LabPage]:
    """As ``lab_page``, on the server whose user is a quota admin."""
    with open_lab_page(chromium_browser, admin_lab_server) as lab:
        yield lab


@pytest.fixture
def admin_viewer_page(admin_lab_server, chromium_browser) -> Iterator[LabPage]:
    """A second page on the admin server, in a browser context of its own: a sidebar that
    was open before an edit made in another page."""
    with open_lab_page(chromium_browser, admin_lab_server) as lab:
        yield lab


@contextlib.contextmanager
def open_lab_page(browser, server: LabServer) -> Iterator[LabPage]:
    """A browser context of its own on ``server``'s ``/lab``, once the app has started."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(30_000)
    lab = LabPage(page=page, console=[], errors=[])
    page.on("console", lambda message: lab.console.append(message.text))
    page.on("pageerror", lambda error: lab.errors.append(str(error)))
    try:
        page.goto(server.url + "lab")
        page.wait_for_function("() => !!window.jupyterapp", timeout=APP_START_TIMEOUT_MS)
        page.evaluate("async () => { await window.jupyterapp.started; }")
        page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=APP_START_TIMEOUT_MS)
        yield lab
    finally:
        context.close()


def _server_config(port: int, root_dir: Path, workspaces_dir: Path, extra: Sequence[str] = ()) -> str:
    """The generated server config: the demo config first, then the test's own settings."""
    lines = ["# Generated by tests/ui/conftest.py"]
    if DEMO_CONFIG.exists():
        lines.append(f"load_subconfig({str(DEMO_CONFIG)!r})")
    lines += [
        "c.ServerApp.ip = '127.0.0.1'",
        f"c.ServerApp.port = {port}",
        "c.ServerApp.port_retries = 0",
        "c.ServerApp.open_browser = False",
        "c.ServerApp.allow_root = True",
        f"c.ServerApp.root_dir = {str(root_dir)!r}",
        "c.ServerApp.jpserver_extensions.update({'jupyter_quota': True})",
        "c.IdentityProvider.token = ''",
        "c.ServerApp.password = ''",
        "c.LabApp.expose_app_in_browser = True",
        f"c.JupyterQuota.job_command = [{sys.executable!r}, {str(FAKE_TRAINER)!r}]",
        "c.LabApp.news_url = None",
        "c.LabApp.check_for_updates_class = 'jupyterlab.NeverCheckForUpdate'",
        f"c.LabApp.workspaces_dir = {str(workspaces_dir)!r}",
        *extra,
    ]
    return "\n".join(lines) + "\n"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_status(server: LabServer) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(
                f"jupyter lab exited with {server.process.returncode} before answering; "
                f"log {server.log_path}:\n{server.log_tail()}",
                pytrace=False,
            )
        try:
            with urllib.request.urlopen(server.url + "api/status", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.25)
    pytest.fail(
        f"jupyter lab did not answer /api/status within {SERVER_START_TIMEOUT} s; "
        f"log {server.log_path}:\n{server.log_tail()}",
        pytrace=False,
    )


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=15)
