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

from ... import bounds, limitrange


def bounded(kind: str, obj: dict) -> dict:
    """``obj`` (a freshly decoded object of ``kind``) with its quantity maps clamped, in place."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    if kind == "resourcequotas":
        status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
        for values in (spec.get("hard"), status.get("hard"), status.get("used")):
            bounds.clamp_map(values)
    elif kind == "limitranges":
        for item in spec.get("limits") or []:
            if not isinstance(item, dict):
                continue
            for field in limitrange.ITEM_MAPS:
                bounds.clamp_map(item.get(field))
    elif kind == "pods":
        bounds.clamp_pod_spec(spec)
    elif kind in ("jobs", "deployments"):
        template = spec.get("template") if isinstance(spec.get("template"), dict) else {}
        bounds.clamp_pod_spec(template.get("spec"))
    return obj
