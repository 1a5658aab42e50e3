"""A stalled job in a real JupyterLab: the sidebar's job list and the admin view flag it, and the
metrics count it. The server's stall limit is 3 seconds (``stalled_job_minutes = 0.05``), so a
job that prints ``ready`` and then waits in silence is a stalled job of its own accord.
Screenshots: ``stalled-job-sidebar.png``, ``stalled-job-admin.png``."""

from __future__ import annotations

import pytest
from quota_ui import NAMESPACE, api, cancel_live_jobs, open_admin_view, open_sidebar, server_request

pytestmark = pytest.mark.ui


def test_a_stalled_job_is_flagged_in_the_sidebar_the_admin_view_and_the_metrics(
    stalling_lab_page, ui_output_dir, tmp_path
):
    release = tmp_path / "release"
    page = stalling_lab_page.page
    submitted = api(page, "POST", f"namespaces/{NAMESPACE}/jobs", {"args": ["--until-file", str(release)], "gpus": 1})
    assert submitted["status"] == 201, submitted
    name = submitted["body"]["name"]
    try:
        sidebar = open_sidebar(page)
        item = sidebar.locator(f"li.jp-QuotaJob[data-job='{name}'][data-stalled='NoLogProgress']")
        item.wait_for(timeout=60_000)  # a poll (10 s) after the 3 s of silence
        assert item.locator(".jp-QuotaJob-stalledFlag").inner_text() == "Stalled"
        assert "Stalled since" in item.locator(".jp-QuotaJob-stalled").inner_text()
        item.scroll_into_view_if_needed()
        sidebar.screenshot(path=ui_output_dir / "stalled-job-sidebar.png")

        panel = open_admin_view(page)
        flagged = panel.locator(f".jp-QuotaAdmin-stalled li[data-job='{name}'][data-namespace='{NAMESPACE}']")
        flagged.wait_for(timeout=60_000)
        assert "no log output" in flagged.inner_text()
        flagged.scroll_into_view_if_needed()
        panel.screenshot(path=ui_output_dir / "stalled-job-admin.png")

        metrics = page.evaluate(
            """async () => {
                const base = JSON.parse(document.getElementById('jupyter-config-data').textContent).baseUrl;
                return await (await fetch(base + 'quota/v1/metrics')).text();
            }"""
        )
        line = 'jupyter_quota_stalled_jobs{namespace="team-alpha",reason="NoLogProgress",team="alpha"} 1.0'
        assert line in metrics.splitlines(), [x for x in metrics.splitlines() if "stalled" in x]
    finally:
        release.touch()
        cancel_live_jobs(page)
        assert server_request(page, "GET", "api/status")["status"] == 200
