"""Turn a user's job request into the batch/v1 Job both backends admit and run.

Input is untrusted JSON: every field is checked here, with a message that says what to fix,
before anything reaches a ledger or a cluster. Arguments stay an argv list end to end.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from . import bounds, kueue, labels, priority, volumes
from .errors import Conflict, InvalidRequest
from .jobfields import TRAIN
from .podresources import DNS1123_LABEL
from .profiles import TeamProfile
from .quantity import Quantity

#: Kubernetes Job names become pod label values, so they must be DNS-1123 labels (63 chars).
MAX_NAME = 63
MAX_ARGS = 512
MAX_ARG_CHARS = 8192
MAX_ARGS_TOTAL = 128 * 1024
MAX_GPUS = 1024
STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")
REQUEST_FIELDS = ("name", "generateName", "args", "gpus", "resources", "priority")
#: ``metadata.generateName`` as the API server fills it (k8s.io/apiserver/pkg/storage/names
#: SimpleNameGenerator): the prefix cut to 58 characters, then 5 random ones from apimachinery's
#: ``util/rand`` alphabet (no vowels), so a generated name is at most 63.
GENERATED_SUFFIX_LENGTH = 5
MAX_GENERATED_PREFIX = MAX_NAME - GENERATED_SUFFIX_LENGTH
GENERATED_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
#: Creates tried on a name clash, as the API server's maxNameGenerationCreateAttempts.
GENERATE_NAME_ATTEMPTS = 8
DEFAULT_GENERATE_NAME = "sft-"
_RANDOM = random.SystemRandom()
T = TypeVar("T")

_LABEL_VALUE_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass
class JobRequest:
    """A validated request: a name (or a prefix to generate one from), the ms-swift arguments,
    and container resources. ``name`` is empty until :func:`create_named` fills it."""

    name: str
    args: list[str]
    resources: dict = field(default_factory=lambda: {"requests": {}, "limits": {}})
    generate_name: str = ""
    #: ``priority.HIGH``, ``NORMAL`` (the default) or ``BEST_EFFORT``
    priority: str = priority.DEFAULT
    #: "" for a fine-tune; ``labels.KIND_ENDPOINT`` for a job that serves (``endpoints``)
    kind: str = ""


def parse_job_request(body, profile: TeamProfile) -> JobRequest:
    """Validate a ``POST .../jobs`` body; raise :class:`InvalidRequest` naming the bad field."""
    if not isinstance(body, dict):
        raise InvalidRequest('the body must be a JSON object like {"args": ["--model", "..."], "gpus": 1}')
    unknown = sorted(set(body) - set(REQUEST_FIELDS))
    if unknown:
        raise InvalidRequest(
            f"unknown field(s) {', '.join(map(repr, unknown))}; a job takes {', '.join(REQUEST_FIELDS)}"
        )
    nulls = [k for k in REQUEST_FIELDS if k in body and body[k] is None]
    if nulls:  # the OpenAPI file gives each field a type; null is none of them (leave it out instead)
        raise InvalidRequest(f'"{nulls[0]}": null is not a value; leave the field out for its default')
    for key in ("name", "generateName"):  # the file's patterns take no empty name, even one name overrides
        if body.get(key) == "":
            raise InvalidRequest(f'"{key}" is empty; leave it out, or give a DNS-1123 label such as "my-job"')
    name = _parse_name(body.get("name"))
    generate_name = _parse_generate_name(body.get("generateName"))
    if not name and not generate_name:
        generate_name = DEFAULT_GENERATE_NAME
    args = _parse_args(body.get("args"))
    resources = _parse_resources(body.get("resources", {}), profile.gpuResource)
    if body.get("gpus") is not None:
        gpus = parse_gpus(body["gpus"], resource=profile.gpuResource)
        for part in ("requests", "limits"):
            stated = resources[part].get(profile.gpuResource)
            if stated is not None and Quantity(stated) != Quantity(gpus):
                raise InvalidRequest(
                    f'"gpus": {gpus} disagrees with resources.{part}["{profile.gpuResource}"]'
                    f' = "{stated}"; give one or make them equal'
                )
            resources[part][profile.gpuResource] = str(gpus)
    return JobRequest(
        name=name,
        args=args,
        resources=resources,
        generate_name=generate_name,
        priority=priority.check(body.get("priority")),
    )


def create_named(request: JobRequest, create: Callable[[JobRequest], T], rng: random.Random = _RANDOM) -> T:
    """``create(request)`` with a concrete name: the one given (name wins over generateName, as in
    Kubernetes), else one generated from the prefix, again on each ``Conflict`` up to
    ``GENERATE_NAME_ATTEMPTS`` times, as the API server retries a create with generateName."""
    if request.name:
        return create(request)
    for _ in range(GENERATE_NAME_ATTEMPTS - 1):
        try:
            return create(replace(request, name=generate_name(request.generate_name, rng)))
        except Conflict:
            pass  # taken: another name
    return create(replace(request, name=generate_name(request.generate_name, rng)))


def generate_name(prefix: str, rng: random.Random = _RANDOM) -> str:
    """``prefix`` (cut to leave room) and 5 random characters, as Kubernetes' SimpleNameGenerator."""
    suffix = "".join(rng.choice(GENERATED_ALPHABET) for _ in range(GENERATED_SUFFIX_LENGTH))
    return prefix[:MAX_GENERATED_PREFIX] + suffix


