"""``deploy/z2jh-values.yaml``'s teams and ``deploy/rbac.yaml`` applied to a real API server (RBAC on).

The quota service of the values runs as ``system:serviceaccount:jhub:hub``, the test cluster's
``service`` identity; a single-user pod's account is its ``user-pod`` identity.
"""

from __future__ import annotations

import pytest
from kubecluster import allowed, delete_namespaces
from z2jh_values import rbac_file_objects, write_service_config

from jupyter_quota.backends.kube import apply_profiles
from jupyter_quota.backends.kube.client import ns_path
from jupyter_quota.cli import load_config
from jupyter_quota.profiles import load_profiles
from jupyter_quota.rbac import ServiceAccount


@pytest.fixture
def z2jh_teams(kube_cluster, tmp_path):
    """The values' teams (Namespace, quota, limits) made by the admin; deleted afterwards."""
    profiles = list(load_profiles(load_config(str(write_service_config(tmp_path))).profiles).values())
    kube = kube_cluster.kube()
    names = [p.namespace for p in profiles]
    delete_namespaces(kube, names)  # another test's (test_kubespawner) of the same names, Roles and all
    apply_profiles(profiles, kube)
    yield profiles
    delete_namespaces(kube, names)


def test_rbac_yaml_applies_and_lets_only_the_hub_account_run_jobs_in_the_teams(kube_cluster, z2jh_teams):
    kube = kube_cluster.kube()
    for obj in rbac_file_objects():  # as `kubectl apply -f deploy/rbac.yaml` creates them
        plural = {"Role": "roles", "RoleBinding": "rolebindings"}[obj["kind"]]
        kube.post(ns_path(obj["metadata"]["namespace"], plural, group="rbac.authorization.k8s.io/v1"), obj)
    service, user_pod = kube_cluster.kube_as("service"), kube_cluster.kube_as("user-pod")
    for team in z2jh_teams:
        for attrs in [("batch", "jobs", "", "create"), ("", "pods", "log", "get"), ("", "resourcequotas", "", "list")]:
            assert allowed(service, team.namespace, *attrs), (team.namespace, attrs)
            assert not allowed(user_pod, team.namespace, *attrs), (team.namespace, attrs)
    # applied again through the code path (`jupyter quota profiles apply`): nothing to change
    again = apply_profiles(z2jh_teams, kube, ServiceAccount("hub", "jhub"))
    assert {r["action"] for r in again} == {"unchanged"}, again
