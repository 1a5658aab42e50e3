"""What a pod asks for, as the kube-apiserver computes it: aggregates, usage, QoS, validation.

Pure functions over Pod dicts shaped like Kubernetes JSON. They mirror, line for line where it
matters, upstream's ``component-helpers/resource/helpers.go`` (PodRequests/PodLimits with
sidecars and overhead), ``pkg/quota/v1/evaluator/core/pods.go`` (quota usage, terminal pods),
``pkg/apis/core/v1/defaults.go`` (request defaults to limit) and the resource part of
``pkg/apis/core/validation/validation.go`` (whole GPUs, request equal to limit, ...), so a
notebook can tell a user what the API server will say before anything is submitted.

Feature gates are taken at their current defaults: PodLevelResources on (pod ``spec.resources``
override cpu/memory/hugepages), InPlacePodVerticalScaling irrelevant (creates carry no status).
Where Go iterates a map, we iterate sorted keys so messages are deterministic.
"""

from __future__ import annotations

import copy
import re
from datetime import datetime, timedelta, timezone

from .errors import Invalid, InvalidRequest
from .quantity import Quantity

ResourceList = dict  # dict[str, Quantity]

HUGEPAGES_PREFIX = "hugepages-"
REQUESTS_PREFIX = "requests."
DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
QOS_COMPUTE = ("cpu", "memory")
OVERCOMMIT_FREE_HINT = "Limit must be set for non overcommitable resources"
INTEGER_RESOURCES = frozenset(
    {
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)
STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
#: what a pod-level spec.resources may set (a trailing '-' is a prefix)
POD_LEVEL = ("cpu", "memory", HUGEPAGES_PREFIX)
STANDARD_RESOURCES = frozenset(
    {
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
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "storage",
        "requests.storage",
        "services.nodeports",
        "services.loadbalancers",
    }
)


def pod_requests(pod: dict, *, overhead: bool = True, pod_level: tuple = POD_LEVEL) -> ResourceList:
    """PodRequests: max(sum of containers and sidecars, init-container peak), pod-level, overhead.

    ``pod_level`` names the resources (or prefixes) a pod-level ``spec.resources.requests``
    overrides; LimitRanger passes ``("cpu", "memory")`` and ``overhead=False``.
    """
    spec = pod.get("spec") or {}
    reqs = _aggregate(spec, "requests")
    level = _pod_level(spec, "requests", pod_level)
    if level:
        reqs.update(level)
    if overhead:
        _add_into(reqs, _resource_list(spec.get("overhead"), "spec.overhead"))
    return reqs


def pod_limits(pod: dict, *, overhead: bool = True, pod_level: tuple = POD_LEVEL) -> ResourceList:
    """PodLimits: the same formula on limits; overhead is added only to limits present and non-zero."""
    spec = pod.get("spec") or {}
    limits = _aggregate(spec, "limits")
    if _pod_level(spec, "requests", pod_level) or _pod_level(spec, "limits", pod_level):
        limits.update(_pod_level(spec, "limits", pod_level))
    if overhead:
        for name, q in _resource_list(spec.get("overhead"), "spec.overhead").items():
            if name in limits and not limits[name].is_zero():
                limits[name] = qsum(limits[name], q)
    return limits


def pod_usage(pod: dict, now: datetime | None = None) -> ResourceList:
    """The quota usage of one pod (PodUsageFunc): ``count/pods`` always, the rest unless terminal."""
    usage = {"count/pods": Quantity(1)}
    if is_terminal(pod, now):
        return usage
    return add(usage, compute_usage(pod_requests(pod), pod_limits(pod)))


def compute_usage(requests: ResourceList, limits: ResourceList) -> ResourceList:
    """podComputeUsageHelper: quota keys for a requests/limits pair (a pod's or one container's)."""
    usage = {"pods": Quantity(1)}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            usage[name] = requests[name]
            usage[REQUESTS_PREFIX + name] = requests[name]
        if name in limits:
            usage["limits." + name] = limits[name]
    for name, q in requests.items():
        if name.startswith(HUGEPAGES_PREFIX):
            usage[name] = q
            usage[REQUESTS_PREFIX + name] = q
        if is_extended_resource_name(name) or name.startswith(DEVICE_CLASS_PREFIX):
            # only requests.<name> is allowed for extended resources: they cannot be overcommitted
            usage[REQUESTS_PREFIX + name] = q
    return usage


def is_terminal(pod: dict, now: datetime | None = None) -> bool:
    """True when quota no longer charges the pod: phase Succeeded/Failed, or past deletion grace."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return True
    meta = pod.get("metadata") or {}
    stamp, grace = meta.get("deletionTimestamp"), meta.get("deletionGracePeriodSeconds")
    if stamp and grace is not None:
        deleted = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
        if deleted.tzinfo is None:
            deleted = deleted.replace(tzinfo=timezone.utc)
        return (now or datetime.now(timezone.utc)) > deleted + timedelta(seconds=int(grace))
    return False


def is_best_effort(pod: dict) -> bool:
    """QoS BestEffort: no positive cpu/memory request or limit anywhere (``status.qosClass`` wins)."""
    qos = (pod.get("status") or {}).get("qosClass")
    if qos:
        return qos == "BestEffort"
    spec = pod.get("spec") or {}
    level = spec.get("resources") or {}
    if _pod_level(spec, "requests", QOS_COMPUTE) or _pod_level(spec, "limits", QOS_COMPUTE):
        sources = [level]
    else:
        sources = [c.get("resources") or {} for c in _all_containers(spec)]
    for resources in sources:
        for part in ("requests", "limits"):
            for name, raw in (resources.get(part) or {}).items():
                if name in QOS_COMPUTE and quantity(raw, name).sign() > 0:
                    return False
    return True


def default_pod(pod: dict) -> dict:
    """SetDefaults_Pod for resources: a copy where each container's missing requests equal its limits."""
    pod = copy.deepcopy(pod)
    spec = pod.setdefault("spec", {})
    for container in _all_containers(spec):
        resources = container.get("resources") or {}
        if resources.get("limits") is not None:
            requests = resources.setdefault("requests", {}) or {}
            for name, value in resources["limits"].items():
                requests.setdefault(name, value)
            resources["requests"] = requests
    level = spec.get("resources") or {}
    if level.get("limits"):
        requests = dict(level.get("requests") or {})
        for name, value in level["limits"].items():
            if name not in requests and _supported_pod_level(name, POD_LEVEL):
                requests[name] = value
        if requests:
            level["requests"] = requests
    return pod


def validate_pod_resources(pod: dict) -> None:
    """Pod validation of resources (ValidateResourceRequirements); raises :class:`errors.Invalid`.

    The message is the API server's aggregate (``[e1, e2]`` when several) without the
    ``Pod "x" is invalid: `` prefix; see :func:`invalid_message`. Within a resource map the keys
    are visited sorted (Go visits them in map order).
    """
    spec = pod.get("spec") or {}
    errs: list[str] = []
    for kind in ("containers", "initContainers"):
        for i, container in enumerate(spec.get(kind) or []):
            errs += _requirement_errors(container.get("resources") or {}, f"spec.{kind}[{i}].resources")
    if spec.get("overhead"):
        errs += _requirement_errors({"limits": spec["overhead"]}, "spec.overhead")
    if errs:
        raise Invalid(aggregate(errs))


def invalid_message(kind: str, name: str, err) -> str:
    """The full API-server text of a 422: ``Pod "x" is invalid: <err>``."""
    return f'{kind} "{name}" is invalid: {getattr(err, "message", err)}'


# -- resource names (pkg/apis/core/helper) ---------------------------------------------------------


def is_native_resource(name: str) -> bool:
    """Unprefixed names and names under ``kubernetes.io/`` are native."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource_name(name: str) -> bool:
    """A non-native, non-``requests.`` qualified name such as ``nvidia.com/gpu``."""
    if is_native_resource(name) or name.startswith(REQUESTS_PREFIX):
        return False
    return not qualified_name_errors(REQUESTS_PREFIX + name)


def is_overcommit_allowed(name: str) -> bool:
    return is_native_resource(name) and not name.startswith(HUGEPAGES_PREFIX)


def is_integer_resource(name: str) -> bool:
    return name in INTEGER_RESOURCES or is_extended_resource_name(name)


_QNAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
#: IsDNS1123Label's pattern (namespaces, job names); use ``fullmatch``: ``$`` would pass a final newline.
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
#: IsDNS1123Subdomain's pattern (a name prefix, a PriorityClass name); use ``fullmatch``.
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_DNS_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def qualified_name_errors(value: str) -> list[str]:
    """IsQualifiedName: an optional DNS-subdomain prefix and '/', then a 63-character name."""
    errs = []
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name " + _QNAME_MSG[:-1] + ") with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errs.append("prefix part must be no more than 253 characters")
            if not DNS1123_SUBDOMAIN.fullmatch(prefix):
                errs.append("prefix part " + _DNS_MSG)
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _QNAME.fullmatch(name):
        errs.append("name part " + _QNAME_MSG)
    return errs


# -- field errors, as apimachinery prints them -------------------------------------------------------


def field_invalid(path: str, value, detail: str) -> str:
    """``<path>: Invalid value: <value>: <detail>``; strings and quantities print quoted."""
    shown = value if isinstance(value, GoValue) else f'"{value}"' if isinstance(value, (str, Quantity)) else value
    return f"{path}: Invalid value: {shown}: {detail}"


def field_required(path: str, detail: str) -> str:
    return f"{path}: Required value" + (f": {detail}" if detail else "")


def field_forbidden(path: str, detail: str) -> str:
    return f"{path}: Forbidden: {detail}"


def aggregate(messages: list[str]) -> str:
    """utilerrors.NewAggregate: duplicates dropped, one message bare, several as ``[a, b]``."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


class GoValue(str):
    """A value already rendered as Go's ``%#v`` would print it (slices and structs of internal types)."""


# -- helpers ----------------------------------------------------------------------------------------


def quantity(raw, where: str = "") -> Quantity:
    """A Quantity from JSON; an unparsable one is the decode error the API server would return."""
    if isinstance(raw, Quantity):
        return raw
    try:
        return Quantity(raw if isinstance(raw, str) else str(raw))
    except ValueError as err:
        raise InvalidRequest(f"{where}: {err}" if where else str(err)) from None


def resource_list(raw, where: str = "") -> ResourceList:
    """A ``{name: "1"}`` map parsed into Quantities (None and {} are both empty)."""
    return _resource_list(raw, where)


def add(a: ResourceList, b: ResourceList) -> ResourceList:
    """quota.Add: the union, summing shared keys (the left operand keeps its format)."""
    out = dict(a)
    _add_into(out, b)
    return out


def _resource_list(raw, where: str) -> ResourceList:
    return {name: quantity(value, f"{where}[{name}]") for name, value in (raw or {}).items()}


def qsum(a: Quantity, b: Quantity) -> Quantity:
    """a + b as Go's Quantity.Add: the left format wins, except that a zero takes the right one's."""
    return b + a if a.is_zero() else a + b


def _add_into(total: ResourceList, more: ResourceList) -> None:
    for name, q in more.items():
        total[name] = qsum(total[name], q) if name in total else q


def _max_into(total: ResourceList, more: ResourceList) -> None:
    for name, q in more.items():
        if name not in total or q > total[name]:
            total[name] = q


def _aggregate(spec: dict, part: str) -> ResourceList:
    """AggregateContainerRequests/Limits: app containers plus sidecars, against the init peak."""
    total: ResourceList = {}
    for i, container in enumerate(spec.get("containers") or []):
        _add_into(total, _container_list(container, part, f"spec.containers[{i}]"))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for i, container in enumerate(spec.get("initContainers") or []):
        own = _container_list(container, part, f"spec.initContainers[{i}]")
        if container.get("restartPolicy") == "Always":
            # a sidecar runs alongside everything after it
            _add_into(total, own)
            _add_into(sidecars, own)
            running = dict(sidecars)
        else:
            running = dict(own)
            _add_into(running, sidecars)
        _max_into(init_peak, running)
    _max_into(total, init_peak)
    return total


def _container_list(container: dict, part: str, where: str) -> ResourceList:
    return _resource_list((container.get("resources") or {}).get(part), f"{where}.resources.{part}")


def _pod_level(spec: dict, part: str, supported: tuple) -> ResourceList:
    raw = (spec.get("resources") or {}).get(part) or {}
    return {
        name: quantity(value, f"spec.resources.{part}[{name}]")
        for name, value in raw.items()
        if _supported_pod_level(name, supported)
    }


def _supported_pod_level(name: str, supported: tuple) -> bool:
    return any(name == s or (s.endswith("-") and name.startswith(s)) for s in supported)


def _all_containers(spec: dict) -> list[dict]:
    return [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]


def _requirement_errors(resources: dict, path: str) -> list[str]:
    """ValidateResourceRequirements for one container (limits first, then requests)."""
    errs: list[str] = []
    limits = _resource_list(resources.get("limits"), f"{path}.limits")
    requests = _resource_list(resources.get("requests"), f"{path}.requests")
    hugepages = cpu_or_memory = False
    for name in sorted(limits):
        key_path = f"{path}.limits[{name}]"
        errs += container_resource_name_errors(name, key_path) + _value_errors(name, limits[name], key_path)
        if name.startswith(HUGEPAGES_PREFIX):
            hugepages = True
            errs += _hugepage_errors(name, limits[name], key_path)
        cpu_or_memory |= name in QOS_COMPUTE
    for name in sorted(requests):
        key_path = f"{path}.requests[{name}]"
        q = requests[name]
        errs += container_resource_name_errors(name, key_path) + _value_errors(name, q, key_path)
        if name in limits:
            limit = limits[name]
            if q != limit and not is_overcommit_allowed(name):
                errs.append(field_invalid(f"{path}.requests", str(q), f"must be equal to {name} limit of {limit}"))
            elif q > limit:
                errs.append(
                    field_invalid(f"{path}.requests", str(q), f"must be less than or equal to {name} limit of {limit}")
                )
        elif not is_overcommit_allowed(name):
            errs.append(field_required(f"{path}.limits", OVERCOMMIT_FREE_HINT))
        if name.startswith(HUGEPAGES_PREFIX):
            hugepages = True
            errs += _hugepage_errors(name, q, key_path)
        cpu_or_memory |= name in QOS_COMPUTE
    if hugepages and not cpu_or_memory:
        errs.append(field_forbidden(path, "HugePages require cpu or memory"))
    return errs


def resource_name_errors(name: str, path: str) -> list[str]:
    """validateResourceName: a qualified name, and a standard one unless it has a '/'."""
    errs = [field_invalid(path, name, msg) for msg in qualified_name_errors(name)]
    if not errs and "/" not in name and not is_standard_resource(name):
        errs.append(field_invalid(path, name, "must be a standard resource type or fully qualified"))
    return errs


def is_standard_resource(name: str) -> bool:
    return name in STANDARD_RESOURCES or name.startswith((HUGEPAGES_PREFIX, REQUESTS_PREFIX + HUGEPAGES_PREFIX))


def container_resource_name_errors(name: str, path: str) -> list[str]:
    """validateContainerResourceName: a standard container resource, hugepages, or a qualified extended name."""
    errs = resource_name_errors(name, path)
    if "/" not in name:
        if name not in STANDARD_CONTAINER_RESOURCES and not name.startswith(HUGEPAGES_PREFIX):
            errs.append(field_invalid(path, name, "must be a standard resource for containers"))
    elif not is_native_resource(name) and not is_extended_resource_name(name):
        errs.append(field_invalid(path, name, "doesn't follow extended resource name standard"))
    return errs


def _value_errors(name: str, q: Quantity, path: str) -> list[str]:
    """ValidateResourceQuantityValue: non-negative, whole for counts and extended resources."""
    errs = []
    if q.sign() < 0:
        errs.append(field_invalid(path, str(q), "must be greater than or equal to 0"))
    if is_integer_resource(name) and q.milli_value() % 1000 != 0:
        errs.append(field_invalid(path, q, "must be an integer"))
    return errs


def _hugepage_errors(name: str, q: Quantity, path: str) -> list[str]:
    try:
        page = Quantity(name[len(HUGEPAGES_PREFIX) :])
    except ValueError:
        page = None
    if page is None or page.sign() <= 0 or page.milli_value() % 1000 or q.value() % page.value():
        return [field_invalid(path, str(q), f"{q} is not positive integer multiple of {name}")]
    return []
