"""A real JupyterHub in a subprocess: the demo hub of binder/jupyterhub_config.py, on free ports.

configurable-http-proxy from node_modules (package.json), DummyAuthenticator, SimpleLocalProcessSpawner,
users ann (ml-alpha), bob (ml-beta), cat (both) and the hub admin ada, and the quota service
``jupyter quota serve`` as the hub-managed service ``jupyter-quota``. The tests add, in their own
``jupyter_server_config.py`` (first on ``JUPYTER_CONFIG_PATH``, so it overrides the demo's): the
fake trainer as the job command and a short ``HubOAuth.cache_max_age``; and a hub service
``test-driver`` whose token may manage users, groups, servers and tokens (never the quota service).

Every wait is on an answer (the hub's API, a server's readiness, the service's port) with a
deadline, never a bare sleep.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import requests

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
HUB_CONFIG = ROOT / "binder" / "jupyterhub_config.py"
CHP = ROOT / "node_modules" / ".bin" / "configurable-http-proxy"
FAKE_TRAINER = ROOT / "tests" / "fake_trainer.py"
USERS = ("ann", "bob", "cat", "ada")
SERVICE_PREFIX = "/services/jupyter-quota/"
DRIVER = "test-driver"
#: c.HubOAuth.cache_max_age of the service (and the servers) in the tests: how long a group change
#: on the hub may take to reach them
HUB_CACHE_SECONDS = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, check, timeout: float, log=lambda: "", interval: float = 0.1):
    """Poll ``check()`` until it returns something true; fail with ``what`` and the log at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            # the polls themselves are not news
            lines = [line for line in log().splitlines() if "200 GET /hub/api/users/" not in line]
            raise AssertionError(
                f"{what}: not within {timeout:.0f}s\n--- hub log (tail) ---\n" + "\n".join(lines[-60:])
            )
        time.sleep(interval)


