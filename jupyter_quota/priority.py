"""A job's priority: the three words, their order, and the check of a request's value.

``high`` and ``normal`` jobs run within their team's quota (``normal`` is the default);
``best-effort`` jobs may also run on GPUs other teams leave idle, and are the ones preempted
when the owner wants them back (``jupyter_quota/elastic.py``). On Kubernetes each maps to the
profile's ``priorityClasses`` entry.
"""

from __future__ import annotations

from .bounds import shown
from .errors import InvalidRequest

HIGH = "high"
NORMAL = "normal"
BEST_EFFORT = "best-effort"
#: Highest first.
PRIORITIES = (HIGH, NORMAL, BEST_EFFORT)
DEFAULT = NORMAL
_RANK = {HIGH: 2, NORMAL: 1, BEST_EFFORT: 0}


def rank(priority: str) -> int:
    """Larger is more important: high 2, normal 1, best-effort 0 (an unknown word counts as normal)."""
    return _RANK.get(priority, 1)


def check(value) -> str:
    """A request's ``priority`` (absent: normal), or InvalidRequest naming the three words."""
    if value is None:
        return DEFAULT
    if value not in PRIORITIES:
        raise InvalidRequest(f'priority must be "high", "normal" or "best-effort", not {shown(value)}')
    return value
