"""The quota admin view in a real JupyterLab (embedded mode, local backend, the demo teams).

The admin server's user is a quota admin through ``JupyterQuota.admin_users`` (fixture
``admin_lab_server``, its own state directory); the other server's user is not. Screenshots:
``admin-view.png``, ``admin-view-refused.png``.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from quota_ui import ADMIN_ID, api, left_text, open_admin_view, open_sidebar, reload_lab, server_request

pytestmark = pytest.mark.ui

TEAM = "beta"
NAMESPACE = "team-beta"
GPU = "requests.nvidia.com/gpu"
#: The sidebar's poll interval in seconds (``DEFAULT_INTERVAL`` in src/model.ts, and the
#: ``refreshInterval`` setting's default in schema/plugin.json).
POLL_INTERVAL_S = 10
#: What a loaded machine may add to one poll interval: the request, the balance, the redraw.
SLACK_S = 20
#: The admin page's poll interval during the edit: far longer than the test waits, so only the
#: read that a save triggers can bring the new balance to that page.
SLOW_POLL_S = 3600


def put_settings(page, raw: dict) -> None:
    """Store the extension's user settings on the server (read by pages loaded afterwards)."""
    answer = server_request(page, "PUT", "lab/api/settings/jupyter-quota:plugin", {"raw": json.dumps(raw)})
    assert answer["status"] == 204, answer


def test_admin_edits_a_gpu_quota_and_sees_the_api_message(admin_lab_page, admin_viewer_page, ui_output_dir):
    page = admin_lab_page.page
    assert api(page, "GET", "identity")["body"]["admin"] is True
    original = api(page, "GET", f"profiles/{TEAM}")["body"]
    old_hard = original["hard"][GPU]
    new_hard = str(int(old_hard) + 1)

    # Another sidebar, open before the edit: it must show the new limit by polling alone.
    viewer = admin_viewer_page.page
    viewer_bar = open_sidebar(viewer).locator(f"section[data-namespace='{NAMESPACE}'] .jp-QuotaBar[data-key='{GPU}']")
    viewer_bar.wait_for()
    assert viewer_bar.get_attribute("data-hard") == old_hard

    # The viewer has read its settings (the default interval); the admin page reads the slow one.
    put_settings(page, {"refreshInterval": SLOW_POLL_S})
    try:
        reload_lab(page)
        panel = open_admin_view(page)
        # The tab names itself beside its icon.
        tab = page.locator(f".jp-SideBar .lm-TabBar-tab[data-id='{ADMIN_ID}']")
        assert tab.locator(".lm-TabBar-tabLabel").inner_text() == "Quota admin"
        row = panel.locator(f"table[data-namespace='{NAMESPACE}'] tr[data-key='{GPU}']")
        row.wait_for()
        assert row.get_attribute("data-hard") == old_hard
        assert panel.locator("table.jp-QuotaAdmin-balance").count() == len(
            api(page, "GET", "profiles")["body"]["profiles"]
        )
        # A read now cancels the tick the page scheduled before it applied the slow interval.
        with page.expect_response(re.compile(r".*/quota/v1/namespaces(\?.*)?$")):
            panel.get_by_role("button", name="Refresh all balances").click()

        form = panel.get_by_role("form", name="Edit a team profile")
        form.get_by_label("Team", exact=True).select_option(TEAM)
        gpu = form.get_by_label(GPU)
        assert gpu.input_value() == old_hard
        gpu.fill(new_hard)
        form.get_by_role("button", name="Save").click()
        form.get_by_role("status").filter(has_text=f"Saved team {TEAM}.").wait_for()
        saved_at = time.monotonic()

        # The admin's own balances are read again on save (its poll is an hour away).
        page.wait_for_function(
            "([ns, key, hard]) => document.querySelector("
            "`#jupyter-quota-admin table[data-namespace='${ns}'] tr[data-key='${key}']`)?.dataset.hard === hard",
            arg=[NAMESPACE, GPU, new_hard],
            timeout=(POLL_INTERVAL_S + SLACK_S) * 1000,
        )
        balance = api(page, "GET", f"namespaces/{NAMESPACE}/balance")["body"]["resources"][GPU]
        assert balance["hard"] == new_hard
        assert row.get_attribute("data-remaining") == balance["remaining"]
        assert api(page, "GET", f"profiles/{TEAM}")["body"]["hard"][GPU] == new_hard
        panel.screenshot(path=ui_output_dir / "admin-view.png")

        # The other sidebar shows it within one poll interval, with no reload.
        viewer.wait_for_function(
            "([ns, key, hard]) => document.querySelector("
            "`section[data-namespace='${ns}'] .jp-QuotaBar[data-key='${key}']`)?.dataset.hard === hard",
            arg=[NAMESPACE, GPU, new_hard],
            timeout=(POLL_INTERVAL_S + SLACK_S) * 1000,
        )
        print(
            f"the other sidebar showed the new hard limit {time.monotonic() - saved_at:.1f} s after the save "
            f"(poll interval {POLL_INTERVAL_S} s)"
        )
        assert viewer_bar.locator(".jp-QuotaBar-text").inner_text() == left_text(GPU, balance)

        # A value the API refuses: its message beside the form, the edit kept, nothing stored.
        gpu.fill("two")
        form.get_by_role("button", name="Save").click()
        alert = form.get_by_role("alert")
        alert.wait_for()
        body = api(page, "GET", f"profiles/{TEAM}")["body"]
        refusal = api(page, "PUT", f"profiles/{TEAM}", {**body, "hard": {**body["hard"], GPU: "two"}})
        assert refusal["status"] == 400, refusal
        assert alert.inner_text() == refusal["body"]["message"]
        assert f"spec.hard[{GPU}]" in alert.inner_text()
        assert gpu.input_value() == "two"
        assert gpu.get_attribute("aria-invalid") == "true"
        assert api(page, "GET", f"profiles/{TEAM}")["body"]["hard"][GPU] == new_hard
        alert.scroll_into_view_if_needed()
        panel.screenshot(path=ui_output_dir / "admin-view-refused.png")
    finally:
        put_settings(page, {})
        assert api(page, "PUT", f"profiles/{TEAM}", original)["status"] == 200


def test_a_non_admin_gets_no_admin_view(lab_page):
    page = lab_page.page
    open_sidebar(page).get_by_role("meter").first.wait_for()  # the first poll has read the identity
    assert api(page, "GET", "identity")["body"]["admin"] is False
    assert page.locator(f".jp-SideBar .lm-TabBar-tab[data-id='{ADMIN_ID}']").count() == 0
    assert page.locator(f"#{ADMIN_ID}").count() == 0
    assert page.evaluate("() => window.jupyterapp.commands.isVisible('jupyter-quota:open-admin')") is False
    refusal = api(page, "GET", "profiles")
    assert refusal["status"] == 403 and "not a quota admin" in refusal["body"]["message"]
