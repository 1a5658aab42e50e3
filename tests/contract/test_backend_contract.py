"""The backend contract (``backends/base.py``), the same assertions on ``local`` and ``kube``."""

from __future__ import annotations

import re

import pytest

from jupyter_quota import errors

GPU_KEY = "requests.nvidia.com/gpu"
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
LIMITS = {
    "limits": [
        {
            "type": "Container",
            "max": {"cpu": "4"},
            "default": {"cpu": "500m", "memory": "1Gi"},
            "defaultRequest": {"cpu": "250m", "memory": "512Mi"},
        }
    ]
}


def phase_is(*phases):
    return lambda job: job["phase"] in phases


def test_balance_reads_the_profiles_quota(harness):
    profile = harness.profile(hard={GPU_KEY: "2", "requests.cpu": "8", "count/jobs.batch": "5"}, limitRange=LIMITS)
    backend = harness.backend(profile)
    balance = backend.balance(profile)
    assert balance["namespace"] == profile.namespace and balance["team"] == profile.team
    assert balance["resources"][GPU_KEY] == {"hard": "2", "used": "0", "remaining": "2"}
    assert balance["resources"]["requests.cpu"] == {"hard": "8", "used": "0", "remaining": "8"}
    assert balance["resources"]["count/jobs.batch"]["hard"] == "5"
    assert [q["name"] for q in balance["quotas"]] == ["team-quota"]
    assert balance["limitRange"]["limits"][0]["defaultRequest"] == {"cpu": "250m", "memory": "512Mi"}
    assert balance["stale"] is False
    assert RFC3339.match(balance["observedAt"])


