"""Cheap validators: an ETag for a balance made without computing the balance (issue 23).

A balance is a pure function of the team's effective profile and the backend's state for its
namespace. Profiles are replaced, never changed in place (an edit stores a new object, and
``EffectiveQuota.of`` returns a new one when increases or windows change the hard quota), so the
object names its content: :func:`serial` numbers each object once. The backend names its state
(``Backend.balance_version``: the local ledger's change counter, the kube cache's
resourceVersions). A process-start nonce keeps a restarted service's numbers from matching the
last one's. Such a validator may change when the balance did not (one more 200), never the other
way round: a 304 is never served for changed content.
"""

from __future__ import annotations

import itertools
import secrets
import threading
import weakref

#: this process's start: serials restart at 1 in the next one
BOOT = secrets.token_hex(4)
_serials: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_next = itertools.count(1)
_lock = threading.Lock()


def serial(obj) -> int:
    """A number for ``obj`` that no other object gets in this process (an ``id`` may be reused)."""
    number = _serials.get(obj)
    if number is None:
        with _lock:
            number = _serials.get(obj)
            if number is None:
                number = _serials[obj] = next(_next)
    return number


class AnswerCache:
    """The last answer made under each key (a namespace), with the validator it was made under:
    its ETag and its JSON bytes less ``observedAt``. A read whose validator matches writes these
    bytes (``observedAt`` stamped now) instead of computing the balance and encoding it again. One
    entry per key, so it holds at most one answer per namespace."""

    def __init__(self):
        self._entries: dict[str, tuple[str, str, bytes]] = {}

    def get(self, key: str, version: str) -> tuple[str, bytes] | None:
        entry = self._entries.get(key)
        return (entry[1], entry[2]) if entry is not None and entry[0] == version else None

    def put(self, key: str, version: str, etag: str, body: bytes) -> None:
        self._entries[key] = (version, etag, body)
