"""ResourceQuota and LimitRange admission for pods and Jobs, as the kube-apiserver does it.

Objects are plain dicts shaped like Kubernetes JSON (a Pod, a batch/v1 Job, a ResourceQuota with
``spec`` and ``status``, a LimitRange), quantities inside them as strings. Public contract:

    pod_requests(pod) / pod_limits(pod)             # PodRequests/PodLimits: sidecars, overhead
    pod_usage(pod)                                  # quota usage keys (pods, requests.cpu, ...)
    is_terminal(pod)                                # Succeeded/Failed, or past deletion grace
    quota_matches_pod(quota, pod)                   # scopes + scopeSelector
    tracked_keys(quota) / unenforced_keys(quota)    # what the pod evaluator enforces / warnings
    validate_quota_spec(spec) / validate_limit_range_spec(spec)    # errors.Invalid, API text
    default_limit_range(spec)                       # SetDefaults_LimitRangeItem
    quota_status(quota, pods, object_counts)        # status as the quota controller computes it
    apply_limit_ranges(pod, limit_ranges)           # pod defaulting, then LimitRanger mutation
    validate_pod_resources(pod)                     # errors.Invalid: whole GPUs, request==limit...
    check_limit_ranges(pod, limit_ranges)           # AdmissionDenied(LimitRangeViolation)
    check_quotas(pod, quotas)                       # AdmissionDenied(ExceededQuota, FailedQuota, ...)
    admit_pod(pod, quotas, limit_ranges)            # the whole pipeline; the defaulted pod
    admit_job(job, quotas, limit_ranges)            # JobAdmission(pod, pods, usage), all or nothing
    balance(quotas)                                 # hard/used/remaining per key, for the UI
    forbidden_message(kind, name, err)              # 'pods "x" is forbidden: ...'

This module holds admission, status and balance (``staging/src/k8s.io/apiserver/pkg/admission/
plugin/resourcequota/controller.go`` CheckRequest, ``pkg/controller/resourcequota``); it
re-exports the pod arithmetic of :mod:`.podresources`, the quota rules of :mod:`.quotaspec` and
the LimitRange steps of :mod:`.limitrange`. Error messages carry the API server's text without
the ``pods "x" is forbidden: `` prefix, which :func:`forbidden_message` adds.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime

from . import labels, reasons
from .errors import AdmissionDenied, Invalid
from .limitrange import apply_limit_ranges, check_limit_ranges, default_limit_range, validate_limit_range_spec
from .podresources import (
    HUGEPAGES_PREFIX,
    REQUESTS_PREFIX,
    add,
    invalid_message,
    is_terminal,
    pod_limits,
    pod_requests,
    pod_usage,
    quantity,
    resource_list,
    validate_pod_resources,
)
from .quantity import Quantity
from .quotaspec import (
    CLASS_SUFFIXES,
    OBJECT_COUNTS,
    enforced_hard,
    matching_resources,
    quota_matches_pod,
    scope_matches,
    scope_selectors,
    tracked_keys,
    unenforced_keys,
    validate_quota_spec,
)

__all__ = [
    "JobAdmission",
    "admit_job",
    "admit_pod",
    "apply_limit_ranges",
    "balance",
    "charge_quotas",
    "check_limit_ranges",
    "check_quotas",
    "constraint_error",
    "default_limit_range",
    "forbidden_message",
    "invalid_message",
    "is_terminal",
    "job_pod",
    "pod_limits",
    "pod_requests",
    "pod_usage",
    "quota_matches_pod",
    "quota_status",
    "scope_matches",
    "tracked_keys",
    "unenforced_keys",
    "validate_limit_range_spec",
    "validate_pod_resources",
    "validate_quota_spec",
]

#: the frozen set of keys that force every container to declare them ("it was a mistake")
VALIDATION_SET = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
#: a pod with no deadline, no priority class and a cpu request: what "the namespace's balance" means
ORDINARY_POD = {"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]}}


@dataclass
class JobAdmission:
    """A Job that would be admitted: its defaulted pod, how many pods start, and what they charge."""

    pod: dict
    pods: int
    usage: dict = field(default_factory=dict)


def admit_pod(
    pod: dict, quotas: list[dict], limit_ranges: list[dict], *, limited_resources=None, now: datetime | None = None
) -> dict:
    """Create-time pipeline: defaulting and LimitRanger mutation, validation, LimitRanger, quota.

    Returns the pod as the API server would store it; raises :class:`errors.Invalid` or
    :class:`errors.AdmissionDenied` with the API server's message.
    """
    pod = apply_limit_ranges(pod, limit_ranges)
    validate_pod_resources(pod)
    check_limit_ranges(pod, limit_ranges)
    check_quotas(pod, quotas, limited_resources=limited_resources, now=now)
    return pod


def admit_job(
    job: dict, quotas: list[dict], limit_ranges: list[dict], *, limited_resources=None, now: datetime | None = None
) -> JobAdmission:
    """Admit a batch/v1 Job and the pods its controller starts at once, all or nothing.

    The Job itself is charged ``count/jobs.batch`` first (object-count quotas only; a scoped
    quota never matches it). Then min(parallelism, completions) pods go through
    :func:`admit_pod` one by one, each seeing the usage of those before it. The first refusal
    is raised with the exact text the API server gives that pod (the FailedCreate event after
    ``Error creating: pods "<name>" is forbidden: ``); the error carries ``resource`` and
    ``name`` for :func:`forbidden_message`. Real API servers name a refused pod by its generated
    name (``train-x7k2p``): validating admission runs after name generation; we only know the
    ``generateName`` (``train-``).
    """
    meta = job.get("metadata") or {}
    job_name = meta.get("name") or meta.get("generateName") or ""
    job_usage = {"count/jobs.batch": Quantity(1)}
    try:
        quotas = _charged(
            quotas, job_usage, "jobs.batch", _matches_object_count, _job_count_keys, limited_resources=limited_resources
        )
    except AdmissionDenied as err:
        err.resource, err.name = "jobs.batch", job_name
        raise
    spec = job.get("spec") or {}
    parallelism = 1 if spec.get("parallelism") is None else int(spec["parallelism"])
    completions = spec.get("completions")
    completions = parallelism if completions is None else int(completions)
    pods = 0 if spec.get("suspend") else max(0, min(parallelism, completions))
    usage = dict(job_usage)
    template_pod = None
    for index in range(pods):
        pod = job_pod(job, index)
        try:
            admitted = admit_pod(pod, [], limit_ranges)
            quotas = charge_quotas(admitted, quotas, limited_resources=limited_resources, now=now)
        except (AdmissionDenied, Invalid) as err:
            err.resource, err.name = "pods", pod["metadata"]["generateName"]
            raise
        template_pod = template_pod or admitted
        usage = add(usage, pod_usage(admitted, now))
    if template_pod is None:
        template_pod = apply_limit_ranges(job_pod(job, 0), limit_ranges)
    return JobAdmission(pod=template_pod, pods=pods, usage=usage)


def check_quotas(pod: dict, quotas: list[dict], *, limited_resources=None, now: datetime | None = None) -> None:
    """ResourceQuota admission of a pod CREATE; quotas must carry ``status.used``.

    Raises :class:`errors.AdmissionDenied` with reason ``ExceededQuota``, ``FailedQuota``,
    ``QuotaStatusUnknown``, ``QuotaUsageNegative`` or ``InsufficientQuota`` (the last only with
    ``limited_resources``, the apiserver's ResourceQuotaConfiguration ``limitedResources``).
    """
    charge_quotas(pod, quotas, limited_resources=limited_resources, now=now)


def charge_quotas(pod: dict, quotas: list[dict], *, limited_resources=None, now: datetime | None = None) -> list[dict]:
    """:func:`check_quotas` returning the quotas with ``status.used`` as admission would write it."""
    return _charged(
        quotas,
        None,
        "pods",
        _matches_pod_quota,
        matching_resources,
        pod=pod,
        limited_resources=limited_resources,
        now=now,
    )


def forbidden_message(kind: str, name: str, err) -> str:
    """The full API-server text of a 403: ``pods "train-" is forbidden: exceeded quota: ...``."""
    message = getattr(err, "message", err)
    return f'{kind} "{name}" is forbidden: {message}' if name else f"{kind} is forbidden: {message}"


def job_pod(job: dict, index: int = 0) -> dict:
    """The pod the job controller creates for ``job`` (completion ``index`` when Indexed).

    Its ``generateName`` is ``<job>-`` (``<job>-<index>-`` for Indexed Jobs); a Job known only
    by its own ``generateName`` is named by that prefix without its trailing dash.
    """
    meta = job.get("metadata") or {}
    spec = job.get("spec") or {}
    template = spec.get("template") or {}
    base = meta.get("name") or (meta.get("generateName") or "").rstrip("-")
    indexed = spec.get("completionMode") == "Indexed"
    pod_meta = copy.deepcopy(template.get("metadata") or {})
    pod_meta.pop("name", None)
    pod_meta["generateName"] = f"{base}-{index}-" if indexed else f"{base}-"
    if meta.get("namespace"):
        pod_meta["namespace"] = meta["namespace"]
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), labels.BATCH_JOB_NAME: base, labels.JOB_NAME: base}
    if indexed:
        pod_meta["annotations"] = {**(pod_meta.get("annotations") or {}), labels.JOB_COMPLETION_INDEX: str(index)}
    spec = copy.deepcopy(template.get("spec") or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}


def constraint_error(pod: dict, required: set) -> str:
    """podEvaluator.Constraints: ``must specify <key> for: <containers>; ...`` or ''."""
    if not required:
        return ""
    spec = pod.get("spec") or {}
    level = spec.get("resources") or {}
    if any(
        k in ("cpu", "memory") or k.startswith(HUGEPAGES_PREFIX)
        for part in ("requests", "limits")
        for k in (level.get(part) or {})
    ):
        return ""  # pod-level resources lift the per-container requirement
    missing: dict = {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        have = _container_keys(resource_list(resources.get("requests")), resource_list(resources.get("limits")))
        for key in required - have:
            missing.setdefault(key, set()).add(container.get("name", ""))
    if not missing:
        return ""
    return "must specify " + "; ".join(f"{k} for: {','.join(sorted(missing[k]))}" for k in sorted(missing))


def quota_status(
    quota: dict, pods: list[dict], object_counts: dict | None = None, *, now: datetime | None = None
) -> dict:
    """A copy of ``quota`` with ``status`` as the quota controller's sync would write it.

    Pod keys are summed over the scope-matching ``pods`` (terminal pods count only in
    ``count/pods``); object counts (``count/jobs.batch``, ``services``, ...) come from
    ``object_counts`` (0 when absent). Hard keys no evaluator tracks keep their previous
    ``status.used``, if any, as upstream does.
    """
    quota = copy.deepcopy(quota)
    hard = resource_list((quota.get("spec") or {}).get("hard"), "spec.hard")
    scoped = bool(scope_selectors(quota))
    previous = resource_list((quota.get("status") or {}).get("used"), "status.used")
    used = {k: v for k, v in previous.items() if k in hard}
    pod_keys = matching_resources(hard)
    if pod_keys:
        total: dict = {}
        for pod in pods:
            if quota_matches_pod(quota, pod):
                total = add(total, pod_usage(pod, now))
        used.update({k: total.get(k, Quantity(0)) for k in pod_keys})
    counts = object_counts or {}
    for name in hard:
        counted = name.startswith("count/") or name in OBJECT_COUNTS or name.endswith(CLASS_SUFFIXES)
        if counted and name not in pod_keys:
            used[name] = Quantity(0) if scoped else quantity(counts.get(name, 0), f"object_counts[{name}]")
    quota["status"] = {"hard": {k: str(v) for k, v in hard.items()}, "used": {k: str(v) for k, v in used.items()}}
    return quota


def balance(quotas: list[dict], pod: dict | None = None) -> dict:
    """Hard, used and remaining per key, the tightest over the quotas that bind ``pod``.

    ``pod`` defaults to an ordinary pod (cpu request, no deadline, no priority class), so
    BestEffort-, Terminating- or PriorityClass-scoped quotas do not shrink the balance.
    Remaining is clamped at 0; values are canonical quantity strings.
    """
    pod = pod or ORDINARY_POD
    tightest: dict = {}
    listed, warnings = [], []
    for quota in quotas:
        name = (quota.get("metadata") or {}).get("name", "")
        rows = _rows(quota)
        spec = quota.get("spec") or {}
        listed.append(
            {
                "name": name,
                "scopes": list(spec.get("scopes") or []),
                "scopeSelector": copy.deepcopy(spec.get("scopeSelector")),
                "resources": _shown_rows(rows),
            }
        )
        warnings += [{"quota": name, **w} for w in unenforced_keys(quota)]
        if not quota_matches_pod(quota, pod):
            continue
        if scope_selectors(quota):
            rows = {k: rows[k] for k in matching_resources(rows)}  # scoped quotas bind pod keys only
        for key, row in rows.items():
            if key not in tightest or row["remaining"] < tightest[key]["remaining"]:
                tightest[key] = row
    return {"resources": _shown_rows(dict(sorted(tightest.items()))), "quotas": listed, "warnings": warnings}


# -- the admission check (CheckRequest) ---------------------------------------------------------------


def _charged(quotas, usage, kind, matches, matching, *, pod=None, limited_resources=None, now=None):
    """CheckRequest for a CREATE: the quotas as they would be written, or the first refusal raised."""
    if not quotas and not limited_resources:
        return quotas  # checkAttributes: nothing to check, not even the usage
    limited = [r for r in (limited_resources or []) if _limits_resource(r, kind)]
    limited_scopes = [
        s
        for r in (limited_resources or [])
        for s in (r.get("matchScopes") or [])
        if pod is not None and scope_matches(s, pod)
    ]
    if usage is None:
        usage = pod_usage(pod, now)
    limited_names = {
        k
        for r in limited
        for k, v in usage.items()
        if v.sign() > 0
        for part in (r.get("matchContains") or [])
        if part in k
    }
    interesting, restricted_all, covered_scopes = [], set(), []
    for i, quota in enumerate(quotas):
        if pod is not None and not _same_namespace(quota, pod):
            continue
        selectors = scope_selectors(quota)
        covered_scopes += [s for s in selectors if pod is not None and scope_matches(s, pod)]
        hard = enforced_hard(quota)
        restricted = matching(list(hard))
        if not restricted or not matches(quota, pod, selectors):
            continue
        quota_name = (quota.get("metadata") or {}).get("name", "")
        if pod is not None:
            missing = constraint_error(pod, set(restricted) & VALIDATION_SET)
            if missing:
                raise AdmissionDenied(f"failed quota: {quota_name}: {missing}", reason=reasons.FAILED_QUOTA)
        used = (quota.get("status") or {}).get("used") or {}
        if any(k not in used for k in restricted):
            raise AdmissionDenied(
                f"status unknown for quota: {quota_name}, resources: {','.join(sorted(restricted))}",
                reason=reasons.QUOTA_STATUS_UNKNOWN,
            )
        interesting.append(i)
        restricted_all |= set(restricted)
    negative = sorted(k for k, v in usage.items() if v.sign() < 0)
    if negative:
        raise AdmissionDenied(
            f"quota usage is negative for resource(s): {','.join(negative)}", reason=reasons.QUOTA_USAGE_NEGATIVE
        )
    delta = {k: v for k, v in usage.items() if not v.is_zero()}
    if not delta:
        return quotas
    uncovered = sorted(limited_names - restricted_all)
    if uncovered:
        raise AdmissionDenied(
            f"insufficient quota to consume: {','.join(uncovered)}", reason=reasons.INSUFFICIENT_QUOTA
        )
    covered = {c.get("scopeName") for c in covered_scopes}
    missing_scopes = [s for s in limited_scopes if s.get("scopeName") not in covered]
    if missing_scopes:
        raise AdmissionDenied(
            f"insufficient quota to match these scopes: [{' '.join(map(_go_scope, missing_scopes))}]",
            reason=reasons.INSUFFICIENT_QUOTA,
        )
    out = list(quotas)
    for i in interesting:
        quota = out[i]
        hard = resource_list(enforced_hard(quota), "status.hard")
        used = resource_list((quota.get("status") or {}).get("used"), "status.used")
        requested = {k: v for k, v in delta.items() if k in hard}
        new_used = add(used, requested)  # a "0" used takes the request's format, as in Go
        exceeded = sorted(k for k in requested if new_used[k] > hard[k])
        if exceeded:
            raise AdmissionDenied(
                f"exceeded quota: {(quota.get('metadata') or {}).get('name', '')}, "
                f"requested: {_pretty(requested, exceeded)}, used: {_pretty(used, exceeded)}, "
                f"limited: {_pretty(hard, exceeded)}",
                reason=reasons.EXCEEDED_QUOTA,
            )
        quota = copy.deepcopy(quota)
        quota.setdefault("status", {})["used"] = {k: str(v) for k, v in new_used.items()}
        out[i] = quota
    return out


def _same_namespace(quota: dict, pod: dict) -> bool:
    """Quotas bind only their namespace; an object with no namespace is taken to be in it."""
    ours, theirs = (quota.get("metadata") or {}).get("namespace"), (pod.get("metadata") or {}).get("namespace")
    return not ours or not theirs or ours == theirs


def _matches_pod_quota(quota, pod, selectors) -> bool:
    return all(scope_matches(s, pod) for s in selectors)


def _job_count_keys(keys) -> list[str]:
    """The object-count evaluator for jobs.batch tracks its own key only."""
    return [k for k in keys if k == "count/jobs.batch"]


def _matches_object_count(quota, pod, selectors) -> bool:
    # generic.MatchesNoScopeFunc: an object-count evaluator never matches a scoped quota
    return not selectors


def _limits_resource(limited: dict, kind: str) -> bool:
    resource, _, group = kind.partition(".")
    return limited.get("resource") == resource and (limited.get("apiGroup") or "") == group


def _container_keys(requests: dict, limits: dict) -> set:
    keys = {"pods"}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            keys |= {name, REQUESTS_PREFIX + name}
        if name in limits:
            keys.add("limits." + name)
    return keys


def _pretty(values: dict, keys: list) -> str:
    return ",".join(f"{k}={values[k]}" for k in keys if k in values)


def _go_scope(selector: dict) -> str:
    """A ScopedResourceSelectorRequirement printed by Go's %v: ``{PriorityClass In [a b]}``."""
    values = " ".join(selector.get("values") or [])
    return f"{{{selector.get('scopeName', '')} {selector.get('operator', '')} [{values}]}}"


# -- balance rows -----------------------------------------------------------------------------------


def _rows(quota: dict) -> dict:
    hard = resource_list(enforced_hard(quota), "status.hard")
    used = resource_list((quota.get("status") or {}).get("used"), "status.used")
    rows = {}
    for key in sorted(hard):
        spent = used.get(key, Quantity(0))
        left = hard[key] - spent
        rows[key] = {"hard": hard[key], "used": spent, "remaining": left if left.sign() > 0 else Quantity(0)}
    return rows


def _shown_rows(rows: dict) -> dict:
    return {k: {part: str(v) for part, v in row.items()} for k, row in rows.items()}
