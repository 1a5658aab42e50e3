"""The sidebar through a real JupyterHub, in Chromium: one team ledger, and profile edits without restart.

Users log in at ``/hub/login`` and open ``/user/<name>/lab``; their servers forward ``quota/v1`` to
the hub's quota service, which holds every team's ledger and profiles (fixture: hub_process.py).
Screenshots go to ``$JUPYTER_QUOTA_TEST_OUTPUT/hub``: ``hub-cat-team-alpha-exceeded.png``,
``hub-ada-admin-view-saved.png``, ``hub-bob-sidebar-new-limit.png``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from pathlib import Path

import pytest
from hub_pages import (
    GPU,
    Rest,
    api,
    chromium,
    gpu_bar,
    lab_page,
    open_admin_view,
    open_sidebar,
    poll_interval_seconds,
    server_model,
)
from hub_process import wait_for
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

pytestmark = pytest.mark.ui

MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
ALPHA, BETA = "team-alpha", "team-beta"
#: Keeps the fake trainer running for the whole test (it is cancelled at the end).
RUNNING = ["--model", MODEL, "--sleep", "600"]
EXCEEDED = re.compile(rf"exceeded quota: [^,]+, requested: {GPU}=1, used: {GPU}=2, limited: {GPU}=2")


@pytest.fixture(autouse=True)
def jp_asyncio_loop():
    """Off: Playwright's sync API runs its own loop in this thread (as in tests/ui/conftest.py)."""
    return None


@pytest.fixture(autouse=True)
def jp_server_cleanup():
    """Off: the servers here are the hub's subprocesses."""


@pytest.fixture(scope="module")
def browser():
    with chromium() as browser:
        yield browser


@pytest.fixture(scope="module")
def output_dir() -> Path:
    base = Path(os.environ.get("JUPYTER_QUOTA_TEST_OUTPUT", Path(__file__).resolve().parents[2] / "test-output"))
    path = base / "hub"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _no_live_jobs(admin: Rest, namespace: str) -> None:
    """Cancel what earlier tests left running in ``namespace`` (as an admin) and wait until it is free."""
    for job in admin("GET", f"namespaces/{namespace}/jobs").json()["jobs"]:
        if job["phase"] in ("Pending", "Running"):
            admin("DELETE", f"namespaces/{namespace}/jobs/{job['name']}")

    def free():
        gpu = admin("GET", f"namespaces/{namespace}/balance").json()["resources"][GPU]
        return gpu["used"] == "0" and gpu

    wait_for(f"{namespace} to have no GPU in use", free, 60)


def test_one_team_ledger_cat_sees_anns_job_and_is_refused(servers, browser, output_dir):
    hub = servers
    ada, ann = Rest(hub, "ada"), Rest(hub, "ann")
    _no_live_jobs(ada, ALPHA)
    launched = ann("POST", f"namespaces/{ALPHA}/jobs", {"args": RUNNING, "gpus": 2})
    assert launched.status_code == 201, launched.text
    name = launched.json()["name"]
    page = None
    try:
        page = lab_page(browser, hub, "cat", height=1500)
        assert api(page, "GET", "identity")["body"]["name"] == "cat"  # her hub cookie, through her server
        panel = open_sidebar(page)
        bar = gpu_bar(panel, ALPHA)
        # one ledger for the team: cat's sidebar shows ann's 2 GPUs as used
        expect(bar).to_have_attribute("data-remaining", "0", timeout=60_000)
        assert (bar.get_attribute("data-hard"), bar.get_attribute("data-used")) == ("2", "2")
        assert bar.locator(".jp-QuotaBar-text").inner_text() == "0 of 2 GPUs left"

        form = panel.get_by_role("form", name="Plan a fine-tune")
        form.get_by_label("Namespace").select_option(ALPHA)
        form.get_by_label("Model").fill(MODEL)
        form.get_by_label("GPUs").fill("1")
        form.get_by_role("button", name="Launch as written").click()
        alert = form.get_by_role("alert")
        alert.wait_for()
        shown = alert.inner_text()
        assert EXCEEDED.fullmatch(shown), shown
        alert.scroll_into_view_if_needed()
        panel.screenshot(path=output_dir / "hub-cat-team-alpha-exceeded.png")

        # the same refusal, asked from her page with her cookie and XSRF: the sidebar shows the API's text
        refusal = api(page, "POST", f"namespaces/{ALPHA}/jobs", {"args": ["--model", MODEL], "gpus": 1})
        assert refusal["status"] == 403, refusal
        assert refusal["body"]["message"] == shown
        jobs = ann("GET", f"namespaces/{ALPHA}/jobs").json()["jobs"]
        assert [j["name"] for j in jobs if j["phase"] in ("Pending", "Running")] == [name]
    finally:
        if page is not None:
            page.context.close()
        ann("DELETE", f"namespaces/{ALPHA}/jobs/{name}")


