"""Reading back what ``jobspec.build_job`` wrote into a Job or its pod: both backends' job views use these."""

from __future__ import annotations

import json

from . import bounds, labels, priority
from .quantity import Quantity

#: The name of the container that runs the trainer (the kube backend reads its logs).
TRAIN = "train"


def train_container(pod: dict) -> dict:
    """The container named ``train`` (else the first) of a pod or pod template."""
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return next((c for c in containers if c.get("name") == TRAIN), containers[0])


def container_resources(container: dict) -> dict:
    """``{"requests", "limits"}`` with every quantity in canonical form."""
    resources = container.get("resources") or {}
    return {
        part: {name: _canonical(str(q)) for name, q in (resources.get(part) or {}).items()}
        for part in ("requests", "limits")
    }


def user_args(job: dict) -> list[str]:
    """The user's arguments: the ``labels.ARGS`` annotation, else the train container's args."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    try:
        args = json.loads(annotations.get(labels.ARGS, "null"))
    except ValueError:
        args = None
    if isinstance(args, list):
        return [str(a) for a in args]
    template = (job.get("spec") or {}).get("template") or {}
    return [str(a) for a in train_container(template).get("args") or []]


def priority_of(labelled: dict) -> str:
    """A Job's or pod's priority label (``labels.PRIORITY``); a job made before priorities is normal."""
    value = ((labelled.get("metadata") or {}).get("labels") or {}).get(labels.PRIORITY)
    return value if value in priority.PRIORITIES else priority.DEFAULT


def _canonical(text: str) -> str:
    """The canonical form; a string an older version stored past today's bounds is shown as stored
    (parsing 100,000 digits on every listing cost half a second)."""
    if len(text) > bounds.MAX_QUANTITY_CHARS:
        return text
    try:
        return str(Quantity(text))
    except ValueError:
        return text
