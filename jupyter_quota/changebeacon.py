"""A change counter that every process on the state directory sees without a system call.

A balance read that nothing changed must cost no SQLite read (issue 23): yet the ledger and the
records store are written by other processes too (the command line, a second server on the same
state directory), so a counter in this process's memory alone would miss their commits. SQLite's
own ways to see them (a ``SELECT`` of the generation, ``PRAGMA data_version``) each start a read
transaction: tens of microseconds, a third of a cached balance read's own cost.

So each store keeps a 16-byte file beside it (``<file>-generation``), mapped shared into every
process that opens it: the counter and its complement (a reader retries the rare torn read).
Writers publish after their commit, so a reader that sees a value sees what it counts; a reader
that reads just before a publish sees the previous value, as if it had read just before the
commit. Publishing takes ``flock`` (writers only) and never lowers the value, so two writers
that publish out of order leave the larger. A writer that dies between its commit and its
publish leaves the counter behind until the next write or ``publish`` by the store's periodic
reader (the local backend's reaper, ``Ledger.sync_beacon``).

Where the file cannot be opened or created (a read-only or full state directory), ``read``
answers None and callers read SQLite as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct
import threading

_LAYOUT = struct.Struct("<QQ")
_MASK = 0xFFFF_FFFF_FFFF_FFFF
SUFFIX = "-generation"


class ChangeBeacon:
    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._map: mmap.mmap | None = None
        self._opened_in: int | None = None  # the pid that opened it: a forked child opens its own

    def read(self) -> int | None:
        """The counter, or None where the beacon cannot be used (read SQLite instead)."""
        mapped = self._mapped()
        if mapped is None:
            return None
        for _ in range(100):  # a torn read needs a publish in the middle of it: retried at once
            value, check = _LAYOUT.unpack_from(mapped)
            if value ^ _MASK == check:
                return value
        return None

    def publish(self, value: int, *, force: bool = False) -> None:
        """Raise the counter to ``value`` (or set it, ``force``: a store opened anew, whose counter
        may have started again below what an old beacon file holds)."""
        self._update(lambda current: value if force or current is None or value > current else None)

    def bump(self) -> None:
        """Add one: a commit happened (stores whose changes have no counter of their own)."""
        self._update(lambda current: (current or 0) + 1)

    def _update(self, new_value) -> None:
        mapped = self._mapped()
        if mapped is None:
            return
        with self._lock:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            except OSError:
                return
            try:
                value = new_value(self.read())
                if value is not None:
                    _LAYOUT.pack_into(mapped, 0, value, value ^ _MASK)
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _mapped(self) -> mmap.mmap | None:
        # flock belongs to the open file, which a fork shares: a child must not share its lock
        if self._opened_in == os.getpid():
            return self._map
        with self._lock:
            if self._opened_in != os.getpid():
                self._map = self._open()
                self._opened_in = os.getpid()
        return self._map

    def _open(self) -> mmap.mmap | None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if os.fstat(fd).st_size < _LAYOUT.size:  # new: zero, and a valid zero
                    os.pwrite(fd, _LAYOUT.pack(0, _MASK), 0)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            mapped = mmap.mmap(fd, _LAYOUT.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError:
            with contextlib.suppress(OSError):
                os.close(fd)
            return None
        self._fd = fd
        return mapped
