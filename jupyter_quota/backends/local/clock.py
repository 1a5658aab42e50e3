"""Timestamps as the Kubernetes API writes them: RFC 3339, UTC, whole seconds, ``Z``."""

from __future__ import annotations

import time

from ..base import rfc3339


def now() -> str:
    """The current time, e.g. ``2026-11-29T08:30:00Z``."""
    return rfc3339(time.time())
