"""LimitRange, as the kube-apiserver applies it to a pod: defaults, then min/max/ratio checks.

Mirrors ``plugin/pkg/admission/limitranger/admission.go`` (mutate: ``default`` and
``defaultRequest`` fill what a container leaves out, with the ``kubernetes.io/limit-ranger``
annotation; validate: ``min``, ``max`` and ``maxLimitRequestRatio`` per container and per pod),
``pkg/apis/core/v1/defaults.go`` (SetDefaults_LimitRangeItem) and ValidateLimitRange.

Upstream visits each ``min``/``max``/``maxLimitRequestRatio`` map in Go map order, so when a pod
breaks several limits the order inside the ``[a, b]`` aggregate varies between API-server calls;
we visit keys sorted, which is one of the orders the API server can produce.
"""

from __future__ import annotations

import copy

from . import bounds, labels, reasons
from .errors import AdmissionDenied, Invalid
from .podresources import (
    aggregate,
    container_resource_name_errors,
    default_pod,
    field_forbidden,
    field_invalid,
    field_required,
    is_overcommit_allowed,
    pod_limits,
    pod_requests,
    qualified_name_errors,
    quantity,
    resource_list,
    resource_name_errors,
)
from .quantity import Quantity

ANNOTATION = labels.LIMIT_RANGER
LIMIT_TYPES = ("Pod", "Container", "PersistentVolumeClaim")
MAX_MILLI_VALUE = (2**63 - 1) // 1000
#: The LimitRangeItem fields that map a resource to a quantity, in the order of its Go struct, which
#: ValidateLimitRange checks them in (profileshape checks their shape, the kube backend bounds them).
ITEM_MAPS = ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")


def apply_limit_ranges(pod: dict, limit_ranges: list[dict]) -> dict:
    """Pod API defaulting, then LimitRanger's mutation by each LimitRange in turn; a new dict.

    Each LimitRange is first defaulted as the API server stores it, so raw manifests behave
    like the stored objects.
    """
    pod = default_pod(pod)
    for limit_range in limit_ranges:
        mutate_pod(pod, default_limit_range(limit_range.get("spec") or {}))
    return pod


def check_limit_ranges(pod: dict, limit_ranges: list[dict]) -> None:
    """LimitRanger's validation: the first LimitRange the pod breaks raises every breach it finds.

    Raises :class:`errors.AdmissionDenied` with reason ``LimitRangeViolation`` and the
    API server's text (``[a, b]`` when several), without the ``pods "x" is forbidden: `` prefix.
    """
    for limit_range in limit_ranges:
        errs = validate_pod(pod, default_limit_range(limit_range.get("spec") or {}))
        if errs:
            raise AdmissionDenied(aggregate(errs), reason=reasons.LIMIT_RANGE_VIOLATION)


def default_limit_range(spec: dict) -> dict:
    """SetDefaults_LimitRangeItem: for Container items, default <- max, defaultRequest <- default, then min."""
    spec = copy.deepcopy(spec)
    for item in spec.get("limits") or []:
        if item.get("type") != "Container":
            continue
        default = dict(item.get("default") or {})
        request = dict(item.get("defaultRequest") or {})
        for name, value in (item.get("max") or {}).items():
            default.setdefault(name, value)
        for name, value in default.items():
            request.setdefault(name, value)
        for name, value in (item.get("min") or {}).items():
            request.setdefault(name, value)
        # Go leaves empty maps, which JSON omits
        for key, value in (("default", default), ("defaultRequest", request)):
            if value:
                item[key] = value
    return spec


def validate_limit_range_spec(spec: dict) -> None:
    """ValidateLimitRange on ``spec``; raises :class:`errors.Invalid` with the API server's field text."""
    errs: list[str] = []
    seen: set = set()
    # the API server defaults the object before validating it
    for i, item in enumerate(default_limit_range(spec).get("limits") or []):
        path = f"spec.limits[{i}]"
        kind = item.get("type") or ""
        errs += _type_errors(kind, f"{path}.type")
        if kind in seen:
            errs.append(f'{path}.type: Duplicate value: "{kind}"')
        seen.add(kind)
        maps = {key: _bounded(item.get(key), f"{path}.{key}") for key in ITEM_MAPS}
        for key in ("max", "min"):
            errs += [e for name in maps[key] for e in _resource_name_errors(kind, name, f"{path}.{key}[{name}]")]
        if kind == "Pod":
            for key in ("default", "defaultRequest"):
                if maps[key]:
                    errs.append(field_forbidden(f"{path}.{key}", "may not be specified when `type` is 'Pod'"))
                maps[key] = {}
        else:
            for key in ("default", "defaultRequest"):
                errs += [e for name in maps[key] for e in _resource_name_errors(kind, name, f"{path}.{key}[{name}]")]
        if kind == "PersistentVolumeClaim" and "storage" not in maps["min"] and "storage" not in maps["max"]:
            errs.append(
                field_required(
                    f"{path}.limits", "either minimum or maximum storage value is required, but neither was provided"
                )
            )
        errs += [
            e
            for name in maps["maxLimitRequestRatio"]
            for e in _resource_name_errors(kind, name, f"{path}.maxLimitRequestRatio[{name}]")
        ]
        for name in sorted(set().union(*maps.values())):
            errs += _consistency_errors(name, maps, path)
    if errs:
        raise Invalid(aggregate(errs))


