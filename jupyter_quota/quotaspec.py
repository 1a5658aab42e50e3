"""What a ResourceQuota may say and what it binds: scopes, tracked keys, warnings, validation.

Mirrors the pod evaluator's ``MatchingResources`` and ``podMatchesScopeFunc``
(``pkg/quota/v1/evaluator/core/pods.go``), the key and scope rules of ``pkg/apis/core/helper``
and ``ValidateResourceQuotaSpec`` (``pkg/apis/core/validation/validation.go``). Field errors
keep the API server's text, including Go's ``%#v`` rendering of scope slices and selectors;
hard keys are visited sorted where Go visits a map.
"""

from __future__ import annotations

from . import bounds
from .errors import Invalid
from .podresources import (
    HUGEPAGES_PREFIX,
    REQUESTS_PREFIX,
    GoValue,
    aggregate,
    field_invalid,
    field_required,
    is_best_effort,
    is_extended_resource_name,
    is_integer_resource,
    is_native_resource,
    resource_name_errors,
)

#: quota keys the pod evaluator tracks by name (podResources)
POD_RESOURCES = frozenset(
    {
        "count/pods",
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
    }
)
STANDARD_QUOTA_RESOURCES = frozenset(
    {
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.storage",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "persistentvolumeclaims",
        "configmaps",
        "services.nodeports",
        "services.loadbalancers",
    }
)
SCOPES = (
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
    "VolumeAttributesClass",
)
POD_COMPUTE = frozenset({"cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"})
EXISTS_ONLY = ("BestEffort", "NotBestEffort", "Terminating", "NotTerminating", "CrossNamespacePodAffinity")
#: object counts other evaluators keep: legacy names, services, PVC storage
OBJECT_COUNTS = frozenset(
    {
        "services",
        "secrets",
        "configmaps",
        "replicationcontrollers",
        "resourcequotas",
        "persistentvolumeclaims",
        "services.loadbalancers",
        "services.nodeports",
        "requests.storage",
    }
)
CLASS_SUFFIXES = (
    ".storageclass.storage.k8s.io/requests.storage",
    ".storageclass.storage.k8s.io/persistentvolumeclaims",
    ".volumeattributesclass.storage.k8s.io/requests.storage",
    ".volumeattributesclass.storage.k8s.io/persistentvolumeclaims",
    ".deviceclass.resource.k8s.io/devices",
)


def quota_matches_pod(quota: dict, pod: dict) -> bool:
    """Whether every scope and scopeSelector expression of ``quota`` selects ``pod`` (no scopes: all)."""
    return all(scope_matches(selector, pod) for selector in scope_selectors(quota))


def tracked_keys(quota: dict) -> list[str]:
    """The hard keys the pod evaluator enforces (MatchingResources), sorted."""
    return sorted(matching_resources(spec_hard(quota)))


def unenforced_keys(quota: dict) -> list[dict]:
    """Keys Kubernetes accepts on a quota that no evaluator ever enforces, with what to write instead."""
    warnings = []
    for name in sorted(spec_hard(quota)):
        if _quota_name_errors(name, name) or enforced(name):
            continue
        warnings.append({"resource": name, "message": _unenforced_message(name)})
    return warnings


def validate_quota_spec(spec: dict) -> None:
    """ValidateResourceQuotaSpec; raises :class:`errors.Invalid` with the API server's field text.

    Hard keys are visited sorted (Go: map order).
    """
    errs = hard_errors(spec.get("hard") or {})
    errs += _scope_errors(spec)
    if spec.get("scopeSelector") is not None:
        errs += _selector_errors(spec)
    if errs:
        raise Invalid(aggregate(errs))


def hard_errors(hard: dict, where: str = "spec.hard") -> list[str]:
    """The checks of a quota's ``hard`` map (names, non-negative, whole GPUs), for any map shaped
    like it (a window's ``extra``, a ``borrowingLimit``); ``where`` names the map in messages."""
    errs: list[str] = []
    for name in sorted(hard):
        path = f"{where}[{name}]"
        q = bounds.quantity(hard[name], path)
        errs += _quota_name_errors(name, path)
        if q.sign() < 0:
            errs.append(field_invalid(path, str(q), "must be greater than or equal to 0"))
        if is_integer_resource(name) and q.milli_value() % 1000 != 0:
            errs.append(field_invalid(path, q, "must be an integer"))
    return errs


