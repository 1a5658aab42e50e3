"""GET quota/v1/metrics on a real jupyter-server, in both modes: what a scrape parsed by
prometheus_client's own parser says after admissions, a refusal, a job that ran and one that
runs. Who may scrape: test_metrics_access.py."""

from __future__ import annotations

import getpass

import pytest
from prometheus_client.parser import text_string_to_metric_families
from quota_testing import QUOTA_MODES, wait_for_phase

SCRAPE_TOKEN = "scrape-token-for-tests"
SECRET_ARG = "/datasets/secret-customer-data.jsonl"


@pytest.fixture(params=QUOTA_MODES)
def quota_mode(request):
    return request.param


@pytest.fixture
def extra_quota_config():
    return {"admin_users": [getpass.getuser()], "metrics_token": SCRAPE_TOKEN}


def samples(text: str) -> list:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def value(found: list, name: str, **labels) -> float:
    matching = [s.value for s in found if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(matching) == 1, (name, labels, matching)
    return matching[0]


async def scrape(jp_fetch) -> str:
    response = await jp_fetch("quota", "v1", "metrics")
    assert response.code == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=")
    return response.body.decode()


async def wait_job(api, name, phases, timeout=120.0):
    return await wait_for_phase(api, "team-alpha", name, phases, timeout)


async def test_a_scrape_counts_what_happened_in_the_service(api, jp_fetch, hold):
    await scrape(jp_fetch)  # the first look: counters count from here
    status, held = await api(
        "POST", "namespaces", "team-alpha", "jobs", body={"args": [*hold, "--data", SECRET_ARG], "gpus": 1}
    )
    assert status == 201, held
    status, done = await api("POST", "namespaces", "team-alpha", "jobs", body={"args": ["--lines", "1"], "gpus": 1})
    assert status == 201, done
    status, refused = await api("POST", "namespaces", "team-alpha", "jobs", body={"args": [], "gpus": 2})
    assert status == 403 and refused["reason"] == "ExceededQuota", refused
    await wait_job(api, done["name"], ("Succeeded",))
    await wait_job(api, held["name"], ("Running",))

    text = await scrape(jp_fetch)
    found = samples(text)
    team = {"namespace": "team-alpha", "team": "alpha"}
    gpu = "requests.nvidia.com/gpu"
    assert value(found, "jupyter_quota_resourcequota", **team, resource=gpu, type="hard") == 2
    assert value(found, "jupyter_quota_resourcequota", **team, resource=gpu, type="used") == 1
    assert value(found, "jupyter_quota_resourcequota", **team, resource="limits.memory", type="hard") == 128 * 2**30
    assert value(found, "jupyter_quota_resourcequota_remaining", **team, resource=gpu) == 1
    assert value(found, "jupyter_quota_resourcequota_remaining", namespace="team-beta", team="beta", resource=gpu) == 2
    assert value(found, "jupyter_quota_admitted_jobs_total", **team) == 2
    assert value(found, "jupyter_quota_refused_jobs_total", **team, reason="ExceededQuota") == 1
    assert value(found, "jupyter_quota_jobs", **team, phase="Running") == 1
    assert value(found, "jupyter_quota_jobs", **team, phase="Pending") == 0
    me = getpass.getuser()
    assert value(found, "jupyter_quota_running_requests", **team, owner=me, resource="nvidia.com/gpu") == 1
    assert value(found, "jupyter_quota_finished_jobs_total", **team, phase="Succeeded", reason="") == 1
    assert value(found, "jupyter_quota_job_duration_seconds_count", **team, phase="Succeeded") == 1
    assert value(found, "jupyter_quota_job_queue_wait_seconds_count", **team) == 2
    assert value(found, "jupyter_quota_stalled_jobs", **team, reason="NoLogProgress") == 0
    assert SECRET_ARG not in text and "--data" not in text, "a job's arguments never reach a label"

    # Nothing is counted twice: a second scrape with no change in between says the same.
    again = samples(await scrape(jp_fetch))
    assert value(again, "jupyter_quota_finished_jobs_total", **team, phase="Succeeded", reason="") == 1
    assert value(again, "jupyter_quota_job_queue_wait_seconds_count", **team) == 2
