"""Priority preemption on Kubernetes, seen and answered: a preempted job is requeued and resumes
from its last checkpoint, as on the local backend (``backends/local/elasticpass.py``).

Without Kueue, the cluster's own mechanism is the scheduler's: a pending pod of a higher
PriorityClass that fits no node makes it delete lower-priority pods (their grace period applies)
and record a ``Preempted`` event on each. The Job controller would then start a new pod of the
same Job, from the beginning. Instead, the service:

- follows the log of each Running job pod (``requeue.py``) (every ``checkpoint_interval`` seconds, and once more
  when its pod is preempted, while the kubelet still serves it): its step and the checkpoints it
  saved (``swiftlog``);
- on a ``Preempted`` event about a pod of one of its Jobs, deletes that Job (its other pods go
  with it) and creates it again under the same name (``jobspec.requeued_job``), its trainer given
  ``--resume_from_checkpoint`` and the newest whole checkpoint (``resume``), and its history
  (``Preempted`` with the step and the scheduler's message, ``Requeued`` with the checkpoint) in
  an annotation (``labels.HISTORY``). Its pod waits for the GPUs like any other pending pod.

The checkpoints are on the volume the profile names, which every pod of the team mounts; the
service reads the paths from the log, and checks them for a whole save only where it can see
them. With Kueue (``kueue_queue``) Kueue preempts and requeues workloads itself: nothing here runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

from ... import jobspec, labels, reasons, resume, swiftlog

PREEMPTED, REQUEUED, RESUMED = resume.PREEMPTED, resume.REQUEUED, resume.RESUMED


# -- pure: what the cluster's objects say ------------------------------------------------------


def requeued_here(job: dict) -> bool:
    """Whether the service requeues ``job`` when preempted: a fine-tune (an endpoint's Job simply
    gets a new pod), not admitted by Kueue (which requeues its own workloads)."""
    job_labels = (job.get("metadata") or {}).get("labels") or {}
    return not job_labels.get(labels.KIND) and not job_labels.get(labels.KUEUE_QUEUE_NAME)


def history(job: dict) -> list[dict]:
    """The Job's elastic events so far (its ``labels.HISTORY`` annotation; [] when none or unreadable)."""
    text = ((job.get("metadata") or {}).get("annotations") or {}).get(labels.HISTORY) or "[]"
    try:
        events = json.loads(text)
    except ValueError:
        return []
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []


def shown_history(job: dict, pod: dict | None) -> list[dict]:
    """:func:`history` as a user reads it: a requeued Job whose pod has started has ``Resumed``."""
    events = history(job)
    started = ((pod or {}).get("status") or {}).get("startTime")
    if events and events[-1].get("event") == REQUEUED and started:
        events.append({"event": RESUMED, "at": started, "checkpoint": events[-1].get("checkpoint")})
    return events


def preemption(job: dict, events: list[dict]) -> dict | None:
    """The newest scheduler ``Preempted`` event about a pod of ``job`` not yet answered (its pod
    is not in the Job's history), or None. A Job's pods are named ``<job>-<5 characters>``; an
    event older than the Job is about an earlier Job of the same name."""
    meta = job.get("metadata") or {}
    name = meta.get("name") or ""
    answered = {e.get("pod") for e in history(job) if e.get("event") == PREEMPTED}
    created = _second(meta.get("creationTimestamp"))
    best, best_at = None, ""
    for event in events:
        involved = event.get("involvedObject") or {}
        pod = involved.get("name") or ""
        prefix, dash, suffix = pod.rpartition("-")
        if event.get("reason") != reasons.PREEMPTED or involved.get("kind") != "Pod":
            continue
        if not dash or prefix != name or len(suffix) != 5 or pod in answered:
            continue
        at = event_time(event)
        if created is not None and (_second(at) or 0) < created:
            continue
        if best is None or at >= best_at:
            best, best_at = event, at
    return best


def event_time(event: dict) -> str:
    """When an event happened: events.k8s.io writers (the scheduler) set ``eventTime``, others ``lastTimestamp``."""
    return (
        event.get("eventTime")
        or event.get("lastTimestamp")
        or event.get("firstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def preempted_message(event: dict, step: int | None) -> str:
    at = f" at step {step}" if step is not None else ""
    return f"the scheduler deleted its pod{at} for a higher-priority pod ({event.get('message') or reasons.PREEMPTED})"


def requeued_message(preempted: str, checkpoint: str | None) -> str:
    then = (
        f"it resumes from {checkpoint} when GPUs free up"
        if checkpoint
        else "it starts again from the beginning when GPUs free up (no checkpoint was saved)"
    )
    return f"{preempted}; requeued: {then}"


def answer(job: dict, event: dict, progress: Progress, now: str) -> dict:
    """The Job that runs again after ``event`` preempted it (``jobspec.requeued_job``)."""
    checkpoint = progress.checkpoint()
    said = preempted_message(event, progress.step)
    pod = (event.get("involvedObject") or {}).get("name")
    events = [
        *history(job),
        {
            "event": PREEMPTED,
            "at": event_time(event) or now,
            "step": progress.step,
            "reason": reasons.PREEMPTED,
            "message": said,
            "pod": pod,
        },
        {"event": REQUEUED, "at": now, "checkpoint": checkpoint, "message": requeued_message(said, checkpoint)},
    ]
    return jobspec.requeued_job(job, checkpoint, events)


@dataclass
class Progress:
    """What a pod's log said last: its step and the checkpoints it saved, oldest first."""

    step: int | None = None
    checkpoints: list[str] = field(default_factory=list)
    read_at: float = 0.0

    def update(self, log: str) -> None:
        found = swiftlog.parse_log(log)
        if found.step is not None:
            self.step = found.step
        self.checkpoints += [c for c in resume.named_checkpoints(found) if c not in self.checkpoints]

    def checkpoint(self) -> str | None:
        return resume.newest_whole(self.checkpoints)


def _second(stamp: str | None) -> int | None:
    if not stamp:
        return None
    try:
        return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None
