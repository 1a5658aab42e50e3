"""Least privilege on a real kube-apiserver with RBAC: only the quota service's account may act
in team namespaces, with exactly the rights ``jupyter_quota/rbac.py`` renders, and those rights
are enough for the whole backend (balance, submit, jobs, logs, cancel, endpoints).

The test cluster authorizes with RBAC (``kubecluster.IDENTITIES``): ``service`` is the hub pod's
account ``system:serviceaccount:jhub:hub``, ``user-pod`` a single-user pod's account.
"""

from __future__ import annotations

import logging

import kubecluster
import pytest
from kubecluster import allowed, team_profile

from jupyter_quota import endpoints, errors, jobspec, rbac
from jupyter_quota.backends.kube import KubeBackend, LogsUnavailable, apply_profiles, cache

ACCOUNT = kubecluster.SERVICE_ACCOUNT
#: Each (group, resource, subresource, verb) the rendered Role grants.
GRANTED = [
    (g, r.split("/")[0], (r.split("/") + [""])[1], verb)
    for rule in rbac.RULES
    for g in rule["apiGroups"]
    for r in rule["resources"]
    for verb in rule["verbs"]
]
#: What the service must not do even in a team namespace.
NOT_GRANTED = [
    ("batch", "jobs", "", "update"),
    ("batch", "jobs", "", "patch"),
    ("", "pods", "", "create"),
    ("", "pods", "", "delete"),
    ("", "pods", "exec", "create"),
    ("", "secrets", "", "get"),
    ("", "secrets", "", "list"),
    ("", "resourcequotas", "", "delete"),
    ("", "limitranges", "", "delete"),
    ("", "events", "", "create"),
    ("rbac.authorization.k8s.io", "roles", "", "create"),
    ("rbac.authorization.k8s.io", "rolebindings", "", "create"),
    ("", "serviceaccounts", "token", "create"),
    ("apps", "deployments", "", "update"),
    ("apps", "deployments", "", "patch"),
    ("apps", "deployments", "scale", "update"),
    ("", "services", "", "update"),
    ("", "services", "proxy", "get"),  # the endpoint proxy reaches the pod by its IP
    ("", "pods", "proxy", "get"),
]


@pytest.fixture
def team(kube, namespace_name):
    """A team namespace with its quota objects and the service's Role, applied by the admin."""
    profile = team_profile(namespace_name)
    actions = apply_profiles([profile], kube, ACCOUNT)
    assert [(r["kind"], r["action"]) for r in actions][-2:] == [("Role", "created"), ("RoleBinding", "created")]
    kubecluster.wait_quota_status(kube, namespace_name)
    return profile


@pytest.fixture
def other_namespace(kube_cluster):
    """A namespace that is no team's."""
    name = "jq-not-a-team"
    kubecluster.create_namespace(kube_cluster.kube(), name)
    return name


def test_the_service_account_has_exactly_the_rendered_rights_in_a_team_namespace(kube_cluster, team):
    service = kube_cluster.kube_as("service")
    for attrs in GRANTED:
        assert allowed(service, team.namespace, *attrs), attrs
    for attrs in NOT_GRANTED:
        assert not allowed(service, team.namespace, *attrs), attrs


def test_the_service_account_can_touch_no_other_namespace_and_nothing_cluster_wide(kube_cluster, team, other_namespace):
    service = kube_cluster.kube_as("service")
    for namespace in (other_namespace, "kube-system", "jhub"):
        for attrs in GRANTED:
            assert not allowed(service, namespace, *attrs), (namespace, attrs)
    for attrs in [
        *GRANTED,
        ("", "namespaces", "", "list"),
        ("", "nodes", "", "list"),
        ("rbac.authorization.k8s.io", "clusterroles", "", "create"),
    ]:
        assert not allowed(service, "", *attrs), attrs  # "": across all namespaces
    with pytest.raises(errors.QuotaError) as refused:
        service.post(
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{team.namespace}/roles",
            rbac.role(team_profile(team.namespace)) | {"metadata": {"name": "more"}},
        )
    assert refused.value.code == 403


