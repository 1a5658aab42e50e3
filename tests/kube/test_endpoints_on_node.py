"""Endpoints on the kube backend, on the real node: a real ``swift deploy --infer_backend
transformers`` of the tiny model in the job image, as a Deployment and a Service made by a real
jupyter-server's REST API. The kubelet's readiness probe on ``/health`` passes, ``/v1/models`` and
one chat completion answer through the proxy route (which reaches the pod by its IP: there is no
kube-proxy here, and none is needed), the ResourceQuota's ``used`` holds the pod's requests while
it serves, a restarted server finds it, DELETE removes both objects and frees the quota, and the
usage report counts the pod's GPU-hours.
"""

from __future__ import annotations

import getpass
from dataclasses import replace
from pathlib import Path

import kubecluster
import kubenode
import openai
import pytest
import test_real_node
from kubecluster import REAL_NODE_LABEL, until
from server_process import ServerProcess
from test_real_node import SWIFT_TIMEOUT, TOLERATION

from jupyter_quota import endpoints
from jupyter_quota.backends.kube import apply_profiles
from jupyter_quota.profiles import TeamProfile

pytestmark = pytest.mark.slow
#: the real node's fixtures: the node (its flock shared with the other node tests) and the tiny model
node_cluster, tiny = test_real_node.node_cluster, test_real_node.tiny


GPU = "requests.nvidia.com/gpu"
#: what the pod gets from the team's LimitRange (an endpoint's body names GPUs only)
MEMORY = "3Gi"


def profile_for(namespace: str, tiny_dir: Path) -> dict:
    hostpath = {"name": "work", "mountPath": str(tiny_dir), "hostPath": {"path": str(tiny_dir), "type": "Directory"}}
    return {
        "team": namespace.replace("jq-", ""),
        "namespace": namespace,
        "users": [getpass.getuser()],
        "hard": {GPU: "2", "requests.memory": "8Gi", "limits.memory": "8Gi"},
        "limitRange": {
            "limits": [
                {
                    "type": "Container",
                    "default": {"memory": MEMORY},
                    "defaultRequest": {"cpu": "500m", "memory": MEMORY},
                }
            ]
        },
        "image": kubenode.JOB_IMAGE,
        "nodeSelector": dict(REAL_NODE_LABEL),
        "tolerations": [TOLERATION],
        "volumes": [hostpath],
    }


def server_for(cluster, profile: dict, tmp_path: Path) -> ServerProcess:
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    config = kubecluster.server_config(cluster, profile) + (
        "c.JupyterQuota.job_image_pull_policy = 'Never'\nc.JupyterQuota.deploy_command = ['swift', 'deploy']\n"
    )
    return ServerProcess(tmp_path / "state", root, extra_config=config)


def used(kube, namespace: str) -> dict:
    (quota,) = kube.get(f"/api/v1/namespaces/{namespace}/resourcequotas")["items"]
    return quota["status"]["used"]