def test_submit_within_quota_returns_the_job_and_charges_the_balance(harness):
    profile = harness.profile()
    backend = harness.backend(profile)
    job = backend.submit(profile, harness.job(profile, "ft-1", "--sleep", "600", "--model", "qwen"), owner="alice")
    assert job["name"] == "ft-1" and job["namespace"] == profile.namespace and job["team"] == profile.team
    assert job["owner"] == "alice"
    assert job["phase"] in ("Pending", "Running")
    assert job["args"] == ["--sleep", "600", "--model", "qwen"]
    assert job["gpus"] == 1
    assert job["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert job["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert RFC3339.match(job["createdAt"])
    assert [j["name"] for j in backend.list_jobs(profile)] == ["ft-1"]
    harness.wait(backend, profile, "ft-1", phase_is("Running"))
    harness.wait_used(backend, profile, "1")
    backend.cancel(profile, "ft-1", by="alice")


def test_over_quota_is_refused_with_the_api_servers_text(harness):
    profile = harness.profile()
    backend = harness.backend(profile)
    backend.submit(profile, harness.job(profile, "big", "--sleep", "600", gpus=2), owner="alice")
    harness.wait_used(backend, profile, "2")
    with pytest.raises(errors.AdmissionDenied) as refused:
        backend.submit(profile, harness.job(profile, "one-more", gpus=1), owner="alice")
    assert refused.value.status == 403
    assert refused.value.reason == "ExceededQuota"
    assert refused.value.message == (
        "exceeded quota: team-quota, requested: requests.nvidia.com/gpu=1, "
        "used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2"
    )
    assert [j["name"] for j in backend.list_jobs(profile)] == ["big"]
    with pytest.raises(errors.NotFound):
        backend.get_job(profile, "one-more")
    backend.cancel(profile, "big", by="alice")


def test_limit_range_defaults_what_the_job_leaves_out_and_bounds_the_rest(harness):
    profile = harness.profile(hard={GPU_KEY: "2", "requests.cpu": "8"}, limitRange=LIMITS)
    backend = harness.backend(profile)
    job = backend.submit(profile, harness.job(profile, "only-gpus", "--sleep", "600"), owner="alice")
    expected = {
        "requests": {"cpu": "250m", "memory": "512Mi", "nvidia.com/gpu": "1"},
        "limits": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"},
    }
    assert job["resources"] == expected
    running = harness.wait(backend, profile, "only-gpus", phase_is("Running"))
    assert running["resources"] == expected
    harness.wait_used(backend, profile, "250m", key="requests.cpu")
    with pytest.raises(errors.AdmissionDenied) as refused:
        backend.submit(profile, harness.job(profile, "too-wide", resources={"limits": {"cpu": "6"}}), owner="alice")
    assert refused.value.message == "maximum cpu usage per Container is 4, but limit is 6"
    assert refused.value.status == 403
    backend.cancel(profile, "only-gpus", by="alice")


def test_a_job_runs_to_succeeded(harness):
    profile = harness.profile()
    backend = harness.backend(profile)
    backend.submit(profile, harness.job(profile, "ok", "--sleep", "0.5"), owner="alice")
    done = harness.wait(backend, profile, "ok", phase_is("Succeeded", "Failed"))
    assert done["phase"] == "Succeeded"
    assert done.get("exitCode") == 0
    assert RFC3339.match(done["startedAt"]) and RFC3339.match(done["finishedAt"])
    harness.wait_used(backend, profile, "0")


def test_a_job_runs_to_failed_with_its_exit_code(harness):
    profile = harness.profile()
    backend = harness.backend(profile)
    backend.submit(profile, harness.job(profile, "bad", "--sleep", "0.2", "--exit", "3"), owner="alice")
    done = harness.wait(backend, profile, "bad", phase_is("Succeeded", "Failed"))
    assert done["phase"] == "Failed"
    assert done["exitCode"] == 3
    assert done.get("reason")
    assert RFC3339.match(done["finishedAt"])
    harness.wait_used(backend, profile, "0")


def test_cancel_stops_the_job_and_releases_its_quota(harness):
    profile = harness.profile()
    backend = harness.backend(profile)
    backend.submit(profile, harness.job(profile, "long", "--sleep", "600", gpus=2), owner="alice")
    harness.wait(backend, profile, "long", phase_is("Running"))
    harness.wait_used(backend, profile, "2")
    cancelled = backend.cancel(profile, "long", by="bob")
    assert (cancelled["phase"], cancelled.get("reason")) in (("Failed", "Cancelled"), ("Running", "Terminating"))
    final = harness.wait(backend, profile, "long", phase_is("Failed"))
    assert final["reason"] == "Cancelled" and "bob" in final["message"]
    harness.wait_used(backend, profile, "0")
    # The freed quota admits a new job.
    backend.submit(profile, harness.job(profile, "next", "--sleep", "0.1", gpus=2), owner="alice")
    harness.wait(backend, profile, "next", phase_is("Succeeded"))
    # Cancelling what already ended changes nothing.
    assert backend.cancel(profile, "next", by="bob")["phase"] == "Succeeded"


def test_a_new_backend_object_finds_jobs_and_usage_again(harness):
    profile = harness.profile()
    first = harness.backend(profile)
    first.submit(profile, harness.job(profile, "survivor", "--sleep", "600"), owner="alice")
    harness.wait(first, profile, "survivor", phase_is("Running"))
    harness.wait_used(first, profile, "1")
    first.close()
    second = harness.backend(profile)
    job = second.get_job(profile, "survivor")
    assert job["phase"] == "Running" and job["owner"] == "alice" and job["gpus"] == 1
    assert [j["name"] for j in second.list_jobs(profile)] == ["survivor"]
    assert second.balance(profile)["resources"][GPU_KEY]["used"] == "1"
    with pytest.raises(errors.AdmissionDenied):
        second.submit(profile, harness.job(profile, "too-many", gpus=2), owner="alice")
    second.cancel(profile, "survivor", by="alice")
    harness.wait(second, profile, "survivor", phase_is("Failed"))


def test_names_are_unique_and_unknown_jobs_are_not_found(harness):
    profile = harness.profile()
    backend = harness.backend(profile)
    backend.submit(profile, harness.job(profile, "same", "--sleep", "600"), owner="alice")
    with pytest.raises(errors.Conflict) as taken:
        backend.submit(profile, harness.job(profile, "same"), owner="bob")
    assert taken.value.message == 'jobs.batch "same" already exists'
    for call in (
        lambda: backend.get_job(profile, "nope"),
        lambda: backend.cancel(profile, "nope", by="x"),
        lambda: backend.logs(profile, "nope"),
    ):
        with pytest.raises(errors.NotFound) as missing:
            call()
        assert missing.value.message == 'jobs.batch "nope" not found'
    backend.cancel(profile, "same", by="alice")


def test_jobs_come_in_pages_newest_first_and_a_bad_position_is_a_400(harness):
    profile = harness.profile(hard={GPU_KEY: "10"})
    backend = harness.backend(profile)
    for name in ("p-1", "p-2", "p-3"):
        backend.submit(profile, harness.job(profile, name, "--sleep", "600", gpus=0), owner="alice")
    first = backend.page_jobs(profile, 2)
    assert [j["name"] for j in first.items] == ["p-3", "p-2"]
    assert first.remaining == 1 and first.next_start
    second = backend.page_jobs(profile, 2, first.next_start)
    assert [j["name"] for j in second.items] == ["p-1"]
    assert second.next_start is None and second.remaining is None
    assert [j["name"] for j in backend.page_jobs(profile, 3).items] == ["p-3", "p-2", "p-1"]
    assert backend.page_jobs(profile, 3).next_start is None
    assert [j["name"] for j in backend.list_jobs(profile)] == ["p-3", "p-2", "p-1"]
    with pytest.raises(errors.InvalidRequest, match="invalid continue token"):
        backend.page_jobs(profile, 2, "not a position")
    for name in ("p-1", "p-2", "p-3"):
        backend.cancel(profile, name, by="alice")