@dataclass(frozen=True)
class JobSettings:
    """The server's part of every Job, which a backend passes to :func:`build_job` (as KubeSpawner
    passes its traits to ``objects.make_pod``); the profile and the request give the rest."""

    #: The container image when the profile names none (``JupyterQuota.job_image``).
    image: str = ""
    #: The container's ``imagePullPolicy`` (``JupyterQuota.job_image_pull_policy``); empty leaves
    #: Kubernetes' default (``Always`` for a ``:latest`` image, else ``IfNotPresent``).
    image_pull_policy: str = ""
    #: ``spec.backoffLimit``: pods retried after a failure (``JupyterQuota.kube_backoff_limit``).
    backoff_limit: int = 0
    #: ``spec.ttlSecondsAfterFinished``; negative leaves it unset (``kube_ttl_seconds_after_finished``).
    ttl_seconds_after_finished: int = -1
    #: Whether the pod mounts volumes: the profile's (``{username}`` expanded for the owner), then
    #: ``cache_volumes``. The kube backend mounts them; the local backend's processes mount nothing.
    mounts: bool = False
    #: The server's volumes in ``volumes`` entry form (``JupyterQuota.kube_cache_volumes``).
    cache_volumes: tuple = ()
    #: Kueue in use: the LocalQueue every Job is queued in (``JupyterQuota.kueue_queue``). The Job
    #: is then created suspended, with the queue and priority-class labels, and Kueue unsuspends
    #: it when its team's ClusterQueue admits it (``kueue.py``). Empty: no Kueue.
    kueue_queue: str = ""


