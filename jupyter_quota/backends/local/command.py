"""A local job's command, found where the server's own packages are.

A server started as ``.venv/bin/jupyter lab`` without activating the venv has a PATH that lacks
``.venv/bin``, where ms-swift installed ``swift``. So a job's ``argv[0]`` is looked up in the
server's own environment first (its ``bin``), then on PATH, and the job gets that same PATH (ms-swift
starts ``torchrun`` from it). The lookup runs before the job is recorded Running (see
``lifecycle``): a command that cannot be found fails the job at once as ``StartError``, with what
to do, instead of a Running job whose supervisor fails a moment later.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig


class CommandNotFound(OSError):
    """The job's command cannot be run; the message says why and what to do."""


def server_bin_dirs() -> list[str]:
    """The server's environment's script directories: ``sys.prefix``'s, then ``sys.executable``'s."""
    return _unique([sysconfig.get_path("scripts"), os.path.dirname(sys.executable)])


def job_path(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the server's script directories in front of its PATH."""
    path = env.get("PATH", os.defpath)
    return {**env, "PATH": os.pathsep.join(_unique([*server_bin_dirs(), *path.split(os.pathsep)]))}


def resolve(argv: list[str], path: str, workdir: str) -> list[str]:
    """``argv`` with its command made an absolute path: a bare name from ``path``, a relative path
    from ``workdir`` (where the job runs). Raises :class:`CommandNotFound`."""
    if not argv or not argv[0]:
        raise CommandNotFound("the job's command is empty; set JupyterQuota.job_command, e.g. ['swift', 'sft']")
    name = argv[0]
    if os.sep in name:
        found = os.path.join(workdir, name)
        problem = _cannot_execute(found)
        if problem:
            raise CommandNotFound(f"cannot run {name!r}: {problem}; check JupyterQuota.job_command")
        return [os.path.normpath(found), *argv[1:]]
    found = shutil.which(name, path=path)
    if found is None:
        raise CommandNotFound(_not_found(name))
    return [found, *argv[1:]]


def _not_found(name: str) -> str:
    where = ", ".join(server_bin_dirs())
    message = f"cannot run {name!r}: not found in the server's environment ({where}) or on PATH"
    if name == "swift":
        return (
            f"{message}. Install ms-swift into the server's environment (pip install "
            "'jupyter_quota[swift]', with torch first on a machine without a GPU), or point "
            "JupyterQuota.job_command at it"
        )
    return f"{message}; check JupyterQuota.job_command"


def _cannot_execute(path: str) -> str | None:
    if not os.path.exists(path):
        return "no such file"
    if os.path.isdir(path):
        return "a directory, not a program"
    if not os.access(path, os.X_OK):
        return "not executable"
    return None


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(item for item in items if item))
