"""An endpoint outlives its server, as a job does: after a kill and a restart the new server finds
it running, probes it again (Starting, then Ready: readiness is kept in memory), proxies to it,
and DELETE still stops it and gives its quota back. The requests its proxy counted before the
kill were written to the records file, and the new server counts on from them."""

from __future__ import annotations

import json
import sqlite3
import sys
import time
import urllib.request
from contextlib import closing
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


def _models(server, endpoint) -> str:
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.port}{endpoint['url']}models", headers={"Authorization": f"Bearer {server.token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)["data"][0]["id"]


def _recorded(records) -> int | None:
    """The requests of the endpoint the records file holds (a reader of the real file, as SQLite
    lets one beside the server's connection)."""
    try:
        with closing(sqlite3.connect(f"file:{records}?mode=ro", uri=True, timeout=30)) as con:
            return con.execute("SELECT sum(count) FROM endpoint_requests").fetchone()[0]
    except sqlite3.OperationalError:  # no file, or no table, yet
        return None


def test_an_endpoint_survives_a_server_restart_and_is_found_ready_again(tmp_path):
    extra = f"c.JupyterQuota.deploy_command = [{sys.executable!r}, {str(FAKE_DEPLOY)!r}]\n"
    server = ServerProcess(tmp_path / "state", tmp_path, extra_config=extra).start()
    try:
        status, created = server.call(
            "POST", "/namespaces/team-alpha/endpoints", {"name": "chat", "args": ["--model", "/m/tiny-chat"]}
        )
        assert status == 201, created
        before = _wait_phase(server, ("Ready",))
        assert _models(server, before) == "tiny-chat"
        records = tmp_path / "state" / "records.sqlite3"
        deadline = time.monotonic() + 60
        while _recorded(records) != 1:  # written by the watch pass, once a second
            assert time.monotonic() < deadline, "the request was never written to the records"
            time.sleep(0.1)
        server.kill()
        server.start()
        after = _wait_phase(server, ("Ready",))
        assert after["models"] == ["tiny-chat"] and after["args"] == before["args"], "the same process, found again"
        assert after["readyAt"] >= before["readyAt"]
        assert after["requests"]["total"] == 1 and after["requests"]["byStatus"] == {"2xx": 1}, after["requests"]
        assert after["requests"]["latencyMs"] is None, "latencies are kept in memory only"
        assert _models(server, after) == "tiny-chat"
        _, counted = server.call("GET", ENDPOINT)
        assert counted["requests"]["total"] == 2, "counted on from the records"
        status, _ = server.call("DELETE", ENDPOINT)
        assert status == 200
        assert _wait_phase(server, ("Stopped",))["reason"] == "Cancelled"
        _, balance = server.call("GET", "/namespaces/team-alpha/balance")
        assert balance["resources"]["requests.cpu"]["used"] == "0"
    finally:
        try:
            server.call("DELETE", ENDPOINT)  # the fake server's process, if the test stopped early
        except Exception:  # noqa: BLE001 - a server that did not come back: the failure above says why
            pass
        server.stop()