def build_job(
    profile: TeamProfile, request: JobRequest, owner: str, command: list[str], settings: JobSettings = JobSettings()
) -> dict:
    """The batch/v1 Job for ``request`` in ``profile``'s namespace, as submitted: no backend changes it.

    Raises :class:`InvalidRequest` when a profile volume does not expand for ``owner``.
    """
    identity = {
        labels.MANAGED_BY: labels.MANAGED_BY_VALUE,
        labels.TEAM: profile.team,
        labels.USER: label_value(owner),
        labels.JOB: request.name,
        labels.PRIORITY: request.priority,
    }
    if request.kind:
        identity[labels.KIND] = request.kind
    container = {
        "name": TRAIN,
        "command": [*command, *request.args],
        "resources": {k: dict(v) for k, v in request.resources.items() if v},
    }
    metadata = {
        "name": request.name,
        "namespace": profile.namespace,
        "labels": identity,
        "annotations": {labels.OWNER: owner, labels.ARGS: json.dumps(request.args)},
    }
    if request.generate_name:
        metadata["generateName"] = request.generate_name  # kept, as the API server keeps it
    processes = _processes_per_node(request, profile.gpuResource)
    if processes:
        # ms-swift launches torchrun itself when NPROC_PER_NODE is set: one rank per GPU (DDP or
        # DeepSpeed); without it a multi-GPU job would run as one process on the first GPU.
        container["env"] = [{"name": "NPROC_PER_NODE", "value": str(processes)}]
    if profile.image or settings.image:
        container["image"] = profile.image or settings.image
    if settings.image_pull_policy:
        container["imagePullPolicy"] = settings.image_pull_policy
    pod_spec: dict = {"restartPolicy": "Never", "containers": [container]}
    if profile.nodeSelector:
        pod_spec["nodeSelector"] = dict(profile.nodeSelector)
    if profile.tolerations:
        pod_spec["tolerations"] = [dict(t) for t in profile.tolerations]
    priority_class = _priority_class(profile, request.priority, settings)
    if priority_class:
        pod_spec["priorityClassName"] = priority_class
    if settings.kueue_queue:
        metadata["labels"] = {
            **identity,
            labels.KUEUE_QUEUE_NAME: settings.kueue_queue,
            labels.KUEUE_PRIORITY_CLASS: priority_class,
        }
    if settings.mounts:
        _mount(pod_spec, volumes.for_user(list(profile.volumes), owner) + list(settings.cache_volumes))
    spec = {
        "parallelism": 1,
        "completions": 1,
        "backoffLimit": settings.backoff_limit,
        "template": {"metadata": {"labels": dict(identity)}, "spec": pod_spec},
    }
    if settings.ttl_seconds_after_finished >= 0:
        spec["ttlSecondsAfterFinished"] = settings.ttl_seconds_after_finished
    if settings.kueue_queue:
        spec["suspend"] = True  # Kueue's job integration unsuspends it on admission
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


#: What the Job controller and the API server add to a Job: a requeued copy leaves them out.
_CONTROLLER_LABELS = (labels.CONTROLLER_UID, labels.JOB_NAME, labels.BATCH_JOB_NAME)


def requeued_job(job: dict, checkpoint: str | None, history: list[dict]) -> dict:
    """A preempted Job again, as ``build_job`` made it (same name, labels, pod template), to run
    once more: its trainer resumes from ``checkpoint`` (``--resume_from_checkpoint``, unless the
    user's own arguments say where), and its elastic events so far are carried in ``history``.
    The server-set fields (uid, status, the controller's selector and labels) are left out."""
    from . import resume

    meta = job.get("metadata") or {}
    spec = copy.deepcopy(job.get("spec") or {})
    for key in ("selector", "manualSelector"):
        spec.pop(key, None)
    template = spec.setdefault("template", {})
    template_meta = template.setdefault("metadata", {})
    template_meta["labels"] = {
        k: v for k, v in (template_meta.get("labels") or {}).items() if k not in _CONTROLLER_LABELS
    }
    user_args = json.loads((meta.get("annotations") or {}).get(labels.ARGS) or "[]")
    for container in (template.get("spec") or {}).get("containers") or []:
        if container.get("name") == TRAIN and not resume.names_resume(user_args):
            command = _without_flag(container.get("command") or [], resume.RESUME_FLAG)
            container["command"] = [*command, *resume.resume_args(command, checkpoint)]
    annotations = {**(meta.get("annotations") or {}), labels.HISTORY: json.dumps(history)}
    metadata = {
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
        "labels": {k: v for k, v in (meta.get("labels") or {}).items() if k not in _CONTROLLER_LABELS},
        "annotations": annotations,
    }
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


