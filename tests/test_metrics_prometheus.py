"""A real Prometheus (Debian's ``prometheus``, scripts/install-prometheus.sh) scrapes a real
server's GET quota/v1/metrics with the scrape token, and every query of the Grafana dashboard
(deploy/grafana/jupyter-quota.json) returns series through Prometheus' HTTP API."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
from dashboard_queries import queries
from quota_testing import free_port
from server_process import ServerProcess, wait_phase

SCRAPE_TOKEN = "prometheus-scrape-token"
PROMETHEUS = shutil.which("prometheus")
DEADLINE = 120.0  # seconds: bounds a failing test only (1 s scrapes on a loaded machine)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed: scripts/install-prometheus.sh"),
]


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    srv = ServerProcess(tmp_path / "state", root, f"c.JupyterQuota.metrics_token = {SCRAPE_TOKEN!r}\n").start()
    yield srv
    srv.stop()


@pytest.fixture
def prometheus(tmp_path, server):
    """Prometheus on a free port, scraping the server every second as the README shows."""
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        json.dumps(  # YAML is a superset of JSON
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "scrape_configs": [
                    {
                        "job_name": "jupyter-quota",
                        "metrics_path": "/quota/v1/metrics",
                        "authorization": {"credentials": SCRAPE_TOKEN},
                        "static_configs": [{"targets": [f"127.0.0.1:{server.port}"]}],
                    }
                ],
            }
        )
    )
    log = open(tmp_path / "prometheus.log", "wb")  # noqa: SIM115 - prometheus writes it while it runs
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/api/v1/"
    try:
        poll(lambda: target_health(url) == "up", "the scrape target to be up", tmp_path / "prometheus.log")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def api(url: str, path: str, **params):
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    with urllib.request.urlopen(url + path + query, timeout=10) as response:
        answer = json.loads(response.read())
    assert answer["status"] == "success", answer
    return answer["data"]


def target_health(url: str) -> str | None:
    try:
        targets = api(url, "targets")["activeTargets"]
    except OSError:
        return None  # not listening yet
    return targets[0]["health"] if targets else None


def poll(condition, what: str, log=None):
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {DEADLINE}s for {what}" + (f":\n{log.read_text()}" if log else ""))
        time.sleep(0.2)


def series(url: str, expr: str) -> list:
    return api(url, "query", query=expr)["result"]


def test_every_dashboard_query_returns_series_from_a_real_prometheus(server, prometheus, hold):
    ns = "team-alpha"
    status, held = server.call("POST", f"/namespaces/{ns}/jobs", {"args": hold, "gpus": 1})
    assert status == 201, held
    status, done = server.call("POST", f"/namespaces/{ns}/jobs", {"args": ["--lines", "1"], "gpus": 1})
    assert status == 201, done
    status, refused = server.call("POST", f"/namespaces/{ns}/jobs", {"args": [], "gpus": 2})
    assert status == 403 and refused["reason"] == "ExceededQuota", refused
    wait_phase(server, ns, done["name"], ("Succeeded",))
    wait_phase(server, ns, held["name"], ("Running",))

    # What the service says now, as Prometheus stored it from its scrapes.
    poll(lambda: series(prometheus, 'jupyter_quota_finished_jobs_total{phase="Succeeded"} == 1'), "the finished job")
    poll(lambda: series(prometheus, 'jupyter_quota_resourcequota{team="alpha",type="used"} > 0'), "alpha's usage")
    gpus = series(prometheus, 'jupyter_quota_running_requests{resource="nvidia.com/gpu"}')
    assert [(s["metric"]["team"], s["value"][1]) for s in gpus] == [("alpha", "1")], gpus
    refusals = series(prometheus, "jupyter_quota_refused_jobs_total")
    assert [(s["metric"]["reason"], s["value"][1]) for s in refusals] == [("ExceededQuota", "1")], refusals

    # Each panel's query, as Grafana would send it: rates need two scrapes, so each is polled.
    for title, expr in queries():
        poll(lambda expr=expr: series(prometheus, expr), f"series from panel {title!r}: {expr}")
