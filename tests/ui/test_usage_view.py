"""The usage charts and the chargeback in a real JupyterLab (embedded mode, local backend).

The module's own server (an admin's, with prices) starts on a ledger seeded with a week of
finished jobs of the demo teams (``tests/usage_seed.py``) that ended a day before the test, some
of them the lab user's and some another alpha member's, so both "You" and "Others" have bars.
Each figure the page shows is checked against the REST API's own answer. Screenshots:
``usage-sidebar.png``, ``usage-sidebar-week-dark.png``, ``usage-chargeback.png``, ``usage-admin.png``;
the downloaded CSV as ``chargeback-YYYY-MM.csv``.
"""

from __future__ import annotations

import getpass
import json
import math
import time
from datetime import datetime, timezone

import pytest
import usage_seed
from quota_testing import demo_config
from quota_ui import NAMESPACE, api, open_admin_view, open_sidebar

from jupyter_quota.config import JupyterQuota
from jupyter_quota.profiles import TeamProfile

pytestmark = pytest.mark.ui

OTHER_USER = "carol"
PRICES = {"currency": "EUR", "gpuHour": 2.5, "cpuHour": 0.04, "memoryGibHour": 0.005}
HOUR = 3600
#: The seeded week ends this long before the test starts; jobs run at most 10 h, so every one
#: has finished and the sums over any window that ends now stay the same while the test runs.
WEEK_ENDS_AGO = 20 * HOUR


@pytest.fixture(scope="module")
def usage_server(tmp_path_factory, start_lab):
    home = tmp_path_factory.mktemp("usagelab")
    profiles = []
    for raw in JupyterQuota(config=demo_config()).profiles:
        profile = TeamProfile(**raw)
        if profile.team == "alpha":  # the lab user and a colleague share team-alpha
            profile = TeamProfile(**{**raw, "users": [getpass.getuser(), OTHER_USER]})
        profiles.append(profile)
    start = int(time.time()) - usage_seed.WEEK - WEEK_ENDS_AGO
    usage_seed.seed(home / "state", profiles, jobs=300, running=False, week_start=start)
    extra = [
        "import getpass",
        "c.JupyterQuota.admin_users = [getpass.getuser()]",
        f"c.JupyterQuota.prices = {PRICES!r}",
    ]
    with start_lab(home, "jupyter-lab-usage.log", extra) as server:
        yield server


@pytest.fixture
def usage_page(usage_server, chromium_browser, open_page):
    with open_page(chromium_browser, usage_server) as lab:
        yield lab


def rfc3339(epoch_ms: float) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def theme_color(page, variable: str) -> str:
    """The computed colour (``rgb(...)``) of a JupyterLab theme variable in the current theme."""
    return page.evaluate(
        """(variable) => {
            const probe = document.createElement('span');
            probe.style.color = `var(${variable})`;
            document.body.appendChild(probe);
            const color = getComputedStyle(probe).color;
            probe.remove();
            return color;
        }""",
        variable,
    )


def check_chart_against_api(page, chart, user: str, step: int) -> int:
    """The chart's figures equal the API's rows for the same buckets; returns the bars drawn."""
    rows = chart.locator("table.jp-QuotaUsage-table tbody tr")
    shown = [
        (
            row.get_attribute("data-start"),
            float(row.get_attribute("data-mine")),
            float(row.get_attribute("data-others")),
        )
        for row in rows.all()
    ]
    since = shown[0][0].replace(".000Z", "Z")
    query = f"usage?since={since}&until={rfc3339(time.time() * 1000)}&by=user&step={step}&namespace={NAMESPACE}"
    answer = api(page, "GET", query)
    assert answer["status"] == 200, answer
    expected: dict[str, list[float]] = {}
    for row in answer["body"]["rows"]:
        mine_others = expected.setdefault(row["start"], [0.0, 0.0])
        mine_others[0 if row["user"] == user else 1] += row["gpuSeconds"] / HOUR
    assert sum(m + o for m, o in expected.values()) > 0, "the seeded week left nothing in the window"
    for start, mine, others in shown:
        want = expected.pop(start.replace(".000Z", "Z"), [0.0, 0.0])
        assert math.isclose(mine, want[0], abs_tol=1e-6) and math.isclose(others, want[1], abs_tol=1e-6), start
    assert expected == {}, f"buckets the chart left out: {sorted(expected)}"

    mine = sum(m for _, m, _ in shown)
    total = sum(m + o for _, m, o in shown)
    share = chart.locator(".jp-QuotaUsage-share")
    assert math.isclose(float(share.get_attribute("data-mine")), mine, abs_tol=1e-6)
    assert math.isclose(float(share.get_attribute("data-total")), total, abs_tol=1e-6)
    assert share.inner_text().endswith(f"GPU-hours ({round(100 * mine / total)}%)")
    return chart.locator(".recharts-bar-rectangle").count()


def assert_distinct_value_ticks(chart):
    """The hours axis reads a different number at every tick (`<0.01` four times, before)."""
    # Recharts 3 draws the labels in a layer of their own, apart from the axis line.
    tick = chart.locator(".recharts-yAxis-tick-labels .recharts-cartesian-axis-tick-value")
    tick.first.wait_for()
    ticks = tick.all_text_contents()
    assert len(ticks) >= 3 and len(set(ticks)) == len(ticks), ticks


