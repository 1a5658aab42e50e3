"""Quota from history in a real JupyterLab (embedded mode, local backend, the demo teams).

The module's own server (an admin's, with prices) starts on a ledger seeded with a week of
finished jobs of the demo teams (``tests/usage_seed.py``) that ended a day before the test. The
admin view shows the recommendation table, the plot of demand against quota and, on request,
the capacity curve (``POST /replay``); **Apply** turns a row into ``PUT /profiles/{team}``, and
the stored profile and the audit log then say so. Screenshot: ``recommendations-admin.png``.
"""

from __future__ import annotations

import getpass
import time

import pytest
import usage_seed
from quota_testing import demo_config
from quota_ui import api, open_admin_view

from jupyter_quota.config import JupyterQuota
from jupyter_quota.profiles import TeamProfile

pytestmark = pytest.mark.ui

GPU = "requests.nvidia.com/gpu"
TEAM = "alpha"
PRICES = {"currency": "EUR", "gpuHour": 2.5}
#: The seeded week ends this long before the test starts (inside the 28 days a recommendation reads).
WEEK_ENDS_AGO = 20 * 3600


@pytest.fixture(scope="module")
def history_server(tmp_path_factory, start_lab):
    home = tmp_path_factory.mktemp("recommendlab")
    profiles = [TeamProfile(**raw) for raw in JupyterQuota(config=demo_config()).profiles]
    start = int(time.time()) - usage_seed.WEEK - WEEK_ENDS_AGO
    usage_seed.seed(home / "state", profiles, jobs=300, running=False, week_start=start)
    extra = [
        "import getpass",
        "c.JupyterQuota.admin_users = [getpass.getuser()]",
        f"c.JupyterQuota.prices = {PRICES!r}",
    ]
    with start_lab(home, "jupyter-lab-recommend.log", extra) as server:
        yield server


@pytest.fixture
def history_page(history_server, chromium_browser, open_page):
    with open_page(chromium_browser, history_server) as lab:
        yield lab


def test_the_admin_sees_the_table_the_plot_and_the_curve_and_applies_a_recommendation(history_page, ui_output_dir):
    page = history_page.page
    page.set_viewport_size({"width": 1600, "height": 1250})
    rows = api(page, "GET", "recommendations")["body"]["recommendations"]
    mine = next(r for r in rows if r["team"] == TEAM and r["resource"] == GPU)
    if mine["current"] == mine["recommended"]:
        # Make the row one that Apply changes: the quota one GPU off the recommendation.
        stored = api(page, "GET", f"profiles/{TEAM}")["body"]
        other = str(max(1, int(mine["recommended"]) - 1) if mine["recommended"] != "1" else 2)
        put = api(page, "PUT", f"profiles/{TEAM}", {**stored, "hard": {**stored["hard"], GPU: other}})
        assert put["status"] == 200, put
        mine = {**mine, "current": other}

    panel = open_admin_view(page)
    # A wide left area, so the table and the plot read as on an admin's screen (the split's
    # sizes are the shell's own; no public setter exists).
    page.evaluate("() => window.jupyterapp.shell._hsplitPanel?.setRelativeSizes([0.62, 0.38, 0])")
    section = panel.locator("section.jp-QuotaRecommend")
    section.scroll_into_view_if_needed()
    table = section.get_by_role("table", name="Recommended hard quotas")
    table.wait_for()
    shown = table.locator("tbody tr[data-team]")
    assert shown.count() == len(rows)
    row = table.locator(f"tr[data-team='{TEAM}'][data-resource='{GPU}']")
    assert row.get_attribute("data-current") == mine["current"]
    assert row.get_attribute("data-recommended") == mine["recommended"]
    assert mine["explanation"] in table.inner_text()
    plot = section.locator("figure.jp-QuotaRecommend-plot")
    plot.locator(".recharts-line").first.wait_for()
    assert int(plot.get_attribute("data-points")) == len(
        api(page, "GET", "recommendations?series=true")["body"]["recommendations"][0]["series"]["demand"]
    )

    capacity = panel.locator("section.jp-QuotaRecommend-capacity")
    capacity.get_by_role("button", name="Replay at several sizes").click()
    line = capacity.locator(".jp-QuotaRecommend-capacityLine")
    line.wait_for(timeout=60_000)
    capacity.locator(".recharts-line").first.wait_for()
    assert capacity.get_by_role("table", name="Capacity curve").locator("tbody tr").count() >= 2
    section.evaluate("e => e.scrollIntoView({block: 'start'})")  # the table, the plot and the curve
    page.mouse.move(1, 1)  # no tooltip left open over the charts
    page.screenshot(path=ui_output_dir / "recommendations-admin.png")
    section.screenshot(path=ui_output_dir / "recommendations-table-plot.png")
    capacity.screenshot(path=ui_output_dir / "recommendations-capacity.png")

    row.get_by_role("button", name=f"Apply {mine['recommended']} to {TEAM}'s {GPU}").click()
    section.get_by_role("status").filter(has_text=f"Applied: {TEAM}'s {GPU} is now {mine['recommended']}").wait_for()
    assert api(page, "GET", f"profiles/{TEAM}")["body"]["hard"][GPU] == mine["recommended"]
    # the table reads again: the row's quota now is the recommended one, and Apply is spent
    page.wait_for_function(
        "([team, key, value]) => document.querySelector("
        "`section.jp-QuotaRecommend tr[data-team='${team}'][data-resource='${key}']`)"
        "?.getAttribute('data-current') === value",
        arg=[TEAM, GPU, mine["recommended"]],
    )
    audit = api(page, "GET", "audit")["body"]["entries"]
    assert any(e["target"].endswith(TEAM) and e["who"] == getpass.getuser() for e in audit), audit[:3]