# -- scopes and keys -------------------------------------------------------------------------------


def scope_selectors(quota: dict) -> list[dict]:
    """spec.scopes as ``Exists`` requirements, then spec.scopeSelector.matchExpressions."""
    spec = quota.get("spec") or {}
    selectors = [{"scopeName": s, "operator": "Exists"} for s in spec.get("scopes") or []]
    return selectors + list(((spec.get("scopeSelector") or {}).get("matchExpressions")) or [])


def scope_matches(selector: dict, pod: dict) -> bool:
    """podMatchesScopeFunc for one requirement."""
    spec = pod.get("spec") or {}
    scope = selector.get("scopeName")
    deadline = spec.get("activeDeadlineSeconds")
    terminating = deadline is not None and int(deadline) >= 0
    if scope == "Terminating":
        return terminating
    if scope == "NotTerminating":
        return not terminating
    if scope == "BestEffort":
        return is_best_effort(pod)
    if scope == "NotBestEffort":
        return not is_best_effort(pod)
    if scope == "PriorityClass":
        return _priority_class_matches(selector, spec.get("priorityClassName") or "")
    if scope == "CrossNamespacePodAffinity":
        return _cross_namespace_affinity(spec.get("affinity") or {})
    return False


def matching_resources(keys) -> list[str]:
    """podEvaluator.MatchingResources: named pod keys, hugepages, and ``requests.<extended>``."""
    out = []
    for key in keys:
        if (
            key in POD_RESOURCES
            or key.startswith((HUGEPAGES_PREFIX, REQUESTS_PREFIX + HUGEPAGES_PREFIX))
            or (
                key.startswith(REQUESTS_PREFIX)
                and (
                    not is_native_resource(key)
                    or key.startswith(REQUESTS_PREFIX + "deviceclass.resource.kubernetes.io/")
                )
            )
        ):
            out.append(key)
    return out


def _priority_class_matches(selector: dict, priority_class: str) -> bool:
    operator, values = selector.get("operator"), selector.get("values") or []
    if operator == "Exists":
        return bool(priority_class)
    if operator == "DoesNotExist":
        return not priority_class
    if operator == "In":
        return bool(values) and priority_class != "" and priority_class in values
    if operator == "NotIn":
        return bool(values) and (priority_class == "" or priority_class not in values)
    return False


def _cross_namespace_affinity(affinity: dict) -> bool:
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = affinity.get(kind) or {}
        required = terms.get("requiredDuringSchedulingIgnoredDuringExecution") or []
        weighted = terms.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        preferred = [t.get("podAffinityTerm") or {} for t in weighted]
        if any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in [*required, *preferred]):
            return True
    return False


def enforced_hard(quota: dict) -> dict:
    """What admission enforces: status.hard (upstream); spec.hard for a quota never synced."""
    status = quota.get("status") or {}
    return status["hard"] if status.get("hard") is not None else (quota.get("spec") or {}).get("hard") or {}


def spec_hard(quota: dict) -> dict:
    return (quota.get("spec") or {}).get("hard") or (quota.get("status") or {}).get("hard") or {}


def _is_standard_quota_name(name: str) -> bool:
    return name in STANDARD_QUOTA_RESOURCES or name.startswith((HUGEPAGES_PREFIX, REQUESTS_PREFIX + HUGEPAGES_PREFIX))


def _quota_name_errors(name: str, path: str) -> list[str]:
    """ValidateResourceQuotaResourceName: qualified, and a standard quota resource unless it has a '/'."""
    errs = resource_name_errors(name, path)
    if "/" not in name and not _is_standard_quota_name(name):
        errs.append(field_invalid(path, name, "must be a standard resource for quota"))
    return errs


def _scope_errors(spec: dict) -> list[str]:
    scopes = list(spec.get("scopes") or [])
    if not scopes:
        return []
    shown = _go_slice("core.ResourceQuotaScope", spec.get("scopes"))
    errs = []
    for scope in scopes:
        if scope not in SCOPES:
            errs.append(field_invalid("spec.scopes", shown, "unsupported scope"))
        errs += [
            field_invalid("spec.scopes", shown, "unsupported scope applied to resource")
            for k in sorted(spec.get("hard") or {})
            if _is_standard_quota_name(k) and not _scope_allows(scope, k)
        ]
    return errs + _conflicts(set(scopes), "spec.scopes", shown)


