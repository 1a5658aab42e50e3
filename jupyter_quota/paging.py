"""Pages of a list answer, as the Kubernetes list API pages them: ``limit`` and ``continue``.

A list answer carries ``metadata`` beside its items, shaped as Kubernetes' ``ListMeta``:
``continue`` (an opaque token; absent on the last page) and ``remainingItemCount`` (how many
items follow this page; absent on the last page). The client passes the token back as
``continue``, with the same ``limit`` or another one, for the next page.

The token is encoded as kube-apiserver encodes its own (base64url without padding of
``{"v": "meta.k8s.io/v1", "start": ...}``, as in ``k8s.io/apiserver/pkg/storage``'s
``continue.go``, less the ``rv`` a snapshot needs), and a token that cannot be decoded is a 400
with its text ("invalid continue token: continue key is not valid"). ``start`` is a backend's
own position key: the list resumes after it. Backends page by key (newest first), not from a snapshot, so a token never
expires (no 410 ``Expired``): a job submitted after the first page is not in later pages, and a
job's state is as of the page that shows it.

Unlike Kubernetes, an absent ``limit`` means the server's default page size
(``JupyterQuota.job_list_limit``), not everything: a namespace's history can be long.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from .errors import InvalidRequest

TOKEN_VERSION = "meta.k8s.io/v1"
MAX_LIMIT = 1000  # the largest page a client may ask for


@dataclass
class Page:
    """One page of a backend's list: its items, where the next page starts, what follows."""

    items: list
    next_start: str | None = None  # None on the last page
    remaining: int | None = None  # items after this page, when there are any


def parse_limit(raw, default: int) -> int:
    """The page size a request asks for: ``raw`` (a query string value or None) or ``default``."""
    if raw is None or raw == "":
        return default
    text = str(raw)
    if not (text.isascii() and text.isdigit() and len(text) <= 4 and 1 <= int(text) <= MAX_LIMIT):
        raise InvalidRequest(
            f"limit must be a whole number from 1 to {MAX_LIMIT}, not {text[:32]!r}; "
            f"without it a page holds {default} items"
        )
    return int(text)


def encode(start: str) -> str:
    """The opaque token for a page that resumes after ``start``."""
    data = json.dumps({"v": TOKEN_VERSION, "start": start}, separators=(",", ":"))
    return base64.urlsafe_b64encode(data.encode()).decode().rstrip("=")


def decode(token: str | None) -> str | None:
    """The ``start`` key of a token; None for no token. Raises ``InvalidRequest`` (400)."""
    if token is None or token == "":
        return None
    try:
        text = str(token)
        data = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, binascii.Error, UnicodeError, RecursionError):
        raise _invalid("continue key is not valid") from None
    if not isinstance(data, dict) or data.get("v") != TOKEN_VERSION:
        version = data.get("v") if isinstance(data, dict) else None
        raise _invalid(f"continue key is not valid: server does not recognize this encoded version {version}")
    start = data.get("start")
    if not isinstance(start, str) or not start:
        raise _invalid(f"continue key is not valid: encoded start key empty (version {TOKEN_VERSION})")
    return start


def invalid_start(start: str) -> InvalidRequest:
    """A decoded token whose ``start`` a backend cannot use (made for another list)."""
    return _invalid(f"continue key is not valid: {start[:64]!r} is no position in this list")


def list_json(key: str, page: Page) -> dict:
    """The API's answer: ``{key: items, "metadata": {"continue"?, "remainingItemCount"?}}``."""
    meta: dict = {}
    if page.next_start is not None:
        meta["continue"] = encode(page.next_start)
        if page.remaining is not None:
            meta["remainingItemCount"] = page.remaining
    return {key: page.items, "metadata": meta}


def _invalid(detail: str) -> InvalidRequest:
    return InvalidRequest(f"invalid continue token: {detail}")
