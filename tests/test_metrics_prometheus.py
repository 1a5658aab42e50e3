"""A real Prometheus (Debian's ``prometheus``, scripts/install-prometheus.sh) scrapes a real
server's GET quota/v1/metrics with the scrape token, and every query of the Grafana dashboard
(deploy/grafana/jupyter-quota.json) returns series through Prometheus' HTTP API; requests through
an endpoint's proxy (to ``fake_deploy.py``) show as its request counter and latency histogram."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

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
    deploy = [sys.executable, str(Path(__file__).resolve().parent / "fake_deploy.py")]
    extra = f"c.JupyterQuota.metrics_token = {SCRAPE_TOKEN!r}\nc.JupyterQuota.deploy_command = {deploy!r}\n"
    srv = ServerProcess(tmp_path / "state", root, extra).start()
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


def proxied(server, path: str, body=None) -> int:
    """A request through the endpoint's proxy, as the openai client sends it; its status."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.port}/quota/v1/namespaces/team-alpha/endpoints/chat/v1/{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as e:
        return e.code


def test_requests_through_an_endpoints_proxy_are_counted_and_timed_in_prometheus(server, prometheus):
    status, created = server.call(
        "POST", "/namespaces/team-alpha/endpoints", {"name": "chat", "args": ["--model", "tiny"]}
    )
    assert status == 201, created
    poll(lambda: server.call("GET", "/namespaces/team-alpha/endpoints/chat")[1]["phase"] == "Ready", "the endpoint")
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}
    codes = [proxied(server, "models"), proxied(server, "chat/completions", chat), proxied(server, "nothing")]
    assert codes == [200, 200, 404]

    where = 'namespace="team-alpha",team="alpha",endpoint="chat"'
    poll(lambda: series(prometheus, f'jupyter_quota_endpoint_requests_total{{{where},code="2xx"}} == 2'), "2xx")
    poll(lambda: series(prometheus, f'jupyter_quota_endpoint_requests_total{{{where},code="4xx"}} == 1'), "4xx")
    poll(lambda: series(prometheus, f"jupyter_quota_endpoint_request_duration_seconds_count{{{where}}} == 3"), "count")
    buckets = series(prometheus, f"jupyter_quota_endpoint_request_duration_seconds_bucket{{{where}}}")
    by_le = {s["metric"]["le"]: float(s["value"][1]) for s in buckets}
    assert by_le["+Inf"] == 3 and by_le["600.0"] == 3, by_le  # within the proxy's request timeout
    latency = series(prometheus, f"jupyter_quota_endpoint_request_duration_seconds_sum{{{where}}}")
    assert 0 < float(latency[0]["value"][1]) < 600, latency
    server.call("DELETE", "/namespaces/team-alpha/endpoints/chat")
