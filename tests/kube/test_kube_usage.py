"""Usage on the kube backend: pod starts and finishes recorded by the service survive its kill -9.

A real ``jupyter server`` on the kube backend runs two jobs on the test cluster; it is killed
with SIGKILL while both run. While it is down one job finishes and the other is deleted (its pod
is gone for good). After a restart on the same state directory, ``GET /usage`` counts each
pod once: the finished one exactly from its pod's status, the deleted one from its start until
the restarted service saw it gone; and the figures stop moving once both are over.
"""

from __future__ import annotations

import getpass
import time
from datetime import datetime, timezone

import kubecluster
import pytest
from server_process import ServerProcess

from jupyter_quota.backends.kube import apply_profiles
from jupyter_quota.profiles import TeamProfile

pytestmark = pytest.mark.slow


def poll(fetch, predicate, timeout=90.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = fetch()
        if predicate(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {value}")
        time.sleep(0.3)


def epoch(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())


def test_usage_survives_a_kill_9_of_the_service_and_counts_nothing_twice(kube_cluster, namespace_name, tmp_path):
    ns = namespace_name
    profile = {
        "team": "usage",
        "namespace": ns,
        "users": [getpass.getuser()],
        "hard": {"requests.nvidia.com/gpu": "2"},
        "limitRange": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "100m", "memory": "128Mi"},
                                   "default": {"cpu": "1", "memory": "1Gi"}}]},
    }  # fmt: skip
    kube = kube_cluster.kube()
    apply_profiles([TeamProfile(**profile)], kube)
    kubecluster.wait_quota_status(kube, ns)
    root = tmp_path / "root"
    root.mkdir()
    server = ServerProcess(
        tmp_path / "state",
        root,
        extra_config=kubecluster.server_config(kube_cluster, profile),
    )
    since = datetime.fromtimestamp(time.time() - 3600, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    query = f"/usage?by=job&namespace={ns}&since={since}"

    def usage_by_job():
        status, body = server.call("GET", query)
        assert status == 200, body
        return {row["job"]: row for row in body["rows"]}, body

    def pods(job):
        return kube.get(f"/api/v1/namespaces/{ns}/pods", labelSelector=f"job-name={job}").get("items") or []

    try:
        server.start()
        for name, seconds in (("short", "8"), ("long", "3600")):
            status, job = server.call(
                "POST", f"/namespaces/{ns}/jobs", {"name": name, "args": ["--sleep", seconds], "gpus": 1}
            )
            assert status == 201, job
        poll(lambda: usage_by_job()[0], lambda rows: {"short", "long"} <= set(rows), what="both pods recorded")
        long_start = epoch(pods("long")[0]["status"]["startTime"])

        killed_at = time.time()
        server.kill()  # SIGKILL: no shutdown code runs

        short = poll(lambda: pods("short"), lambda p: p and p[0]["status"].get("phase") == "Succeeded",
                     what="short Succeeded while the service is down")[0]  # fmt: skip
        kube.delete(f"/apis/batch/v1/namespaces/{ns}/jobs/long", body={"propagationPolicy": "Background"})
        poll(lambda: pods("long"), lambda p: not p, what="long's pod deleted while the service is down")

        server.start()
        restarted_at = time.time()

        def two_looks():  # a running pod's row grows by a second each second
            before = usage_by_job()[0]
            time.sleep(1.1)
            return before, usage_by_job()[0]

        first, _ = poll(
            two_looks,
            lambda looks: {"short", "long"} <= set(looks[0]) and looks[0] == looks[1],
            what="both records finished after the restart",
        )
        time.sleep(2)  # a last look, later: finished records must not move
        rows, body = usage_by_job()
    finally:
        server.stop()

    print({job: {k: row[k] for k in ("gpuSeconds", "cpuSeconds", "memoryGibSeconds")} for job, row in rows.items()})
    assert rows == first and set(rows) == {"short", "long"}, "one row per job, unchanged once both ended"
    terminated = short["status"]["containerStatuses"][0]["state"]["terminated"]
    ran = epoch(terminated["finishedAt"]) - epoch(short["status"]["startTime"])
    assert rows["short"]["gpuSeconds"] == ran, "the finished pod: exactly its start to its finish"
    assert rows["short"]["cpuSeconds"] == pytest.approx(0.1 * ran)  # the LimitRange's defaultRequest
    assert rows["short"]["memoryGibSeconds"] == pytest.approx(ran * 128 / 1024)
    held = rows["long"]["gpuSeconds"]
    assert killed_at - long_start - 1 <= held <= time.time() - long_start, (
        "the deleted pod: from its start until the restarted service saw it gone"
    )
    assert held <= restarted_at - long_start + 60  # seen gone right after the restart, not later
    assert body["totals"]["gpuSeconds"] == rows["short"]["gpuSeconds"] + rows["long"]["gpuSeconds"]
