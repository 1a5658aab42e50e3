"""Usage on the local backend survives a kill -9 of the server, and nothing is counted twice.

A real ``jupyter server`` runs two jobs; one ends before the kill, the other runs through it
and ends while no server runs (jobs outlive their server by design). After the restart the
ledger's start and finish times give every job's usage once, exactly as its job says it ran.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from server_process import ServerProcess, wait_phase

pytestmark = pytest.mark.slow
NS = "team-alpha"
ADMIN = "import getpass\nc.JupyterQuota.admin_users = [getpass.getuser()]\n"


def epoch(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())


def held_seconds(job: dict) -> int:
    return epoch(job["finishedAt"]) - epoch(job["startedAt"])


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    srv = ServerProcess(tmp_path / "state", root, extra_config=ADMIN)
    yield srv
    srv.stop()


def test_usage_survives_a_kill_9_and_counts_each_job_once(server, tmp_path, request):
    release = tmp_path / "release"
    request.addfinalizer(release.touch)  # the job ends even when an assertion fails before it is told to
    server.start()
    for name, args in (("short", ["--sleep", "1"]), ("through", ["--until-file", str(release)])):
        status, job = server.call("POST", f"/namespaces/{NS}/jobs", {"name": name, "args": args, "gpus": 1})
        assert status == 201, job
    short = wait_phase(server, NS, "short", ("Succeeded",))
    wait_phase(server, NS, "through", ("Running",))
    query = f"/usage?by=job&namespace={NS}&since={short['createdAt']}"
    status, before = server.call("GET", query)
    assert status == 200 and {r["job"] for r in before["rows"]} == {"short", "through"}, before

    server.kill()  # SIGKILL: the running job goes on without its server
    release.touch()  # ... and ends while no server runs
    server.start()
    through = wait_phase(server, NS, "through", ("Succeeded",))
    status, after = server.call("GET", query)
    assert status == 200, after
    status, again = server.call("GET", query)
    print({r["job"]: r["gpuSeconds"] for r in after["rows"]})

    rows = {r["job"]: r for r in after["rows"]}
    # the rows, not the whole answer: its `until` (now, by default) moves on between the two reads
    assert len(after["rows"]) == 2, "one row per job"
    assert again["rows"] == after["rows"], "finished jobs stop counting"
    assert rows["short"] == next(r for r in before["rows"] if r["job"] == "short"), "unchanged by the restart"
    assert rows["short"]["gpuSeconds"] == held_seconds(short)
    assert rows["through"]["gpuSeconds"] == held_seconds(through)
    # the demo LimitRange's defaultRequest: 2 CPUs and 16Gi for the whole time each job ran
    assert rows["through"]["cpuSeconds"] == 2 * held_seconds(through)
    assert rows["through"]["memoryGibSeconds"] == 16 * held_seconds(through)
    assert after["totals"]["gpuSeconds"] == held_seconds(short) + held_seconds(through)
