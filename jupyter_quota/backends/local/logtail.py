"""The last lines of a job's log, read backwards from the end so a huge log costs no more."""

from __future__ import annotations

import os

BLOCK = 64 * 1024
MAX_BYTES = 1024 * 1024  # never return more than this, whatever tail_lines says


def tail(path: str | os.PathLike, lines: int, max_bytes: int = MAX_BYTES) -> str:
    """The last ``lines`` lines of ``path`` (at most ``max_bytes``), "" when it does not exist."""
    if lines <= 0:
        return ""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return ""
    with f:
        end = f.seek(0, os.SEEK_END)
        pos, chunks, newlines = end, [], 0
        # A trailing newline ends the last line; it does not start a new one.
        wanted = lines + 1
        while pos > 0 and newlines < wanted and end - pos < max_bytes:
            step = min(BLOCK, pos, max_bytes - (end - pos))
            pos -= step
            f.seek(pos)
            chunk = f.read(step)
            chunks.append(chunk)
            newlines += chunk.count(b"\n")
    data = b"".join(reversed(chunks))
    body = data[:-1] if data.endswith(b"\n") else data
    kept = body.split(b"\n")[-lines:]
    if pos > 0 and len(kept) == len(body.split(b"\n")):
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
