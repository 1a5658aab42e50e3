"""Kueue's objects for the team profiles (``jupyter quota profiles render --kueue``), built here only.

On Kubernetes, borrowing idle GPUs and preempting the borrowers is Kueue's job, not ours: each
team gets a ClusterQueue in one cohort, its ``nominalQuota`` the profile's hard GPU, CPU and
memory, its ``borrowingLimit``/``lendingLimit`` the profile's; a LocalQueue in the team namespace
points at it; jobs carry the LocalQueue's name and a priority class as labels and are created
suspended (``jobspec.build_job`` with ``JobSettings.kueue_queue``), so Kueue admits them.

Preemption (ClusterQueue ``spec.preemption``):

- ``reclaimWithinCohort: Any``: a team that wants its nominal quota back preempts the workloads
  borrowing it, whatever their priority (the lender always gets its guaranteed share);
- ``borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: <best-effort>}``: a job
  that must borrow may preempt only best-effort workloads of other teams, never their
  guaranteed (normal or high) ones;
- ``withinClusterQueue: LowerPriority``: within a team, a high-priority job preempts the team's
  own lower-priority ones.

Each priority (``jupyter_quota/priority.py``) is a WorkloadPriorityClass (read by Kueue, named
by the Job's ``kueue.x-k8s.io/priority-class`` label) and a PriorityClass of the same name (the
pod's ``priorityClassName``, read by the scheduler), with the values of :data:`PRIORITY_VALUES`.
A profile names its own classes in ``priorityClasses``; the rest get :data:`DEFAULT_CLASS_NAMES`.

The API version is Kueue's current one, ``v1beta2`` (Kueue v0.15 added it; v0.16 deprecated
``v1beta1``). ``tests/kube/test_kueue_objects.py`` creates these objects on a real API server
that has Kueue v0.19.2's CRDs (``tests/data/kueue/``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from . import labels
from .errors import InvalidRequest
from .priority import BEST_EFFORT, HIGH, NORMAL, PRIORITIES
from .profiles import MANAGED_LABELS, TeamProfile
from .quantity import Quantity

GROUP = "kueue.x-k8s.io"
API_VERSION = f"{GROUP}/v1beta2"
SCHEDULING_API = "scheduling.k8s.io/v1"
#: The value of each priority's WorkloadPriorityClass and PriorityClass (larger wins).
PRIORITY_VALUES = {HIGH: 1000, NORMAL: 100, BEST_EFFORT: 10}
#: The class of a priority the profile's ``priorityClasses`` does not name.
DEFAULT_CLASS_NAMES = {p: f"jupyter-quota-{p}" for p in PRIORITIES}
#: The ResourceFlavor of teams with no ``nodeSelector``.
DEFAULT_FLAVOR = "default-flavor"
#: The LocalQueue name ``render --kueue`` uses when ``JupyterQuota.kueue_queue`` is empty.
DEFAULT_QUEUE = "team-queue"
DEFAULT_COHORT = "jupyter-quota"
#: What Kueue counts, in the order of ``coveredResources``; the GPU resource is the profile's.
_COMPUTE = ("cpu", "memory")
_UNSAFE = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True)
class KueueSettings:
    """The server's part of the Kueue objects (``JupyterQuota.kueue_cohort`` and ``kueue_queue``)."""

    cohort: str = DEFAULT_COHORT
    queue: str = DEFAULT_QUEUE


def kueue_objects(profiles: Iterable[TeamProfile], settings: KueueSettings = KueueSettings()) -> list[dict]:
    """Every Kueue object of ``profiles``, in the order to apply them: the PriorityClasses and
    WorkloadPriorityClasses, the ResourceFlavors, the ClusterQueues, then the LocalQueues (in the
    team namespaces, which ``rbac.team_objects`` makes). Raises InvalidRequest naming the profile
    and field Kueue would refuse."""
    profiles = list(profiles)
    classes = _classes(profiles)
    flavors = _flavors(profiles)
    return [
        *(priority_class(name, p) for name, p in classes.items()),
        *(workload_priority_class(name, p) for name, p in classes.items()),
        *(resource_flavor(name, selector) for name, selector in flavors.values()),
        *(cluster_queue(p, settings.cohort, flavors[_key(p.nodeSelector)][0]) for p in profiles),
        *(local_queue(p, settings.queue) for p in profiles),
    ]


def class_name(profile: TeamProfile, priority: str) -> str:
    """The WorkloadPriorityClass and PriorityClass a job of ``priority`` in ``profile`` names."""
    return profile.priorityClasses.get(priority) or DEFAULT_CLASS_NAMES[priority]


def cluster_queue_name(profile: TeamProfile) -> str:
    """A team's ClusterQueue is named after its namespace (unique among the profiles)."""
    return profile.namespace


# -- one object each ------------------------------------------------------------------------------


def priority_class(name: str, priority: str) -> dict:
    """The scheduler's PriorityClass; best-effort pods never preempt other pods."""
    obj = {
        "apiVersion": SCHEDULING_API,
        "kind": "PriorityClass",
        "metadata": {"name": name, "labels": dict(MANAGED_LABELS)},
        "value": PRIORITY_VALUES[priority],
        "description": f"jupyter-quota {priority} jobs",
    }
    if priority == BEST_EFFORT:
        obj["preemptionPolicy"] = "Never"
    return obj