def _selector_errors(spec: dict) -> list[str]:
    path = "spec.scopeSelector.matchExpressions"
    expressions = (spec.get("scopeSelector") or {}).get("matchExpressions") or []
    errs, names = [], set()
    for req in expressions:
        scope, operator, values = req.get("scopeName", ""), req.get("operator", ""), req.get("values")
        if scope not in SCOPES:
            errs.append(field_invalid(f"{path}.scopeName", scope, "unsupported scope"))
        errs += [
            field_invalid(path, _go_selector(spec["scopeSelector"]), "unsupported scope applied to resource")
            for k in sorted(spec.get("hard") or {})
            if _is_standard_quota_name(k) and not _scope_allows(scope, k)
        ]
        if scope in EXISTS_ONLY and operator != "Exists":
            errs.append(
                field_invalid(
                    f"{path}.operator",
                    operator,
                    "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, "
                    "ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, "
                    "ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
                )
            )
        if operator in ("In", "NotIn"):
            if not values:
                errs.append(
                    field_required(
                        f"{path}.values",
                        "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
                    )
                )
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errs.append(
                    field_invalid(
                        f"{path}.values",
                        _go_slice("string", values),
                        "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
                    )
                )
        else:
            errs.append(field_invalid(f"{path}.operator", operator, "not a valid selector operator"))
        names.add(scope)
    return errs + _conflicts(names, path, _go_slice("core.ResourceQuotaScope", spec.get("scopes")))


def _conflicts(scopes: set, path: str, shown) -> list[str]:
    pairs = ({"BestEffort", "NotBestEffort"}, {"Terminating", "NotTerminating"})
    return [field_invalid(path, shown, "conflicting scopes") for pair in pairs if pair <= scopes]


def _scope_allows(scope: str, name: str) -> bool:
    """IsResourceQuotaScopeValidForResource."""
    if scope in ("Terminating", "NotTerminating", "NotBestEffort", "PriorityClass", "CrossNamespacePodAffinity"):
        return name == "pods" or name in POD_COMPUTE
    if scope == "BestEffort":
        return name == "pods"
    if scope == "VolumeAttributesClass":
        return name in ("persistentvolumeclaims", "requests.storage")
    return True


def _go_slice(kind: str, values) -> GoValue:
    if values is None:
        return GoValue(f"[]{kind}(nil)")
    return GoValue(f"[]{kind}{{" + ", ".join(f'"{v}"' for v in values) + "}")


def _go_selector(selector: dict) -> GoValue:
    items = ", ".join(
        f'core.ScopedResourceSelectorRequirement{{ScopeName:"{r.get("scopeName", "")}", '
        f'Operator:"{r.get("operator", "")}", Values:{_go_slice("string", r.get("values"))}}}'
        for r in selector.get("matchExpressions") or []
    )
    shown = (
        "[]core.ScopedResourceSelectorRequirement(nil)"
        if selector.get("matchExpressions") is None
        else f"[]core.ScopedResourceSelectorRequirement{{{items}}}"
    )
    return GoValue(f"core.ScopeSelector{{MatchExpressions:{shown}}}")


def enforced(name: str) -> bool:
    """Some evaluator (pods, services, PVCs, claims, object counts) tracks this key."""
    return (
        _is_standard_quota_name(name)
        or name.startswith("count/")
        or bool(matching_resources([name]))
        or name.endswith(CLASS_SUFFIXES)
    )


def _unenforced_message(name: str) -> str:
    if name.startswith("limits.") and is_extended_resource_name(name[len("limits.") :]):
        ext = name[len("limits.") :]
        return (
            f"{name} is accepted but never enforced: extended resources cannot be overcommitted, so "
            f"quota counts them only by request; write requests.{ext}: <count> instead"
        )
    if is_extended_resource_name(name):
        return (
            f"{name} is accepted but never enforced: quota counts extended resources only as "
            f"requests.{name}; write requests.{name}: <count> instead"
        )
    return (
        f"{name} is accepted but no quota evaluator tracks it, so it is never enforced; write "
        "requests.<resource> for an extended resource or count/<resource>.<group> for an object count"
    )