class HubProcess:
    def __init__(self, root: Path, server_config: str = "", hub_config: str = ""):
        """``server_config`` goes into the tests' ``jupyter_server_config.py`` (the service and the
        servers), ``hub_config`` into ``jupyterhub_config.py`` after the demo's (another spawner, say)."""
        self.root = root
        self.run_dir = root / "run"
        self.conf_dir = root / "conf"
        self.port, self.service_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.service_url = f"http://127.0.0.1:{self.service_port}{SERVICE_PREFIX}"
        self.password = secrets.token_urlsafe(12)
        self.driver_token = secrets.token_hex(32)
        self.log_file = root / "hub.log"
        self.proc: subprocess.Popen | None = None
        self._tokens: dict[str, str] = {}
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        (self.conf_dir / "jupyter_server_config.py").write_text(
            "c = get_config()\n"
            f"c.JupyterQuota.job_command = [{sys.executable!r}, {str(FAKE_TRAINER)!r}]\n"
            "c.JupyterQuota.reap_interval = 0.1\n"
            "c.LabApp.expose_app_in_browser = True\n"  # window.jupyterapp, for the browser tests' waits
            f"c.HubOAuth.cache_max_age = {HUB_CACHE_SECONDS}\n" + server_config
        )
        self.config_file = root / "jupyterhub_config.py"
        self.config_file.write_text(
            "c = get_config()\n"
            f"load_subconfig({str(HUB_CONFIG)!r})\n"
            f"c.JupyterHub.services.append({{'name': {DRIVER!r}, 'api_token': {self.driver_token!r}}})\n"
            f"c.JupyterHub.load_roles.append({{'name': {DRIVER!r}, 'services': [{DRIVER!r}], 'scopes': "
            "['admin:users', 'admin:groups', 'admin:servers', 'tokens', 'read:roles']})\n" + hub_config
        )

    # -- the process ---------------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> HubProcess:
        if not CHP.exists():
            raise AssertionError(f"{CHP} is missing: run ./scripts/setup (npm ci installs configurable-http-proxy)")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        bin_dir = os.path.dirname(sys.executable)
        env = {
            **os.environ,
            "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "/usr/bin:/bin")]),
            # this checkout's jupyter_quota in the hub, the service and the servers
            "PYTHONPATH": os.pathsep.join(
                [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
            ),
            "JUPYTER_CONFIG_PATH": str(self.conf_dir),
            "JUPYTER_QUOTA_DEMO_PASSWORD": self.password,
            "JUPYTER_QUOTA_HUB_DIR": str(self.run_dir),
            "JUPYTER_QUOTA_HUB_PORT": str(self.port),
            "JUPYTER_QUOTA_SERVICE_PORT": str(self.service_port),
        }
        log = open(self.log_file, "ab")  # noqa: SIM115 - the hub process writes it as long as it runs
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterhub", "-f", str(self.config_file)],
            cwd=self.run_dir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

        def hub_up():
            if self.proc.poll() is not None:
                raise AssertionError(f"jupyterhub exited with {self.proc.returncode}:\n{self.log()[-6000:]}")
            try:
                return self.api("GET", "/").status_code == 200
            except requests.ConnectionError:
                return False

        wait_for("the hub's API (GET /hub/api/)", hub_up, timeout, self.log)
        # the hub does not wait for its managed services; the quota service answers once it listens
        wait_for("the quota service", lambda: hub_up() and self._answers(self.service_url), timeout, self.log)
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM: the hub stops the servers (cleanup_servers), the proxy and its services."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    # -- the hub's API, as the test driver -----------------------------------------------------

    def api(self, method: str, path: str, token: str | None = None, **kwargs) -> requests.Response:
        headers = {"Authorization": f"token {token or self.driver_token}", **kwargs.pop("headers", {})}
        return requests.request(method, f"{self.url}/hub/api{path}", headers=headers, timeout=60, **kwargs)

    def token(self, user: str) -> str:
        """An API token of ``user`` with all the user's scopes (as `jupyterhub token`, or the token page)."""
        if user not in self._tokens:
            r = self.api("POST", f"/users/{user}/tokens", json={"note": "tests/hub", "expires_in": 3600})
            assert r.status_code == 201, r.text
            self._tokens[user] = r.json()["token"]
        return self._tokens[user]

    def server_ready(self, user: str) -> bool:
        model = self.api("GET", f"/users/{user}").json()
        server = (model.get("servers") or {}).get("")
        return bool(server and server.get("ready")) and self._answers(
            f"{self.url}/user/{user}/api/status", token=self.token(user)
        )

    def start_servers(self, users=USERS, timeout: float = 180.0) -> None:
        """Start the users' servers at once: the hub's POST blocks up to 10 s each, so one thread each."""
        users = [u for u in users if not self.server_ready(u)]
        answers: dict[str, int] = {}

        def spawn(user):
            answers[user] = self.api("POST", f"/users/{user}/server").status_code

        threads = [threading.Thread(target=spawn, args=(u,)) for u in users]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout)
        assert all(code in (201, 202, 400) for code in answers.values()), answers  # 400: already running
        for user in users:
            wait_for(f"{user}'s server", lambda u=user: self.server_ready(u), timeout, self.log, 0.5)

    def stop_server(self, user: str, timeout: float = 60.0) -> None:
        r = self.api("DELETE", f"/users/{user}/server")
        assert r.status_code in (202, 204), r.text
        wait_for(
            f"{user}'s server to stop",
            lambda: not self.api("GET", f"/users/{user}").json().get("servers"),
            timeout,
            self.log,
        )

    def quota(self, user: str, method: str, path: str, body=None, via: str = "server") -> requests.Response:
        """``user`` calls ``quota/v1{path}`` with their token, through their server (``via="server"``)
        or at the quota service through the hub's proxy (``via="service"``)."""
        base = f"{self.url}/user/{user}/" if via == "server" else f"{self.url}{SERVICE_PREFIX}"
        return requests.request(
            method,
            f"{base}quota/v1{path}",
            timeout=60,
            headers={"Authorization": f"token {self.token(user)}"},
            data=None if body is None else json.dumps(body),
        )

    # -- a browser's session -------------------------------------------------------------------

    def browser(self, user: str, page: str | None = None) -> requests.Session:
        """A cookie session of ``user``: the hub's login form, then the OAuth dance of ``page``.

        ``page`` defaults to the user's JupyterLab; an API URL would answer 403, not a login redirect
        (research/hub.md §1), so the dance needs a page.
        """
        s = requests.Session()
        s.get(f"{self.url}/hub/login", timeout=60).raise_for_status()
        r = s.post(
            f"{self.url}/hub/login",
            timeout=60,
            allow_redirects=False,
            data={"username": user, "password": self.password, "_xsrf": s.cookies.get("_xsrf", "")},
        )
        assert r.status_code == 302, f"login of {user}: {r.status_code} {r.text[:300]}"
        self.visit(s, page or f"/user/{user}/lab")
        return s

    def visit(self, s: requests.Session, page: str) -> requests.Response:
        r = s.get(self.url + page, timeout=60)
        assert r.status_code == 200 and urlparse(r.url).path == page, f"{page}: {r.status_code} at {r.url}"
        return r

    @staticmethod
    def xsrf(s: requests.Session, url: str) -> dict:
        """The header that makes a cookie-authenticated write pass XSRF: the ``_xsrf`` cookie of the URL's path."""
        path = urlparse(url).path
        cookies = [c for c in s.cookies if c.name == "_xsrf" and path.startswith(c.path or "/")]
        cookies.sort(key=lambda c: len(c.path or ""), reverse=True)
        return {"X-XSRFToken": cookies[0].value} if cookies else {}

    @staticmethod
    def _answers(url: str, token: str | None = None) -> bool:
        try:
            headers = {"Authorization": f"token {token}"} if token else {}
            r = requests.get(url, headers=headers, timeout=10, allow_redirects=False)
            return r.status_code < 500 if token is None else r.status_code == 200
        except requests.ConnectionError:
            return False
