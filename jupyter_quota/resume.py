"""Where a preempted ``swift sft`` resumes: the newest whole checkpoint its log names, passed back
with ms-swift's own ``--resume_from_checkpoint``. Both backends requeue with it (the local
backend's ``elasticpass``, the kube backend's ``preemption``)."""

from __future__ import annotations

import os

from . import swiftlog

RESUME_FLAG = "--resume_from_checkpoint"
#: The events of a preempted job's ``history`` (the JobEvent of the REST API), on both backends.
PREEMPTED, REQUEUED, RESUMED = "Preempted", "Requeued", "Resumed"
#: What transformers' Trainer writes last in a checkpoint folder: without it the save was cut short.
TRAINER_STATE = "trainer_state.json"


def last_checkpoint(log: str) -> str | None:
    """The newest checkpoint ``log`` names that is whole: a job killed while saving leaves a
    folder without ``trainer_state.json``. A log naming folders this process cannot see (the job
    ran as another account, or on a volume only the pods mount) is taken at its word."""
    return newest_named(swiftlog.parse_log(log))


def named_checkpoints(progress: swiftlog.TrainProgress) -> list[str]:
    """The checkpoints a parsed log names, oldest first."""
    return progress.checkpoints or ([progress.last_checkpoint] if progress.last_checkpoint else [])


def newest_named(progress: swiftlog.TrainProgress) -> str | None:
    """The newest whole checkpoint a parsed log names, as :func:`last_checkpoint` (also what
    ``servejob`` serves of a finished fine-tune)."""
    return newest_whole(named_checkpoints(progress))


def newest_whole(named: list[str]) -> str | None:
    """The newest of the checkpoints ``named`` (oldest first) that is whole, as :func:`last_checkpoint`."""
    if not any(os.path.isdir(path) for path in named):
        return named[-1] if named else None
    return next((p for p in reversed(named) if os.path.isfile(os.path.join(p, TRAINER_STATE))), None)


def names_resume(args: list[str]) -> bool:
    """Whether ``args`` already say where to resume (the user's own flag wins)."""
    return any(a == RESUME_FLAG or a.startswith(RESUME_FLAG + "=") for a in args)


def resume_args(args: list[str], checkpoint: str | None) -> list[str]:
    """The arguments a requeued job adds to ``args`` to resume from ``checkpoint`` (none without one)."""
    if not checkpoint or names_resume(args):
        return []
    return [RESUME_FLAG, checkpoint]
