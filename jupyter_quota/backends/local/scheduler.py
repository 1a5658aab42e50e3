"""Which pending jobs start now, and on which GPUs: kube-scheduler's fit on a single node.

Pure: it takes the inventory, what Running jobs hold and the Pending jobs in submission order,
and returns a decision per pending job. The rules follow the NodeResourcesFit plugin:
- a job fits when, for each resource it requests, request <= allocatable - requested by
  running jobs (cpu, memory, ``nvidia.com/gpu``, and any other extended resource, which this
  machine does not have); ``ephemeral-storage`` and hugepages are not tracked locally;
- GPUs are whole devices, assigned by index (lowest free first);
- pending jobs are tried oldest first, and a job that does not fit does not block younger
  ones that do (as kube-scheduler moves on to the next pod in its queue).

A job that would not fit even on the empty machine is ``Unschedulable``; one that waits for
running jobs to finish is ``WaitingForResources``. Both carry kube-scheduler's message,
``0/1 nodes are available: 1 Insufficient nvidia.com/gpu.``

A job whose requests cannot be read as exact numbers (a row an older version admitted, such as
``ephemeral-storage: 1e200000``) cannot be decided at all: ``amounts`` raises ``InvalidRequests``
naming the request, and the caller fails that job as ``InvalidJob`` and goes on with the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from ... import bounds, reasons
from ...quantity import Quantity

GPU = "nvidia.com/gpu"
NODE_RESOURCES = ("cpu", "memory", GPU)
ZERO = Fraction(0)


@dataclass
class Running:
    requests: dict  # resource -> quantity (Quantity, str, or an exact Fraction)
    gpu_indices: list[int] = field(default_factory=list)
    borrowed: bool = False  # it runs on quota borrowed from other teams (``elastic``)


@dataclass
class Pending:
    key: object  # whatever identifies the job to the caller
    requests: dict


@dataclass
class Decision:
    key: object
    start: bool
    gpu_indices: list[int] = field(default_factory=list)
    reason: str | None = None
    message: str | None = None


def schedule(inventory: dict, running: list[Running], pending: list[Pending]) -> list[Decision]:
    """One decision per pending job, in the order given (oldest first)."""
    allocatable = node_allocatable(inventory)
    requested = _total(r.requests for r in running)
    held = {i for r in running for i in r.gpu_indices}
    free_gpus = [g["index"] for g in inventory.get("gpus", []) if g["index"] not in held]

    # What is left now, kept current as jobs start: each check is one comparison per resource.
    left = {name: allocatable.get(name, ZERO) - requested.get(name, ZERO) for name in {*allocatable, *requested}}
    decisions = []
    for job in pending:
        wanted = amounts(job.requests)
        missing = _insufficient(wanted, allocatable)
        reason = reasons.UNSCHEDULABLE
        if not missing:
            reason = reasons.WAITING
            missing = _insufficient(wanted, left)
            gpus = int(wanted.get(GPU, 0))
            if gpus > len(free_gpus) and GPU not in missing:
                missing.append(GPU)  # counted free, but an index is still held (a shrunk inventory)
        if missing:
            decisions.append(Decision(job.key, False, reason=reason, message=_message(missing)))
            continue
        gpus = int(wanted.get(GPU, 0))
        taken, free_gpus = free_gpus[:gpus], free_gpus[gpus:]
        for name, amount in wanted.items():
            left[name] = left.get(name, ZERO) - amount
        decisions.append(Decision(job.key, True, gpu_indices=taken))
    return decisions


def node_allocatable(inventory: dict) -> dict[str, Fraction]:
    """The node's allocatable resources, as exact numbers."""
    return {
        "cpu": Quantity(str(inventory.get("cpu", "0"))).as_fraction(),
        "memory": Quantity(str(inventory.get("memory", "0"))).as_fraction(),
        GPU: Fraction(len(inventory.get("gpus", []))),
    }


def _insufficient(wanted: dict, left: dict) -> list[str]:
    """Resources whose request exceeds what is ``left``, sorted as kube-scheduler sorts them."""
    return sorted(
        name for name, amount in wanted.items() if amount > 0 and _tracked(name) and amount > left.get(name, ZERO)
    )


def _tracked(name: str) -> bool:
    """cpu, memory and extended resources (``domain/name``) are checked; the rest are not."""
    return name in NODE_RESOURCES or ("/" in name and not name.startswith("kubernetes.io/"))


def _message(missing: list[str]) -> str:
    reasons = ", ".join(f"1 Insufficient {name}" for name in sorted(missing))
    return f"0/1 nodes are available: {reasons}."


class InvalidRequests(ValueError):
    """A request the scheduler's arithmetic cannot carry; the text names it and says why."""


def amounts(requests: dict) -> dict[str, Fraction]:
    """Requests as exact numbers; already-converted values pass through (callers may cache them).

    Raises ``InvalidRequests`` for a value that is no quantity or is out of range.
    """
    exact = {}
    for name, q in requests.items():
        try:
            exact[name] = q if isinstance(q, Fraction) else Quantity(str(q)).as_fraction()
        except (ValueError, ArithmeticError) as e:
            raise InvalidRequests(f"resources.requests[{name}] {_shown(q)}: {e}") from None
    return exact


def invalid_message(error: Exception) -> str:
    """The message of a job failed as ``InvalidJob``."""
    return f"the job cannot be scheduled: {error}"


def _shown(q) -> str:
    """A quantity as a message may repeat it (``bounds.shown``: long texts cut short)."""
    try:
        text = str(q)
    except (ValueError, ArithmeticError):  # e.g. an integer past Python's 4,300-digit str() limit
        return "(a number too long to show)"
    return bounds.shown(text)


def _total(all_requests) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    for requests in all_requests:
        for name, amount in amounts(requests).items():
            total[name] = total.get(name, Fraction(0)) + amount
    return total
