"""A ledger row as the job the REST API returns (see ``backends.base`` for the shape)."""

from __future__ import annotations

import sqlite3
import time

from ... import labels, reasons
from ...jobfields import container_resources, train_container
from . import ledger


def job_json(row: sqlite3.Row, stalled: dict | None = None) -> dict:
    """The API's job dict for a row; a cancel in progress shows as Running/Terminating.
    ``stalled`` is the ``stallwatch`` verdict on the row."""
    pod = ledger.loads(row["pod"])
    job = {
        "name": row["name"],
        "namespace": row["namespace"],
        "team": row["team"],
        "owner": row["owner"],
        "phase": row["phase"],
        "args": ledger.loads(row["args"], []),
        "priority": row["priority"],
        "gpus": row["gpus"],
        "gpuIndices": ledger.loads(row["gpu_indices"], []),
        "resources": container_resources(train_container(pod)),
        "createdAt": row["created_at"],
        "stalled": stalled,
    }
    kind = ((pod.get("metadata") or {}).get("labels") or {}).get(labels.KIND)
    if kind:
        job["kind"] = kind
    for key, column in (("startedAt", "started_at"), ("finishedAt", "finished_at")):
        if row[column]:
            job[key] = row[column]
    if row["exit_code"] is not None:
        job["exitCode"] = row["exit_code"]
    if row["reason"]:
        job["reason"] = row["reason"]
    if row["message"]:
        job["message"] = row["message"]
    if row["phase"] == "Running":
        job["borrowed"] = bool(row["borrowed"])
    history = ledger.loads(row["history"], [])
    if history:
        job["history"] = history
    if row["phase"] == "Running" and row["cancelled_by"]:
        job["reason"] = reasons.TERMINATING
        left = max(0.0, (row["kill_after"] or 0.0) - time.time())
        job["message"] = f"cancelled by {row['cancelled_by']}; sent SIGTERM, SIGKILL in {left:.0f}s if still running"
    return job


def command_of(container: dict) -> list[str]:
    """The argv a container runs: ``command`` then ``args``, as the kubelet joins them."""
    return [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
