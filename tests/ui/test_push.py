"""Push, not poll, in a real JupyterLab and Chromium (issue 23): the sidebar holds one
``EventSource`` on ``quota/v1/events``, and a job submitted elsewhere shows in its balance with
no read of the balance in between. When the stream is blocked (a proxy that refuses it), the
sidebar polls instead, with ``If-None-Match``, and an unchanged poll is a 304.

Every wait is on an event (a response, the sidebar's attribute); the bounds are for a hung page.
The delay from the submit's answer to the sidebar showing it is printed, not asserted: speed
targets live in ``benchmarks/push_bench.py``.
"""

from __future__ import annotations

import re
import time

import pytest
from quota_ui import EVENTS, NAMESPACE, api, block_push, cancel_live_jobs, open_sidebar, reload_lab

pytestmark = pytest.mark.ui

GPU = "requests.nvidia.com/gpu"
#: the model's reads: the namespaces with their balances, a balance, a job list
READS = re.compile(r".*/quota/v1/namespaces(/[^/]+/(balance|jobs))?(\?.*)?$")


class Traffic:
    """The page's requests to the quota API, in order."""

    def __init__(self, page):
        self.requests: list[tuple[str, str]] = []
        page.on("request", lambda r: self.requests.append((r.method, r.url)))

    def reads_since(self, start: int) -> list[str]:
        return [url for method, url in self.requests[start:] if method == "GET" and READS.match(url)]


def submit_one_gpu(page, release) -> dict:
    """A one-GPU job that runs until ``release`` exists, submitted from the page."""
    return api(page, "POST", f"namespaces/{NAMESPACE}/jobs", {"args": ["--until-file", str(release)], "gpus": 1})


def used_gpus_shown(page, used: str, timeout: float = 60_000) -> None:
    page.wait_for_function(
        "([key, used]) => document.querySelector("
        "`#jupyter-quota-sidebar section[data-namespace='team-alpha'] .jp-QuotaBar[data-key='${key}']`)"
        "?.dataset.used === used",
        arg=[GPU, used],
        timeout=timeout,
    )


def test_a_submit_reaches_the_sidebar_by_push_with_no_read(lab_page, ui_output_dir, tmp_path):
    page = lab_page.page
    traffic = Traffic(page)
    release = tmp_path / "release"
    reload_lab(page)  # a page whose traffic is watched from its start
    try:
        panel = open_sidebar(page)
        # Live: the stream's first event (the balances) came, then the model read everything once
        # (what changed before the hold), and it polls no more.
        live = panel.locator(".jp-QuotaSidebar-live[data-push='held']")
        live.wait_for(timeout=60_000)
        assert live.inner_text() == "Live"
        used_gpus_shown(page, "0")
        start = len(traffic.requests)
        submitted = submit_one_gpu(page, release)
        answered = time.monotonic()
        assert submitted["status"] == 201, submitted
        used_gpus_shown(page, "1")
        shown_after = time.monotonic() - answered
        print(f"push: the sidebar showed the submit {shown_after * 1000:.0f} ms after its answer")
        assert traffic.reads_since(start) == [], "the balance came by push, not by a read"
        assert any(EVENTS.match(url) for _, url in traffic.requests), "one EventSource"
        open_sidebar(page).screenshot(path=ui_output_dir / "push-sidebar.png")
    finally:
        release.touch()
        cancel_live_jobs(page)


def test_with_the_stream_blocked_the_sidebar_polls_with_etags(lab_page, tmp_path):
    page = lab_page.page
    release = tmp_path / "release"
    block_push(page)
    try:
        reload_lab(page)
        panel = open_sidebar(page)
        used_gpus_shown(page, "0")
        assert panel.locator(".jp-QuotaSidebar-live").get_attribute("data-push") == "polling"
        # Nothing changed since the last poll: the next one sends the ETag back and gets a 304.
        with page.expect_response(
            lambda r: READS.match(r.url) and r.status == 304 and r.request.headers.get("if-none-match"),
            timeout=60_000,
        ):
            pass
        submitted = submit_one_gpu(page, release)
        assert submitted["status"] == 201, submitted
        with page.expect_response(lambda r: READS.match(r.url) and r.status == 200, timeout=60_000):
            pass  # the poll after the change reads the new balance
        used_gpus_shown(page, "1")
    finally:
        release.touch()
        cancel_live_jobs(page)
        page.unroute(EVENTS)
        reload_lab(page)
