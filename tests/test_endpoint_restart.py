"""An endpoint outlives its server, as a job does: after a kill and a restart the new server finds
it running, probes it again (Starting, then Ready: readiness is kept in memory), proxies to it,
and DELETE still stops it and gives its quota back."""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path

from server_process import ServerProcess

FAKE_DEPLOY = Path(__file__).resolve().parent / "fake_deploy.py"
ENDPOINT = "/namespaces/team-alpha/endpoints/chat"


def _wait_phase(server, phases, timeout=120.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status, endpoint = server.call("GET", ENDPOINT)
        if status == 200 and endpoint["phase"] in phases:
            return endpoint
        assert time.monotonic() < deadline, (status, endpoint)
        time.sleep(0.1)


def test_an_endpoint_survives_a_server_restart_and_is_found_ready_again(tmp_path):
    extra = f"c.JupyterQuota.deploy_command = [{sys.executable!r}, {str(FAKE_DEPLOY)!r}]\n"
    server = ServerProcess(tmp_path / "state", tmp_path, extra_config=extra).start()
    try:
        status, created = server.call(
            "POST", "/namespaces/team-alpha/endpoints", {"name": "chat", "args": ["--model", "/m/tiny-chat"]}
        )
        assert status == 201, created
        before = _wait_phase(server, ("Ready",))
        server.kill()
        server.start()
        after = _wait_phase(server, ("Ready",))
        assert after["models"] == ["tiny-chat"] and after["args"] == before["args"], "the same process, found again"
        assert after["readyAt"] >= before["readyAt"]
        request = urllib.request.Request(
            f"http://127.0.0.1:{server.port}{after['url']}models",
            headers={"Authorization": f"Bearer {server.token}"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert json.load(response)["data"][0]["id"] == "tiny-chat"
        status, _ = server.call("DELETE", ENDPOINT)
        assert status == 200
        assert _wait_phase(server, ("Stopped",))["reason"] == "Cancelled"
        _, balance = server.call("GET", "/namespaces/team-alpha/balance")
        assert balance["resources"]["requests.cpu"]["used"] == "0"
    finally:
        server.call("DELETE", ENDPOINT)
        server.stop()
