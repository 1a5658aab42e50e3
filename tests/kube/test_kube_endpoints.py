"""Endpoints on the kube backend against the real API server, its quota admission and its
deployment, replicaset and garbage-collector controllers; the simulated nodes play the kubelet
(a pod's ``--sleep``/``--exit`` decide its course). The real ``swift deploy`` on the real node is
``test_endpoints_on_node.py``."""

from __future__ import annotations

import time

import kubecluster
import pytest
from kubecluster import team_profile, until

from jupyter_quota import endpoints, errors
from jupyter_quota.backends.kube import apply_profiles
from jupyter_quota.backends.kube.client import KubeError

GPU = "requests.nvidia.com/gpu"


@pytest.fixture
def team(kube, namespace_name):
    profile = team_profile(namespace_name)  # 2 GPUs
    apply_profiles([profile], kube)
    kubecluster.wait_quota_status(kube, namespace_name)
    return profile


def create(backend, profile, name: str, gpus: int, *args: str) -> dict:
    request = endpoints.parse_endpoint_request({"name": name, "args": ["--model", "m", *args], "gpus": gpus}, profile)
    deployment = backend.endpoints.build_job(profile, request, "alice", kubecluster.JOB_COMMAND)
    return backend.endpoints.submit(profile, deployment, "alice")


def used_gpus(kube, namespace: str) -> str:
    (quota,) = kube.get(f"/api/v1/namespaces/{namespace}/resourcequotas")["items"]
    return quota["status"]["used"][GPU]


def objects(kube, namespace: str) -> list[str]:
    deployments = kube.get(f"/apis/apps/v1/namespaces/{namespace}/deployments")["items"]
    services = kube.get(f"/api/v1/namespaces/{namespace}/services")["items"]
    return [f"deployment/{d['metadata']['name']}" for d in deployments] + [
        f"service/{s['metadata']['name']}" for s in services
    ]


def test_an_endpoint_past_the_quota_is_refused_with_the_api_servers_words_and_nothing_is_made(
    kube, team, make_kube_backend
):
    backend = make_kube_backend()
    with pytest.raises(errors.AdmissionDenied) as refused:
        create(backend, team, "big", 3, "--sleep", "600")
    assert refused.value.message == (
        "exceeded quota: team-quota, requested: requests.nvidia.com/gpu=3, "
        "used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=2"
    )
    assert objects(kube, team.namespace) == []


def test_a_serving_pod_holds_the_quota_from_create_so_the_next_is_refused_until_delete(kube, team, make_kube_backend):
    backend = make_kube_backend()
    first = create(backend, team, "first", 2, "--sleep", "600")
    assert first["phase"] == "Pending" and first["kind"] == "endpoint"
    # the submit's turn lasted until the ReplicaSet's pod existed: the quota holds it already
    assert used_gpus(kube, team.namespace) == "2"
    assert objects(kube, team.namespace) == ["deployment/first", "service/first"]
    with pytest.raises(errors.AdmissionDenied) as refused:
        create(backend, team, "second", 1, "--sleep", "600")
    assert "used: requests.nvidia.com/gpu=2" in refused.value.message
    until(lambda: backend.endpoints.get_job(team, "first")["phase"] == "Running", 30, "the pod to run")
    assert backend.endpoints.base_url(backend.endpoints.get_job(team, "first")) == "http://10.244.0.10:8000"

    stopped = backend.endpoints.cancel(team, "first", "alice")
    assert (stopped["phase"], stopped["reason"], stopped["message"]) == ("Failed", "Cancelled", "stopped by alice")
    assert endpoints.phase_of(stopped, False) == "Stopped"
    assert backend.endpoints.get_job(team, "first")["reason"] == "Cancelled"  # remembered
    until(lambda: used_gpus(kube, team.namespace) == "0", 60, "the quota to be freed")
    until(lambda: objects(kube, team.namespace) == [], 60, "the Deployment and Service to go")
    second = create(backend, team, "second", 1, "--sleep", "600")
    assert second["name"] == "second"
    assert [e["name"] for e in backend.endpoints.list_jobs(team)] == ["second", "first"]


def test_a_server_that_exits_fails_the_endpoint_and_gives_its_quota_back(kube, team, make_kube_backend):
    """The simulated node has no kubelet to serve the log: the endpoint fails without it once its
    reads got nothing for ``log_tail_patience`` seconds (shortened here)."""
    backend = make_kube_backend()
    backend.endpoints.log_tail_patience = 2.0
    create(backend, team, "crash", 1, "--exit", "3")

    def failed():
        job = backend.endpoints.get_job(team, "crash")
        return job if job["phase"] == "Failed" else None

    began = time.monotonic()
    job = until(failed, 60, "the endpoint to fail")
    assert time.monotonic() - began >= 2.0  # not before the reads got nothing for that long
    assert (job["reason"], job["exitCode"]) == ("Error", 3)
    assert job["message"] == "the server exited with code 3"
    assert endpoints.phase_of(job, False) == "Failed"
    # Kubernetes would restart it for ever: the first read that saw it fail deleted it instead
    until(lambda: objects(kube, team.namespace) == [], 60, "the failed endpoint's objects to go")
    until(lambda: used_gpus(kube, team.namespace) == "0", 60, "the quota to be freed")
    assert backend.endpoints.get_job(team, "crash")["reason"] == "Error"


def test_a_log_not_readable_at_the_first_read_is_read_again_and_the_failure_carries_its_tail(
    kube, team, make_kube_backend, monkeypatch
):
    """Right after a crash the kubelet may not serve the ended container's log yet (the container
    it restarts is being created, or its log is still empty): that read must not end the endpoint
    with no tail; the next read reads it again, and ends it with the tail."""
    backend = make_kube_backend()
    reads = []
    read = backend.kube.request

    def request(method, path, **kwargs):
        if not path.endswith("/log"):
            return read(method, path, **kwargs)
        reads.append(kwargs.get("query"))
        if len(reads) == 1:
            raise KubeError(400, "BadRequest", 'container "train" is waiting to start: ContainerCreating')
        if len(reads) == 2:
            return ""  # the new container's log, nothing written yet
        return "loading the model\nValueError: no such model\n"

    monkeypatch.setattr(backend.kube, "request", request)
    create(backend, team, "crash", 1, "--exit", "3")

    def failed():
        job = backend.endpoints.get_job(team, "crash")
        return job if job["phase"] == "Failed" else None

    job = until(failed, 60, "the endpoint to fail")
    assert len(reads) == 3, reads
    assert (job["reason"], job["exitCode"]) == ("Error", 3), job
    assert job["message"] == "the server exited with code 3; the last lines of its log:\n" + (
        "loading the model\nValueError: no such model"
    )
    until(lambda: objects(kube, team.namespace) == [], 60, "the failed endpoint's objects to go")
    until(lambda: used_gpus(kube, team.namespace) == "0", 60, "the quota to be freed")
    assert backend.endpoints.get_job(team, "crash")["message"] == job["message"]
    assert len(reads) == 3, reads  # the ended endpoint is remembered: no more reads
