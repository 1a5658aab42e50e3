"""The RBAC objects of a team namespace: what the quota service may do there, and nothing more.

Only the quota service holds cluster credentials (a JupyterHub-managed service in the hub pod,
running as the hub's ServiceAccount, ``JupyterQuota.kube_service_account``). Each team namespace
gets one Role and one RoleBinding for that account; user pods get none (they talk to the service,
``deploy/z2jh-values.yaml``). The rules are exactly the calls the Kubernetes backend makes in a
team namespace (``backends/kube``): the cache lists and watches ResourceQuotas, LimitRanges, Pods,
Jobs and Events there (``cache.KINDS``, one watch per namespace and kind); a submit lists the
ResourceQuotas and creates a Job; a job read that misses the cache gets the Job; logs get
``pods/log``; a cancel deletes the Job; an admin's ``PUT /profiles/{team}`` gets, then creates or
updates, the namespace's ResourceQuotas and LimitRange (``KubeBackend.apply_profile``), so an
edit holds for every user at once. An endpoint (``backends/kube/endpoints.py``) is a Deployment
and a Service: the cache lists and watches Deployments, a create posts both, a read that misses
the cache gets the Deployment, a stop deletes both, and a failed server's log tail is
``pods/log``; the proxy reaches the pod by its IP, so no ``services/proxy``.
``tests/kube/test_kube_rbac.py`` runs the backend with only these rights and checks that every
call passes and that nothing else does.

``jupyter quota profiles render|apply`` emits them next to each team's Namespace, ResourceQuota
and LimitRange (:func:`team_objects`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .profiles import MANAGED_LABELS, TeamProfile

RBAC_API = "rbac.authorization.k8s.io/v1"
#: The name of the Role and the RoleBinding in every team namespace.
ROLE_NAME = "jupyter-quota"
#: One rule per resource, verbs sorted; see the module doc for which call needs which verb.
RULES = (
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "delete", "get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch"]},
    {
        "apiGroups": [""],
        "resources": ["resourcequotas", "limitranges"],
        "verbs": ["create", "get", "list", "update", "watch"],
    },
    {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create", "delete", "get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["create", "delete"]},
)


@dataclass(frozen=True)
class ServiceAccount:
    """The quota service's identity on the cluster (z2jh: the hub pod's account, ``hub``)."""

    name: str
    namespace: str

    @classmethod
    def from_config(cls, config) -> ServiceAccount:
        return cls(config.kube_service_account, config.kube_service_account_namespace)

    @property
    def username(self) -> str:
        """The user name the API server gives the account's tokens."""
        return f"system:serviceaccount:{self.namespace}:{self.name}"


def team_objects(profile: TeamProfile, account: ServiceAccount | None) -> list[dict]:
    """Everything a team namespace needs, in the order to apply it: Namespace, ResourceQuotas,
    LimitRange, then (unless ``account`` is None) the Role and its RoleBinding."""
    quota_objects = [profile.namespace_object(), *profile.resource_quotas(), *profile.limit_ranges()]
    return quota_objects + ([role(profile), role_binding(profile, account)] if account else [])


def role(profile: TeamProfile) -> dict:
    return {
        "apiVersion": RBAC_API,
        "kind": "Role",
        "metadata": _meta(profile),
        "rules": [{k: list(v) for k, v in rule.items()} for rule in RULES],
    }


def role_binding(profile: TeamProfile, account: ServiceAccount) -> dict:
    return {
        "apiVersion": RBAC_API,
        "kind": "RoleBinding",
        "metadata": _meta(profile),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE_NAME},
        "subjects": [{"kind": "ServiceAccount", "name": account.name, "namespace": account.namespace}],
    }


def _meta(profile: TeamProfile) -> dict:
    return {"name": ROLE_NAME, "namespace": profile.namespace, "labels": dict(MANAGED_LABELS)}
