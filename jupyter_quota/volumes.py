"""Volumes a job pod mounts: the user's home volume, the team's shared volume, a model cache.

A profile's ``volumes`` (and the server's ``JupyterQuota.kube_cache_volumes``) are entries of one
shape, as a Kubernetes volume and its mount written together::

    {"name": "home", "mountPath": "/home/jovyan", "persistentVolumeClaim": {"claimName": "claim-{username}"}}

``name``, ``mountPath``, optional ``readOnly``, ``subPath`` and ``mountPropagation``, and one volume
source (``persistentVolumeClaim``, ``nfs``, ``emptyDir``, ...). ``{username}`` in a claim name or a
``subPath`` is the submitting user's name, so a job mounts the same home claim KubeSpawner made for
the user (``claim-{username}``). :func:`check` refuses a malformed entry when the profile is set;
:func:`for_user` expands and checks it again for the user at submit; :func:`split` gives the pod
its volume and the containers their mount.
"""

from __future__ import annotations

import re

from .bounds import shown
from .errors import InvalidRequest
from .podresources import DNS1123_LABEL

MOUNT_KEYS = ("name", "mountPath", "readOnly", "subPath", "mountPropagation")
#: The one placeholder an entry may hold, in the fields that may hold it.
PLACEHOLDER = "{username}"
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def check(entries, path: str = "volumes") -> None:
    """Each entry well formed, names unique; a claim name checked as it expands for user ``user``."""
    if not isinstance(entries, list):
        raise InvalidRequest(f"{path} must be a list of volumes, e.g. [{_EXAMPLE}], not {shown(entries)}")
    names = set()
    for i, entry in enumerate(entries):
        _check_entry(entry, f"{path}[{i}]", "user")
        if entry["name"] in names:
            raise InvalidRequest(f'{path}[{i}].name: Duplicate value: "{entry["name"]}"')
        names.add(entry["name"])


def for_user(entries: list[dict], username: str, path: str = "volumes") -> list[dict]:
    """The entries with ``{username}`` replaced by ``username``, checked (400 if it makes a bad name)."""
    expanded = []
    for i, entry in enumerate(entries):
        entry = _expand(entry, username)
        _check_entry(entry, f"{path}[{i}]", username)
        expanded.append(entry)
    return expanded


def split(entry: dict) -> tuple[dict, dict]:
    """(the pod's volume, the container's volumeMount) of one entry."""
    volume = {k: v for k, v in entry.items() if k not in MOUNT_KEYS or k == "name"}
    mount = {k: entry[k] for k in MOUNT_KEYS if k in entry}
    return volume, mount


# -- one entry ------------------------------------------------------------------------------------

_EXAMPLE = '{"name": "home", "mountPath": "/home/jovyan", "persistentVolumeClaim": {"claimName": "claim-{username}"}}'


def _check_entry(entry, path: str, username: str) -> None:
    if not isinstance(entry, dict):
        raise InvalidRequest(f"{path} must be an object, e.g. {_EXAMPLE}, not {shown(entry)}")
    name, mount_path = entry.get("name"), entry.get("mountPath")
    if not isinstance(name, str) or len(name) > 63 or not DNS1123_LABEL.fullmatch(name):
        raise InvalidRequest(
            f"{path}.name: Invalid value: {shown(name)}: a volume name must be a DNS-1123 label "
            "(lower case alphanumeric characters or '-', at most 63, e.g. 'home')"
        )
    if not isinstance(mount_path, str) or not mount_path.startswith("/"):
        raise InvalidRequest(
            f"{path}.mountPath: Invalid value: {shown(mount_path)}: must be an absolute path "
            "in the job's container, e.g. '/home/jovyan'"
        )
    if ":" in mount_path:
        raise InvalidRequest(f"{path}.mountPath: Invalid value: {shown(mount_path)}: must not contain ':'")
    if "readOnly" in entry and not isinstance(entry["readOnly"], bool):
        raise InvalidRequest(f"{path}.readOnly must be true or false, not {shown(entry['readOnly'])}")
    sub_path = entry.get("subPath")
    if sub_path is not None and (
        not isinstance(sub_path, str) or sub_path.startswith("/") or ".." in sub_path.split("/")
    ):
        raise InvalidRequest(f"{path}.subPath: Invalid value: {shown(sub_path)}: must be a relative path without '..'")
    sources = [k for k in entry if k not in MOUNT_KEYS]
    if len(sources) != 1 or not isinstance(entry[sources[0]], dict):
        raise InvalidRequest(
            f"{path} must name exactly one volume source object (persistentVolumeClaim, nfs, "
            f"emptyDir, ...) beside {', '.join(MOUNT_KEYS)}; it has "
            f"{', '.join(map(shown, sources)) or 'none'}"
        )
    claim = entry.get("persistentVolumeClaim")
    for value in (entry.get("subPath"), (claim or {}).get("claimName")):
        if isinstance(value, str) and "{" in value.replace(PLACEHOLDER, ""):
            raise InvalidRequest(f"{path}: {shown(value)} may hold only the placeholder {PLACEHOLDER}")
    if claim is not None:
        claim_name = _expand(claim.get("claimName"), username)
        if not isinstance(claim_name, str) or len(claim_name) > 253 or not _SUBDOMAIN.fullmatch(claim_name):
            raise InvalidRequest(
                f"{path}.persistentVolumeClaim.claimName: Invalid value: {shown(claim.get('claimName'))}: "
                f"for user {username!r} it is {shown(claim_name)}, which is not a PersistentVolumeClaim name "
                "(a DNS-1123 subdomain: lower case alphanumeric characters, '-' or '.', at most 253)"
            )


def _expand(value, username: str):
    if isinstance(value, str):
        return value.replace(PLACEHOLDER, username)
    if isinstance(value, dict):
        return {
            k: _expand(v, username) if k in ("persistentVolumeClaim", "claimName", "subPath") else v
            for k, v in value.items()
        }
    return value