def test_usage_chart_and_the_chargeback_csv(usage_page, ui_output_dir, tmp_path):
    page = usage_page.page
    user = api(page, "GET", "identity")["body"]["name"]
    panel = open_sidebar(page)
    chart = panel.locator(f"section.jp-QuotaUsage[data-namespace='{NAMESPACE}']")

    # The last 24 hours, by the hour: 24 buckets and the hour in progress. A chart reads its
    # usage once it is on screen.
    chart.scroll_into_view_if_needed()
    chart.locator("table.jp-QuotaUsage-table").wait_for(state="attached")
    chart.locator(".recharts-bar-rectangle").first.wait_for()
    assert chart.locator("table.jp-QuotaUsage-table tbody tr").count() == 25
    assert check_chart_against_api(page, chart, user, HOUR) > 0
    assert_distinct_value_ticks(chart)
    chart.scroll_into_view_if_needed()
    panel.screenshot(path=ui_output_dir / "usage-sidebar.png")

    # The last 7 days, by 6 hours, in the dark theme.
    panel.get_by_role("group", name="Time range").get_by_role("button", name="7 days").click()
    page.locator(f"section.jp-QuotaUsage[data-namespace='{NAMESPACE}'][data-range='7d'][aria-busy='false']").wait_for()
    assert chart.locator("table.jp-QuotaUsage-table tbody tr").count() in (28, 29)
    assert check_chart_against_api(page, chart, user, 6 * HOUR) > 0
    assert_distinct_value_ticks(chart)
    try:
        page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
        page.wait_for_selector("body[data-jp-theme-light='false']", state="attached", timeout=30_000)
        # The axis labels take the theme's secondary text colour, not Recharts' fixed grey.
        tick = chart.locator(".recharts-cartesian-axis-tick-value").first
        assert tick.evaluate("e => getComputedStyle(e).fill") == theme_color(page, "--jp-ui-font-color2")
        chart.scroll_into_view_if_needed()
        panel.screenshot(path=ui_output_dir / "usage-sidebar-week-dark.png")
    finally:
        page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")
        page.wait_for_selector("body[data-jp-theme-light='true']", state="attached", timeout=30_000)

    # The admin's chargeback for the month most of the seeded week fell in, and its CSV.
    month = datetime.fromtimestamp(time.time() - 4 * 24 * HOUR, timezone.utc).strftime("%Y-%m")
    report = api(page, "GET", f"chargeback?month={month}")
    assert report["status"] == 200, report
    report = report["body"]
    admin = open_admin_view(page)
    admin.get_by_label("Month").scroll_into_view_if_needed()
    admin.get_by_label("Month").fill(month)
    table = admin.get_by_role("table", name=f"Chargeback for {month}")
    table.wait_for()
    for row in report["rows"]:
        line = table.locator(f"tbody tr[data-key='{row['namespace']}']")
        assert float(line.get_attribute("data-cost")) == row["cost"], row
        assert line.locator("td").first.inner_text() == f"{row['cost']:.2f}"  # cost first: a narrow panel shows it
    assert table.locator("tbody tr").count() == len(report["rows"]) > 0
    total = table.locator("tfoot tr")
    assert float(total.get_attribute("data-cost")) == report["totals"]["cost"]
    assert math.isclose(sum(r["cost"] for r in report["rows"]), report["totals"]["cost"], abs_tol=0.005)

    with page.expect_download() as download_info:
        admin.get_by_role("link", name="Download CSV").click()
    download = download_info.value
    assert download.suggested_filename == f"chargeback-{month}.csv"
    path = tmp_path / download.suggested_filename
    download.save_as(path)
    served = page.evaluate(
        """async (path) => {
            const base = JSON.parse(document.getElementById('jupyter-config-data').textContent).baseUrl;
            return await (await fetch(base + path, {credentials: 'same-origin'})).text();
        }""",
        f"quota/v1/chargeback?month={month}&format=csv",
    )
    csv_text = path.read_text()
    assert csv_text == served
    lines = csv_text.splitlines()
    assert lines[0].startswith("namespace,team,")
    assert lines[-1].startswith("total,")
    assert len(lines) == len(report["rows"]) + 2
    (ui_output_dir / f"chargeback-{month}.csv").write_text(csv_text)
    admin.get_by_role("heading", name="Chargeback").scroll_into_view_if_needed()
    admin.screenshot(path=ui_output_dir / "usage-chargeback.png")

    # The admin's usage by team and top holders: the API's figures for the same window.
    admin.get_by_role("heading", name="Usage by team").scroll_into_view_if_needed()
    usage = admin.locator("section.jp-QuotaAdmin-usage[aria-busy='false']")
    usage.locator("table.jp-QuotaUsage-table").wait_for()
    window = f"since={usage.get_attribute('data-since')}&until={usage.get_attribute('data-until')}"
    for by, rows, size in (
        ("team", usage.locator("table.jp-QuotaUsage-table tbody tr"), None),
        ("user", admin.locator("table.jp-QuotaAdmin-holders tbody tr"), 5),
    ):
        answer = api(page, "GET", f"usage?{window}&by={by}")["body"]["rows"]
        key = "namespace" if by == "team" else "user"
        hours: dict[str, float] = {}
        for row in answer:
            hours[row[key]] = hours.get(row[key], 0) + row["gpuSeconds"] / HOUR
        ranked = sorted(hours.items(), key=lambda item: (-item[1], item[0]))[:size]
        shown = [(row.get_attribute("data-key"), float(row.get_attribute("data-gpu-hours"))) for row in rows.all()]
        assert [name for name, _ in shown] == [name for name, _ in ranked], by
        assert all(math.isclose(a, b, abs_tol=1e-6) for (_, a), (_, b) in zip(shown, ranked, strict=True)), by
    usage.locator(".recharts-bar-rectangle").first.wait_for()
    admin.get_by_role("heading", name="Usage by team").scroll_into_view_if_needed()
    admin.screenshot(path=ui_output_dir / "usage-admin.png")
    print(json.dumps({"month": month, "chargebackRows": len(report["rows"]), "totalCost": report["totals"]["cost"]}))
