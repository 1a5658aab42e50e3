"""Serve in the sidebar, in a real JupyterLab and Chromium (issue 20): **Serve** on a finished
fine-tune starts an endpoint from that job (``POST .../endpoints`` with ``"job"``), the jobs list
shows it Starting then Ready with its URL, the model it serves and its memory, its API answers at
that URL, and **Stop** gives its quota back.

The fine-tune is ``tests/fake_trainer.py`` (it logs a checkpoint as transformers' Trainer does)
and the server ``tests/fake_deploy.py``: this test is about the sidebar, and the stand-ins answer
in a second where a real ``swift sft`` and ``swift deploy`` on the tiny model take about two
minutes of a 2-core CI machine. The real pair runs in the serving notebook's tests
(tests/e2e/test_serve_notebook.py, tests/hub/test_hub_serve_notebook.py). Every wait is on an
attribute the sidebar sets; the bounds are for a hung page.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from quota_ui import NAMESPACE, api, open_sidebar

pytestmark = pytest.mark.ui

FAKE_DEPLOY = Path(__file__).resolve().parents[1] / "fake_deploy.py"


@pytest.fixture(scope="module")
def serve_server(tmp_path_factory, start_lab):
    home = tmp_path_factory.mktemp("servelab")
    extra = [f"c.JupyterQuota.deploy_command = [{sys.executable!r}, {str(FAKE_DEPLOY)!r}]"]
    with start_lab(home, "jupyter-lab-serve.log", extra) as server:
        yield server


@pytest.fixture
def serve_page(serve_server, chromium_browser, open_page):
    with open_page(chromium_browser, serve_server) as lab:
        yield lab


def job_item(panel, name: str):
    return panel.locator(f"section[data-namespace='{NAMESPACE}'] li[data-job='{name}']")


def test_serve_on_a_finished_fine_tune_gives_a_ready_endpoint_and_stop_frees_it(serve_page, ui_output_dir, tmp_path):
    page = serve_page.page
    out = tmp_path / "out"
    train = ["--model", "/models/tiny-base", "--steps", "2", "--save-to", str(out)]
    created = api(page, "POST", f"namespaces/{NAMESPACE}/jobs", {"generateName": "tune-", "args": train, "gpus": 0})
    assert created["status"] == 201, created
    tune = created["body"]["name"]
    panel = open_sidebar(page)
    job_item(panel, tune).and_(page.locator("[data-phase='Succeeded']")).wait_for(timeout=60_000)

    job_item(panel, tune).get_by_role("button", name=f"Serve {tune}").click()
    status = job_item(panel, tune).locator(".jp-QuotaJob-served")
    status.wait_for()
    endpoint_name = status.inner_text().removeprefix("Serving its last checkpoint as endpoint ").rstrip(".")
    view = panel.get_by_role("group", name=f"Endpoint {endpoint_name}")
    view.and_(page.locator("[data-endpoint-phase='Ready']")).wait_for(timeout=60_000)

    assert view.get_by_role("status").inner_text() == "Ready, serving tiny-base"
    link = view.get_by_role("link")
    url = link.get_attribute("href")
    assert url.endswith(f"/quota/v1/namespaces/{NAMESPACE}/endpoints/{endpoint_name}/v1/"), url
    assert "no GPU (CPU)" in view.locator(".jp-QuotaEndpoint-memory").inner_text()
    served = api(page, "GET", f"namespaces/{NAMESPACE}/endpoints/{endpoint_name}")["body"]
    assert served["args"][:4] == ["--model", "/models/tiny-base", "--adapters", str(out / "checkpoint-2")]
    models = page.evaluate("async url => (await fetch(url + 'models')).json()", url)
    assert models["data"][0]["id"] == "tiny-base", "the URL the sidebar shows answers"
    assert job_item(panel, endpoint_name).get_by_role("button", name=f"Cancel {endpoint_name}").count() == 0
    page.screenshot(path=ui_output_dir / "serve-ready-endpoint.png")

    view.get_by_role("button", name=f"Stop endpoint {endpoint_name}").click()
    page.locator(".jp-Dialog").get_by_role("button", name="Stop endpoint").click()
    view.and_(page.locator("[data-endpoint-phase='Stopped']")).wait_for(timeout=60_000)
    balance = api(page, "GET", f"namespaces/{NAMESPACE}/balance")["body"]
    assert balance["resources"]["requests.cpu"]["used"] == "0", "its quota is back"
    assert serve_page.errors == []
