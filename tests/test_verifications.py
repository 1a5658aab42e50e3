"""How ``service/verifications.py`` runs its children: a timeout, a failed child, a busy server, a
failed run tried again, and the server's stop, each with a real child process (the command is
given so that it sleeps or fails; the real one is exercised in tests/test_verifications_api.py)."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import uuid
from pathlib import Path

import pytest

from jupyter_quota.errors import TooManyRequests
from jupyter_quota.identity import Identity
from jupyter_quota.service.verifications import Verifications

ANN = Identity("ann")
LORA = ["--model", "Qwen/Qwen2.5-0.5B-Instruct", "--tuner_type", "lora"]
FULL = ["--model", "Qwen/Qwen2.5-0.5B-Instruct", "--tuner_type", "full"]


def python(code: str):
    """A child command that runs ``code`` instead of the simulated step."""
    return lambda args, gpus: [sys.executable, "-c", code]


def settled(verifications: Verifications, vid: str, timeout: float = 120.0) -> dict:
    """The verification once it is no longer running (a bound for a hung child, not a pace)."""
    deadline = time.monotonic() + timeout
    while (answer := verifications.get(ANN, vid))["state"] == "running":
        assert time.monotonic() < deadline, answer
        time.sleep(0.05)
    return answer


def children_since(ticks: int) -> list[tuple[int, str, bytes]]:
    """This process's children started at or after ``ticks`` (clock ticks since boot): pid, state
    (``Z`` for one not reaped) and command line (empty for a zombie)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        state, ppid, start = fields[0], int(fields[1]), int(fields[19])
        if ppid == os.getpid() and start >= ticks:
            found.append((int(entry.name), state, cmdline))
    return found


def now_ticks() -> int:
    return int(float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK"))


def test_a_child_past_the_timeout_is_killed_and_the_verification_says_so():
    # The child may be killed before its Python has started (a loaded machine): it is found by the
    # marker its command line carries from exec on, and by being this process's child, not by
    # anything it writes.
    marker = f"verification-timeout-{uuid.uuid4().hex}"
    since = now_ticks()
    verifications = Verifications(
        1,
        1.0,
        logging.getLogger(),
        command=lambda args, gpus: [sys.executable, "-c", "import time; time.sleep(600)", marker],
    )
    started = verifications.start(ANN, {"args": LORA})
    answer = settled(verifications, started["id"])
    assert answer["state"] == "failed"
    assert "ran past 1 s (JupyterQuota.verification_timeout)" in answer["reason"]
    left = children_since(since)
    assert not [c for c in left if marker.encode() in c[2]], left  # killed
    assert not [c for c in left if c[1] == "Z"], left  # and reaped


def test_a_failed_child_gives_its_status_and_stderr_and_is_tried_again():
    code = "import sys; sys.stderr.write('the model code raised'); sys.exit(3)"
    verifications = Verifications(1, 60.0, logging.getLogger(), command=python(code))
    first = settled(verifications, verifications.start(ANN, {"args": LORA})["id"])
    assert first["state"] == "failed"
    assert first["reason"] == "the simulated step exited with status 3: the model code raised"
    verifications.command = python("import json; print(json.dumps({'verification': {'unsupported': 'not today'}}))")
    second = verifications.start(ANN, {"args": LORA})
    assert second["state"] == "running", second  # a failed run is not shared: it runs again
    answer = settled(verifications, second["id"])
    assert (answer["state"], answer["reason"]) == ("unsupported", "not today")


def test_one_more_than_the_limit_is_refused_at_once_and_the_same_argv_joins_the_run(tmp_path):
    verifications = Verifications(1, 60.0, logging.getLogger(), command=python("import time; time.sleep(600)"))
    try:
        first = verifications.start(ANN, {"args": LORA})
        with pytest.raises(TooManyRequests) as refused:
            verifications.start(ANN, {"args": FULL})
        assert "1 of 1 verifications running" in str(refused.value)
        assert refused.value.headers["Retry-After"]
        joined = verifications.start(ANN, {"args": LORA})
        assert joined["state"] == "running" and joined["startedAt"] == first["startedAt"]
    finally:
        verifications.close()


def test_stopping_the_server_kills_the_children(tmp_path):
    pidfile = tmp_path / "pid"
    code = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    verifications = Verifications(1, 600.0, logging.getLogger(), command=python(code))
    started = verifications.start(ANN, {"args": LORA})
    deadline = time.monotonic() + 120
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.05)
    verifications.close()
    answer = settled(verifications, started["id"])
    assert answer["state"] == "failed", answer
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_child_gets_no_credential_of_the_server_and_a_lower_priority(monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "the-service-token")
    monkeypatch.setenv("KUBECONFIG", "/etc/the-cluster-admin.yaml")
    code = (
        "import json, os; print(json.dumps({'verification': {'unsupported': json.dumps("
        "[os.environ.get('JUPYTERHUB_API_TOKEN'), os.environ.get('KUBECONFIG'), bool(os.environ.get('PATH')), "
        "os.getpriority(os.PRIO_PROCESS, 0)])}}))"
    )
    verifications = Verifications(1, 60.0, logging.getLogger(), command=python(code))
    answer = settled(verifications, verifications.start(ANN, {"args": LORA})["id"])
    token, kubeconfig, has_path, niceness = json.loads(answer["reason"])
    assert (token, kubeconfig, has_path) == (None, None, True)
    assert niceness >= os.getpriority(os.PRIO_PROCESS, 0) + 10 or niceness == 19