def test_a_single_user_pods_account_may_do_nothing_in_a_team_namespace(kube_cluster, team):
    user_pod = kube_cluster.kube_as("user-pod")
    for attrs in GRANTED:
        assert not allowed(user_pod, team.namespace, *attrs), attrs
    with pytest.raises(errors.QuotaError) as refused:
        user_pod.post(f"/apis/batch/v1/namespaces/{team.namespace}/jobs", build(team, "sneaky"))
    assert refused.value.code == 403 and "forbidden" in refused.value.message


def test_the_whole_backend_works_with_only_the_team_role(kube_cluster, team):
    """Every call the backend makes (watches per namespace, quota reads, create, get, logs,
    delete) passes with the Role alone; none is refused."""
    backend = KubeBackend(
        kube_cluster.kube_as("service"),
        job_image=kubecluster.JOB_IMAGE,
        backoff_max=1.0,
        namespaced=True,
        log=logging.getLogger("jupyter_quota.kube.test"),
    )
    backend.start()
    try:
        balance = backend.balance(team)
        assert not balance["stale"], backend.cache.errors(namespace=team.namespace)
        assert balance["resources"]["requests.nvidia.com/gpu"]["hard"] == "2"

        backend.submit(team, build(team, "done", "--sleep", "0"), owner="alice")
        assert backend.cache.wait(lambda: backend.get_job(team, "done")["phase"] == "Succeeded", 60)
        with pytest.raises(LogsUnavailable) as no_logs:  # the simulated node has no kubelet: not a 403
            backend.logs(team, "done")
        assert "forbidden" not in no_logs.value.message.lower()
        with pytest.raises(errors.NotFound):  # a cache miss asks the server: get is allowed
            backend.get_job(team, "never-created")

        more = type(team)(**{**team.to_json(), "hard": {**team.hard, "requests.nvidia.com/gpu": "3"}})
        backend.apply_profile(more)  # an admin's PUT /profiles: the Role may update the ResourceQuota
        assert backend.cache.wait(
            lambda: backend.balance(team)["resources"]["requests.nvidia.com/gpu"]["hard"] == "3", 30
        )

        backend.submit(team, build(team, "cancelled", "--sleep", "600"), owner="alice")
        assert backend.cancel(team, "cancelled", "alice")["reason"] == "Cancelled"

        # an endpoint: its Deployment and Service created, read (a cache miss gets it), listed, deleted
        served = backend.endpoints.submit(team, build_endpoint(backend, team, "served"), owner="alice")
        assert served["kind"] == "endpoint"
        with pytest.raises(errors.NotFound):
            backend.endpoints.get_job(team, "never-served")
        assert [e["name"] for e in backend.endpoints.list_jobs(team)] == ["served"]
        assert backend.endpoints.cancel(team, "served", "alice")["reason"] == "Cancelled"
        assert backend.cache.errors(namespace=team.namespace) == {}
        assert sorted(backend.cache["jobs"].namespaces()) == [team.namespace]
    finally:
        backend.close()


def test_watching_the_whole_cluster_is_refused_to_the_service_account(kube_cluster, team):
    """Why ``kube_watch_scope = "namespaces"`` is the default: a cluster-wide watch needs a ClusterRole."""
    backend = KubeBackend(
        kube_cluster.kube_as("service"),
        job_image=kubecluster.JOB_IMAGE,
        backoff_max=1.0,
        namespaced=False,
        sync_timeout=5.0,
    )
    backend.start()
    try:
        refused = lambda: [e for e in backend.cache.errors().values() if "forbidden" in e]  # noqa: E731
        assert backend.cache.wait(lambda: len(refused()) == len(cache.KINDS), 30), backend.cache.errors()
        assert "at the cluster scope" in refused()[0]
        assert backend.balance(team)["stale"]
    finally:
        backend.close()


def build(profile, name, *args):
    request = jobspec.parse_job_request({"name": name, "args": list(args), "gpus": 1}, profile)
    return jobspec.build_job(
        profile, request, "alice", kubecluster.JOB_COMMAND, jobspec.JobSettings(image=kubecluster.JOB_IMAGE)
    )


def build_endpoint(backend, profile, name):
    request = endpoints.parse_endpoint_request(
        {"name": name, "args": ["--model", "m", "--sleep", "600"], "gpus": 1}, profile
    )
    return backend.endpoints.build_job(profile, request, "alice", kubecluster.JOB_COMMAND)
