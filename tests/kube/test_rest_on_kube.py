"""The REST API of a real jupyter server on the kube backend, against the real test cluster."""

from __future__ import annotations

import getpass
import time

import kubecluster
import pytest
from server_process import ServerProcess

from jupyter_quota.backends.kube import apply_profiles
from jupyter_quota.profiles import TeamProfile

pytestmark = pytest.mark.slow


def wait(fetch, predicate, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        status, body = fetch()
        if status == 200 and predicate(body):
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {status} {body}")
        time.sleep(0.2)


def test_balance_refusal_and_a_job_over_rest(kube_cluster, namespace_name, tmp_path):
    profile = {
        "team": "rest",
        "namespace": namespace_name,
        "users": [getpass.getuser()],
        "hard": {"requests.nvidia.com/gpu": "2"},
        "limitRange": {
            "limits": [
                {
                    "type": "Container",
                    "default": {"cpu": "1", "memory": "1Gi"},
                    "defaultRequest": {"cpu": "100m", "memory": "128Mi"},
                }
            ]
        },
    }
    apply_profiles([TeamProfile(**profile)], kube_cluster.kube())
    kubecluster.wait_quota_status(kube_cluster.kube(), namespace_name)
    root = tmp_path / "root"
    root.mkdir()
    server = ServerProcess(
        tmp_path / "state",
        root,
        extra_config=kubecluster.server_config(kube_cluster, profile),
    )
    try:
        server.start()
        status, me = server.call("GET", "/identity")
        assert me["backend"] == "kube" and me["namespaces"] == [namespace_name]
        balance = wait(
            lambda: server.call("GET", f"/namespaces/{namespace_name}/balance"),
            lambda b: "requests.nvidia.com/gpu" in b["resources"],
            what="the cached quota",
        )
        assert balance["resources"]["requests.nvidia.com/gpu"] == {"hard": "2", "used": "0", "remaining": "2"}
        assert balance["stale"] is False

        status, refused = server.call("POST", f"/namespaces/{namespace_name}/jobs", {"args": [], "gpus": 4})
        assert status == 403 and refused["message"] == (
            "exceeded quota: team-quota, requested: requests.nvidia.com/gpu=4, "
            "used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=2"
        )

        status, job = server.call(
            "POST", f"/namespaces/{namespace_name}/jobs", {"name": "over-rest", "args": ["--sleep", "1"], "gpus": 1}
        )
        assert status == 201, job
        done = wait(
            lambda: server.call("GET", f"/namespaces/{namespace_name}/jobs/over-rest"),
            lambda j: j["phase"] in ("Succeeded", "Failed"),
            what="the job's end",
        )
        assert done["phase"] == "Succeeded", done
        assert "Traceback" not in server.log()
    finally:
        server.stop()


def test_an_admins_profile_change_reaches_the_cluster_and_every_balance(kube_cluster, namespace_name, tmp_path):
    """``PUT /profiles/{team}`` on the kube backend writes the namespace's ResourceQuota (as the
    quota service does for every user of a hub), and a change the API server refuses stores nothing."""
    me = getpass.getuser()
    profile = {"team": "edit", "namespace": namespace_name, "users": [me], "hard": {"requests.nvidia.com/gpu": "2"}}
    apply_profiles([TeamProfile(**profile)], kube_cluster.kube())
    root = tmp_path / "root"
    root.mkdir()
    gone = {"team": "gone", "namespace": f"{namespace_name}-gone", "users": [me], "hard": {"requests.cpu": "1"}}
    server = ServerProcess(
        tmp_path / "state",
        root,
        extra_config=(
            "c.JupyterQuota.backend = 'kube'\n"
            f"c.JupyterQuota.profiles = [{profile!r}, {gone!r}]\n"
            f"c.JupyterQuota.admin_users = [{me!r}]\n"
            f"c.JupyterQuota.kube_config_file = {str(kube_cluster.kubeconfig)!r}\n"
            "c.JupyterQuota.kube_in_cluster = 'false'\n"
        ),
    )
    try:
        server.start()
        status, stored = server.call("PUT", "/profiles/edit", {**profile, "hard": {"requests.nvidia.com/gpu": "3"}})
        assert status == 200, stored
        live = kube_cluster.kube().get(f"/api/v1/namespaces/{namespace_name}/resourcequotas/team-quota")
        assert live["spec"]["hard"] == {"requests.nvidia.com/gpu": "3"}
        wait(
            lambda: server.call("GET", f"/namespaces/{namespace_name}/balance"),
            lambda b: b["resources"].get("requests.nvidia.com/gpu", {}).get("hard") == "3",
            what="the new hard limit in the balance",
        )

        # the namespace of team "gone" does not exist: the API server refuses, nothing is stored
        status, refused = server.call("PUT", "/profiles/gone", {**gone, "hard": {"requests.cpu": "2"}})
        assert status == 404 and "not found" in refused["message"], refused
        status, kept = server.call("GET", "/profiles/gone")
        assert kept["hard"] == {"requests.cpu": "1"}
        assert (
            not (tmp_path / "state" / "profiles.json").exists()
            or "gone" not in (tmp_path / "state" / "profiles.json").read_text()
        )
    finally:
        server.stop()