def _without_flag(argv: list[str], flag: str) -> list[str]:
    """``argv`` without ``flag`` and its value (an earlier requeue's resume point)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == flag:
            skip = True
        elif not arg.startswith(flag + "="):
            out.append(arg)
    return out


def _priority_class(profile: TeamProfile, level: str, settings: JobSettings) -> str:
    """The pod's PriorityClass: with Kueue, the class ``render --kueue`` made for the priority
    (also the Job's WorkloadPriorityClass); else the profile's class for it, or its
    ``priorityClassName``, or none."""
    if settings.kueue_queue:
        return kueue.class_name(profile, level)
    return profile.priorityClasses.get(level) or profile.priorityClassName


def _mount(pod_spec: dict, entries: list[dict]) -> None:
    """Each entry's volume in the pod and its mount in the container; a name given twice is
    mounted once (the profile's home or share before a server cache of the same name)."""
    taken = set()
    for entry in entries:
        if entry.get("name") in taken:
            continue
        taken.add(entry.get("name"))
        volume, mount = volumes.split(copy.deepcopy(entry))
        pod_spec.setdefault("volumes", []).append(volume)
        for container in pod_spec["containers"]:
            container.setdefault("volumeMounts", []).append(dict(mount))


def processes_per_node(gpus: int, args: list[str]) -> int:
    """Ranks ms-swift should launch (``NPROC_PER_NODE``): one per GPU for a multi-GPU job, and 1
    for DeepSpeed on one GPU (torchrun sets the rank variables DeepSpeed needs); 0 means a plain
    process."""
    deepspeed = any(a == "--deepspeed" or a.startswith("--deepspeed=") for a in args)
    return gpus if gpus > 1 else (1 if deepspeed and gpus == 1 else 0)


def _processes_per_node(request: JobRequest, gpu_resource: str) -> int:
    stated = request.resources["limits"].get(gpu_resource) or request.resources["requests"].get(gpu_resource)
    return processes_per_node(Quantity(stated).value() if stated else 0, request.args)


def label_value(text: str) -> str:
    """``text`` made a valid label value (63 chars of ``[A-Za-z0-9_.-]``, alphanumeric ends)."""
    value = _LABEL_VALUE_UNSAFE.sub("_", text)[:63].strip("_.-")
    return value or "unknown"


# -- field checks ---------------------------------------------------------------------------------


def _parse_name(name) -> str:
    name = _name_field(name, '"name"', "a job name")
    if name and not DNS1123_LABEL.fullmatch(name):
        raise InvalidRequest(
            f'"name" {_shown(name)} is not a valid job name: use lower-case letters, '
            "digits and '-', starting and ending with a letter or digit (e.g. 'qwen-lora-1')"
        )
    return name


def _parse_generate_name(prefix) -> str:
    """A prefix is checked as the API server checks ``metadata.generateName``: a DNS-1123 label
    once a trailing '-' is allowed (apimachinery's maskTrailingDash)."""
    prefix = _name_field(prefix, '"generateName"', "a prefix")
    masked = prefix[:-1] + "a" if len(prefix) > 1 and prefix.endswith("-") else prefix
    if prefix and not DNS1123_LABEL.fullmatch(masked):
        raise InvalidRequest(
            f'"generateName" {_shown(prefix)} is not a valid generateName: use lower-case '
            "letters, digits and '-', starting with a letter or digit (e.g. 'tiny-demo-')"
        )
    return prefix


def _name_field(value, what: str, kind: str) -> str:
    """A string of at most ``MAX_NAME`` characters; "" when absent."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        raise InvalidRequest(f"{what} must be a string, not {type(value).__name__}")
    if len(value) > MAX_NAME:
        raise InvalidRequest(f"{what} is {len(value)} characters; {kind} has at most {MAX_NAME}")
    return value


def _parse_args(args) -> list[str]:
    if args is None:
        return []
    if not isinstance(args, list):
        raise InvalidRequest(
            '"args" must be a list of strings, one argument per item, e.g. '
            '["--model", "Qwen/Qwen2.5-7B-Instruct", "--tuner_type", "lora"]'
        )
    if len(args) > MAX_ARGS:
        raise InvalidRequest(f'"args" has {len(args)} items; at most {MAX_ARGS} are accepted')
    total = 0
    for i, arg in enumerate(args):
        if not isinstance(arg, str):
            raise InvalidRequest(f'"args[{i}]" must be a string, not {type(arg).__name__}')
        if len(arg) > MAX_ARG_CHARS:
            raise InvalidRequest(f'"args[{i}]" is {len(arg)} characters; at most {MAX_ARG_CHARS} are accepted')
        bad = next((c for c in arg if ord(c) < 32 or ord(c) == 127), None)
        if bad is not None:
            raise InvalidRequest(
                f'"args[{i}]" contains the control character U+{ord(bad):04X}; '
                "arguments are passed as they are, one per item, so no quoting or "
                "newlines are needed"
            )
        total += len(arg)
    if total > MAX_ARGS_TOTAL:
        raise InvalidRequest(f'"args" total {total} characters; at most {MAX_ARGS_TOTAL} are accepted')
    return list(args)


def parse_gpus(value, what: str = '"gpus"', resource: str = "nvidia.com/gpu", minimum: int = 0) -> int:
    """A whole number of GPUs from JSON or a command line: a job takes 0 up, a plan or an
    estimate 1 up (``minimum``), at most ``MAX_GPUS``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InvalidRequest(f"{what} must be a whole number, like 1 or 2, not {_shown(value)}")
    q = bounds.quantity(value, what, f"{what} {_shown(value)} is not a number; give a whole number like 1 or 2")
    n = _whole_gpus(q, f"{what} {_shown(value)}", resource, kube_sign_check=minimum == 0)
    if n < minimum:
        raise InvalidRequest(f"{what} must be at least {minimum}, not {n}")
    return n


def _whole_gpus(q: Quantity, what: str, resource: str, kube_sign_check: bool = True) -> int:
    """Whole and bounded; negatives get the API server's words unless the caller has its own floor."""
    if kube_sign_check and q.sign() < 0:
        raise InvalidRequest(f"{what} must be greater than or equal to 0")
    if q.milli_value() % 1000 != 0:
        raise InvalidRequest(
            f"{what} is not a whole number: GPUs ({resource}) are whole, 1, 2, ... of them, never a fraction"
        )
    n = q.value()
    if n > MAX_GPUS:
        raise InvalidRequest(f"{what} asks for {n} GPUs; at most {MAX_GPUS} are accepted")
    return n


def _parse_resources(resources, gpu_resource: str) -> dict:
    parsed: dict = {"requests": {}, "limits": {}}
    if not isinstance(resources, dict):  # null too: the OpenAPI file says an object
        raise InvalidRequest(
            '"resources" must be an object like {"requests": {"cpu": "4"}, "limits": {"memory": "32Gi"}}'
        )
    unknown = sorted(set(resources) - {"requests", "limits"})
    if unknown:
        raise InvalidRequest(f'"resources" takes "requests" and "limits", not {", ".join(map(repr, unknown))}')
    allowed = (*STANDARD_RESOURCES, gpu_resource)
    for part in ("requests", "limits"):
        values = resources.get(part, {})
        if not isinstance(values, dict):  # null, "", 0 or [] too: the OpenAPI file says an object
            raise InvalidRequest(f'"resources.{part}" must be an object of resource name to quantity')
        for key, raw in values.items():
            where = f'resources.{part}["{_clip(str(key))}"]'
            if key not in allowed:
                raise InvalidRequest(f"{where}: unknown resource {_shown(key)}; a job may ask for {', '.join(allowed)}")
            q = bounds.quantity(
                raw,
                where,
                f"{where}: {_shown(raw)} is not a Kubernetes quantity; write e.g. "
                '"4" or "500m" for CPU, "32Gi" for memory',
            )
            if q.sign() < 0:
                raise InvalidRequest(f"{where}: must be greater than or equal to 0")
            if key == gpu_resource:
                q = Quantity(_whole_gpus(q, where, gpu_resource))
            parsed[part][key] = str(q)
    return parsed


def _clip(text: str, limit: int = 64) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _shown(value) -> str:
    return bounds.shown(value)