def mutate_pod(pod: dict, spec: dict) -> None:
    """PodMutateLimitFunc: fill missing limits/requests from one (defaulted) LimitRange, in place."""
    requests, limits = container_defaults(spec)
    notes: list[str] = []
    pod_spec = pod.setdefault("spec", {})
    for kind, label in (("containers", "container"), ("initContainers", "init container")):
        for container in pod_spec.get(kind) or []:
            resources = container.get("resources")
            if resources is None:
                resources = container["resources"] = {}
            set_limits = _fill(resources, "limits", limits)
            set_requests = _fill(resources, "requests", requests)
            name = container.get("name", "")
            if set_requests:
                notes.append(f"{', '.join(set_requests)} request for {label} {name}")
            if set_limits:
                notes.append(f"{', '.join(set_limits)} limit for {label} {name}")
    if notes:
        meta = pod.setdefault("metadata", {})
        note = "LimitRanger plugin set: " + "; ".join(notes)
        meta["annotations"] = {**(meta.get("annotations") or {}), ANNOTATION: note}


def container_defaults(spec: dict) -> tuple[dict, dict]:
    """defaultContainerResourceRequirements: (requests, limits) from the Container items, later ones winning."""
    requests: dict = {}
    limits: dict = {}
    for item in spec.get("limits") or []:
        if item.get("type") == "Container":
            requests.update(item.get("defaultRequest") or {})
            limits.update(item.get("default") or {})
    return requests, limits


def validate_pod(pod: dict, spec: dict) -> list[str]:
    """PodValidateLimitFunc: every breach of one LimitRange, containers before init containers."""
    errs: list[str] = []
    pod_spec = pod.get("spec") or {}
    for item in spec.get("limits") or []:
        kind = item.get("type")
        if kind == "Container":
            for container in [*(pod_spec.get("containers") or []), *(pod_spec.get("initContainers") or [])]:
                resources = container.get("resources") or {}
                errs += _item_errors(
                    item, kind, resource_list(resources.get("requests")), resource_list(resources.get("limits"))
                )
        elif kind == "Pod":
            level = ("cpu", "memory")
            errs += _item_errors(
                item,
                kind,
                pod_requests(pod, overhead=False, pod_level=level),
                pod_limits(pod, overhead=False, pod_level=level),
            )
    return errs


# -- constraints (minConstraint, maxConstraint, limitRequestRatioConstraint) -------------------------


def _item_errors(item: dict, kind: str, requests: dict, limits: dict) -> list[str]:
    errs = []
    for name, value in sorted((item.get("min") or {}).items()):
        errs += _min_error(kind, name, quantity(value), requests, limits)
    for name, value in sorted((item.get("max") or {}).items()):
        errs += _max_error(kind, name, quantity(value), requests, limits)
    for name, value in sorted((item.get("maxLimitRequestRatio") or {}).items()):
        errs += _ratio_error(kind, name, quantity(value), requests, limits)
    return errs


def _min_error(kind, name, enforced, requests, limits) -> list[str]:
    req, lim = requests.get(name), limits.get(name)
    req_value, lim_value, enforced_value = _common_precision(req, lim, enforced)
    if req is None:
        return [f"minimum {name} usage per {kind} is {enforced}.  No request is specified"]
    if req_value < enforced_value:
        return [f"minimum {name} usage per {kind} is {enforced}, but request is {req}"]
    if lim is not None and lim_value < enforced_value:
        return [f"minimum {name} usage per {kind} is {enforced}, but limit is {lim}"]
    return []


def _max_error(kind, name, enforced, requests, limits) -> list[str]:
    req, lim = requests.get(name), limits.get(name)
    req_value, lim_value, enforced_value = _common_precision(req, lim, enforced)
    if lim is None:
        return [f"maximum {name} usage per {kind} is {enforced}.  No limit is specified"]
    if lim_value > enforced_value:
        return [f"maximum {name} usage per {kind} is {enforced}, but limit is {lim}"]
    if req is not None and req_value > enforced_value:
        return [f"maximum {name} usage per {kind} is {enforced}, but request is {req}"]
    return []


def _ratio_error(kind, name, enforced, requests, limits) -> list[str]:
    req, lim = requests.get(name), limits.get(name)
    req_value, lim_value, _ = _common_precision(req, lim, enforced)
    if req is None or req_value == 0:
        return [
            f"{name} max limit to request ratio per {kind} is {enforced}, but no request is specified or request is 0"
        ]
    if lim is None or lim_value == 0:
        return [f"{name} max limit to request ratio per {kind} is {enforced}, but no limit is specified or limit is 0"]
    ratio = float(lim_value) / float(req_value)
    observed, allowed = ratio, float(enforced.value())
    if enforced.value() <= MAX_MILLI_VALUE:
        observed, allowed = ratio * 1000, float(enforced.milli_value())
    if observed > allowed:
        return [f"{name} max limit to request ratio per {kind} is {enforced}, but provided ratio is {ratio:f}"]
    return []


