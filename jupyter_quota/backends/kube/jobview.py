"""A batch/v1 Job, its pods and its events, as the job dict the REST API returns (see ``base``).

Phase: the Job's ``Complete`` condition is Succeeded and ``Failed`` is Failed (with the
condition's reason and message, or, when its container was killed for passing its memory
limit, ``OOMKilled`` naming the limit); a job whose pod cannot get its image is Failed at once
(``reasons.IMAGE_PULL_FAILURES``, naming the image); a job with a Running pod is Running;
anything else is Pending. A Pending job whose pods the API server refused (quota, LimitRange)
carries the newest ``FailedCreate`` event's reason and message, so a refusal is never silent.
"""

from __future__ import annotations

from ... import jobfields, labels, reasons
from ...jobfields import container_resources, priority_of, train_container, user_args
from ...quantity import Quantity
from . import preemption

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
    preemptions: list[dict] = (),
) -> dict:
    """The API's job dict. ``pods`` are the Job's pods; ``events`` those about the Job;
    ``preemptions`` the scheduler's ``Preempted`` events in its namespace (``preemption.py``).

    ``template_pod`` (the pod as LimitRanger would default it) stands in for the resources
    while the Job has no pod yet.
    """
    meta = job.get("metadata") or {}
    job_labels = meta.get("labels") or {}
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
        "team": job_labels.get(labels.TEAM, ""),
        "owner": annotations.get(labels.OWNER) or job_labels.get(labels.USER, ""),
        "phase": "Pending",
        "args": user_args(job),
        "priority": priority_of(job),
        "gpus": int(Quantity(gpus).value()),
        "resources": resources,
        "createdAt": meta.get("creationTimestamp", ""),
        # a Running job's flag needs its pod log's progress: the backend sets it (logprogress.py)
        "stalled": None,
    }
    if status.get("startTime"):
        out["startedAt"] = status["startTime"]
    ended = end_condition(job)
    exit_code = _exit_code(pod)
    pull_failure = image_pull_failure(pod)
    if ended and ended.get("type") == COMPLETE:
        out["phase"] = "Succeeded"
        out["finishedAt"] = status.get("completionTime") or ended.get("lastTransitionTime", "")
    elif ended:
        out["phase"] = "Failed"
        out["finishedAt"] = ended.get("lastTransitionTime", "")
        out["reason"] = ended.get("reason") or FAILED
        out["message"] = _failure_message(ended.get("message") or "", pod)
        if _terminated(pod).get("reason") == reasons.OOM_KILLED:
            out["reason"] = reasons.OOM_KILLED
            out["message"] = oom_killed_message(resources["limits"].get("memory"))
    elif pull_failure is not None:
        out["phase"] = "Failed"
        out["reason"], out["message"] = pull_failure
    elif any(_pod_phase(p) == "Running" for p in pods):
        out["phase"] = "Running"
    else:
        refused = failed_create(events, meta)
        if refused is not None and not any(_pod_phase(p) in ("Pending", "Running") for p in pods):
            out["reason"] = refused.get("reason") or reasons.FAILED_CREATE
            out["message"] = refused.get("message") or ""
        elif pod is not None and _pod_phase(pod) == "Pending":
            waiting = _pending_reason(pod)
            if waiting:
                out["reason"], out["message"] = waiting
    if exit_code is not None and out["phase"] in ("Succeeded", "Failed"):
        out["exitCode"] = exit_code
    _preempted(out, job, pod, preemptions)
    if meta.get("deletionTimestamp") and out["phase"] in ("Pending", "Running"):
        out["reason"] = reasons.TERMINATING
        out["message"] = "the job is being deleted"
    return out


def _preempted(out: dict, job: dict, pod: dict | None, preemptions: list[dict]) -> None:
    """A job whose pod the scheduler preempted is Pending, ``Preempted``, until the service has
    requeued it; a requeued one is Pending, ``Requeued``, until its new pod starts (then its
    history says ``Resumed``)."""
    history = preemption.shown_history(job, pod)
    if history:
        out["history"] = history
    if out["phase"] == "Succeeded" or not preemption.requeued_here(job):
        return
    event = preemption.preemption(job, list(preemptions))
    if event is not None:
        for key in ("finishedAt", "exitCode"):
            out.pop(key, None)
        out["phase"], out["reason"] = "Pending", reasons.PREEMPTED
        out["message"] = preemption.preempted_message(event, None) + "; it is being requeued"
    elif history and history[-1].get("event") == preemption.REQUEUED and out["phase"] == "Pending":
        waiting = f"; {out['message']}" if out.get("message") else ""
        out["reason"], out["message"] = reasons.REQUEUED, (history[-1].get("message") or "") + waiting


def _pod_phase(pod: dict | None) -> str:
    return ((pod or {}).get("status") or {}).get("phase", "Pending")


def _exit_code(pod: dict | None):
    return _terminated(pod).get("exitCode")


def _train_status(pod: dict | None) -> dict:
    statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
    return next((s for s in statuses if s.get("name", jobfields.TRAIN) == jobfields.TRAIN), {})


def _terminated(pod: dict | None) -> dict:
    """The training container's ``state.terminated`` ({} while it has not ended)."""
    return (_train_status(pod).get("state") or {}).get("terminated") or {}


def oom_killed_message(limit: str | None) -> str:
    return (
        f"the training container was killed for passing its memory limit ({limit or 'no limit set'}); "
        "submit it again with a plan that requests more memory (a larger memory request and limit), or a "
        "smaller --max_length or batch size"
    )


def image_pull_failure(pod: dict | None) -> tuple[str, str] | None:
    """(reason, message) when the node cannot get the training container's image: Kubernetes
    would retry for ever (``ImagePullBackOff``) or never (``ErrImageNeverPull``)."""
    waiting = (_train_status(pod).get("state") or {}).get("waiting") or {}
    if waiting.get("reason") not in reasons.IMAGE_PULL_FAILURES:
        return None
    image = _train_status(pod).get("image") or train_container(pod or {}).get("image") or ""
    return waiting["reason"], (
        f'the node cannot get the image "{image}" ({waiting.get("message") or waiting["reason"]}); '
        "set the team profile's image or JupyterQuota.job_image to an image the nodes can pull"
    )


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
        pod_labels = (pod.get("metadata") or {}).get("labels") or {}
        if pod_labels.get(labels.JOB_NAME) != name:
            continue
        if uid and pod_labels.get(labels.CONTROLLER_UID) not in (None, uid):
            continue
        found.append(pod)
    return found


def failed_create(events: list[dict], job_meta: dict) -> dict | None:
    """The newest FailedCreate Warning event about this Job (same uid, when known)."""
    uid = job_meta.get("uid")
    best, best_at = None, ""
    for event in events:
        involved = event.get("involvedObject") or {}
        if event.get("reason") != reasons.FAILED_CREATE or involved.get("name") != job_meta.get("name"):
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
