"""Helpers for the sidebar's browser tests: open the panel, call the REST API from the page.

Selectors follow galata's sidebar helpers: a left tab is ``.jp-SideBar .lm-TabBar-tab[data-id]``
and the open panel is the visible child of ``#jp-left-stack``.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from fractions import Fraction

import pytest

from jupyter_quota.quantity import parse_quantity

SIDEBAR_ID = "jupyter-quota-sidebar"
ADMIN_ID = "jupyter-quota-admin"
NAMESPACE = "team-alpha"
#: the sidebar's push, ``GET quota/v1/events`` (``src/events.ts``)
EVENTS = re.compile(r".*/quota/v1/events(\?.*)?$")

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextlib.contextmanager
def chromium():
    """Debian's Chromium under Playwright; fails (not skips) when it is not installed.

    Playwright's own browser download is never used (``executable_path``).
    """
    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail(
            "chromium is not on PATH: the UI tests need Debian's chromium package. "
            "Run scripts/install-chromium.sh (or deselect them with -m 'not ui').",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def open_sidebar(page):
    """Open the quota panel (unless the restored layout already shows it); return its locator."""
    return _open_panel(page, SIDEBAR_ID)


def open_admin_view(page):
    """Open the admin panel; its tab appears once the first poll has read the identity."""
    return _open_panel(page, ADMIN_ID, tab_timeout=60_000)


def _open_panel(page, panel_id: str, tab_timeout: float | None = None):
    page.locator(f".jp-SideBar .lm-TabBar-tab[data-id='{panel_id}']").wait_for(state="visible", timeout=tab_timeout)
    # After a reload the layout restorer may open the panel a moment later, and a click on the
    # current tab collapses the sidebar: wait for the restore, then activate (never toggles).
    page.evaluate("() => window.jupyterapp.restored")
    page.evaluate(f"() => window.jupyterapp.shell.activateById('{panel_id}')")
    panel = page.locator(f"#{panel_id}")
    panel.wait_for(state="visible")
    return panel


def reload_lab(page) -> None:
    """Reload the page and wait until JupyterLab has started and restored its layout."""
    page.reload()
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.started")
    page.evaluate("() => window.jupyterapp.restored")


def api(page, method: str, path: str, body=None) -> dict:
    """Call ``quota/v1/<path>`` from the page, as the frontend would (XSRF header included)."""
    return server_request(page, method, "quota/v1/" + path, body)


def server_request(page, method: str, path: str, body=None) -> dict:
    """Call the server's ``<base_url><path>`` from the page, XSRF header included."""
    return page.evaluate(
        """async ([method, path, body]) => {
            const xsrf = (document.cookie.match(/(?:^|; )_xsrf=([^;]*)/) || [])[1];
            const headers = {'Content-Type': 'application/json'};
            if (xsrf) { headers['X-XSRFToken'] = decodeURIComponent(xsrf); }
            const base = JSON.parse(document.getElementById('jupyter-config-data').textContent).baseUrl;
            const response = await fetch(base + path, {
                method, headers, credentials: 'same-origin',
                body: body === null ? undefined : JSON.stringify(body)});
            const text = await response.text();
            let json = null; try { json = JSON.parse(text); } catch (e) {}
            return {status: response.status, body: json};
        }""",
        [method, path, body],
    )


def cancel_live_jobs(page, namespace: str = NAMESPACE) -> None:
    """Cancel every pending or running job of ``namespace`` so the next test starts clean."""
    jobs = api(page, "GET", f"namespaces/{namespace}/jobs")["body"]["jobs"]
    for job in jobs:
        if job["phase"] in ("Pending", "Running"):
            api(page, "DELETE", f"namespaces/{namespace}/jobs/{job['name']}")


def left_text(key: str, balance: dict) -> str:
    """The text the sidebar must show for one quota key, computed from the API's strings."""
    hard = parse_quantity(balance["hard"]).as_fraction()
    remaining = parse_quantity(balance["remaining"]).as_fraction()
    if "memory" in key or "storage" in key:
        return f"{_bytes(remaining)} of {_bytes(hard)} left"
    if key.endswith("/gpu"):
        return f"{_num(remaining)} of {_num(hard)} {'GPU' if hard == 1 else 'GPUs'} left"
    if key.endswith("cpu") or key == "cpu":
        return f"{_num(remaining)} of {_num(hard)} {'CPU' if hard <= 1 else 'CPUs'} left"
    return f"{_num(remaining)} of {_num(hard)}"


def _bytes(value: Fraction) -> str:
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    unit = 0
    while value >= 1024 and unit < len(units) - 1:
        value /= 1024
        unit += 1
    return f"{_num(value, 1)} {units[unit]}"


def _num(value: Fraction, digits: int = 3) -> str:
    return f"{float(value):.{digits}f}".rstrip("0").rstrip(".")


def block_push(page) -> None:
    """Refuse the sidebar's push, as a proxy that cannot hold a stream would: it polls instead.
    Undo with ``page.unroute(EVENTS)``."""
    page.route(EVENTS, lambda route: route.abort())
