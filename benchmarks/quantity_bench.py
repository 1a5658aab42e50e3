#!/usr/bin/env python
"""Parsing and printing Kubernetes quantities (``jupyter_quota/quantity.py``).

    python benchmarks/quantity_bench.py [--rounds 20000]

Times ``Quantity(text)`` on the strings quotas are written with (``8``, ``128Gi``, ``500m``,
``1.5e3``), ``str()`` of each, and a ``+``/compare as admission does, per call in microseconds.
Every balance read and admission decision parses a handful of these, so a regression shows here.

Prints figures; asserts nothing (speed targets live here, not in tests).
"""

from __future__ import annotations

import argparse
import time

from jupyter_quota.quantity import Quantity

TEXTS = ("8", "128Gi", "500m", "1.5e3", "80Gi", "9223372036854775807")


def per_call_us(fn, rounds: int) -> float:
    start = time.perf_counter()
    for _ in range(rounds):
        fn()
    return (time.perf_counter() - start) / rounds * 1e6


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20000, help="calls per figure (default 20000)")
    args = parser.parse_args(argv)
    parsed = [Quantity(t) for t in TEXTS]
    print(f"{'operation':<28} {'µs/call':>9}")
    for text in TEXTS:
        print(f"{'parse ' + repr(text):<28} {per_call_us(lambda t=text: Quantity(t), args.rounds):>9.2f}")
    for q in parsed:
        print(f"{'str ' + repr(str(q)):<28} {per_call_us(lambda q=q: str(q), args.rounds):>9.2f}")
    a, b = Quantity("128Gi"), Quantity("500m")
    print(f"{'add':<28} {per_call_us(lambda: a + b, args.rounds):>9.2f}")
    print(f"{'compare':<28} {per_call_us(lambda: a < b, args.rounds):>9.2f}")


if __name__ == "__main__":
    main()
