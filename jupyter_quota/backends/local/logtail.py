"""The last lines of a job's log, read backwards from the end so a huge log costs no more.

A job's log may be rotated (see ``supervise.RotatingLog``): ``output.log`` is the newest part,
``output.log.1`` the one before it, and so on. ``tail`` reads them as one stream, so a line cut
at a rotation boundary comes back whole.
"""

from __future__ import annotations

import itertools
import os

BLOCK = 64 * 1024
MAX_BYTES = 1024 * 1024  # never return more than this, whatever tail_lines says


def tail(path: str | os.PathLike, lines: int, max_bytes: int = MAX_BYTES) -> str:
    """The last ``lines`` lines of ``path`` and its rotated files (at most ``max_bytes``).

    "" when it does not exist.
    """
    if lines <= 0:
        return ""
    chunks, newlines, size = [], 0, 0
    wanted = lines + 1  # a trailing newline ends the last line; it does not start a new one
    cut = False  # whether older bytes were left unread
    seen: set[tuple[int, int]] = set()
    for n in itertools.count():
        name = _part(path, n)
        try:
            f = open(name, "rb")  # noqa: SIM115 - a missing part ends the loop; `with f` below closes it
        except FileNotFoundError:
            break
        with f:
            st = os.fstat(f.fileno())
            if (st.st_dev, st.st_ino) in seen:
                continue  # rotated while we read: this part was read under its newer name
            seen.add((st.st_dev, st.st_ino))
            pos = f.seek(0, os.SEEK_END)
            while pos > 0 and newlines < wanted and size < max_bytes:
                step = min(BLOCK, pos, max_bytes - size)
                pos -= step
                f.seek(pos)
                chunk = f.read(step)
                chunks.append(chunk)
                newlines += chunk.count(b"\n")
                size += len(chunk)
        if newlines >= wanted or size >= max_bytes:
            cut = pos > 0 or os.path.exists(_part(path, n + 1))
            break
    data = b"".join(reversed(chunks))
    body = data[:-1] if data.endswith(b"\n") else data
    kept = body.split(b"\n")[-lines:]
    if cut and len(kept) == len(body.split(b"\n")):
        kept = kept[1:]  # the first line was cut by the byte cap: drop the fragment
    text = b"\n".join(kept).decode("utf-8", errors="replace")
    return text + "\n" if data.endswith(b"\n") and kept else text


def last_line(path: str | os.PathLike, limit: int = 200) -> str:
    """The last non-empty line of a log, shortened to ``limit`` characters (for messages)."""
    for line in reversed(tail(path, 5, max_bytes=16 * 1024).splitlines()):
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def _part(path: str | os.PathLike, n: int) -> str:
    """Part ``n`` of a rotated log, newest first: ``path``, ``path.1``, ``path.2``, ..."""
    return f"{os.fspath(path)}.{n}" if n else os.fspath(path)
