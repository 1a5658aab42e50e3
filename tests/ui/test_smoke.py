"""Smoke tests of the labextension in a real JupyterLab and a real Chromium.

The first test needs only the built, installed labextension; the second needs the REST API
and the demo config (``binder/jupyter_server_config.py``), where the server user is in team
alpha.
"""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.ui

ACTIVATED = "JupyterLab extension jupyter-quota is activated!"
SHOW_BALANCE = "jupyter-quota:show-balance"
VISIBLE = re.compile(r"^jupyter-quota: \d+ namespace\(s\) visible$")
NEWS_PLUGIN = "@jupyterlab/apputils-extension:announcements"
NEWS_QUESTION = "Would you like to get notified about official Jupyter news?"


def test_lab_loads_the_extension_once(lab_page, ui_output_dir):
    page = lab_page.page
    extensions = page.evaluate(
        """() => JSON.parse(document.getElementById('jupyter-config-data').textContent)
                 .federated_extensions.map(e => e.name)"""
    )
    assert "jupyter-quota" in extensions, (
        "the jupyter-quota labextension is not installed in this environment "
        "(run `npm run build` and `pip install -e .`); loaded: " + ", ".join(extensions)
    )

    lab_page.wait_for_console(lambda message: message == ACTIVATED)
    page.screenshot(path=ui_output_dir / "lab.png")

    assert lab_page.console_count(ACTIVATED) == 1, lab_page.console
    assert not lab_page.errors, lab_page.errors


def test_show_balance_lists_the_team_namespace(lab_page, ui_output_dir):
    page = lab_page.page
    startup = lab_page.wait_for_console(lambda message: message.startswith("jupyter-quota: "))
    assert startup, f"no 'jupyter-quota: ...' line from activation; console: {lab_page.console}"

    # execute() resolves only when the dialog closes, so do not await it.
    page.evaluate(f"() => {{ void window.jupyterapp.commands.execute({SHOW_BALANCE!r}); }}")
    dialog = page.get_by_role("dialog").filter(has_text="Team Quota Balance")
    dialog.wait_for(state="visible")
    dialog.locator(".jp-Quota-balance").wait_for(state="visible")
    dialog.locator(".jp-Dialog-content").screenshot(path=ui_output_dir / "show-balance-dialog.png")

    text = dialog.inner_text()
    assert VISIBLE.match(startup[0]), startup
    assert "team-alpha" in text, text

    dialog.get_by_role("button", name="Close").click()
    dialog.wait_for(state="detached")


def test_the_demo_opens_without_the_news_question(lab_page, ui_output_dir):
    """No user settings answer it here (``conftest.py`` writes none): the demo config must."""
    page = lab_page.page
    page.evaluate("async () => { await window.jupyterapp.restored; }")
    lab_page.wait_for_console(lambda message: message == ACTIVATED)

    assert page.evaluate(f"() => window.jupyterapp.isPluginActivated({NEWS_PLUGIN!r})") is False
    assert page.get_by_text(NEWS_QUESTION).count() == 0
    page.screenshot(path=ui_output_dir / "lab-no-news.png")
