"""``jupyter quota serve`` as a process, without a hub: where it listens, and how it refuses.

Its life behind a real JupyterHub (OAuth, tokens, groups) is tested in tests/hub/.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from server_process import free_port

PREFIX = "/services/jupyter-quota/"


@pytest.fixture
def service(tmp_path):
    """The service told by its URL to listen on "hub" (a name it cannot bind), and by --ip and
    --port where to listen instead; the hub's API is a closed port."""
    yield from _serve(tmp_path, f"http://127.0.0.1:{free_port()}/hub/api")


@pytest.fixture
def hung_hub_service(tmp_path):
    """The service, with a hub API that accepts connections and never answers (a hung hub)."""
    hub = socket.socket()
    hub.bind(("127.0.0.1", 0))
    hub.listen(16)
    yield from _serve(tmp_path, f"http://127.0.0.1:{hub.getsockname()[1]}/hub/api", "c.JupyterQuota.hub_timeout = 2\n")
    hub.close()


def _serve(tmp_path, api_url: str, extra_config: str = ""):
    config = tmp_path / "quota_config.py"
    config.write_text(
        "c = get_config()\n"
        f"c.JupyterQuota.state_dir = {str(tmp_path / 'state')!r}\n"
        "c.JupyterQuota.profiles = [{'team': 'alpha', 'users': ['ann'], 'hard': {'requests.cpu': '1'}}]\n"
        + extra_config
    )
    port = free_port()
    env = {
        **os.environ,
        "JUPYTERHUB_SERVICE_URL": "http://hub:10101",
        "JUPYTERHUB_SERVICE_PREFIX": PREFIX,
        "JUPYTERHUB_API_URL": api_url,
        "JUPYTERHUB_API_TOKEN": "service-token",
        "JUPYTERHUB_CLIENT_ID": "service-jupyter-quota",
        "JUPYTERHUB_SERVICE_NAME": "jupyter-quota",
    }
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter_quota",
                "serve",
                "--ip",
                "127.0.0.1",
                "--port",
                str(port),
                "--config",
                str(config),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    url = f"http://127.0.0.1:{port}{PREFIX}quota/v1"
    deadline = time.monotonic() + 60
    while "quota service (local backend" not in log.read_text():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    yield url, log
    proc.terminate()
    assert proc.wait(30) == 0, log.read_text()


def call(url, token=None, method="GET"):
    headers = {"Authorization": f"token {token}"} if token else {}
    request = urllib.request.Request(url, method=method, headers=headers, data=b"{}" if method == "PUT" else None)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read()), response.headers
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), e.headers


def test_serve_listens_where_ip_and_port_say_and_refuses_an_anonymous_caller(service):
    url, _ = service
    status, answer, _ = call(url + "/namespaces")
    assert status == 403 and answer["reason"] == "Forbidden" and "token" in answer["message"]
    status, answer, _ = call(url + "/profiles/alpha", method="PUT")
    assert status == 403 and "_xsrf" not in answer["message"]


def test_a_hub_that_does_not_answer_is_a_503_not_a_500(service):
    url, _ = service
    status, answer, _ = call(url + "/namespaces", token="some-user-token")
    assert status == 503 and answer["reason"] == "ServiceUnavailable", answer
    assert "JupyterHub did not answer" in answer["message"] and "127.0.0.1" not in answer["message"]


def test_a_hung_hub_is_a_503_within_the_hub_timeout(hung_hub_service):
    url, _ = hung_hub_service
    started = time.monotonic()
    status, answer, _ = call(url + "/namespaces", token="some-user-token")  # urlopen gives up at 30 s
    assert status == 503 and "JupyterHub did not answer" in answer["message"], answer
    assert time.monotonic() - started < 20  # hub_timeout (2 s), not aiohttp's 300 s


def test_serve_without_a_hub_environment_says_how_to_run_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")}
    done = subprocess.run(
        [sys.executable, "-m", "jupyter_quota", "serve"],
        capture_output=True,
        text=True,
        env={**env, "JUPYTER_QUOTA_STATE_DIR": str(tmp_path)},
        timeout=120,
    )
    assert done.returncode == 1
    assert "JUPYTERHUB_SERVICE_URL is not set" in done.stderr and "c.JupyterHub.services" in done.stderr


def test_the_service_freezes_its_start_up_heap_before_it_serves(service):
    # a full collection walking ~100k start-up objects held the IO loop for over 100 ms, every
    # balance read waiting (hubservice/startup_heap.py); frozen, no collection walks them
    _, log = service
    frozen = re.search(r"(\d+) start-up objects frozen out of the garbage collector", log.read_text())
    assert frozen is not None, log.read_text()
    assert int(frozen.group(1)) > 10_000  # jupyter-server, tornado and the service: far more than this
