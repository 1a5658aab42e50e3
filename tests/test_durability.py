"""The ledger under stress, through a real server process: races, kill -9, restarts."""

from __future__ import annotations

import json
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from server_process import ServerProcess, wait_phase

pytestmark = pytest.mark.slow

# A team of the server's owner with room for many admitted jobs, on a machine of 4 GPUs: the
# first four run, the rest wait Pending, so a burst spawns few processes.
WIDE_TEAM = """
import getpass
c.JupyterQuota.profiles = list(c.JupyterQuota.profiles) + [{
    "team": "wide", "namespace": "team-wide", "users": [getpass.getuser()],
    "hard": {"requests.nvidia.com/gpu": "1000", "requests.cpu": "1000"},
    "limitRange": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "10m"},
                               "default": {"cpu": "100m"}}]},
}]
"""


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    srv = ServerProcess(tmp_path / "state", root, extra_config=WIDE_TEAM)
    yield srv
    try:
        if srv.proc and srv.proc.poll() is None:
            for namespace in ("team-alpha", "team-wide"):
                _, jobs = srv.call("GET", f"/namespaces/{namespace}/jobs")
                for job in jobs["jobs"]:
                    if job["phase"] in ("Pending", "Running"):
                        srv.call("DELETE", f"/namespaces/{namespace}/jobs/{job['name']}")
    finally:
        srv.stop()


def ledger(srv: ServerProcess) -> sqlite3.Connection:
    return sqlite3.connect(srv.state_dir / "ledger.sqlite3")


# ``hold`` before ``server``: its file is made after the server fixture has cancelled the jobs.
def test_200_concurrent_submissions_admit_exactly_two(hold, server):
    server.start()

    def submit(i):
        return server.call(
            "POST", "/namespaces/team-alpha/jobs", {"name": f"race-{i:03d}", "args": hold, "gpus": 1}, timeout=120
        )

    with ThreadPoolExecutor(max_workers=50) as pool:
        results = list(pool.map(submit, range(200)))
    codes = [status for status, _ in results]
    assert codes.count(201) == 2, sorted(set(codes))
    assert codes.count(403) == 198
    refusals = {body["message"].split(", used:")[0] for status, body in results if status == 403}
    assert refusals == {"exceeded quota: team-quota, requested: requests.nvidia.com/gpu=1"}
    admitted = {body["name"] for status, body in results if status == 201}

    with ledger(server) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = con.execute("SELECT name, gpus FROM jobs WHERE namespace = 'team-alpha'").fetchall()
    assert {name for name, _ in rows} == admitted
    assert sum(g for _, g in rows) == 2
    _, balance = server.call("GET", "/namespaces/team-alpha/balance")
    assert balance["resources"]["requests.nvidia.com/gpu"] == {"hard": "2", "used": "2", "remaining": "0"}


def test_kill_9_mid_burst_loses_no_admitted_job(hold, server):
    server.start()
    admitted: list[str] = []
    lock = threading.Lock()
    killed = threading.Event()

    def submit(i):
        try:
            status, body = server.call(
                "POST", "/namespaces/team-wide/jobs", {"name": f"burst-{i:03d}", "args": hold, "gpus": 1}
            )
        except OSError:
            return  # the server died under this request: no answer, so no promise
        if status == 201:
            with lock:
                admitted.append(body["name"])
                if len(admitted) == 40:
                    server.kill()
                    killed.set()

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(submit, range(200)))
    assert killed.is_set(), f"the burst ended before the kill ({len(admitted)} admitted)"

    with ledger(server) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = con.execute(
            "SELECT name, phase, pod, usage, job, args FROM jobs WHERE namespace = 'team-wide'"
        ).fetchall()
    names = {r[0] for r in rows}
    assert set(admitted) <= names, set(admitted) - names
    for name, phase, pod, usage, job, args in rows:  # every record whole
        assert phase in ("Pending", "Running", "Succeeded", "Failed")
        assert (
            json.loads(pod)["spec"]["containers"] and json.loads(usage) and json.loads(job)["metadata"]["name"] == name
        )
        assert isinstance(json.loads(args), list)

    server.start()
    _, jobs = server.call("GET", "/namespaces/team-wide/jobs")
    listed = {j["name"] for j in jobs["jobs"]}
    assert set(admitted) <= listed
    running = [j for j in jobs["jobs"] if j["phase"] == "Running"]
    assert len(running) <= 4 and sorted(i for j in running for i in j["gpuIndices"]) == sorted(
        {i for j in running for i in j["gpuIndices"]}
    )


def test_a_running_job_survives_a_server_restart(server, tmp_path):
    # The job ends only when the test says so (a file), not on a timer that a slow restart
    # on a loaded machine could outlast.
    release = tmp_path / "release"
    server.start()
    status, job = server.call(
        "POST",
        "/namespaces/team-alpha/jobs",
        {"name": "survivor", "args": ["--until-file", str(release), "--lines", "2"], "gpus": 1},
    )
    assert status == 201, job
    wait_phase(server, "team-alpha", "survivor", {"Running"})
    server.kill()
    server.start()
    status, job = server.call("GET", "/namespaces/team-alpha/jobs/survivor")
    assert status == 200 and job["phase"] == "Running", job
    release.touch()
    done = wait_phase(server, "team-alpha", "survivor", {"Succeeded", "Failed"})
    assert done["phase"] == "Succeeded" and done["exitCode"] == 0, done
    assert "Traceback" not in server.log()
