"""The approval flow of a temporary increase in Chromium: a member asks in the sidebar, an admin
approves in the admin view (another server on the same state directory), the member's sidebar
shows the raised GPU quota, the increase expires by itself (a short request), and the admin reads
the audit log and its CSV export. Screenshots: ``increase-*.png``."""

from __future__ import annotations

import pytest
from quota_ui import api, open_admin_view, open_sidebar

pytestmark = pytest.mark.ui

NAMESPACE = "team-alpha"
GPU = "requests.nvidia.com/gpu"
#: 0.025 h = 90 s: long enough to see the raised quota through a poll or two on a loaded
#: machine, short enough to wait for the end (the sidebar polls every 10 s).
HOURS = "0.025"
POLL_SLACK_MS = 40_000


def test_request_approve_raise_expire_and_audit(shared_state_labs, member_and_admin_pages, ui_output_dir):
    admin_server = shared_state_labs[1]
    page, admin_page = (lab.page for lab in member_and_admin_pages)
    assert api(admin_page, "GET", "identity")["body"]["admin"] is True
    sidebar = open_sidebar(page)
    bar = sidebar.locator(f"section[data-namespace='{NAMESPACE}'] .jp-QuotaBar[data-key='{GPU}']")
    bar.wait_for()
    assert bar.get_attribute("data-hard") == "2"

    # the member asks
    form = sidebar.get_by_role("form", name="Ask for a temporary increase")
    form.get_by_label("More GPUs").fill("2")
    form.get_by_label("For hours").fill(HOURS)
    form.get_by_label("Reason").fill("UI test: a deadline")
    form.get_by_role("button", name="Ask for more").click()
    form.get_by_role("status").filter(has_text="is Pending").wait_for()
    name = api(page, "GET", "increases")["body"]["increases"][0]["name"]
    mine = sidebar.locator(f".jp-QuotaIncrease-item[data-name='{name}']")
    mine.wait_for()
    assert mine.get_attribute("data-phase") == "Pending"
    page.screenshot(path=str(ui_output_dir / "increase-requested.png"))

    # the admin approves, with a comment
    panel = open_admin_view(admin_page)
    pending = panel.get_by_role("list", name="Pending requests").locator(f"[data-name='{name}']")
    pending.wait_for(timeout=POLL_SLACK_MS)
    assert "UI test: a deadline" in pending.inner_text()
    pending.get_by_label(f"Comment on {name}").fill("ok for the deadline")
    admin_page.screenshot(path=str(ui_output_dir / "increase-pending-admin.png"))
    pending.get_by_role("button", name=f"Approve {name}").click()
    panel.get_by_role("status").filter(has_text=f"{name} is Approved.").wait_for()
    approved = panel.get_by_role("list", name="Decided requests").locator(f"[data-name='{name}']")
    approved.wait_for()
    assert approved.get_attribute("data-phase") == "Approved"
    admin_page.screenshot(path=str(ui_output_dir / "increase-approved-admin.png"))

    # the member's sidebar: the raised quota, then its end
    page.wait_for_function(
        "([key, hard]) => document.querySelector(`#jupyter-quota-sidebar .jp-QuotaBar[data-key='${key}']`)"
        "?.dataset.hard === hard",
        arg=[GPU, "4"],
        timeout=POLL_SLACK_MS,
    )
    mine.and_(page.locator("[data-phase='Approved']")).wait_for(timeout=POLL_SLACK_MS)
    assert "by quota-admin" in mine.inner_text() and "ok for the deadline" in mine.inner_text()
    # In words and local time; the exact key and time one hover away.
    amount = mine.locator(".jp-QuotaIncrease-amount")
    assert amount.inner_text() == "+2 GPUs" and amount.get_attribute("title") == f"{GPU}: 2"
    assert GPU not in mine.inner_text()
    expires_at = api(page, "GET", "increases")["body"]["increases"][0]["expiresAt"]
    assert mine.locator(f"time[datetime='{expires_at}']").get_attribute("title") == expires_at
    assert expires_at not in mine.inner_text()
    # The balance says which of its GPUs are temporary, and until when.
    bar.locator(".jp-QuotaBar-increase").filter(has_text="includes +2 GPUs until").wait_for(timeout=POLL_SLACK_MS)
    # The admin's profile form: the base quota, and the increase the balances add to it.
    note = panel.get_by_role("form", name="Edit a team profile").get_by_role("note")
    note.filter(has_text=f"({name})").wait_for(timeout=POLL_SLACK_MS)
    assert "base quota" in note.inner_text() and "+2 GPUs until" in note.inner_text()
    bar.scroll_into_view_if_needed()
    page.screenshot(path=str(ui_output_dir / "increase-raised.png"))
    page.wait_for_function(
        "([key, hard]) => document.querySelector(`#jupyter-quota-sidebar .jp-QuotaBar[data-key='${key}']`)"
        "?.dataset.hard === hard",
        arg=[GPU, "2"],
        timeout=90_000 + POLL_SLACK_MS,
    )
    mine.and_(page.locator("[data-phase='Expired']")).wait_for(timeout=POLL_SLACK_MS)
    assert bar.locator(".jp-QuotaBar-increase").count() == 0
    bar.scroll_into_view_if_needed()
    page.screenshot(path=str(ui_output_dir / "increase-expired.png"))

    # the audit log: the request, the decision, the expiry; and its CSV
    audit = panel.get_by_role("table", name="Audit log")
    audit.locator("tr[data-action='increase.expired']").wait_for(timeout=POLL_SLACK_MS + 30_000)
    actions = audit.locator("tbody tr").evaluate_all("rows => rows.map(r => r.dataset.action)")
    assert actions == ["increase.expired", "increase.approved", "increase.requested"]
    audit.scroll_into_view_if_needed()
    admin_page.screenshot(path=str(ui_output_dir / "increase-audit.png"))
    href = panel.get_by_role("link", name="Export CSV").get_attribute("href")
    csv = admin_page.request.get(admin_server.url.rstrip("/") + href if href.startswith("/") else href)
    assert csv.status == 200 and csv.headers["content-type"].startswith("text/csv")
    assert f"increase/{NAMESPACE}/{name}" in csv.text() and "increase.expired" in csv.text()
    assert api(page, "GET", "audit")["status"] == 403, "the member may not read the audit log"
