"""Timestamps as the Kubernetes API writes them: RFC 3339, UTC, whole seconds, ``Z``."""

from __future__ import annotations

from ...times import now_rfc3339 as now

__all__ = ["now"]
