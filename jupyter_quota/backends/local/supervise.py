"""The wrapper every local job runs under: start the command, end all of it, record its exit.

Run as ``python -I supervise.py --exit-file PATH --log PATH [--log-max-bytes N]
[--log-backups K] [--cgroup-file PATH] [--run-as UID:GID:GROUPS] -- argv...``, in a session of
its own (its own stdout and stderr, for its own errors, are the log file). It exists so that a
job's exit code survives the server: the server may be stopped or restarted while the job
runs, and the child is not its child then, so only this process can wait for it and write
``exit.json`` (temp file, fsync, rename).

Its duties:
- It waits for ``go`` on stdin before starting the command. The server sends it only after the
  ledger has committed the job as Running with this process's pid, so a server that dies in
  between leaves no unrecorded process behind (stdin closes, this exits, nothing ran).
- It owns every process of the job, as a pod owns its containers' processes. It is a child
  subreaper (``PR_SET_CHILD_SUBREAPER``): a process whose parent exits is re-parented to it,
  not to init, so a ``setsid`` or double-forked grandchild stays among its descendants, which
  a walk of ``/proc`` by parent pid finds whatever their session or process group. SIGTERM,
  SIGINT and SIGHUP sent to it (a cancel) are forwarded to all descendants. When the main
  process exits (however), every descendant still running is SIGKILLed, as a container's
  processes die with its init; this process exits and writes ``exit.json`` only once it has
  reaped them all, so "supervisor gone" means "nothing of the job runs" and the server frees
  the job's GPUs only then.
- Every process of the job inherits ``JUPYTER_QUOTA_JOB_UID`` (``procfs.MARKER``), unique to
  this supervisor. Should this process itself be SIGKILLed, its orphans go to init; the server
  then finds them by that marker in ``/proc/<pid>/environ`` (see ``tracking.reap_leftovers``). The
  marker alone is not enough (a process may exec with a clean environment) and the tree alone
  is not either (it breaks when this process dies): the two together cover both.
- With ``--cgroup-file``, and where the machine allows it (see ``cgroup``), the job also runs
  in a cgroup of its own, recorded in that file: it holds every process of the job whatever
  its parent or environment, and ``cgroup.kill`` ends them all at once, forks included.
- It writes the job's output (stdout and stderr through one pipe) to ``--log``, rotated at
  ``--log-max-bytes`` into ``LOG.1`` .. ``LOG.<backups>``: at most ``max * (backups + 1)``
  bytes on disk, however much the job prints.
- The main process is asked to die with this one (``PR_SET_PDEATHSIG``).
- With ``--run-as UID:GID:GROUPS`` (a root server running the job as its owner's account, see
  ``account``), the main process takes that account's groups, gid and uid just before exec,
  after joining the cgroup (``cgroup.procs`` is root's to write) and before ``PR_SET_PDEATHSIG``
  (a change of credentials clears it); this process keeps root to kill the job whatever it does.
  It then enters the working directory again as the account: one it may not enter fails the job
  at start with that message.

Standard library only: it runs in isolated mode, without the package on its path, and loads
``procfs.py`` and ``cgroup.py`` (standard library only as well) from beside it.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_PUMP_WAIT = 10.0  # seconds to drain the output pipe once every process of the job is gone
_CHUNK = 64 * 1024


def main(argv: list[str] | None = None) -> int:
    """Run the command once; return (and exit with) its exit code, 128+N for signal N."""
    opts = _parse(sys.argv[1:] if argv is None else argv)
    procfs, cgroup = _load("procfs"), _load("cgroup")
    for sig in _FORWARDED:  # a handler, not SIG_IGN: the job starts with default dispositions
        signal.signal(sig, lambda signum, frame: _signal_descendants(procfs, signum))
    if sys.stdin.buffer.readline() != b"go\n":
        return 0  # the server never confirmed: run nothing
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    me = procfs.identify(os.getpid())
    env = dict(os.environ, **{procfs.MARKER: procfs.marker(me)})
    group = cgroup.create(cgroup.name(me.pid, me.start)) if opts.cgroup_file else None
    log = RotatingLog(opts.log, opts.log_max_bytes, opts.log_backups)
    read_end, write_end = os.pipe()
    problem_end, problem_fd = os.pipe()  # why the child could not start (see ``_start_child``)
    try:
        child = subprocess.Popen(
            opts.command,
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=write_end,
            env=env,
            preexec_fn=_start_child(cgroup, group, opts.run_as, problem_fd),
        )
    except (OSError, subprocess.SubprocessError) as e:
        os.close(problem_fd)
        problem = _read_all(problem_end)
        os.close(read_end)
        os.close(write_end)
        if group is not None:
            cgroup.remove(group)
        code = 127 if getattr(e, "errno", None) == errno.ENOENT else 126  # as a shell reports it
        error = problem or f"cannot run {opts.command[0]!r}: {getattr(e, 'strerror', None) or e}"
        log.write(f"supervise: {error}\n".encode())
        log.close()
        write_exit(opts.exit_file, {"exitCode": code, "error": error, "finishedAt": _now()})
        return code
    os.close(problem_fd)
    os.close(problem_end)
    os.close(write_end)  # the job's processes hold the only write ends: EOF once all are gone
    if group is not None and cgroup.path_of(child.pid) != group:  # (a zombie still says where)
        cgroup.remove(group)  # the child could not join it (not delegated to us): /proc alone
        group = None
    if group is not None:
        _write_text(opts.cgroup_file, group)
    pump = threading.Thread(target=_pump, args=(read_end, log), daemon=True)
    pump.start()
    returncode = os.waitstatus_to_exitcode(_wait_all(procfs, cgroup, group, child.pid))
    if group is not None:
        cgroup.remove(group)  # empty: every process of the job has been reaped
    child.returncode = returncode  # reaped here, not by Popen
    pump.join(_PUMP_WAIT)
    record = {"exitCode": returncode, "finishedAt": _now()}
    if returncode < 0:
        record["exitCode"] = 128 - returncode
        record["signal"] = signal.Signals(-returncode).name
    write_exit(opts.exit_file, record)
    return record["exitCode"]


def _wait_all(procfs, cgroup, group: str | None, main_pid: int) -> int:
    """Reap every child (orphans come to us) until none is left; the main process's wait status.

    Once the main process has exited, whatever of the job still runs is SIGKILLed, again after
    each reaped child (a dying parent re-parents its children to us, and a process may fork
    while the others are killed).
    """
    status = None
    while True:
        try:
            pid, wait_status = os.waitpid(-1, 0)
        except ChildProcessError:  # no child left: no descendant either (we are their subreaper)
            return status
        if pid == main_pid:
            status = wait_status
        if status is not None:
            if group is not None:
                cgroup.kill(group)
            _signal_descendants(procfs, signal.SIGKILL)


def _signal_descendants(procfs, sig: int) -> None:
    for proc in procfs.descendants(os.getpid(), procfs.processes()):
        procfs.send(proc, sig)


class RotatingLog:
    """Appends bytes to ``path``, renaming it to ``path.1`` (``.1`` to ``.2``, ...) at ``max_bytes``.

    Keeps ``backups`` rotated files (0: the file is emptied instead), so at most
    ``max_bytes * (backups + 1)`` bytes are on disk. ``logtail.tail`` reads them as one stream.
    """

    def __init__(self, path: str, max_bytes: int, backups: int):
        self.path, self.max_bytes, self.backups = path, max(1, max_bytes), max(0, backups)
        self._fd = self._open(append=True)
        self._size = os.fstat(self._fd).st_size

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self._size >= self.max_bytes:
                self._rotate()
            written = os.write(self._fd, view[: self.max_bytes - self._size])
            self._size += written
            view = view[written:]

    def close(self) -> None:
        os.close(self._fd)

    def _rotate(self) -> None:
        os.close(self._fd)
        if self.backups:
            for n in range(self.backups - 1, 0, -1):
                if os.path.exists(f"{self.path}.{n}"):
                    os.replace(f"{self.path}.{n}", f"{self.path}.{n + 1}")
            os.replace(self.path, f"{self.path}.1")
        self._fd = self._open(append=False)
        self._size = 0

    def _open(self, append: bool) -> int:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | (0 if append else os.O_TRUNC)
        return os.open(self.path, flags, 0o600)


def _pump(fd: int, log: RotatingLog) -> None:
    """Copy the job's output into the log until every writer has closed the pipe."""
    with open(fd, "rb", buffering=0) as pipe:
        while chunk := pipe.read(_CHUNK):
            try:
                log.write(chunk)
            except OSError:  # a full or failing disk loses output; it must not block the job
                pass
    log.close()