def _common_precision(req, lim, enforced) -> tuple[int, int, int]:
    """requestLimitEnforcedValues: milli-units when all three fit, whole units otherwise."""
    zero = Quantity(0)
    qs = [req or zero, lim or zero, enforced]
    if all(q.value() <= MAX_MILLI_VALUE for q in qs):
        return tuple(q.milli_value() for q in qs)
    return tuple(q.value() for q in qs)


def _fill(resources: dict, part: str, defaults: dict) -> list[str]:
    current = resources.get(part)
    current = dict(current) if current else {}
    added = sorted(name for name in defaults if name not in current)
    for name in added:
        current[name] = defaults[name]
    if current or part in resources:
        resources[part] = current
    return added


# -- spec validation helpers ------------------------------------------------------------------------


def _bounded(values, path: str) -> dict:
    """A spec's quantities, each refused past what the arithmetic carries (see ``bounds``)."""
    return {name: bounds.quantity(value, f"{path}[{name}]") for name, value in (values or {}).items()}


def _type_errors(kind: str, path: str) -> list[str]:
    errs = [field_invalid(path, kind, msg) for msg in qualified_name_errors(kind)]
    if not errs and "/" not in kind and kind not in LIMIT_TYPES:
        errs.append(field_invalid(path, kind, "must be a standard limit type or fully qualified"))
    return errs


def _resource_name_errors(kind: str, name: str, path: str) -> list[str]:
    """validateLimitRangeResourceName: container names for Pod/Container, any resource otherwise."""
    if kind in ("Pod", "Container"):
        return container_resource_name_errors(name, path)
    return resource_name_errors(name, path)


def _consistency_errors(name: str, maps: dict, path: str) -> list[str]:
    """min <= defaultRequest <= default <= max, ratio >= 1 and <= max/min, no overcommit defaults."""
    lo, hi = maps["min"].get(name), maps["max"].get(name)
    default, request = maps["default"].get(name), maps["defaultRequest"].get(name)
    ratio = maps["maxLimitRequestRatio"].get(name)
    errs = []
    if lo is not None and hi is not None and lo > hi:
        errs.append(field_invalid(f"{path}.min[{name}]", lo, f"min value {lo} is greater than max value {hi}"))
    if request is not None and lo is not None and lo > request:
        errs.append(
            field_invalid(
                f"{path}.defaultRequest[{name}]",
                request,
                f"min value {lo} is greater than default request value {request}",
            )
        )
    if request is not None and hi is not None and request > hi:
        errs.append(
            field_invalid(
                f"{path}.defaultRequest[{name}]",
                request,
                f"default request value {request} is greater than max value {hi}",
            )
        )
    if request is not None and default is not None and request > default:
        errs.append(
            field_invalid(
                f"{path}.defaultRequest[{name}]",
                request,
                f"default request value {request} is greater than default limit value {default}",
            )
        )
    if default is not None and lo is not None and lo > default:
        errs.append(
            field_invalid(f"{path}.default[{name}]", lo, f"min value {lo} is greater than default value {default}")
        )
    if default is not None and hi is not None and default > hi:
        errs.append(
            field_invalid(f"{path}.default[{name}]", hi, f"default value {default} is greater than max value {hi}")
        )
    if ratio is not None and ratio < Quantity(1):
        errs.append(field_invalid(f"{path}.maxLimitRequestRatio[{name}]", ratio, f"ratio {ratio} is less than 1"))
    if ratio is not None and lo is not None and hi is not None:
        allowed, lo_v, hi_v = float(ratio.value()), lo.value(), hi.value()
        if ratio.value() < MAX_MILLI_VALUE and lo_v < MAX_MILLI_VALUE and hi_v < MAX_MILLI_VALUE:
            allowed, lo_v, hi_v = float(ratio.milli_value()) / 1000, lo.milli_value(), hi.milli_value()
        limit = float(hi_v) / float(lo_v) if lo_v else float("inf")
        if allowed > limit:
            errs.append(
                field_invalid(
                    f"{path}.maxLimitRequestRatio[{name}]", ratio, f"ratio {ratio} is greater than max/min = {limit:f}"
                )
            )
    if not is_overcommit_allowed(name) and default is not None and request is not None and default != request:
        errs.append(
            field_invalid(
                f"{path}.defaultRequest[{name}]",
                request,
                f"default value {default} must equal to defaultRequest value {request} in {name}",
            )
        )
    return errs


def limit_range_spec(limit_ranges: list[dict]) -> dict | None:
    """A namespace's LimitRange spec as a balance shows it (several merged into one list of limits), or None."""
    if not limit_ranges:
        return None
    if len(limit_ranges) == 1:
        return copy.deepcopy(limit_ranges[0].get("spec") or {})
    return {"limits": [item for lr in limit_ranges for item in (lr.get("spec") or {}).get("limits") or []]}
