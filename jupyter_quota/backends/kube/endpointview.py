"""An endpoint's Deployment and pods as the job dict ``jupyter_quota.endpoints`` reads (pure).

It is ``jobview.job_json`` of the Deployment (owner, args, priority, resources, image failures,
unschedulable and waiting reasons of its pod, ``Terminating``), with what a server that restarts
adds: a server container that ended is a failure, since ``swift deploy`` does not end by itself.
Killed for its memory limit, it is ``OOMKilled`` naming the limit; otherwise ``Error`` with its
exit code and the last lines of its log. A pod the API server refused (the ReplicaSet's
``FailedCreate``, shown as the Deployment's ``ReplicaFailure`` condition) keeps the endpoint
Pending with that reason and message, as a Job's refused pods do.
"""

from __future__ import annotations

from ... import labels, reasons
from ...jobfields import TRAIN
from . import jobview

#: The Deployment condition the ReplicaSet controller's refused pod creates surface as.
REPLICA_FAILURE = "ReplicaFailure"


def pods_of(pods: list[dict], name: str) -> list[dict]:
    """The pods of endpoint ``name`` among a namespace's pods, oldest first."""
    found = [
        p
        for p in pods
        if ((p.get("metadata") or {}).get("labels") or {}).get(labels.JOB) == name
        and ((p.get("metadata") or {}).get("labels") or {}).get(labels.KIND) == labels.KIND_ENDPOINT
    ]
    return sorted(found, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "")


def live_pod(pods: list[dict]) -> dict | None:
    """The newest of an endpoint's pods that is not being deleted."""
    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    return live[-1] if live else None


def ended_server(pod: dict | None) -> dict | None:
    """The server container's last ``terminated`` state when it ended at least once, else None."""
    for status in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        if status.get("name", TRAIN) != TRAIN:
            continue
        state = status.get("state") or {}
        last = (status.get("lastState") or {}).get("terminated")
        return state.get("terminated") or (last if status.get("restartCount") else None)
    return None


def endpoint_job(
    deployment: dict,
    pods: list[dict],
    gpu_resource: str = "nvidia.com/gpu",
    template_pod: dict | None = None,
    log_tail: str = "",
    show_ended: bool = True,
) -> dict:
    """The job dict of an endpoint. ``pods``: its pods (:func:`pods_of`); ``log_tail``: the last
    lines of its server's log when it ended (the adapter reads them); ``show_ended=False``: a
    server that ended shows as its pod is (restarting) while the adapter cannot read them yet."""
    pod = live_pod(pods)
    job = jobview.job_json(deployment, [pod] if pod else [], [], gpu_resource, template_pod=template_pod)
    job["kind"] = labels.KIND_ENDPOINT
    if pod is not None and (pod.get("status") or {}).get("startTime"):
        job["startedAt"] = pod["status"]["startTime"]
    if job["phase"] == "Failed":
        return job  # the image: jobview said so
    ended = ended_server(pod) if show_ended else None
    if ended is not None:
        job["phase"] = "Failed"
        job["finishedAt"] = ended.get("finishedAt") or ""
        if ended.get("exitCode") is not None:
            job["exitCode"] = ended["exitCode"]
        if ended.get("reason") == reasons.OOM_KILLED:
            job["reason"] = reasons.OOM_KILLED
            job["message"] = oom_killed_message(job["resources"]["limits"].get("memory"))
        else:
            job["reason"] = reasons.ERROR
            job["message"] = exited_message(ended.get("exitCode"), log_tail)
        return job
    if job["phase"] == "Pending" and not job.get("reason"):
        refused = replica_failure(deployment)
        if refused is not None:
            job["reason"] = reasons.FAILED_CREATE
            job["message"] = refused.get("message") or ""
    return job


def replica_failure(deployment: dict) -> dict | None:
    """The Deployment's ``ReplicaFailure`` condition when True (its pod could not be created)."""
    for condition in (deployment.get("status") or {}).get("conditions") or []:
        if condition.get("type") == REPLICA_FAILURE and condition.get("status") == "True":
            return condition
    return None


def oom_killed_message(limit: str | None) -> str:
    return (
        f"the server container was killed for passing its memory limit ({limit or 'no limit set'}); "
        "create the endpoint again with a plan that requests more memory, or a smaller --max_model_len "
        "or --max_num_seqs"
    )


def exited_message(code, log_tail: str) -> str:
    tail = log_tail.rstrip()
    said = f"; the last lines of its log:\n{tail}" if tail else ""
    return f"the server exited with code {code if code is not None else 'unknown'}{said}"
