#!/usr/bin/env python
"""Print the tracebacks the test servers logged, one line each: ``scripts/server_errors.py DIR``.

``scripts/test`` runs it when a test failed. CI keeps only the end of the output, and a UI test
that got a 500 shows the status, not why: the lab servers' logs (``DIR/ui/*.log``) have the why.
Each distinct error is printed once, with the log it is in, where it was raised and how often.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

START = "Traceback (most recent call last):"


def tracebacks(text: str):
    """(where it was raised, the exception line) of each traceback in ``text``."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.lstrip().startswith(START):
            continue
        indent = len(line) - len(line.lstrip())  # a log formatter may indent the whole traceback
        where = ""
        for follow in lines[i + 1 :]:
            stripped = follow.strip()
            if stripped.startswith('File "'):
                where = stripped
            elif stripped and len(follow) - len(follow.lstrip()) <= indent:
                yield where, stripped  # the exception line: back at the traceback's own indent
                break


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    seen: Counter = Counter()
    for log in sorted(Path(argv[0]).rglob("*.log")):
        for where, error in tracebacks(log.read_text(errors="replace")):
            seen[(log.name, error, where)] += 1
    for (log, error, where), count in seen.most_common(30):
        print(f"{log}: {error[:300]} ({count}x; {where[:200]})")
    if not seen:
        print("none")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
