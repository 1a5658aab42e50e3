"""A team profile as the elastic policy (``elastic``) counts it: the nominal GPU quota, the
borrowing and lending limits, and whether a closed window of the team preempts.

One translation for both places that run the policy: the local backend's pass
(``backends/local/elasticpass.py``), whose profiles come with their effective hard quota (the
service composes it), and the what-if replay (``replay.py``), whose proposed profiles do not.
"""

from __future__ import annotations

from datetime import datetime
from fractions import Fraction

from . import elastic, windows
from .quantity import Quantity


def team(profile, now: datetime, resource: str, *, add_windows: bool) -> elastic.Team:
    """``profile``'s team at ``now``, its GPUs (``requests.<gpuResource>``) counted as ``resource``.

    ``add_windows``: ``profile.hard`` is its own, so the open windows' ``extra`` is added to the
    nominal quota here (a profile the service composed has it added already).
    """
    key = f"requests.{profile.gpuResource}"
    opened = {w.name for w in windows.open_windows(profile, now)} if profile.windows else set()
    nominal = {}
    if key in profile.hard:
        extra = windows.window_extra(profile, now).get(key, "0") if add_windows and opened else "0"
        nominal[resource] = exact(profile.hard[key]) + exact(extra)
    closing = any(
        w.on_close == windows.ON_CLOSE_PREEMPT and w.name not in opened for w in windows.parse_windows(profile.windows)
    )
    return elastic.Team(
        profile.namespace,
        nominal,
        {resource: exact(profile.borrowingLimit[key])} if key in profile.borrowingLimit else {},
        {resource: exact(profile.lendingLimit[key])} if key in profile.lendingLimit else {},
        windows.ON_CLOSE_PREEMPT if closing else windows.ON_CLOSE_FINISH,
    )


def exact(text) -> int | Fraction:
    """A quantity as the policy adds it up: an int when whole (GPUs always are), else a Fraction."""
    value = Quantity(str(text)).as_fraction()
    return value.numerator if value.denominator == 1 else value
