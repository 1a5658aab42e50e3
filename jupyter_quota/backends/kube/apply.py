"""``jupyter quota profiles apply [--dry-run]``: make the cluster hold each team's objects.

For every profile: its Namespace, ResourceQuota objects and LimitRange (from ``TeamProfile``),
and the Role and RoleBinding of the quota service's account (``rbac.team_objects``), created
when absent and replaced when they differ (get, compare, replace with the live
``resourceVersion``, so a concurrent change is a 409 rather than lost; the object is then read
and compared again, a few times: ``_apply``). Only what a profile
states is compared and written: labels other tools put on a Namespace, and the status the
quota controller writes, are kept. Running it twice changes nothing the second time.

On ``dry_run`` the same requests are sent with ``dryRun=All``, so the API server validates and
defaults them without storing anything, and each result carries a unified diff.

Usage (the CLI wires this; any ``ApiClient`` from ``client.load_api_client`` works)::

    results = apply_profiles(profiles, api_client, account, dry_run=True)
    for r in results:
        print(r["action"], r["kind"], r["namespace"], r["name"]); print(r["diff"])

Each result: ``{"kind", "namespace", "name", "action": "created"|"updated"|"unchanged",
"diff": str, "dryRun": bool}``.
"""

from __future__ import annotations

import copy
import difflib
import json

from ... import labels
from ...quantity import Quantity
from ...rbac import RBAC_API, ServiceAccount, team_objects
from .client import Kube, KubeError, ns_path


def apply_profiles(profiles, api_client, account: ServiceAccount | None = None, dry_run: bool = False) -> list[dict]:
    """Create or update each profile's objects (``rbac.team_objects``); see the module doc.

    ``profiles``: ``TeamProfile`` objects (or a dict of them by team). ``api_client``: a
    ``kubernetes.client.ApiClient`` or a :class:`client.Kube`. ``account``: the quota service's
    ServiceAccount, bound to the Role (None: no Role and RoleBinding). Raises
    :class:`client.KubeError` on the first refusal (with the API server's message); results
    before it were applied.
    """
    kube = api_client if isinstance(api_client, Kube) else Kube(api_client)
    if isinstance(profiles, dict):
        profiles = list(profiles.values())
    results = []
    for profile in profiles:
        for obj in team_objects(profile, account):
            results.append(_apply(kube, obj, dry_run))
    return results


def apply_quota_objects(profile, kube: Kube) -> list[dict]:
    """Only the profile's ResourceQuotas and LimitRange, in its existing namespace: what the quota
    service writes when an admin changes a profile (it has no right to create namespaces)."""
    return [_apply(kube, obj, False) for obj in [*profile.resource_quotas(), *profile.limit_ranges()]]


def render_diff(results: list[dict]) -> str:
    """All the diffs of ``apply_profiles`` results, one after another (for printing)."""
    return "".join(r["diff"] for r in results if r["diff"])


# -- one object ---------------------------------------------------------------------------------------


#: kind -> (API group version, "" for core; plural; the top-level fields a profile decides).
_KINDS = {
    "Namespace": ("", "namespaces", ()),
    "ResourceQuota": ("", "resourcequotas", ("spec",)),
    "LimitRange": ("", "limitranges", ("spec",)),
    "Role": (RBAC_API, "roles", ("rules",)),
    "RoleBinding": (RBAC_API, "rolebindings", ("roleRef", "subjects")),
}


#: Tries of one object's get-compare-replace when its ``resourceVersion`` moved in between (409):
#: the quota controller rewrites a ResourceQuota's status whenever a pod comes or goes.
CONFLICT_TRIES = 5


def _apply(kube: Kube, desired: dict, dry_run: bool) -> dict:
    """Create or replace one object; on a 409 it is read again and compared again (client-go's
    ``RetryOnConflict``): the replace is built on what is live, so nothing written meanwhile is lost."""
    for _ in range(CONFLICT_TRIES - 1):
        try:
            return _apply_once(kube, desired, dry_run)
        except KubeError as e:
            if e.code != 409:
                raise
    return _apply_once(kube, desired, dry_run)


