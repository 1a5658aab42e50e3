"""Domain errors with a reason code, a message a person can act on, and an HTTP status.

The REST layer maps every one of these to ``{"reason", "message"}`` with ``status``; anything
else escaping a handler is a bug (and the only path to a 500).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from . import reasons


class QuotaError(Exception):
    """Base of every error the API reports to a user."""

    status = 400
    reason = "BadRequest"
    #: HTTP headers the answer carries besides the JSON body (e.g. ``Retry-After``)
    headers: Mapping[str, str] = MappingProxyType({})

    def __init__(self, message: str, *, reason: str | None = None, status: int | None = None):
        super().__init__(message)
        self.message = message
        if reason is not None:
            self.reason = reason
        if status is not None:
            self.status = status

    def to_json(self) -> dict:
        return {"reason": self.reason, "message": self.message}


class InvalidRequest(QuotaError):
    """Malformed input: a bad quantity, an unknown resource, a hostile name (400)."""

    status = 400
    reason = "BadRequest"


class Invalid(QuotaError):
    """The object is well formed but Kubernetes validation would reject it (422 there; 400 here).

    Messages keep the API server's ``field: Invalid value: ...: ...`` text.
    """

    status = 400
    reason = "Invalid"


class BodyTooLarge(QuotaError):
    """The request body is over the API's cap (413), refused before it is read."""

    status = 413
    reason = "RequestEntityTooLarge"


class TooManyRequests(QuotaError):
    """The server is busy with as much of this work as it takes at once (429); retry later."""

    status = 429
    reason = "TooManyRequests"

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.headers = {"Retry-After": str(retry_after)}


class StateDirectoryError(QuotaError):
    """The state directory is full or read-only (507 Insufficient Storage): writes wait, reads go on.

    ``statedir.storage_error`` is the one place that recognises the failures behind it.
    """

    status = 507
    FULL = "StateDirectoryFull"
    READ_ONLY = "StateDirectoryReadOnly"
    reason = FULL


class ServiceUnavailable(QuotaError):
    """Something the answer depends on did not answer (the hub's quota service): try again."""

    status = 503
    reason = "ServiceUnavailable"


class Forbidden(QuotaError):
    """The caller may not see or touch this (403)."""

    status = 403
    reason = reasons.FORBIDDEN


class AdmissionDenied(QuotaError):
    """Quota or LimitRange admission refused the object (403), with the API server's text.

    ``reason`` is one of ``ExceededQuota``, ``FailedQuota``, ``LimitRangeViolation``,
    ``QuotaStatusUnknown``, ``InsufficientQuota``.
    """

    status = 403
    reason = reasons.EXCEEDED_QUOTA


class NotFound(QuotaError):
    status = 404
    reason = "NotFound"


class Conflict(QuotaError):
    """The name is taken, or the object is in a state that forbids the action (409)."""

    status = 409
    reason = "AlreadyExists"
