"""Verifications of estimates as background work (docs/estimator.md §14.3): ``POST /verifications``
starts the simulated training step of a ``swift sft`` argv, ``GET /verifications/{id}`` says how it
went, and the planner shows the answer beside its plan when it arrives.

The step runs in a child process, ``jupyter quota estimate --verify --json`` (the CLI's own path;
an argv, never a shell): it imports torch and transformers, which the server itself never does,
holds one CPU for tens of seconds, and is killed past ``JupyterQuota.verification_timeout``. At
most ``JupyterQuota.max_concurrent_verifications`` run at once; one more is refused at once with
429, as plan searches are (``slots.py``). A child runs under ``nice`` with only the environment
it needs (``child_env``): no token or credential of the server. What the step cannot simulate
(``verify.regime_for``, ``verify.facts_for``: pure checks) is answered ``unsupported`` without a
child.

A verification is its caller's: another user asking for its id hears 404. The same argv asked
again shares the run and its answer (the step is deterministic for the installed versions); a
failed run is tried again. Runs and ids are kept in memory, the newest ``KEEP``: a restart forgets
them, and the caller asks again.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..errors import InvalidRequest, NotFound, TooManyRequests
from ..identity import Identity
from ..times import rfc3339

#: a verification's states, the REST field ``state``
RUNNING, DONE, UNSUPPORTED, FAILED = "running", "done", "unsupported", "failed"
#: runs (settled or not) and ids kept; the oldest settled are forgotten first
KEEP = 256
#: seconds a refused caller is told to wait: a step takes tens of seconds
RETRY_AFTER = 15
#: how much of a failed child's stderr the answer carries
STDERR_CHARS = 600


@dataclass
class _Run:
    args: list[str]
    gpus: int
    started: float
    state: str = RUNNING
    result: dict | None = None
    reason: str | None = None
    finished: float | None = None


#: the server's environment a child gets: where Python, the model caches and the locale are, and
#: nothing else: a hub service's token (``JUPYTERHUB_API_TOKEN``), Kubernetes credentials and the
#: like stay with the server (the argv is a user's)
CHILD_ENV = ("PATH", "HOME", "LANG", "TMPDIR", "VIRTUAL_ENV", "JUPYTER_QUOTA_HUB_LOOKUP", "XDG_CACHE_HOME")
CHILD_ENV_PREFIXES = ("LC_", "PYTHON", "HF_", "HUGGINGFACE_", "TRANSFORMERS_", "MODELSCOPE_", "TORCH", "OMP_")
#: a child runs at a lower CPU priority than the server it answers for
CHILD_NICENESS = 10


def child_env(environ=os.environ) -> dict:
    env = {k: v for k, v in environ.items() if k in CHILD_ENV or k.startswith(CHILD_ENV_PREFIXES)}
    return {**env, "PYTHONUNBUFFERED": "1"}


def child_command(args: list[str], gpus: int) -> list[str]:
    """The argv of the child that runs the step: the CLI's ``estimate --verify --json``."""
    return [
        sys.executable,
        "-m",
        "jupyter_quota.cli",
        "estimate",
        "--verify",
        "--json",
        "--gpus",
        str(gpus),
        "--",
        *args,
    ]