def write_exit(path: str, record: dict) -> None:
    """Write ``record`` as JSON so that ``path`` is either absent or complete, even on power loss."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dirfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dirfd)
    finally:
        os.close(dirfd)


def _parse(argv: list[str]) -> argparse.Namespace:
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        sys.exit(
            "usage: supervise --exit-file PATH --log PATH [--log-max-bytes N] [--log-backups K] "
            "[--cgroup-file PATH] [--run-as UID:GID:GROUPS] -- COMMAND [ARG...]"
        )
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="supervise")
    parser.add_argument("--exit-file", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--log-max-bytes", type=int, default=10 * 1024 * 1024)
    parser.add_argument("--log-backups", type=int, default=2)
    parser.add_argument("--cgroup-file")
    parser.add_argument("--run-as", type=_ids, help="UID:GID:G1,G2,... (the job's account)")
    opts = parser.parse_args(argv[:split])
    opts.command = argv[split + 1 :]
    return opts


def _write_text(path: str, text: str) -> None:
    with open(f"{path}.tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(f"{path}.tmp", path)


def _load(module: str):
    """A standard-library-only module of this package, from the file beside this one."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{module}.py")
    spec = importlib.util.spec_from_file_location(f"_jupyter_quota_{module}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def _prctl(option: int, arg: int) -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux
        return False


def _ids(text: str) -> tuple[int, int, list[int]]:
    uid, gid, groups = text.split(":")
    return int(uid), int(gid), [int(g) for g in groups.split(",") if g]


def _read_all(fd: int) -> str:
    with open(fd, "rb") as f:
        return f.read().decode(errors="replace").strip()


def _start_child(cgroup, group: str | None, run_as: tuple[int, int, list[int]] | None, problem_fd: int):
    """A preexec hook: join the job's cgroup, become the job's account (``run_as``), and have the
    kernel SIGKILL the child when this process dies.

    Not ``Popen(user=, group=, extra_groups=)``: it switches before this hook runs, and the
    cgroup must be joined as root. What goes wrong is written to ``problem_fd`` (a preexec
    exception reaches the parent without its text).
    """
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: nothing to arm
        prctl = None
    parent = os.getpid()
    workdir = os.getcwd()

    def start() -> None:
        if group is not None:
            cgroup.join(group)  # before exec, so every process of the job is in it
        if run_as is not None and run_as[0] != os.geteuid():
            uid, gid, groups = run_as
            try:
                os.setgroups(groups)
                os.setgid(gid)  # real, effective and saved: the job cannot take root back
                os.setuid(uid)
            except OSError as e:
                os.write(problem_fd, f"cannot switch to uid {uid}, gid {gid}: {e.strerror}".encode())
                raise
            try:
                os.chdir(workdir)  # entered as root; the job must be able to enter it too
            except OSError as e:
                os.write(problem_fd, f"uid {uid} cannot enter the working directory {workdir}: {e.strerror}".encode())
                raise
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:  # died before the hook was armed
                os._exit(1)

    return start


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


if __name__ == "__main__":
    sys.exit(main())