def workload_priority_class(name: str, priority: str) -> dict:
    return {
        "apiVersion": API_VERSION,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name, "labels": dict(MANAGED_LABELS)},
        "value": PRIORITY_VALUES[priority],
        "description": f"jupyter-quota {priority} jobs",
    }


def resource_flavor(name: str, node_labels: dict) -> dict:
    spec = {"nodeLabels": dict(node_labels)} if node_labels else {}
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": name, "labels": dict(MANAGED_LABELS)},
        "spec": spec,
    }


def cluster_queue(profile: TeamProfile, cohort: str, flavor: str) -> dict:
    """The team's ClusterQueue: nominal quota, borrowing and lending limits from the profile."""
    nominal = _compute(profile, profile.hard, "hard")
    borrowing = _compute(profile, profile.borrowingLimit, "borrowingLimit")
    lending = _compute(profile, profile.lendingLimit, "lendingLimit")
    for what, limits in (("borrowingLimit", borrowing), ("lendingLimit", lending)):
        extra = sorted(set(limits) - set(nominal))
        if extra:
            raise InvalidRequest(
                f"profile {profile.team!r}: {what} names {', '.join(extra)}, which its hard quota does not "
                "bound; Kueue lends and borrows only what a ClusterQueue has a nominalQuota for"
            )
    for resource, limit in lending.items():
        if Quantity(limit) > Quantity(nominal[resource]):
            raise InvalidRequest(
                f"profile {profile.team!r}: lendingLimit {resource} {limit} is more than its hard {nominal[resource]}; "
                "Kueue requires lendingLimit <= nominalQuota"
            )
    resources = []
    for resource, quota in nominal.items():
        entry = {"name": resource, "nominalQuota": quota, "borrowingLimit": borrowing.get(resource, "0")}
        if resource in lending:
            entry["lendingLimit"] = lending[resource]
        resources.append(entry)
    spec: dict = {
        "cohortName": cohort,
        "namespaceSelector": {"matchLabels": {labels.TEAM: profile.team}},
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": PRIORITY_VALUES[BEST_EFFORT]},
            "withinClusterQueue": "LowerPriority",
        },
        "resourceGroups": [],
    }
    if resources:
        spec["resourceGroups"] = [
            {"coveredResources": list(nominal), "flavors": [{"name": flavor, "resources": resources}]}
        ]
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": cluster_queue_name(profile), "labels": {**MANAGED_LABELS, labels.TEAM: profile.team}},
        "spec": spec,
    }


def local_queue(profile: TeamProfile, queue: str) -> dict:
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": {
            "name": queue,
            "namespace": profile.namespace,
            "labels": {**MANAGED_LABELS, labels.TEAM: profile.team},
        },
        "spec": {"clusterQueue": cluster_queue_name(profile)},
    }


# -- helpers ----------------------------------------------------------------------------------------


def _compute(profile: TeamProfile, quota: dict, what: str) -> dict[str, str]:
    """``quota``'s CPU, memory and GPU as Kueue names them (pod resource names), in the order of
    ``coveredResources``. A ResourceQuota bounds ``requests.cpu`` or ``cpu`` (the same thing) and
    ``limits.cpu``; Kueue counts requests, so a requests bound wins and a limits-only bound (which
    caps requests too, as requests <= limits) stands in for it."""
    out = {}
    for resource in (*_COMPUTE, profile.gpuResource):
        value = next(
            (
                quota[k]
                for k in (f"requests.{resource}", resource, f"limits.{resource}")
                if quota.get(k) not in (None, "")
            ),
            None,
        )
        if value is None:
            continue
        try:
            out[resource] = str(Quantity(str(value)))
        except (ValueError, TypeError):
            raise InvalidRequest(f"profile {profile.team!r}: {what} {resource} {value!r} is not a quantity") from None
    return out


def _classes(profiles: list[TeamProfile]) -> dict[str, str]:
    """Class name to priority, for every profile and priority; one name for two priorities is
    refused (the classes' values would contradict)."""
    classes: dict[str, str] = {}
    for profile in profiles:
        for priority in PRIORITIES:
            name = class_name(profile, priority)
            if classes.setdefault(name, priority) != priority:
                raise InvalidRequest(
                    f"profile {profile.team!r}: priority class {name!r} is used for both "
                    f"{classes[name]!r} and {priority!r} jobs; Kueue needs one class per priority"
                )
    return classes


def _flavors(profiles: list[TeamProfile]) -> dict[tuple, tuple[str, dict]]:
    """One ResourceFlavor per distinct ``nodeSelector`` (its nodeLabels), named by its values."""
    flavors: dict[tuple, tuple[str, dict]] = {}
    taken: set[str] = set()
    for profile in profiles:
        key = _key(profile.nodeSelector)
        if key in flavors:
            continue
        name = DEFAULT_FLAVOR
        if key:
            name = _UNSAFE.sub("-", "-".join(v for _, v in key).lower()).strip("-")[:50] or "flavor"
            if name in taken or name == DEFAULT_FLAVOR:
                name = f"{name[:41]}-{hashlib.sha256(repr(key).encode()).hexdigest()[:8]}"
        taken.add(name)
        flavors[key] = (name, dict(profile.nodeSelector))
    return flavors


def _key(selector: dict) -> tuple:
    return tuple(sorted((str(k), str(v)) for k, v in (selector or {}).items()))
