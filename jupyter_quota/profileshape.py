"""The JSON shape of a profile's names and Kubernetes parts, checked before any rule reads them.

The rules (``quotaspec``, ``limitrange``) read lists and objects as the API server's decoder
would have made them; a string where a list belongs must be refused here, naming the field,
instead of failing inside a rule. Names get apimachinery's own checks and words: a namespace is
a DNS-1123 label (``ValidateNamespaceName``), a team is a label value (it labels every object),
and the GPU resource is an extended resource name (``validateContainerResourceName``).
"""

from __future__ import annotations

import re

from . import bounds, quotaspec, windows
from .bounds import shown
from .errors import InvalidRequest
from .limitrange import ITEM_MAPS
from .podresources import (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    container_resource_name_errors,
    field_invalid,
    is_extended_resource_name,
)
from .priority import PRIORITIES

_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_QUOTA_FIELDS = ("name", "hard", "scopes", "scopeSelector")
_EXPRESSION_FIELDS = ("scopeName", "operator", "values")


def check_names(team: str, namespace: str, gpu_resource: str) -> None:
    """The team (a label value), its namespace (a DNS-1123 label) and its GPU resource (extended)."""
    errs = [f'metadata.labels: Invalid value: "{team}": {m}' for m in _label_value_errors(team)]
    errs += [
        f'Namespace "{namespace}" is invalid: metadata.name: Invalid value: "{namespace}": {m}'
        for m in dns1123_label_errors(namespace)
    ]
    errs += container_resource_name_errors(gpu_resource, "gpuResource")
    if not errs and not is_extended_resource_name(gpu_resource):
        errs.append(
            field_invalid(
                "gpuResource",
                gpu_resource,
                "must be an extended resource name such as "
                "nvidia.com/gpu (a domain-qualified name outside kubernetes.io): GPUs are "
                "extended resources",
            )
        )
    if errs:
        raise InvalidRequest("; ".join(errs))


def dns1123_label_errors(value: str) -> list[str]:
    """IsDNS1123Label, in apimachinery's words."""
    errs = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not DNS1123_LABEL.fullmatch(value):
        errs.append(_DNS1123_LABEL_MSG)
    return errs


def check_shapes(extra_quotas: list, scope_selector: dict, limit_range: dict) -> None:
    """Lists where lists belong, objects where objects belong, strings where strings belong."""
    for i, spec in enumerate(extra_quotas):
        path = f"extraQuotas[{i}]"
        _fields(spec, _QUOTA_FIELDS, path)
        _typed(spec.get("name"), str, f"{path}.name", "a string")
        _typed(spec.get("hard"), dict, f"{path}.hard", 'an object of resource to quantity, e.g. {"pods": "10"}')
        _strings(spec.get("scopes"), f"{path}.scopes")
        _selector(spec.get("scopeSelector"), f"{path}.scopeSelector")
    _selector(scope_selector, "scopeSelector")
    _fields(limit_range, ("limits",), "limitRange")
    limits = limit_range.get("limits")
    _typed(limits, list, "limitRange.limits", 'a list of items, e.g. [{"type": "Container", "default": {"cpu": "4"}}]')
    for i, item in enumerate(limits or []):
        path = f"limitRange.limits[{i}]"
        _typed(item, dict, path, 'an object, e.g. {"type": "Container", "default": {"cpu": "4"}}')
        _fields(item, ("type", *ITEM_MAPS), path)
        _typed(item.get("type"), str, f"{path}.type", 'a string: "Container", "Pod" or "PersistentVolumeClaim"')
        for key in ITEM_MAPS:
            _typed(item.get(key), dict, f"{path}.{key}", 'an object of resource to quantity, e.g. {"cpu": "4"}')


def check_elastic(profile) -> None:
    """``borrowingLimit``, ``lendingLimit`` and each window's ``extra`` read as a quota's ``hard``,
    in whole GPUs (a quota allows ``requests.nvidia.com/gpu: 0.5``; lending half a GPU means
    nothing); ``priorityClasses`` maps each job priority (``priority.PRIORITIES``) to a
    PriorityClass name (a DNS-1123 subdomain)."""
    maps = {"borrowingLimit": profile.borrowingLimit, "lendingLimit": profile.lendingLimit}
    errs = [e for path, values in maps.items() for e in quotaspec.hard_errors(values, path)]
    if errs:
        raise InvalidRequest("; ".join(errs))
    windows.parse_windows(profile.windows)
    for i, window in enumerate(profile.windows):
        maps[f"windows[{i}].extra"] = window.get("extra") or {}
    gpu_keys = (profile.gpuResource, f"requests.{profile.gpuResource}")
    for path, values in maps.items():
        for key in gpu_keys:
            if key in values and bounds.quantity(values[key], path).milli_value() % 1000:
                errs.append(f"{path}[{key}]: Invalid value: {shown(str(values[key]))}: GPUs are whole numbers")
    for priority, name in profile.priorityClasses.items():
        path = f"priorityClasses[{priority}]"
        if priority not in PRIORITIES:
            errs.append(f"{path}: unknown priority {shown(priority)}; priorities are {', '.join(PRIORITIES)}")
        elif not isinstance(name, str) or len(name) > 253 or not DNS1123_SUBDOMAIN.fullmatch(name):
            errs.append(f"{path} must be a PriorityClass name (a lowercase DNS-1123 subdomain), not {shown(name)}")
    if errs:
        raise InvalidRequest("; ".join(errs))


def _selector(selector, path: str) -> None:
    if selector is None:
        return
    _typed(selector, dict, path, 'an object, e.g. {"matchExpressions": [...]}')
    _fields(selector, ("matchExpressions",), path)
    expressions = selector.get("matchExpressions")
    _typed(
        expressions,
        list,
        f"{path}.matchExpressions",
        'a list, e.g. [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]',
    )
    for i, expression in enumerate(expressions or []):
        where = f"{path}.matchExpressions[{i}]"
        _typed(expression, dict, where, 'an object, e.g. {"scopeName": "PriorityClass", "operator": "Exists"}')
        _fields(expression, _EXPRESSION_FIELDS, where)
        _typed(expression.get("scopeName"), str, f"{where}.scopeName", "a string")
        _typed(expression.get("operator"), str, f"{where}.operator", "a string")
        _strings(expression.get("values"), f"{where}.values")


def _typed(value, kind: type, path: str, what: str) -> None:
    """``value`` is None (absent) or a ``kind``."""
    if value is not None and not isinstance(value, kind):
        raise InvalidRequest(f"{path} must be {what}, not {shown(value)}")


def _strings(value, path: str) -> None:
    _typed(value, list, path, 'a list of strings, e.g. ["high"]')
    for i, item in enumerate(value or []):
        _typed(item, str, f"{path}[{i}]", "a string")


def _fields(value: dict, known: tuple, path: str) -> None:
    unknown = sorted(map(str, set(value) - set(known)))
    if unknown:
        raise InvalidRequest(f"{path}: unknown field(s) {', '.join(map(shown, unknown))}; it takes {', '.join(known)}")


def _label_value_errors(value: str) -> list[str]:
    """IsValidLabelValue, in apimachinery's words."""
    errs = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not _LABEL_VALUE.fullmatch(value):
        errs.append(_LABEL_VALUE_MSG)
    return errs
