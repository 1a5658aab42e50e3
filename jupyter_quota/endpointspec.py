"""The Deployment and Service an endpoint is on Kubernetes, built once, beside ``jobspec.build_job``.

The pod is the one ``jobspec.build_job`` builds for the same request (image, command, the plan's
requests and limits, volumes, node selector, tolerations, priority class, labels), so a served
model is admitted and counted by the ResourceQuota exactly as a fine-tune of the same size. What
serving changes is said here: the pod restarts (``Always``, a Deployment's only policy), it
listens on ``PORT`` on every address of its pod, and the kubelet marks it Ready when ``/health``
answers (a readiness probe, no liveness probe: loading a model may take minutes, and a probe that
killed it then would never let it start). One replica, replaced with ``Recreate``: a rolling
update would hold the quota twice.

The Service (ClusterIP, same port) gives the endpoint a stable in-cluster name
(``<name>.<namespace>.svc``); the quota service's proxy reaches the Ready pod by its IP
(``backends/kube/endpoints.py`` says why).
"""

from __future__ import annotations

from dataclasses import replace

from . import labels
from .endpoints import served_args
from .jobspec import JobRequest, JobSettings, build_job
from .profiles import TeamProfile

#: Where an endpoint's server listens in its pod: every address, ms-swift's default port.
HOST = "0.0.0.0"
PORT = 8000
#: The container port's name: the probe and the Service refer to it.
PORT_NAME = "http"
#: The probe ms-swift's server answers once the model is loaded.
HEALTH_PATH = "/health"
#: Seconds between readiness probes, and failures before the pod leaves the Service.
PROBE_PERIOD = 5
PROBE_FAILURES = 3


def served_request(request: JobRequest) -> JobRequest:
    """The request with where to listen appended (``--host 0.0.0.0 --port 8000``), as it is stored."""
    return replace(request, args=served_args(list(request.args), PORT, host=HOST))


def selector(name: str) -> dict:
    """The labels that pick an endpoint's pods (the Deployment's selector, the Service's)."""
    return {labels.MANAGED_BY: labels.MANAGED_BY_VALUE, labels.KIND: labels.KIND_ENDPOINT, labels.JOB: name}


def build_deployment(
    profile: TeamProfile, request: JobRequest, owner: str, command: list[str], settings: JobSettings | None = None
) -> dict:
    """The apps/v1 Deployment serving ``request`` (already :func:`served_request`) in ``profile``'s
    namespace. Kueue's queue is not used: the endpoint's pod is admitted by the ResourceQuota."""
    settings = replace(settings or JobSettings(), kueue_queue="")
    job = build_job(profile, replace(request, kind=labels.KIND_ENDPOINT), owner, command, settings)
    template = job["spec"]["template"]
    pod_spec = template["spec"]
    pod_spec["restartPolicy"] = "Always"
    container = pod_spec["containers"][0]
    container["ports"] = [{"name": PORT_NAME, "containerPort": PORT, "protocol": "TCP"}]
    container["readinessProbe"] = {
        "httpGet": {"path": HEALTH_PATH, "port": PORT_NAME},
        "periodSeconds": PROBE_PERIOD,
        "failureThreshold": PROBE_FAILURES,
    }
    metadata = job["metadata"]
    metadata.pop("generateName", None)  # the name is chosen before (create_named): a Service shares it
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector(request.name)},
            "strategy": {"type": "Recreate"},
            "template": template,
        },
    }


def build_service(deployment: dict) -> dict:
    """The ClusterIP Service in front of ``deployment``'s pod, with its name and labels."""
    meta = deployment["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "labels": dict(meta["labels"])},
        "spec": {
            "type": "ClusterIP",
            "selector": dict(deployment["spec"]["selector"]["matchLabels"]),
            "ports": [{"name": PORT_NAME, "port": PORT, "targetPort": PORT_NAME, "protocol": "TCP"}],
        },
    }