def test_a_real_swift_deploy_serves_on_the_node_through_the_proxy_route_and_delete_frees_the_quota(
    node_cluster, kube, namespace_name, tiny, tmp_path
):
    profile = profile_for(namespace_name, tiny)
    apply_profiles([TeamProfile(**profile)], kube)
    kubecluster.wait_quota_status(kube, namespace_name)
    base = f"/namespaces/{namespace_name}/endpoints"
    args = ["--model", str(tiny / "model"), "--model_type", "qwen2", "--template", "qwen"]
    args += ["--infer_backend", "transformers", "--torch_dtype", "float32"]
    server = server_for(node_cluster, profile, tmp_path).start()
    try:
        status, created = server.call("POST", base, {"name": "tiny", "args": args, "gpus": 1})
        assert status == 201, created
        assert created["phase"] in ("Pending", "Starting"), created
        # POST waits for the ReplicaSet's pod at most sync_timeout (backends/kube/endpoints.py
        # _settle); on a slow machine the pod, and so its charge, may come after the answer
        charged = {GPU: "1", "requests.memory": MEMORY, "limits.memory": MEMORY}
        kubecluster.until(lambda: used(kube, namespace_name) == charged, what="the endpoint's pod charged to the quota")

        deployment = kube.get(f"/apis/apps/v1/namespaces/{namespace_name}/deployments/tiny")
        service = kube.get(f"/api/v1/namespaces/{namespace_name}/services/tiny")
        assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http", "scheme": "HTTP"}
        assert container["command"][-4:] == ["--host", "0.0.0.0", "--port", "8000"]

        def phase(*phases):
            def check():
                status, endpoint = server.call("GET", f"{base}/tiny")
                assert status == 200, endpoint
                assert endpoint["phase"] not in ("Failed", "Stopped"), endpoint
                return endpoint if endpoint["phase"] in phases else None

            return check

        ready = until(phase("Ready"), SWIFT_TIMEOUT, "the endpoint to be Ready")
        assert ready["models"] == ["model"], ready
        assert ready["url"].endswith(f"/quota/v1{base}/tiny/v1/")

        def kubelet_ready():  # the kubelet's own probe of /health (every 5 s) passes too
            (pod,) = kube.get(f"/api/v1/namespaces/{namespace_name}/pods", labelSelector="jupyter-quota/job=tiny")[
                "items"
            ]
            conditions = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
            return pod if conditions.get("Ready") == "True" else None

        pod = until(kubelet_ready, 60, "the kubelet's readiness probe to pass")
        assert pod["spec"]["nodeName"] == kubenode.NODE_NAME

        status, models = server.call("GET", f"{base}/tiny/v1/models")
        assert status == 200 and [m["id"] for m in models["data"]] == ["model"], models
        # the openai client, as a notebook calls it: the Jupyter token as its api_key
        client = openai.OpenAI(
            base_url=server.url.removesuffix("/quota/v1") + ready["url"], api_key=server.token, max_retries=0
        )
        completion = client.chat.completions.create(
            model="model", messages=[{"role": "user", "content": "Hello"}], max_tokens=8, timeout=120
        )
        assert completion.choices[0].message.role == "assistant"
        assert completion.usage.completion_tokens > 0
        print(f"\nendpoint on the node: pod {pod['status']['podIP']}, completion {completion.choices[0].message!r}")

        # a restarted server finds the running endpoint, probes it again, and proxies to it
        server.stop()
        server = server_for(node_cluster, profile, tmp_path).start()
        until(phase("Ready"), 120, "the restarted server to find the endpoint Ready")
        status, listed = server.call("GET", base)
        assert status == 200 and [e["name"] for e in listed["endpoints"]] == ["tiny"], listed
        status, models = server.call("GET", f"{base}/tiny/v1/models")
        assert status == 200 and models["data"][0]["id"] == "model", models

        status, deleted = server.call("DELETE", f"{base}/tiny")
        assert status == 200 and deleted["phase"] == "Stopped" and deleted["reason"] == "Cancelled", deleted
        until(lambda: used(kube, namespace_name)[GPU] == "0", 90, "the quota to be freed")
        assert used(kube, namespace_name) == {GPU: "0", "requests.memory": "0", "limits.memory": "0"}
        for path in (
            f"/apis/apps/v1/namespaces/{namespace_name}/deployments",
            f"/api/v1/namespaces/{namespace_name}/services",
        ):
            assert kube.get(path)["items"] == [], path
        status, stopped = server.call("GET", f"{base}/tiny")
        assert status == 200 and stopped["phase"] == "Stopped", stopped
        status, refused = server.call("GET", f"{base}/tiny/v1/models")
        assert status == 409 and refused["reason"] == "NotReady", refused

        def usage():
            status, report = server.call("GET", f"/usage?by=job&namespace={namespace_name}")
            assert status == 200, report
            return [r for r in report["rows"] if r.get("job") == "tiny" and r["gpuSeconds"] > 0]

        (row,) = until(usage, 30, "the endpoint pod's GPU-seconds in the usage report")
        assert row["user"] == getpass.getuser(), row  # the owner, from the Deployment's annotation
        print(f"usage of the endpoint: {row}")
    finally:
        server.call("DELETE", f"{base}/tiny")
        server.stop()


def test_a_server_that_exits_on_the_node_fails_the_endpoint_with_its_log_tail_and_frees_the_quota(
    node_cluster, kube, namespace_name, make_kube_backend
):
    profile = test_real_node.real_profile(namespace_name, image=kubenode.BUSYBOX_IMAGE)
    apply_profiles([profile], kube)
    kubecluster.wait_quota_status(kube, namespace_name)
    backend = make_kube_backend()
    small = {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"memory": "32Mi"}}
    request = endpoints.parse_endpoint_request({"name": "crash", "args": ["--model", "m"], "gpus": 1}, profile)
    request = replace(request, resources={k: {**v, "nvidia.com/gpu": "1"} for k, v in small.items()})
    said = ["loading the model", "Traceback (most recent call last):", "ValueError: no such model"]
    script = f"echo '{said[0]}'; echo '{said[1]}' >&2; echo '{said[2]}' >&2; exit 3"
    deployment = backend.endpoints.build_job(profile, request, "alice", ["sh", "-c", script, "swift-deploy"])
    backend.endpoints.submit(profile, deployment, "alice")

    def failed():
        job = backend.endpoints.get_job(profile, "crash")
        return job if job["phase"] == "Failed" else None

    job = until(failed, 300, "the endpoint to fail")
    assert (job["reason"], job["exitCode"]) == ("Error", 3), job
    # the tail is the ended container's log (``previous`` once the kubelet restarted it)
    exited, _, tail = job["message"].partition("; the last lines of its log:\n")
    assert exited == "the server exited with code 3", job
    lines = tail.splitlines()
    assert sorted(lines) == sorted(said), job
    # containerd copies stdout and stderr into the log apart: a stream's lines keep their order,
    # the two streams' lines do not (under load stderr's came first)
    assert lines.index(said[1]) < lines.index(said[2]), job
    until(lambda: used(kube, namespace_name)[GPU] == "0", 300, "the quota to be freed")
    until(
        lambda: kube.get(f"/apis/apps/v1/namespaces/{namespace_name}/deployments")["items"] == [],
        120,
        "the failed endpoint's Deployment to be gone",
    )
    print(f"\nfailed endpoint on the node: {job['message']!r}")
