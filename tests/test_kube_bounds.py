"""Quantities written straight into the cluster (kubectl) reach the kube backend bounded.

The kube-apiserver stores a ResourceQuota ``hard`` of ``1e200000`` or a pod request of 100,000
digits; the REST API refuses such input (``bounds.quantity``), but the watch cache reads what
the cluster holds. These tests feed such objects to the backend's watch cache as watch events
(no API server: ``cache.Reflector`` applies events without calling one) and read balance, plan
and the job list: each answers, with the huge value counted as 2^63-1 (``bounds.clamp``, as the
local backend does), and normal values stay exactly as the cluster wrote them.
"""

from __future__ import annotations

import copy
import time

import kubernetes.client
import pytest

from jupyter_quota import bounds, jobspec
from jupyter_quota.backends.kube import KubeBackend
from jupyter_quota.backends.kube.client import Kube
from jupyter_quota.planner import context_from_balance, plan
from jupyter_quota.profiles import TeamProfile

NAMESPACE = "team-a"
HUGE = "1e200000"
LONG = "9" * 100_000
BOUND = str(bounds.MAX_QUANTITY)
GPU_KEY = "requests.nvidia.com/gpu"


@pytest.fixture
def backend():
    # Never started: no watch runs and nothing calls the (unreachable) API server.
    return KubeBackend(Kube(kubernetes.client.ApiClient()), job_image="trainer:1")


@pytest.fixture
def profile():
    return TeamProfile(team="a", namespace=NAMESPACE, users=["alice"], hard={GPU_KEY: "2"})


def added(backend, kind, obj):
    backend.cache[kind]._event({"type": "ADDED", "object": copy.deepcopy(obj)})


def resource_quota(hard: dict, used: dict) -> dict:
    return {
        "metadata": {"name": "team-quota", "namespace": NAMESPACE, "resourceVersion": "5"},
        "spec": {"hard": dict(hard)},
        "status": {"hard": dict(hard), "used": dict(used)},
    }


def limit_range(maximum: dict, default: dict) -> dict:
    return {
        "metadata": {"name": "team-limits", "namespace": NAMESPACE, "resourceVersion": "6"},
        "spec": {
            "limits": [
                {"type": "Container", "max": dict(maximum), "default": dict(default), "defaultRequest": dict(default)}
            ]
        },
    }


def job_with_requests(profile, name: str, requests: dict, created: str) -> dict:
    request = jobspec.parse_job_request({"name": name, "args": ["--model", "m"], "gpus": 1}, profile)
    job = jobspec.build_job(profile, request, "alice", ["swift", "sft"], jobspec.JobSettings(image="trainer:1"))
    job["metadata"].update(namespace=NAMESPACE, uid=f"uid-{name}", resourceVersion="7", creationTimestamp=created)
    container = job["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": dict(requests), "limits": dict(requests)}
    return job


def timed(call):
    start = time.monotonic()
    value = call()
    return value, time.monotonic() - start


@pytest.mark.parametrize("huge", [HUGE, LONG], ids=["exponent", "100000-digits"])
def test_a_huge_quota_from_the_cluster_reads_as_the_bound_and_the_balance_answers(backend, profile, huge):
    added(
        backend,
        "resourcequotas",
        resource_quota(
            {GPU_KEY: huge, "requests.cpu": "8", "requests.memory": "64Gi"},
            {GPU_KEY: "1", "requests.cpu": "1500m", "requests.memory": "1Gi"},
        ),
    )
    added(backend, "limitranges", limit_range({"cpu": huge, "memory": "32Gi"}, {"cpu": "500m", "memory": "1Gi"}))

    balance, seconds = timed(lambda: backend.balance(profile))

    gpus = balance["resources"][GPU_KEY]
    assert gpus["hard"] == BOUND and gpus["used"] == "1" and gpus["remaining"] == str(bounds.MAX_QUANTITY - 1)
    # normal values exactly as the cluster wrote them
    assert balance["resources"]["requests.cpu"] == {"hard": "8", "used": "1500m", "remaining": "6500m"}
    assert balance["resources"]["requests.memory"]["hard"] == "64Gi"
    limits = balance["limitRange"]["limits"][0]
    assert limits["max"] == {"cpu": BOUND, "memory": "32Gi"} and limits["default"] == {"cpu": "500m", "memory": "1Gi"}
    assert seconds < 5, f"a balance took {seconds:.1f} s"


def test_the_plan_reads_a_balance_with_a_huge_quota(backend, profile):
    added(
        backend,
        "resourcequotas",
        resource_quota(
            {GPU_KEY: "2", "requests.memory": HUGE, "requests.cpu": LONG},
            {GPU_KEY: "0", "requests.memory": "1Gi", "requests.cpu": "1"},
        ),
    )
    context = context_from_balance(backend.balance(profile), profile, gpu_memory="80Gi")
    result = plan(["--model", "Qwen/Qwen2.5-7B-Instruct", "--train_type", "lora"], context).to_json()
    assert result["gpusFree"] == 2 and result["request"]["gpus"] == 1


@pytest.mark.parametrize("huge", [HUGE, LONG], ids=["exponent", "100000-digits"])
def test_jobs_with_huge_requests_from_the_cluster_are_listed(backend, profile, huge):
    added(
        backend,
        "jobs",
        job_with_requests(profile, "big", {"cpu": huge, "nvidia.com/gpu": huge}, "2026-01-02T00:00:00Z"),
    )
    added(
        backend,
        "jobs",
        job_with_requests(profile, "small", {"cpu": "250m", "nvidia.com/gpu": "1"}, "2026-01-01T00:00:00Z"),
    )

    page = backend.page_jobs(profile, 10)

    big, small = page.items
    assert big["name"] == "big" and big["resources"]["requests"]["cpu"] == BOUND
    assert big["gpus"] == bounds.MAX_QUANTITY
    assert small["name"] == "small" and small["resources"]["requests"] == {"cpu": "250m", "nvidia.com/gpu": "1"}
    assert small["gpus"] == 1
    assert backend.get_job(profile, "big")["resources"]["limits"]["cpu"] == BOUND


def test_quotas_read_from_the_server_for_admission_are_bounded_too(backend):
    from jupyter_quota.backends.kube.bounded import bounded

    quota = bounded("resourcequotas", resource_quota({GPU_KEY: HUGE, "pods": "10"}, {GPU_KEY: LONG, "pods": "0"}))
    assert quota["status"]["hard"] == {GPU_KEY: BOUND, "pods": "10"}
    assert quota["status"]["used"] == {GPU_KEY: BOUND, "pods": "0"}
    assert quota["spec"]["hard"] == {GPU_KEY: BOUND, "pods": "10"}
