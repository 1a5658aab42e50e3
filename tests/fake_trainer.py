"""A stand-in for ``swift sft`` in the local backend's tests: prints, sleeps, exits as told.

    python fake_trainer.py [--env] [--lines N] [--sleep S] [--ignore-term] [--exit CODE] [other...]

``--env`` prints the variables the backend sets; ``--ignore-term`` ignores SIGTERM (a job
that must be killed); it prints ``ready`` once its signal disposition is in place. Other
arguments (``--model ...``, as a real ``swift sft`` takes) are printed and otherwise ignored.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", action="store_true")
    parser.add_argument("--lines", type=int, default=0)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--exit", type=int, default=0)
    args, other = parser.parse_known_args()  # stands in for `swift sft`: take any of its args
    if other:
        print(f"args: {' '.join(other)}")
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.env:
        for var in ("CUDA_VISIBLE_DEVICES", "JUPYTER_QUOTA_JOB", "JUPYTER_QUOTA_NAMESPACE"):
            print(f"{var}={os.environ.get(var, '<unset>')}")
        print(f"cwd={os.getcwd()}")
    for i in range(args.lines):
        print(f"line {i}")
    print("ready", flush=True)
    time.sleep(args.sleep)
    print(f"exiting with {args.exit}", file=sys.stderr if args.exit else sys.stdout)
    return args.exit


if __name__ == "__main__":
    sys.exit(main())
