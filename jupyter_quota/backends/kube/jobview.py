"""A batch/v1 Job, its pods and its events, as the job dict the REST API returns (see ``base``).

Phase: the Job's ``Complete`` condition is Succeeded and ``Failed`` is Failed (with the
condition's reason and message); a job with a Running pod is Running; anything else is
Pending. A Pending job whose pods the API server refused (quota, LimitRange) carries the
newest ``FailedCreate`` event's reason and message, so a refusal is never silent.
"""

from __future__ import annotations

import json

from ... import reasons
from ...quantity import Quantity

TRAIN = "train"
ARGS_ANNOTATION = "jupyter-quota/args"
OWNER_ANNOTATION = "jupyter-quota/owner"
TEAM_LABEL = "jupyter-quota/team"
USER_LABEL = "jupyter-quota/user"
JOB_LABEL = "jupyter-quota/job"
#: Labels the job controller puts on a Job's pods, and the reason of its event when the API
#: server refuses one (quota, LimitRange, ...).
JOB_NAME_LABEL = "job-name"
CONTROLLER_UID_LABEL = "controller-uid"
FAILED_CREATE = "FailedCreate"
#: The Job conditions that end it (batch/v1 JobConditionType).
COMPLETE = "Complete"
FAILED = "Failed"


def end_condition(job: dict) -> dict | None:
    """The Job's ``Complete`` condition when True, else its ``Failed`` one when True, else None."""
    status = job.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or [] if c.get("status") == "True"}
    return conditions.get(COMPLETE) or conditions.get(FAILED)


def job_json(
    job: dict,
    pods: list[dict],
    events: list[dict],
    gpu_resource: str = "nvidia.com/gpu",
    template_pod: dict | None = None,
) -> dict:
    """The API's job dict. ``pods`` are the Job's pods; ``events`` those about the Job.

    ``template_pod`` (the pod as LimitRanger would default it) stands in for the resources
    while the Job has no pod yet.
    """
    meta = job.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    status = job.get("status") or {}
    pods = sorted(pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "")
    pod = pods[-1] if pods else None
    container = train_container(pod or template_pod or (job.get("spec") or {}).get("template") or {})
    resources = container_resources(container)
    gpus = resources["limits"].get(gpu_resource) or resources["requests"].get(gpu_resource) or "0"
    out = {
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
        "team": labels.get(TEAM_LABEL, ""),
        "owner": annotations.get(OWNER_ANNOTATION) or labels.get(USER_LABEL, ""),
        "phase": "Pending",
        "args": user_args(job),
        "gpus": int(Quantity(gpus).value()),
        "resources": resources,
        "createdAt": meta.get("creationTimestamp", ""),
    }
    if status.get("startTime"):
        out["startedAt"] = status["startTime"]
    ended = end_condition(job)
    exit_code = _exit_code(pod)
    if ended and ended.get("type") == COMPLETE:
        out["phase"] = "Succeeded"
        out["finishedAt"] = status.get("completionTime") or ended.get("lastTransitionTime", "")
    elif ended:
        out["phase"] = "Failed"
        out["finishedAt"] = ended.get("lastTransitionTime", "")
        out["reason"] = ended.get("reason") or FAILED
        out["message"] = _failure_message(ended.get("message") or "", pod)
    elif any(_pod_phase(p) == "Running" for p in pods):
        out["phase"] = "Running"
    else:
        refused = failed_create(events, meta)
        if refused is not None and not any(_pod_phase(p) in ("Pending", "Running") for p in pods):
            out["reason"] = refused.get("reason") or FAILED_CREATE
            out["message"] = refused.get("message") or ""
        elif pod is not None and _pod_phase(pod) == "Pending":
            waiting = _pending_reason(pod)
            if waiting:
                out["reason"], out["message"] = waiting
    if exit_code is not None and out["phase"] in ("Succeeded", "Failed"):
        out["exitCode"] = exit_code
    if meta.get("deletionTimestamp") and out["phase"] in ("Pending", "Running"):
        out["reason"] = reasons.TERMINATING
        out["message"] = "the job is being deleted"
    return out


def train_container(pod: dict) -> dict:
    """The container named ``train`` (else the first) of a pod or pod template."""
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return next((c for c in containers if c.get("name") == TRAIN), containers[0])


def container_resources(container: dict) -> dict:
    resources = container.get("resources") or {}
    return {
        part: {k: str(Quantity(str(v))) for k, v in (resources.get(part) or {}).items()}
        for part in ("requests", "limits")
    }


def user_args(job: dict) -> list[str]:
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    try:
        args = json.loads(annotations.get(ARGS_ANNOTATION, "null"))
    except ValueError:
        args = None
    if isinstance(args, list):
        return [str(a) for a in args]
    template = (job.get("spec") or {}).get("template") or {}
    return [str(a) for a in train_container(template).get("args") or []]


def _pod_phase(pod: dict | None) -> str:
    return ((pod or {}).get("status") or {}).get("phase", "Pending")


def _exit_code(pod: dict | None):
    for status in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated")
        if terminated and status.get("name", TRAIN) == TRAIN:
            return terminated.get("exitCode")
    return None


def _failure_message(message: str, pod: dict | None) -> str:
    code = _exit_code(pod)
    if code is not None and code != 0:
        return (
            f"{message}; the training container exited with code {code}"
            if message
            else f"the training container exited with code {code}"
        )
    return message


def pods_of(pods: list[dict], name: str, uid: str | None) -> list[dict]:
    """The pods of Job ``name`` (of that uid, when known) among ``pods``."""
    found = []
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get(JOB_NAME_LABEL) != name:
            continue
        if uid and labels.get(CONTROLLER_UID_LABEL) not in (None, uid):
            continue
        found.append(pod)
    return found


def failed_create(events: list[dict], job_meta: dict) -> dict | None:
    """The newest FailedCreate Warning event about this Job (same uid, when known)."""
    uid = job_meta.get("uid")
    best, best_at = None, ""
    for event in events:
        involved = event.get("involvedObject") or {}
        if event.get("reason") != FAILED_CREATE or involved.get("name") != job_meta.get("name"):
            continue
        if uid and involved.get("uid") and involved["uid"] != uid:
            continue
        at = (
            event.get("lastTimestamp")
            or event.get("eventTime")
            or (event.get("metadata") or {}).get("creationTimestamp")
            or ""
        )
        if best is None or at >= best_at:
            best, best_at = event, at
    return best


def _pending_reason(pod: dict) -> tuple[str, str] | None:
    """Why a pod waits: unschedulable, or a container waiting (image pull, ...)."""
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return condition.get("reason") or reasons.UNSCHEDULABLE, condition.get("message") or ""
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason") not in (None, "ContainerCreating"):
            return waiting["reason"], waiting.get("message") or ""
    return None
