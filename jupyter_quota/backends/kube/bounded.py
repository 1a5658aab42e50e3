"""Cluster objects with their quantities bounded as ``bounds.clamp`` bounds them.

The REST API refuses a quantity past 2^63-1 or 64 characters (``bounds.quantity``), but
``kubectl`` can write one straight into the cluster (a ResourceQuota ``hard`` of ``1e200000``, a
pod request of 100,000 digits) and the kube-apiserver stores it. Read unbounded, it would make a
balance or a plan raise OverflowError or spend seconds on big-number sums. Every object the
backend reads from the API server passes through :func:`bounded` (``cache.trim`` and the quotas
read for admission): such a value counts as the bound, as the local backend counts a stored one
(``backends/local/admission.py``), and any normal value stays exactly as the cluster wrote it.
"""

from __future__ import annotations

from ... import bounds

#: The places each kind keeps quantity maps (``cache.KINDS`` names the kinds).
_LIMIT_RANGE_FIELDS = ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")


def bounded(kind: str, obj: dict) -> dict:
    """``obj`` (a freshly decoded object of ``kind``) with its quantity maps clamped, in place."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    if kind == "resourcequotas":
        status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
        for values in (spec.get("hard"), status.get("hard"), status.get("used")):
            _clamp_map(values)
    elif kind == "limitranges":
        for item in _dicts(spec.get("limits")):
            for field in _LIMIT_RANGE_FIELDS:
                _clamp_map(item.get(field))
    elif kind == "pods":
        _clamp_pod_spec(spec)
    elif kind == "jobs":
        template = spec.get("template") if isinstance(spec.get("template"), dict) else {}
        _clamp_pod_spec(template.get("spec"))
    return obj


def _clamp_pod_spec(spec) -> None:
    if not isinstance(spec, dict):
        return
    _clamp_map(spec.get("overhead"))
    for container in [*_dicts(spec.get("containers")), *_dicts(spec.get("initContainers"))]:
        resources = container.get("resources")
        if isinstance(resources, dict):
            for values in resources.values():
                _clamp_map(values)


def _clamp_map(values) -> None:
    if isinstance(values, dict):
        for name, text in values.items():
            values[name] = bounds.clamp(str(text))


def _dicts(items) -> list[dict]:
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []
