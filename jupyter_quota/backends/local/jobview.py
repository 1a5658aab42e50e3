"""A ledger row as the job the REST API returns (see ``backends.base`` for the shape)."""

from __future__ import annotations

import sqlite3
import time

from ... import bounds, reasons
from ...quantity import Quantity
from . import ledger

TRAIN = "train"


def job_json(row: sqlite3.Row) -> dict:
    """The API's job dict for a row; a cancel in progress shows as Running/Terminating."""
    pod = ledger.loads(row["pod"])
    job = {
        "name": row["name"],
        "namespace": row["namespace"],
        "team": row["team"],
        "owner": row["owner"],
        "phase": row["phase"],
        "args": ledger.loads(row["args"], []),
        "gpus": row["gpus"],
        "gpuIndices": ledger.loads(row["gpu_indices"], []),
        "resources": container_resources(train_container(pod)),
        "createdAt": row["created_at"],
    }
    for key, column in (("startedAt", "started_at"), ("finishedAt", "finished_at")):
        if row[column]:
            job[key] = row[column]
    if row["exit_code"] is not None:
        job["exitCode"] = row["exit_code"]
    if row["reason"]:
        job["reason"] = row["reason"]
    if row["message"]:
        job["message"] = row["message"]
    if row["phase"] == "Running" and row["cancelled_by"]:
        job["reason"] = reasons.TERMINATING
        left = max(0.0, (row["kill_after"] or 0.0) - time.time())
        job["message"] = f"cancelled by {row['cancelled_by']}; sent SIGTERM, SIGKILL in {left:.0f}s if still running"
    return job


def train_container(pod: dict) -> dict:
    """The container named ``train`` (else the first) of a pod or pod template."""
    spec = pod.get("spec", {})
    containers = spec.get("containers") or [{}]
    for container in containers:
        if container.get("name") == TRAIN:
            return container
    return containers[0]


def container_resources(container: dict) -> dict:
    """``{"requests", "limits"}`` with every quantity in canonical form."""
    resources = container.get("resources") or {}
    return {
        part: {name: _canonical(str(q)) for name, q in (resources.get(part) or {}).items()}
        for part in ("requests", "limits")
    }


def _canonical(text: str) -> str:
    """The canonical form; a string an older version stored past today's bounds is shown as stored
    (parsing 100,000 digits on every listing cost half a second)."""
    if len(text) > bounds.MAX_QUANTITY_CHARS:
        return text
    try:
        return str(Quantity(text))
    except ValueError:
        return text


def command_of(container: dict) -> list[str]:
    """The argv a container runs: ``command`` then ``args``, as the kubelet joins them."""
    return [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
