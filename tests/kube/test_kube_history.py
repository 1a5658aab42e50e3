"""The kube backend's history for recommendations (issue 21), on a real kube-apiserver v1.20.2:
what ran (with its Job's submission), what waited without a pod, and submits the quota refused,
so that demand and the p90 wait on Kubernetes see what the local ledger sees."""

from __future__ import annotations

from datetime import datetime

import pytest
from test_kube_backend import build, setup_team, wait

from jupyter_quota import demand, errors, recommend

pytestmark = pytest.mark.slow
GPU_KEY = "requests.nvidia.com/gpu"


def epoch(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())


def test_kube_history_has_submissions_waiting_jobs_and_refusals(kube, namespace_name, make_kube_backend, tmp_path):
    ns = namespace_name
    profile = setup_team(kube, ns)  # 2 GPUs
    usage_path = str(tmp_path / "usage.sqlite3")
    backend = make_kube_backend(usage_path=usage_path)
    assert backend.cache.wait(lambda: backend.cache["resourcequotas"].items(ns), 10)
    since = int(datetime.now().timestamp()) - 60

    def records():
        return backend.job_records(since, int(datetime.now().timestamp()) + 3600, [ns])

    def pods(name):
        return kube.get(f"/api/v1/namespaces/{ns}/pods", labelSelector=f"job-name={name}").get("items") or []

    backend.submit(profile, build(backend, profile, "big", "--sleep", "600", gpus=2), owner="alice")
    created = epoch(kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs/big")["metadata"]["creationTimestamp"])
    (ran,) = wait(lambda: [r for r in records() if r.started is not None], what="big's pod recorded as started")
    started = epoch(wait(lambda: pods("big") and pods("big")[0]["status"].get("startTime"), what="big's start"))
    assert (ran.user, ran.gpus, ran.submitted, ran.started) == ("alice", 2.0, created, started)

    # the quota is full: the pre-check refuses (the API server would, with the same text)
    with pytest.raises(errors.AdmissionDenied) as refused:
        backend.submit(profile, build(backend, profile, "more", "--sleep", "600"), owner="alice")
    assert refused.value.reason == "ExceededQuota"
    (asked,) = [r for r in records() if r.started is None]
    assert (asked.user, asked.gpus, asked.finished) == ("alice", 1.0, None)  # asks until alice retries

    # a Job created past the service: the API server refuses its pod, so it waits without one
    kube.post(f"/apis/batch/v1/namespaces/{ns}/jobs", build(backend, profile, "direct", "--sleep", "600"))
    direct_created = epoch(kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs/direct")["metadata"]["creationTimestamp"])
    waiting = wait(
        lambda: [r for r in records() if r.started is None] if len(records()) == 3 else None,
        what="the Job without a pod recorded as waiting",
    )  # the refusal and the Job (both may carry the same second)
    assert sorted((r.submitted, r.gpus, r.finished) for r in waiting) == sorted(
        [(asked.submitted, 1.0, None), (direct_created, 1.0, None)]
    )
    now = int(datetime.now().timestamp())
    asked_at_once = demand.demand(records(), since, now + 1, lambda r: r.gpus)
    held = demand.demand(records(), since, now + 1, lambda r: r.gpus, running=True)
    assert (max(asked_at_once.values), max(held.values)) == (4.0, 2.0)  # 2 ran, 2 more asked

    # deleted while it waited: it asked until the recorder saw it gone
    kube.delete(f"/apis/batch/v1/namespaces/{ns}/jobs/direct", body={"propagationPolicy": "Background"})
    (gone,) = wait(
        lambda: [r for r in records() if r.started is None and r.submitted == direct_created and r.finished],
        what="the deleted waiting Job ended",
    )
    assert direct_created <= gone.finished <= int(datetime.now().timestamp())

    # big is cancelled, alice retries: her refusal ends at the retry's creation, which runs
    backend.cancel(profile, "big", by="alice")
    wait(lambda: not pods("big"), what="big's pod deleted")
    wait(lambda: _gpus_used(kube, ns) == "0", what="the quota controller released big's GPUs")
    retried = backend.submit(profile, build(backend, profile, "more", "--sleep", "600"), owner="alice")
    retry_created = epoch(retried["createdAt"])
    assert (asked.submitted, None, retry_created) in [(r.submitted, r.started, r.finished) for r in records()]
    (more,) = wait(
        lambda: [r for r in records() if r.started is not None and r.gpus == 1.0],  # big has 2
        what="the retry's pod recorded",
    )
    assert more.submitted == retry_created  # the pod carries its Job's submission
    assert more.wait(now + 3600) == more.started - retry_created
    more_pod = wait(lambda: pods("more"), what="the retry's pod listed")[0]["metadata"]["uid"]

    # the service's p90 wait is known on Kubernetes now, and a restart counts nothing twice
    seen = sorted(records(), key=repr)
    rows = recommend.recommend_team(profile.team, ns, dict(profile.hard), "nvidia.com/gpu", seen, since, now + 60)
    assert next(r for r in rows if r["resource"] == GPU_KEY)["waitP90Seconds"] is not None
    backend.close()
    again = make_kube_backend(usage_path=usage_path)
    again.usage.stop()  # its ticker's sweeps done; one more, with the caches synced, races nothing
    again.usage.sweep()
    assert more_pod in again.usage._written
    assert sorted(again.job_records(since, int(datetime.now().timestamp()) + 3600, [ns]), key=repr) == seen


def _gpus_used(kube, namespace):
    (quota,) = kube.get(f"/api/v1/namespaces/{namespace}/resourcequotas")["items"]
    return (quota.get("status") or {}).get("used", {}).get(GPU_KEY)
