"""The Deployment and Service of an endpoint on Kubernetes (``endpointspec``), and how their pod's
status reads as an endpoint's phase (``backends/kube/endpointview``). Pure: no cluster; the real
node runs them in tests/kube/test_endpoints_on_node.py."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from jupyter_quota import endpoints, endpointspec, jobspec, labels, reasons
from jupyter_quota.backends.kube import endpointview
from jupyter_quota.profiles import TeamProfile

PROFILE = TeamProfile(
    team="alpha",
    namespace="team-alpha",
    users=["ann"],
    hard={"requests.nvidia.com/gpu": "2"},
    image="registry.example/swift:1",
    nodeSelector={"gpu": "h100"},
    tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    priorityClassName="team-normal",
)
SETTINGS = jobspec.JobSettings(image_pull_policy="IfNotPresent", mounts=True, kueue_queue="team-queue")
ARGS = ["--model", "/models/tiny", "--infer_backend", "transformers"]
RESOURCES = {"requests": {"cpu": "1", "memory": "6Gi"}, "limits": {"memory": "6Gi"}}


def request(name="chat"):
    """An endpoint request as the service parses it, with a plan's resources (a LimitRange's defaults
    would stand in on a cluster when the body gives none)."""
    parsed = endpoints.parse_endpoint_request({"name": name, "args": ARGS, "gpus": 1}, PROFILE)
    resources = jobspec.parse_job_request({"args": [], "gpus": 1, "resources": RESOURCES}, PROFILE).resources
    return endpointspec.served_request(replace(parsed, resources=resources))


def deployment(name="chat"):
    return endpointspec.build_deployment(PROFILE, request(name), "ann", ["swift", "deploy"], SETTINGS)


def test_the_deployments_pod_is_the_job_builders_pod_with_what_serving_adds():
    served = request()
    built = deployment()
    job = jobspec.build_job(PROFILE, served, "ann", ["swift", "deploy"], replace(SETTINGS, kueue_queue=""))
    pod = copy.deepcopy(built["spec"]["template"])
    container = pod["spec"]["containers"][0]
    assert pod["spec"].pop("restartPolicy") == "Always"
    assert container.pop("ports") == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert container.pop("readinessProbe") == {
        "httpGet": {"path": "/health", "port": "http"},
        "periodSeconds": endpointspec.PROBE_PERIOD,
        "failureThreshold": endpointspec.PROBE_FAILURES,
    }
    assert "livenessProbe" not in container  # a model that loads for minutes is not killed
    expected = copy.deepcopy(job["spec"]["template"])
    expected["spec"].pop("restartPolicy")
    assert pod == expected
    # the image, the plan's requests and limits, the node selector and the priority class are the job's
    assert container["image"] == "registry.example/swift:1"
    assert container["resources"] == {
        "requests": {"cpu": "1", "memory": "6Gi", "nvidia.com/gpu": "1"},
        "limits": {"memory": "6Gi", "nvidia.com/gpu": "1"},
    }
    assert pod["spec"]["nodeSelector"] == {"gpu": "h100"}
    assert pod["spec"]["priorityClassName"] == "team-normal"
    assert container["command"] == ["swift", "deploy", *ARGS, "--host", "0.0.0.0", "--port", "8000"]


def test_the_deployment_is_one_replica_replaced_never_beside_itself_and_labelled_an_endpoint():
    built = deployment()
    meta, spec = built["metadata"], built["spec"]
    assert (built["apiVersion"], built["kind"]) == ("apps/v1", "Deployment")
    assert (meta["name"], meta["namespace"]) == ("chat", "team-alpha")
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    assert meta["labels"][labels.KIND] == labels.KIND_ENDPOINT and meta["labels"][labels.JOB] == "chat"
    assert meta["labels"][labels.MANAGED_BY] == labels.MANAGED_BY_VALUE
    assert labels.KUEUE_QUEUE_NAME not in meta["labels"]  # admitted by the ResourceQuota, not Kueue
    template_labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= template_labels.items()
    assert spec["selector"]["matchLabels"] == endpointspec.selector("chat")
    assert meta["annotations"][labels.OWNER] == "ann"
    # the stored args say where it listens: what the service's proxy and probe read (port_of)
    job = {"args": endpoints.served_args(ARGS, 8000, host=endpointspec.HOST)}
    assert endpoints.port_of(job) == endpointspec.PORT
    assert "generateName" not in meta


def test_the_service_selects_the_deployments_pods_on_the_probed_port():
    built = deployment()
    service = endpointspec.build_service(built)
    assert (service["apiVersion"], service["kind"]) == ("v1", "Service")
    assert service["metadata"] == {"name": "chat", "namespace": "team-alpha", "labels": built["metadata"]["labels"]}
    assert service["spec"]["selector"] == built["spec"]["selector"]["matchLabels"]
    (port,) = service["spec"]["ports"]
    container_port = built["spec"]["template"]["spec"]["containers"][0]["ports"][0]
    assert port["targetPort"] == container_port["name"] and port["port"] == container_port["containerPort"]
    assert service["spec"]["type"] == "ClusterIP"


# -- the phase from the pod ----------------------------------------------------------------------


def created(name="chat"):
    built = deployment(name)
    built["metadata"].update(uid="d-1", creationTimestamp="2026-01-01T00:00:00Z")
    return built


def pod(phase="Running", **status):
    return {
        "metadata": {
            "name": "chat-abc-xyz",
            "uid": "p-1",
            "creationTimestamp": "2026-01-01T00:00:01Z",
            "labels": endpointspec.selector("chat"),
        },
        "spec": created()["spec"]["template"]["spec"],
        "status": {"phase": phase, "startTime": "2026-01-01T00:00:02Z", **status},
    }


def server_status(restarts=0, state=None, last=None):
    return {
        "containerStatuses": [
            {"name": "train", "restartCount": restarts, "state": state or {"running": {}}, "lastState": last or {}}
        ]
    }


def view(pods, deployment=None, log_tail=""):
    return endpointview.endpoint_job(deployment or created(), pods, log_tail=log_tail)


def test_no_pod_yet_is_pending_and_a_running_pod_is_running():
    assert view([])["phase"] == "Pending"
    running = view([pod(**server_status())])
    assert (running["phase"], running["kind"], running["startedAt"]) == ("Running", "endpoint", "2026-01-01T00:00:02Z")
    assert running["args"] == [*ARGS, "--host", "0.0.0.0", "--port", "8000"]
    assert running["gpus"] == 1 and running["owner"] == "ann"


def test_a_pod_no_node_can_hold_is_pending_with_the_schedulers_reason():
    unschedulable = pod(
        "Pending",
        conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes"}],
    )
    shown = view([unschedulable])
    assert (shown["phase"], shown["reason"], shown["message"]) == ("Pending", reasons.UNSCHEDULABLE, "0/1 nodes")


def test_an_image_the_node_cannot_get_fails_the_endpoint_naming_the_image():
    waiting = {"waiting": {"reason": "ErrImageNeverPull", "message": "never pull"}}
    shown = view([pod("Pending", **server_status(state=waiting))])
    assert (shown["phase"], shown["reason"]) == ("Failed", "ErrImageNeverPull")
    assert "registry.example/swift:1" in shown["message"]


@pytest.mark.parametrize("state", ["waiting", "running"])
def test_a_server_killed_for_its_memory_limit_fails_as_oom_killed_naming_the_limit(state):
    last = {"terminated": {"reason": "OOMKilled", "exitCode": 137, "finishedAt": "2026-01-01T00:01:00Z"}}
    now = {"waiting": {"reason": "CrashLoopBackOff"}} if state == "waiting" else {"running": {}}
    shown = view([pod(**server_status(restarts=1, state=now, last=last))])
    assert (shown["phase"], shown["reason"], shown["exitCode"]) == ("Failed", reasons.OOM_KILLED, 137)
    assert "(6Gi)" in shown["message"] and shown["finishedAt"] == "2026-01-01T00:01:00Z"


def test_a_server_that_exited_fails_with_its_code_and_log_tail():
    last = {"terminated": {"reason": "Error", "exitCode": 1, "finishedAt": "2026-01-01T00:01:00Z"}}
    state = {"waiting": {"reason": "CrashLoopBackOff"}}
    shown = view([pod(**server_status(restarts=2, state=state, last=last))], log_tail="ValueError: no model\n")
    assert (shown["phase"], shown["reason"], shown["exitCode"]) == ("Failed", reasons.ERROR, 1)
    assert shown["message"] == "the server exited with code 1; the last lines of its log:\nValueError: no model"
    # a container that never restarted and runs is not failed by an old lastState
    assert view([pod(**server_status(restarts=0, last=last))])["phase"] == "Running"
    # while the adapter cannot read the log yet, the endpoint shows as its pod is (restarting)
    pending = endpointview.endpoint_job(
        created(), [pod(**server_status(restarts=2, state=state, last=last))], show_ended=False
    )
    assert (pending["phase"], pending.get("reason"), pending.get("exitCode")) == ("Running", None, None)


def test_a_pod_the_quota_refused_keeps_the_endpoint_pending_with_the_api_servers_words():
    refused = created()
    message = 'pods "chat-abc-xyz" is forbidden: exceeded quota: gpu, requested: requests.nvidia.com/gpu=1'
    refused["status"] = {
        "conditions": [{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": message}]
    }
    shown = view([], deployment=refused)
    assert (shown["phase"], shown["reason"], shown["message"]) == ("Pending", reasons.FAILED_CREATE, message)


def test_pods_of_picks_the_endpoints_live_pod_not_a_job_of_the_same_name_nor_one_being_deleted():
    mine, going = pod(), pod()
    going["metadata"] = {**going["metadata"], "deletionTimestamp": "x", "creationTimestamp": "2026-01-01T00:00:09Z"}
    job_pod = copy.deepcopy(mine)
    job_pod["metadata"]["labels"] = {labels.JOB: "chat", labels.MANAGED_BY: labels.MANAGED_BY_VALUE}
    found = endpointview.pods_of([job_pod, going, mine], "chat")
    assert found == [mine, going]
    assert endpointview.live_pod(found) is mine
