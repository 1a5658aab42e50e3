"""The browser side of the hub tier: a user's JupyterLab reached through the hub, in Chromium.

One browser for a module, one context per user (each with its own hub and server cookies). A
user logs in at ``/hub/login`` with the demo password, then opens ``/user/<name>/lab``, which
runs the OAuth dance with their server (research/hub.md §1). Sidebar helpers come from
tests/ui/quota_ui.py, as in the single-server browser tests.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "ui"))

from quota_ui import api, chromium, open_admin_view, open_sidebar  # noqa: E402,F401 (for the hub tests)

APP_START_TIMEOUT_MS = 120_000
GPU = "requests.nvidia.com/gpu"


def poll_interval_seconds() -> float:
    """The sidebar's poll interval in effect: the model's default (src/model.ts), which the
    settings schema's default (schema/plugin.json, in seconds) must equal."""
    source = (ROOT / "src" / "model.ts").read_text()
    match = re.search(r"const DEFAULT_INTERVAL = (\d+) \* 1000;", source)
    assert match, "src/model.ts no longer defines DEFAULT_INTERVAL = N * 1000"
    schema = json.loads((ROOT / "schema" / "plugin.json").read_text())
    setting = schema["properties"]["refreshInterval"]["default"]
    assert setting == int(match.group(1)), (setting, match.group(1))
    return float(setting)


def lab_page(browser, hub, user: str, height: int = 900, on_request=None):
    """A new context of ``user``, logged in through the hub's form, on their started JupyterLab.

    ``on_request`` is called with every request the page finished, from the login on.
    """
    context = browser.new_context(viewport={"width": 1280, "height": height})
    page = context.new_page()
    page.set_default_timeout(60_000)
    if on_request is not None:
        page.on("requestfinished", on_request)
    page.goto(f"{hub.url}/hub/login")
    page.locator("input[name='username']").fill(user)
    page.locator("input[name='password']").fill(hub.password)
    with page.expect_response(lambda r: r.request.method == "POST" and "/hub/login" in r.url) as login:
        page.locator("#login_submit").click()
    assert login.value.status == 302, f"login of {user}: {login.value.status}"
    page.goto(f"{hub.url}/user/{user}/lab")
    assert re.search(rf"/user/{user}/lab", page.url), page.url
    page.wait_for_function("() => !!window.jupyterapp", timeout=APP_START_TIMEOUT_MS)
    page.evaluate("async () => { await window.jupyterapp.started; }")
    page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=APP_START_TIMEOUT_MS)
    return page


def gpu_bar(panel, namespace: str):
    """The GPU bar of ``namespace`` in the open sidebar (its ``data-*`` are the API's strings)."""
    section = panel.locator(f"section.jp-QuotaSidebar-namespace[data-namespace='{namespace}']")
    return section.locator(f".jp-QuotaBar[data-key='{GPU}']")


class Rest:
    """``quota/v1`` through ``user``'s own server with their hub token (as a kernel or the CLI calls it)."""

    def __init__(self, hub, user: str):
        self.base = f"{hub.url}/user/{user}/quota/v1/"
        self.headers = {"Authorization": f"token {hub.token(user)}"}

    def __call__(self, method: str, path: str, body=None) -> requests.Response:
        return requests.request(method, self.base + path, headers=self.headers, json=body, timeout=60)


def server_model(hub, user: str) -> dict:
    """What tells one run of ``user``'s server from the next: its start time and process id."""
    server = hub.api("GET", f"/users/{user}").json()["servers"][""]
    model = {"started": server["started"], "pid": server["state"]["pid"]}  # state: the driver's admin:servers
    assert model["started"] and isinstance(model["pid"], int), server
    return model
