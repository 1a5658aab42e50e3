"""End to end: a real ``swift sft`` on the tiny model, started as a best-effort job on borrowed
GPUs, preempted when the lending team submits a job, requeued, and resumed from its last
checkpoint to completion, its steps going on from that checkpoint in one log.

The local backend hands out GPUs by index (a declared inventory): on a machine without one,
``CUDA_VISIBLE_DEVICES=0`` finds no CUDA device and ms-swift trains on the CPU, as the notebook
e2e test does. The lender's job is the fake trainer (it only needs to hold its GPU).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest
from local_testing import GPU_KEY, TRAINER, UNTIL_CANCELLED, phase_is, wait_for

from jupyter_quota import reasons
from jupyter_quota.jobspec import JobRequest, build_job
from jupyter_quota.profiles import TeamProfile

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tiny_swift import build_dataset, build_tiny_model, hold_after_checkpoint, swift_flags  # noqa: E402

SWIFT = shutil.which("swift", path=os.path.dirname(sys.executable))
OFFLINE = {"USE_HF": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
BORROWER = TeamProfile(team="a", users=["alice"], hard={GPU_KEY: "1"}, borrowingLimit={GPU_KEY: "1"})
LENDER = TeamProfile(team="b", users=["bob"], hard={GPU_KEY: "1"})
MAX_STEPS = 24
_STEP = re.compile(r"'global_step/max_steps': '(\d+)/")
_SAVED = re.compile(r"Saving model checkpoint to (\S+)")


def _steps(log: str) -> list[int]:
    """The steps a log shows, in order, each once (the final summary repeats the last)."""
    steps: list[int] = []
    for step in map(int, _STEP.findall(log)):
        if not steps or steps[-1] != step:
            steps.append(step)
    return steps


def _job(profile, name, priority, command, args):
    one = {"nvidia.com/gpu": "1"}
    request = JobRequest(name=name, args=args, resources={"requests": one, "limits": one}, priority=priority)
    return build_job(profile, request, "alice", command)


@pytest.mark.skipif(
    SWIFT is None or importlib.util.find_spec("swift") is None,
    reason="ms-swift is not installed in this environment (pip install 'jupyter_quota[swift]')",
)
def test_a_real_swift_sft_is_preempted_on_borrowed_gpus_and_resumes_from_its_checkpoint(
    make_backend, tmp_path, monkeypatch
):
    for name, value in OFFLINE.items():
        monkeypatch.setenv(name, value)
    root = tmp_path / "work"
    model = build_tiny_model(root / "tiny-qwen2")
    data = build_dataset(root / "data.jsonl", rows=64)
    out = root / "out"
    flags = swift_flags(model, data, out, max_steps=MAX_STEPS)
    flags[flags.index("--save_steps") + 1] = "2"  # a checkpoint every other step
    # held after checkpoint-2 until the preemption has happened: however fast the machine, the
    # preemption comes mid-run (a 24-step run once ended before it)
    release = tmp_path / "released"
    flags += hold_after_checkpoint(2, release, tmp_path / "hold_plugin.py")
    backend = make_backend(grace_period=60.0)
    backend.use_profiles(lambda: [BORROWER, LENDER])
    # team a's own GPU is taken, so its best-effort fine-tune runs on team b's idle one
    backend.submit(BORROWER, _job(BORROWER, "own", "normal", [sys.executable, TRAINER], list(UNTIL_CANCELLED)), "alice")
    job = backend.submit(BORROWER, _job(BORROWER, "tiny", "best-effort", [SWIFT, "sft"], flags), "alice")
    assert (job["phase"], job["borrowed"]) == ("Running", True), job

    # preempt once a checkpoint is whole (transformers writes trainer_state.json last)
    deadline = time.monotonic() + 900
    while not any((c / "trainer_state.json").is_file() for c in out.glob("v*/checkpoint-*")):
        assert time.monotonic() < deadline, backend.logs(BORROWER, "tiny", 200)
        assert backend.get_job(BORROWER, "tiny")["phase"] == "Running", backend.logs(BORROWER, "tiny", 200)
        time.sleep(0.5)
    lender = backend.submit(
        LENDER, _job(LENDER, "mine", "normal", [sys.executable, TRAINER], list(UNTIL_CANCELLED)), "bob"
    )
    assert lender["reason"] == reasons.WAITING_FOR_PREEMPTION
    requeued = wait_for(backend, BORROWER, "tiny", phase_is("Pending", "Succeeded", "Failed"), timeout=300)
    assert requeued["phase"] == "Pending", requeued
    preempted, requeue = requeued["history"][-2:]
    assert preempted["event"] == "Preempted" and preempted["reason"] == reasons.RECLAIMED
    stopped_at = preempted["step"]
    checkpoint = requeue["checkpoint"]
    assert checkpoint and (Path(checkpoint) / "trainer_state.json").is_file(), requeue
    resumed_from = int(checkpoint.rsplit("-", 1)[1])
    assert 2 <= resumed_from <= stopped_at < MAX_STEPS, (resumed_from, stopped_at)
    assert (resumed_from, stopped_at) in ((2, 2), (2, 3)), "preempted where it was held"
    release.touch()  # the resumed run goes on to the end
    assert wait_for(backend, LENDER, "mine", phase_is("Running"))["borrowed"] is False
    first_run = backend.logs(BORROWER, "tiny", 100_000)  # its processes are gone: the whole first run

    backend.cancel(LENDER, "mine", "bob")  # the lender is done: the GPUs are idle again
    resumed = wait_for(backend, BORROWER, "tiny", phase_is("Running", "Succeeded", "Failed"), timeout=300)
    assert [e["event"] for e in resumed["history"]][:4] == ["Borrowed", "Preempted", "Requeued", "Resumed"]
    done = wait_for(backend, BORROWER, "tiny", phase_is("Succeeded", "Failed"), timeout=1800)
    log = backend.logs(BORROWER, "tiny", 100_000)
    assert done["phase"] == "Succeeded", (done, log[-3000:])
    # one log: the first run's steps, then the resumed run's, going on from the checkpoint
    assert log.startswith(first_run[:1000])
    first, second = _steps(first_run), _steps(log[len(first_run) :])
    assert first == list(range(1, len(first) + 1)) and first[-1] >= stopped_at, (first, second)
    assert second == list(range(resumed_from + 1, MAX_STEPS + 1)), (first, second)
    assert any(p.endswith(f"checkpoint-{MAX_STEPS}") for p in _SAVED.findall(log)), log[-3000:]
    backend.cancel(BORROWER, "own", "alice")
