"""A stand-in for ``swift sft`` in the local backend's tests: prints, sleeps, exits as told.

    python fake_trainer.py [--env] [--lines N] [--fill BYTES] [--steps N] [--more-steps N] [--sleep S]
                           [--until-file PATH] [--ignore-term]
                           [--exit CODE] [--spawn KIND --pid-dir DIR ...] [--check-gpus FILE]
                           [--whoami FILE] [--memory-gib G] [--oom] [other...]

``--env`` prints the variables the backend sets; ``--until-file PATH`` waits (after ``--sleep``)
until PATH exists, so a test decides when the job ends instead of racing a timer; ``--fill`` writes
about BYTES of numbered 100-byte lines (``fill 000000042 ...``) as fast as it can; ``--ignore-term``
ignores SIGTERM (a job that must be killed); it prints ``ready`` once its signal disposition is in
place (and once what ``--spawn`` started has written its pid file). Other arguments (``--model
...``, as a real ``swift sft`` takes) are printed and otherwise ignored.

Training, for the loss plot's tests: ``--steps N`` logs N steps as ms-swift 4.6 does (a dict with
``loss`` and ``global_step/max_steps``) before ``ready``, and ``--more-steps N`` N more after the
wait, so a test sees the plot grow when it creates the ``--until-file``. ``--memory-gib G`` adds
the ``memory(GiB)`` a GPU run logs to each step; ``--oom`` ends with CUDA out-of-memory (exit 1).
Checkpoints, for preemption: ``--save-to DIR`` logs ``Saving model checkpoint to DIR/checkpoint-N`` after each step,
as transformers' Trainer does, and ``--resume_from_checkpoint DIR/checkpoint-N`` (ms-swift's flag)
logs ``resuming from ...`` and goes on from step N+1.

Processes a job leaves behind (the orphan tests): ``--spawn KIND`` (repeatable) starts
- ``ignore-term``: a child that ignores SIGTERM, SIGINT and SIGHUP;
- ``setsid``: a child that starts a grandchild and exits at once; the grandchild calls
  ``os.setsid()`` (a session and group of its own, re-parented when its parent exits);
- ``worker``: a background worker that would run forever;
- ``clean-env``: a worker started with an empty environment (no marker of any kind) that
  calls ``os.setsid()``: only a cgroup can tell that it belongs to the job;
each sleeps forever after writing ``DIR/KIND.pid``. ``--check-gpus FILE`` writes, as JSON, the
processes that hold one of this job's GPUs (``CUDA_VISIBLE_DEVICES``) for another job of the
same test run (``FAKE_TRAINER_RUN`` in their environment): a GPU handed out while a process of
a previous job still used it. ``--whoami FILE`` writes, as JSON, who and where the job runs: uid,
gid, groups, cwd, HOME, USER, LOGNAME, its cgroup, and which of ``JUPYTERHUB_API_TOKEN`` it got.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

# What torch prints when a CUDA allocation fails (``--oom``), as a GPU run of ms-swift ends.
OOM_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "swift/cli/sft.py", line 20, in <module>\n'
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.15 GiB of which 1.02 GiB is free."
)
RUN = "FAKE_TRAINER_RUN"  # marks every process of one test run, whatever the backend does
KINDS = ("ignore-term", "setsid", "worker", "clean-env")
_SETSID = """
import os, sys, time
os.setsid()
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    time.sleep(0.5)
"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", action="store_true")
    parser.add_argument("--lines", type=int, default=0)
    parser.add_argument("--fill", type=int, default=0)
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--more-steps", type=int, default=0)
    parser.add_argument("--save-to")
    parser.add_argument("--resume_from_checkpoint")
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--until-file")
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--exit", type=int, default=0)
    parser.add_argument("--spawn", action="append", choices=KINDS, default=[])
    parser.add_argument("--pid-dir", default=".")
    parser.add_argument("--check-gpus")
    parser.add_argument("--whoami")
    parser.add_argument("--memory-gib", "--memory_gib", type=float, dest="memory_gib")  # as ms-swift args spell it
    parser.add_argument("--oom", action="store_true")
    parser.add_argument("--be", choices=KINDS, help=argparse.SUPPRESS)  # a spawned process
    args, other = parser.parse_known_args()  # stands in for `swift sft`: take any of its args
    if args.be:
        return _be(args.be, os.path.join(args.pid_dir, f"{args.be}.pid"))
    if args.check_gpus:
        _write(args.check_gpus, json.dumps(conflicts()))
    if args.whoami:
        _write(args.whoami, json.dumps(whoami()))
    if other:
        print(f"args: {' '.join(other)}")
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.env:
        for var in ("CUDA_VISIBLE_DEVICES", "JUPYTER_QUOTA_JOB", "JUPYTER_QUOTA_NAMESPACE"):
            print(f"{var}={os.environ.get(var, '<unset>')}")
        print(f"cwd={os.getcwd()}")
    for kind in args.spawn:
        _spawn(kind, args.pid_dir)
    for i in range(args.lines):
        print(f"line {i}")
    _fill(args.fill)
    total = args.steps + args.more_steps
    done = 0
    if args.resume_from_checkpoint:
        done = int(args.resume_from_checkpoint.rsplit("-", 1)[1])
        print(f"resuming from {args.resume_from_checkpoint}", flush=True)
    _log_steps(done + 1, args.steps, total, args.save_to, args.memory_gib)
    print("ready", flush=True)
    time.sleep(args.sleep)
    while args.until_file and not os.path.exists(args.until_file):
        time.sleep(0.05)
    _log_steps(max(done, args.steps) + 1, total, total, args.save_to, args.memory_gib)
    if args.oom:
        print(OOM_TRACEBACK, file=sys.stderr, flush=True)
        return 1
    print(f"exiting with {args.exit}", file=sys.stderr if args.exit else sys.stdout)
    return args.exit


