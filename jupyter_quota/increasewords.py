"""``+2 gpu 8h "reason"``: an increase request in words, for ``%quota request`` and the CLI.

Pure: words in, the REST body out (``POST /namespaces/{ns}/increases``). The server validates the
quantities; this only reads the words, and refuses with the syntax when it cannot.
"""

from __future__ import annotations

import re

from .errors import InvalidRequest

SYNTAX = '+N RESOURCE [+N RESOURCE ...] DURATION "REASON"   e.g.  +2 gpu 8h "paper deadline Friday"'
#: short names -> the quota keys they may stand for, the first one the team's quota names wins
_ALIASES = {
    "cpu": ("requests.cpu", "limits.cpu", "cpu"),
    "cpus": ("requests.cpu", "limits.cpu", "cpu"),
    "memory": ("limits.memory", "requests.memory", "memory"),
    "mem": ("limits.memory", "requests.memory", "memory"),
}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(m|min|h|d)")
_PER_HOUR = {"m": 1 / 60, "min": 1 / 60, "h": 1, "d": 24}


def parse_words(words: list[str], quota_keys, gpu_resource: str = "nvidia.com/gpu") -> dict:
    """The request body ``words`` stand for; ``quota_keys`` are the keys of the team's hard quota
    (``gpu``, ``cpu``, ``memory`` become the one of them they stand for)."""
    resources: dict[str, str] = {}
    hours = None
    rest = list(words)
    while rest and rest[0].startswith("+"):
        amount, rest = rest[0][1:], rest[1:]
        if not amount or not rest:
            raise InvalidRequest(f"say how much of what after +, as in: {SYNTAX}")
        resources[_resource(rest[0], quota_keys, gpu_resource)] = amount
        rest = rest[1:]
    if not resources:
        raise InvalidRequest(f"say what you need, as in: {SYNTAX}")
    if rest and (match := _DURATION.fullmatch(rest[0])):
        hours = float(match.group(1)) * _PER_HOUR[match.group(2)]
        rest = rest[1:]
    if hours is None:
        raise InvalidRequest(f"say for how long (e.g. 8h, 90m, 2d) after the resources, as in: {SYNTAX}")
    reason = " ".join(rest).strip()
    if not reason:
        raise InvalidRequest(f"say why, in quotes, as in: {SYNTAX}")
    return {"resources": resources, "hours": round(hours, 6), "reason": reason}


def _resource(word: str, quota_keys, gpu_resource: str) -> str:
    name = word.lower()
    if name in ("gpu", "gpus"):
        return f"requests.{gpu_resource}"
    for key in _ALIASES.get(name, ()):
        if key in quota_keys:
            return key
    return word  # a full quota key (the server refuses one the quota does not name)