def _apply_once(kube: Kube, desired: dict, dry_run: bool) -> dict:
    kind = desired["kind"]
    meta = desired["metadata"]
    name, namespace = meta["name"], meta.get("namespace", "")
    group, plural, _ = _KINDS[kind]
    collection = "/api/v1/namespaces" if kind == "Namespace" else ns_path(namespace, plural, group=group)
    path = f"{collection}/{name}"
    query = {"dryRun": "All"} if dry_run else {}
    try:
        live = kube.get(path)
    except KubeError as e:
        if e.code != 404:
            raise
        live = None
    result = {"kind": kind, "namespace": namespace, "name": name, "dryRun": dry_run}
    if live is None:
        if dry_run and kind != "Namespace" and not _namespace_exists(kube, namespace):
            stored = desired  # the API server cannot dry-run into a namespace that does not exist yet
        else:
            stored = kube.post(collection, desired, **query)
        return {**result, "action": "created", "diff": _diff(kind, namespace, name, None, stored)}
    if _managed(desired) == _managed(live):
        return {**result, "action": "unchanged", "diff": ""}
    body = copy.deepcopy(live)
    body.pop("status", None)
    body["metadata"].pop("managedFields", None)
    body["metadata"]["labels"] = {**(live["metadata"].get("labels") or {}), **(meta.get("labels") or {})}
    for field in _KINDS[kind][2]:
        body[field] = copy.deepcopy(desired[field])
    body.setdefault("apiVersion", desired["apiVersion"])
    body.setdefault("kind", kind)
    stored = kube.put(path, body, **query)
    return {**result, "action": "updated", "diff": _diff(kind, namespace, name, live, stored)}


def _namespace_exists(kube: Kube, namespace: str) -> bool:
    try:
        kube.get(f"/api/v1/namespaces/{namespace}")
        return True
    except KubeError as e:
        if e.code == 404:
            return False
        raise


def _managed(obj: dict) -> dict:
    """What a profile decides about an object: its labels we set and its spec, quantities canonical."""
    meta = obj.get("metadata") or {}
    out = {
        "labels": {
            k: v for k, v in (meta.get("labels") or {}).items() if k == labels.MANAGED_BY or k.startswith(labels.PREFIX)
        }
    }
    for field in _KINDS[obj.get("kind", "")][2]:
        out[field] = _canonical(obj.get(field) or {}) if field == "spec" else obj.get(field)
    return out


def _canonical(value, key: str = ""):
    """Quantities in resource maps compared by value (``1024Mi`` is ``1Gi``), lists kept in order."""
    if isinstance(value, dict):
        return {k: _canonical(v, k) for k, v in value.items() if v not in (None, [], {})}
    if isinstance(value, list):
        return [_canonical(v, key) for v in value]
    if isinstance(value, str) and key not in ("type", "scopeName", "operator", "name", "values"):
        try:
            return str(Quantity(value))
        except (ValueError, TypeError):
            return value
    return value


def _diff(kind: str, namespace: str, name: str, live: dict | None, stored: dict) -> str:
    label = f"{kind} {namespace + '/' if namespace else ''}{name}"
    before = _shown(live) if live is not None else []
    after = _shown(stored)
    return "".join(
        difflib.unified_diff(
            before, after, fromfile=f"live: {label}" if live else "live: (none)", tofile=f"applied: {label}"
        )
    )


def _shown(obj: dict) -> list[str]:
    meta = obj.get("metadata") or {}
    shown = {"metadata": {k: meta[k] for k in ("name", "namespace", "labels") if meta.get(k)}}
    for field in _KINDS[obj.get("kind", "")][2]:
        if field in obj:
            shown[field] = obj[field]
    return [line + "\n" for line in json.dumps(shown, indent=2, sort_keys=True).splitlines()]