def whoami() -> dict:
    with open("/proc/self/cgroup") as f:
        cgroup = next((line[3:].strip() for line in f if line.startswith("0::")), None)
    env = {var: os.environ.get(var) for var in ("HOME", "USER", "LOGNAME", "JUPYTERHUB_API_TOKEN")}
    return {
        "uid": os.getuid(),
        "euid": os.geteuid(),
        "gid": os.getgid(),
        "egid": os.getegid(),
        "groups": sorted(os.getgroups()),
        "cwd": os.getcwd(),
        "cgroup": cgroup,
        **env,
    }


def _fill(size: int) -> None:
    sys.stdout.flush()
    batch = 1000
    for first in range(0, size // 100, batch):
        lines = (f"fill {i:09d} {'x' * 84}\n" for i in range(first, min(first + batch, size // 100)))
        sys.stdout.buffer.write("".join(lines).encode())
    sys.stdout.buffer.flush()


def _log_steps(first: int, last: int, total: int, save_to: str | None = None, memory_gib: float | None = None) -> None:
    """Steps ``first..last`` of ``total`` as ms-swift 4.6 logs them (values as strings), with the
    ``memory(GiB)`` a GPU run logs when ``memory_gib`` is given."""
    memory = f", 'memory(GiB)': '{memory_gib}'" if memory_gib is not None else ""
    for step in range(first, last + 1):
        print(
            f"{{'loss': '{2.0 / step:.4g}', 'learning_rate': '1e-04', 'global_step/max_steps': "
            f"'{step}/{total}'{memory}, 'elapsed_time': '{step}s', 'remaining_time': '{total - step}s'}}",
            flush=True,
        )
        if save_to:
            print(f"Saving model checkpoint to {os.path.join(save_to, f'checkpoint-{step}')}", flush=True)


def _spawn(kind: str, pid_dir: str) -> None:
    """Start a process of ``kind`` and wait until it has written its pid file."""
    pid_file = os.path.join(pid_dir, f"{kind}.pid")
    env = {} if kind == "clean-env" else None
    subprocess.Popen([sys.executable, __file__, "--be", kind, "--pid-dir", pid_dir], env=env)
    deadline = time.monotonic() + 60
    while not os.path.exists(pid_file):
        if time.monotonic() > deadline:
            sys.exit(f"{kind} never wrote {pid_file}")
        time.sleep(0.01)


def _be(kind: str, pid_file: str) -> int:
    if kind == "setsid":  # start the grandchild and exit: it is re-parented
        subprocess.Popen([sys.executable, "-c", _SETSID, pid_file])
        return 0
    if kind == "clean-env":
        os.setsid()
    if kind == "ignore-term":
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
    _write(pid_file, str(os.getpid()))
    while True:
        time.sleep(0.5)


def _write(path: str, text: str) -> None:
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def environ(pid: int) -> dict[str, str] | None:
    """The environment ``pid`` was started with; None when it is gone, a zombie or not ours."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs} or None


def run_processes(run: str) -> list[dict]:
    """Live processes of test run ``run``: pid, job, GPUs (zombies hold no GPU and are skipped)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        env = environ(int(entry))
        if env and env.get(RUN) == run:
            gpus = {g for g in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if g}
            job = f"{env.get('JUPYTER_QUOTA_NAMESPACE')}/{env.get('JUPYTER_QUOTA_JOB')}"
            found.append({"pid": int(entry), "job": job, "gpus": sorted(gpus)})
    return found


def conflicts() -> list[dict]:
    """Processes of another job of this run that hold one of this job's GPUs."""
    run = os.environ.get(RUN)
    if not run:
        return []
    mine = {g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g}
    job = f"{os.environ.get('JUPYTER_QUOTA_NAMESPACE')}/{os.environ.get('JUPYTER_QUOTA_JOB')}"
    return [p for p in run_processes(run) if p["job"] != job and mine & set(p["gpus"])]


if __name__ == "__main__":
    sys.exit(main())