class Verifications:
    def __init__(self, limit: int, timeout: float, log, command=child_command, clock=time.time):
        """``limit`` runs at once, each killed after ``timeout`` seconds; ``command(args, gpus)``
        is the child's argv (tests give a slower or failing one)."""
        self.limit = limit
        self.timeout = timeout
        self.log = log
        self.command = command
        self.clock = clock
        self._lock = threading.Lock()
        self._runs: OrderedDict[tuple, _Run] = OrderedDict()  # by (argv, gpus)
        self._ids: OrderedDict[str, tuple[str, tuple]] = OrderedDict()  # id: (owner, run key)
        self._children: set[subprocess.Popen] = set()
        self._executor = ThreadPoolExecutor(max_workers=limit, thread_name_prefix="jupyter-quota-verify")
        self._closed = False

    # -- the REST use cases ---------------------------------------------------------------------

    def start(self, who: Identity, body) -> dict:
        """Start (or join) the verification of ``body``'s argv; any signed-in user may ask."""
        from ..estimator.simstep import UnsupportedStep
        from ..estimator.verify import facts_for, regime_for
        from ..planner.request import VERIFY_EXAMPLE, parse_verify_request
        from ..swift import parse_sft_args

        request = parse_verify_request(body)
        sft = parse_sft_args(request.args)
        if not sft.model:
            raise InvalidRequest(f"--model is required: the model to simulate, e.g. {VERIFY_EXAMPLE}")
        gpus = request.gpus
        argv = sft.to_argv()
        key = (tuple(argv), gpus)
        try:  # outside the lock: a local config.json is read
            regime_for(sft, gpus)
            facts_for(sft.model)
            refusal = None
        except UnsupportedStep as exc:
            refusal = str(exc)
        with self._lock:
            run = self._runs.get(key)
            if run is None or run.state == FAILED:
                run = _Run(argv, gpus, self.clock())
                if refusal is not None:
                    run.state, run.reason, run.finished = UNSUPPORTED, refusal, run.started
                else:
                    self._refuse_when_busy()
                    self._executor.submit(self._work, run)
                self._runs[key] = run
                self._runs.move_to_end(key)
                self._forget_old()
            vid = secrets.token_hex(8)
            self._ids[vid] = (who.name, key)
            while len(self._ids) > KEEP * 4:  # several callers may hold ids of one run
                self._ids.popitem(last=False)
            return self._json(vid, run)

    def get(self, who: Identity, vid: str) -> dict:
        """The verification ``vid`` of ``who``: 404 when it is someone else's, or forgotten."""
        with self._lock:
            owner, key = self._ids.get(vid, (None, None))
            run = self._runs.get(key) if owner == who.name else None
            if run is None:
                raise NotFound(
                    f"no verification {vid!r} of yours here: it is another user's, or was forgotten "
                    f"(the server restarted, or kept only its newest {KEEP}); start it again with "
                    "POST /verifications"
                )
            return self._json(vid, run)

    def close(self) -> None:
        """Kill the children still running and stop taking work (the server stops)."""
        with self._lock:
            self._closed = True
            children = list(self._children)
        for child in children:
            _kill(child)
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- the run ----------------------------------------------------------------------------------

    def _refuse_when_busy(self) -> None:
        running = sum(1 for r in self._runs.values() if r.state == RUNNING)
        if self._closed or running >= self.limit:
            raise TooManyRequests(
                f"busy: {running} of {self.limit} verifications running, the most this server runs at "
                f"once (JupyterQuota.max_concurrent_verifications); retry in {RETRY_AFTER} s",
                retry_after=RETRY_AFTER,
            )

    def _work(self, run: _Run) -> None:
        try:
            state, result, reason = self._child(run)
        except Exception as exc:  # the answer must settle, whatever broke
            self.log.exception("jupyter_quota: a verification failed")
            state, result, reason = FAILED, None, f"the verification could not run: {exc}"
        with self._lock:
            run.state, run.result, run.reason, run.finished = state, result, reason, self.clock()

    def _child(self, run: _Run) -> tuple[str, dict | None, str | None]:
        nice = shutil.which("nice")  # coreutils: the priority is set before the child runs anything
        prefix = [nice, "-n", str(CHILD_NICENESS)] if nice else []
        child = subprocess.Popen(
            prefix + self.command(run.args, run.gpus),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: a kill ends whatever it started
            env=child_env(),
        )
        with self._lock:
            self._children.add(child)
        try:
            out, err = child.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill(child)
            child.communicate()
            return (
                FAILED,
                None,
                f"the simulated step ran past {self.timeout:g} s (JupyterQuota.verification_timeout) and "
                "was stopped; a smaller --max_length or a smaller model of the same architecture verifies faster",
            )
        finally:
            with self._lock:
                self._children.discard(child)
        if child.returncode != 0:
            tail = err.decode("utf-8", "replace").strip()[-STDERR_CHARS:]
            return FAILED, None, f"the simulated step exited with status {child.returncode}: {tail or 'no output'}"
        try:
            verification = json.loads(out)["verification"]
        except (ValueError, KeyError, TypeError):
            return FAILED, None, "the simulated step printed no verification (the server log may say more)"
        if "unsupported" in verification:
            return UNSUPPORTED, None, str(verification["unsupported"])
        verification["peakGibPerGpu"] = round(verification["peakBytesPerGpu"] / 1024**3, 2)
        return DONE, verification, None

    def _forget_old(self) -> None:
        """Keep the newest ``KEEP`` runs; a running one is never forgotten."""
        for key in list(self._runs):
            if len(self._runs) <= KEEP:
                break
            if self._runs[key].state != RUNNING:
                del self._runs[key]

    def _json(self, vid: str, run: _Run) -> dict:
        return {
            "id": vid,
            "state": run.state,
            "args": list(run.args),
            "gpus": run.gpus,
            "startedAt": rfc3339(run.started),
            "finishedAt": None if run.finished is None else rfc3339(run.finished),
            "result": run.result,
            "reason": run.reason,
        }


def _kill(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
