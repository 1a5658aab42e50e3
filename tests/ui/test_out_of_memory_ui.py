"""A job that ran out of GPU memory, in a real JupyterLab: the sidebar marks it with its estimate
and measured peak and offers the next plan down in one click; the admin view shows the
estimator's error table (docs/estimator.md §12). Screenshots: ``out-of-memory-job.png``,
``out-of-memory-retried.png``, ``estimator-accuracy.png``.

The job is ``fake_trainer`` given ms-swift's arguments, ending as a GPU run that ran out of memory
does (``--oom``, with a logged ``memory(GiB)``).
"""

from __future__ import annotations

import time

import pytest
from quota_ui import api, open_admin_view, open_sidebar

pytestmark = pytest.mark.ui

NAMESPACE = "team-beta"
ARGS = ["--model", "Qwen/Qwen2.5-1.5B-Instruct", "--tuner_type", "full", "--dataset", "d"]


def ended(page, name: str, deadline_s: float = 120) -> dict:
    until = time.monotonic() + deadline_s
    while True:
        job = api(page, "GET", f"namespaces/{NAMESPACE}/jobs/{name}")["body"]
        if job["phase"] in ("Succeeded", "Failed"):
            return job
        assert time.monotonic() < until, job
        page.wait_for_timeout(200)


def test_an_out_of_memory_job_is_marked_and_retried_with_the_next_plan_down(admin_lab_page, ui_output_dir):
    page = admin_lab_page.page
    submitted = api(
        page,
        "POST",
        f"namespaces/{NAMESPACE}/jobs",
        {"args": [*ARGS, "--steps", "1", "--memory-gib", "31.5", "--oom"], "gpus": 1},
    )
    assert submitted["status"] == 201, submitted
    job = ended(page, submitted["body"]["name"])
    assert job["reason"] == "OutOfMemory", job

    panel = open_sidebar(page)
    item = panel.locator(f"li.jp-QuotaJob[data-job='{job['name']}']")
    item.wait_for(timeout=60_000)  # the next poll brings the ended job
    assert "Ran out of GPU memory" in item.locator(".jp-QuotaJob-reason").inner_text()
    memory = item.locator(".jp-QuotaJob-memory").inner_text()
    assert memory.startswith(f"estimated {job['memory']['estimatedGib']} GiB") and "measured 31.5 GiB" in memory
    item.screenshot(path=ui_output_dir / "out-of-memory-job.png")

    item.get_by_role("button", name=f"Retry {job['name']} with the next plan down").click()
    status = item.locator(".jp-QuotaJob-retried")
    status.wait_for(timeout=60_000)
    retried_name = status.inner_text().split()[2]
    retried = api(page, "GET", f"namespaces/{NAMESPACE}/jobs/{retried_name}")["body"]
    assert retried["args"] != job["args"], retried  # the next plan down, not the same again
    item.screenshot(path=ui_output_dir / "out-of-memory-retried.png")
    ended(page, retried_name)

    errors = api(page, "GET", "estimator/errors")
    assert errors["status"] == 200 and errors["body"]["rows"], errors
    admin = open_admin_view(page)
    table = admin.locator("table.jp-QuotaAdmin-errors")
    try:
        table.wait_for(timeout=60_000)
    finally:
        admin.screenshot(path=ui_output_dir / "estimator-accuracy-admin.png")
    assert table.locator("tbody th", has_text="All jobs").count() == 1
    admin.locator("section", has=page.locator("#jp-QuotaAdmin-errorsTitle")).screenshot(
        path=ui_output_dir / "estimator-accuracy.png"
    )
