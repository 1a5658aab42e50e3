"""Admission counts what the ledger holds, whoever wrote it.

A job admitted or cancelled by another backend on the same ledger (another server process) counts
at the next admission, and nothing of a transaction rolled back does.
"""

from __future__ import annotations

import threading
import time

import pytest

from jupyter_quota import errors
from test_local_backend import GPU_KEY, NO_GPUS, Profile, make_backend, make_job  # noqa: F401 - fixture

REFUSED_AT_TWO = (
    "exceeded quota: a-quota, requested: requests.nvidia.com/gpu=1, "
    "used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2"
)


def test_a_job_admitted_or_cancelled_by_another_server_counts_at_the_next_admission(make_backend):
    ours, theirs, profile = make_backend(NO_GPUS), make_backend(NO_GPUS), Profile(hard={GPU_KEY: "2"})
    ours.submit(profile, make_job("one"), owner="alice")  # our copy of the namespace is read now
    theirs.submit(profile, make_job("two"), owner="bob")
    with pytest.raises(errors.AdmissionDenied) as refused:
        ours.submit(profile, make_job("three"), owner="alice")
    assert refused.value.message == REFUSED_AT_TWO  # their job counts: no over-admission
    theirs.cancel(profile, "two", by="bob")
    assert ours.submit(profile, make_job("three"), owner="alice")["phase"] == "Pending"  # freed quota is usable
    with pytest.raises(errors.AdmissionDenied) as refused:
        theirs.submit(profile, make_job("four"), owner="bob")
    assert refused.value.message == REFUSED_AT_TWO


def test_a_rolled_back_transaction_leaves_nothing_in_the_copy(make_backend, monkeypatch):
    backend, profile = make_backend(NO_GPUS), Profile(hard={GPU_KEY: "2"})
    backend.submit(profile, make_job("first", gpus=0), owner="alice")  # the copy holds the namespace
    lifecycle = backend._jobs
    outcomes = {}

    def fail(con, launches):
        raise RuntimeError("the pass broke the transaction")

    def submit(name):
        try:
            outcomes[name] = backend.submit(profile, make_job(name), owner="alice")["phase"]
        except RuntimeError as e:
            outcomes[name] = str(e)

    monkeypatch.setattr(lifecycle, "_guarded_pass", fail)
    with lifecycle._lock:  # both wait for one transaction: the second admission sees the first
        threads = [threading.Thread(target=submit, args=(name,)) for name in ("one", "two")]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while len(lifecycle._queue) < 2:
            assert time.monotonic() < deadline, "the submissions never queued"
            time.sleep(0.01)
    for thread in threads:
        thread.join(30)
    assert outcomes == {"one": "the pass broke the transaction", "two": "the pass broke the transaction"}
    monkeypatch.undo()
    # Neither stands, so both GPUs are free.
    assert backend.submit(profile, make_job("both", gpus=2), owner="alice")["phase"] == "Pending"
