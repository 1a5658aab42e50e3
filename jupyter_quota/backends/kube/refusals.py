"""The API server's refusal of a create, as this package's errors: the quota's and the
LimitRange's 403 keep their text and get a reason code (``reasons``). One mapping for Jobs
(``backend``) and endpoints' Deployments and Services (``endpoints``)."""

from __future__ import annotations

from ... import errors, reasons
from .client import KubeError


def refusal(error: KubeError, name: str, kind: str = "jobs.batch") -> errors.QuotaError:
    """The API server's refusal of a create of ``kind`` (a Job unless said) as our error, its text kept."""
    if error.code == 409:
        return errors.Conflict(f'{kind} "{name}" already exists')
    if error.code == 403:
        text = error.message
        marker = " is forbidden: "
        detail = text.split(marker, 1)[1] if marker in text else text
        return errors.AdmissionDenied(detail, reason=_denial_reason(detail))
    if error.code in (400, 422):
        return errors.Invalid(error.message)
    return error


def _denial_reason(message: str) -> str:
    for prefix, reason in (
        ("exceeded quota", reasons.EXCEEDED_QUOTA),
        ("failed quota", reasons.FAILED_QUOTA),
        ("status unknown for quota", reasons.QUOTA_STATUS_UNKNOWN),
        ("insufficient quota", reasons.INSUFFICIENT_QUOTA),
        ("quota usage is negative", reasons.QUOTA_USAGE_NEGATIVE),
    ):
        if message.startswith(prefix):
            return reason
    if " usage per " in message or "ratio" in message:
        return reasons.LIMIT_RANGE_VIOLATION
    return reasons.FORBIDDEN
