"""A server starts and answers whatever its state directory holds (issue 14, item 1).

Older versions admitted quantities the arithmetic cannot carry (``"1e200000"``, 100,000 digits)
and stored profile changes with such values. A restart on that state must still load the
extension, answer every route, and let the job be listed and cancelled.
"""

from __future__ import annotations

import getpass
import json
import sys

import pytest
from quota_testing import FAKE_TRAINER
from server_process import ServerProcess, wait_phase

from jupyter_quota.backends.local import ledger

pytestmark = pytest.mark.slow

NAMESPACE = "team-alpha"
ADMIN = f"c.JupyterQuota.admin_users = [{getpass.getuser()!r}]\n"
HUGE = {"bad-exponent": "1e200000", "bad-digits": "9" * 100_000}


def write_old_row(path, name: str, ephemeral: str) -> None:
    """A Pending job as an older version stored it: admitted with a huge ephemeral-storage request."""
    container = {
        "name": "train",
        "command": [sys.executable, str(FAKE_TRAINER)],
        "resources": {
            "requests": {"cpu": "2", "memory": "16Gi", "ephemeral-storage": ephemeral},
            "limits": {"cpu": "4", "memory": "32Gi"},
        },
    }
    meta = {"name": name, "namespace": NAMESPACE, "labels": {"jupyter-quota/team": "alpha"}}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {"template": {"metadata": {}, "spec": pod["spec"]}},
    }
    book = ledger.Ledger(path)
    with book.write() as con:
        ledger.insert(
            con,
            {
                "namespace": NAMESPACE,
                "name": name,
                "team": "alpha",
                "owner": getpass.getuser(),
                "phase": "Pending",
                "args": "[]",
                "gpus": 0,
                "pod": json.dumps(pod),
                "usage": "{}",
                "job": json.dumps(job),
                "created_at": "2026-01-01T00:00:00Z",
            },
        )


def write_old_profile_change(state_dir) -> None:
    """An admin's change stored by an older version: a LimitRange default no arithmetic carries."""
    change = {
        "gamma": {
            "team": "gamma",
            "namespace": "team-gamma",
            "users": [getpass.getuser()],
            "limitRange": {"limits": [{"type": "Container", "default": {"cpu": "1e2147483647"}}]},
        }
    }
    (state_dir / "profiles.json").write_text(json.dumps(change))


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    state = tmp_path / "state"
    state.mkdir()
    for name, value in HUGE.items():
        write_old_row(state / "ledger.sqlite3", name, value)
    write_old_profile_change(state)
    srv = ServerProcess(state, root, extra_config=ADMIN)
    yield srv
    srv.stop()


def test_a_server_starts_on_huge_old_rows_and_every_route_answers(server):
    server.start()
    jobs = f"/namespaces/{NAMESPACE}/jobs"
    sft = {"args": ["--model", "Qwen/Qwen2.5-0.5B-Instruct"]}
    calls = [
        ("GET", "/namespaces", None),
        ("GET", f"/namespaces/{NAMESPACE}/balance", None),
        ("GET", jobs, None),
        ("GET", f"{jobs}/bad-exponent", None),
        ("GET", f"{jobs}/bad-digits", None),
        ("GET", f"{jobs}/bad-exponent/logs", None),
        ("POST", "/estimate", sft),
        ("POST", f"/namespaces/{NAMESPACE}/plan", sft),
        ("GET", "/models", None),
        ("GET", "/profiles", None),
        ("GET", "/profiles/alpha", None),
        ("GET", "/identity", None),
        ("GET", "/inventory", None),
        ("GET", "/namespaces/team-beta/balance", None),
    ]
    for method, path, body in calls:
        status, answer = server.call(method, path, body)
        assert status < 500, (method, path, status, answer)

    status, listed = server.call("GET", jobs)
    assert status == 200 and sorted(j["name"] for j in listed["jobs"]) == sorted(HUGE)
    # The scheduler fails a row it cannot read as numbers (InvalidJob) on its first pass; one it
    # can (100,000 nines of ephemeral-storage, which this machine does not track) may start. A
    # cancel answers either way, and each ends, no longer counted against the quota.
    for name in HUGE:
        status, job = server.call("DELETE", f"{jobs}/{name}")
        assert status == 200, job
        job = wait_phase(server, NAMESPACE, name, {"Succeeded", "Failed"})
        assert job["phase"] == "Succeeded" or job["reason"] in {"Cancelled", "InvalidJob"}, job
    assert server.call("GET", f"{jobs}/bad-exponent")[1]["reason"] in {"Cancelled", "InvalidJob"}
    assert "Traceback" not in server.log()

    # With the bad jobs gone, the namespace admits again.
    status, job = server.call("POST", jobs, {"args": [], "gpus": 1})
    assert status == 201, job
    server.call("DELETE", f"{jobs}/{job['name']}")


def test_a_stored_profile_change_that_no_longer_validates_is_skipped_with_a_log_line(server):
    server.start()
    status, profiles = server.call("GET", "/profiles")
    assert status == 200
    assert "gamma" not in [p["team"] for p in profiles["profiles"]]
    assert "profiles.json" in server.log() and "gamma" in server.log()