def test_adas_edit_in_the_admin_view_reaches_bobs_open_sidebar_within_one_poll(servers, browser, output_dir):
    hub = servers
    interval = poll_interval_seconds()
    ada = Rest(hub, "ada")
    profile = ada("GET", "profiles/beta").json()
    old = profile["hard"][GPU]
    new = str(int(old) + 2)
    before = server_model(hub, "bob")
    reads = []  # bob's sidebar's calls of quota/v1, as Chromium timed them
    bob = lab_page(
        browser, hub, "bob", on_request=lambda request: reads.append(request) if "/quota/v1/" in request.url else None
    )
    admin = None
    try:
        bar = gpu_bar(open_sidebar(bob), BETA)
        bar.wait_for()
        assert bar.get_attribute("data-hard") == old

        admin = lab_page(browser, hub, "ada", height=1000)
        # bob's page stays visible in its own context (the sidebar's poll pauses on hidden pages)
        assert bob.evaluate("() => document.visibilityState") == "visible"
        panel = open_admin_view(admin)
        form = panel.get_by_role("form", name="Edit a team profile")
        form.get_by_label("Team", exact=True).select_option("beta")
        field = form.get_by_label(GPU)
        assert field.input_value() == old
        field.fill(new)
        with admin.expect_response(lambda r: r.request.method == "PUT" and "/quota/v1/profiles/beta" in r.url) as put:
            form.get_by_role("button", name="Save").click()
        assert put.value.status == 200, put.value.text()
        form.get_by_role("status").filter(has_text="Saved team beta.").wait_for()
        admin.wait_for_function(  # ada's own table of every team's balance reads it again on save
            "([s, h]) => document.querySelector(s)?.dataset.hard === h",
            arg=[f"#jupyter-quota-admin table[data-namespace='{BETA}'] tr[data-key='{GPU}']", new],
        )
        panel.screenshot(path=output_dir / "hub-ada-admin-view-saved.png")
        edited_at = _end(put.value.request)
        try:
            bob.wait_for_function(  # polled at each animation frame, so the time is the DOM's
                "([s, h]) => document.querySelector(s)?.dataset.hard === h",
                arg=[f"section[data-namespace='{BETA}'] .jp-QuotaBar[data-key='{GPU}']", new],
                timeout=4 * interval * 1000,
            )
        except PlaywrightTimeout:
            pytest.fail(
                f"bob's sidebar still shows a hard GPU limit of {bar.get_attribute('data-hard')} "
                f"{4 * interval:.0f} s after ada saved {new} (poll interval {interval:.0f} s)"
            )
        elapsed = time.time() - edited_at

        # Playwright reports a finished request asynchronously; the DOM may be ahead of it
        deadline = time.monotonic() + 30
        while not [r for r in _poll_rounds(reads) if r.start > edited_at]:
            assert time.monotonic() < deadline, "bob's sidebar changed with no poll after the edit"
            bob.wait_for_timeout(100)
        rounds = _poll_rounds(reads)
        after = [r for r in rounds if r.start > edited_at]
        beta = next(n for n in after[0].namespaces.response().json()["namespaces"] if n["name"] == BETA)
        assert beta["balance"]["resources"][GPU]["hard"] == new  # the very first poll after the edit has it
        slowest = max(r.seconds for r in rounds)
        print(
            f"\nada's edit (admin view) -> bob's sidebar: {elapsed:.2f} s (poll interval {interval:.0f} s; "
            f"bob's first poll after the edit began {after[0].start - edited_at:.2f} s after it and took "
            f"{after[0].seconds:.2f} s; slowest of his {len(rounds)} polls {slowest:.2f} s)"
        )
        # Lumino's Poll starts a round one interval after the previous round ended; 1 s for the DOM
        assert elapsed <= interval + 2 * slowest + 1.0, (elapsed, interval, slowest)
        bob.locator("#jupyter-quota-sidebar").screenshot(path=output_dir / "hub-bob-sidebar-new-limit.png")
        assert server_model(hub, "bob") == before  # no restart of bob's server
    finally:
        for page in (bob, admin):
            if page is not None:
                page.context.close()
        restored = ada("PUT", "profiles/beta", profile)
        assert restored.status_code == 200, restored.text


@dataclasses.dataclass
class _Round:
    """One poll of the sidebar: its namespaces read, when it started (epoch s) and how long it took."""

    namespaces: object  # playwright Request
    start: float
    seconds: float


def _start(request) -> float:
    """When Chromium sent ``request`` (epoch seconds)."""
    return request.timing["startTime"] / 1000


def _end(request) -> float:
    """When its response had come in whole (responseEnd counts from startTime, in ms)."""
    return _start(request) + request.timing["responseEnd"] / 1000


def _poll_rounds(reads) -> list[_Round]:
    """Group quota/v1 reads into poll rounds: each starts with a namespaces read (src/model.ts _fetch)."""
    start, end = _start, _end
    reads = sorted(reads, key=start)
    heads = [r for r in reads if re.search(r"/quota/v1/namespaces(\?|$)", r.url)]
    rounds = []
    for i, head in enumerate(heads):
        until = start(heads[i + 1]) if i + 1 < len(heads) else float("inf")
        last = max(end(r) for r in reads if start(head) <= start(r) < until)
        rounds.append(_Round(head, start(head), last - start(head)))
    return rounds
