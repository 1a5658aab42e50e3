"""The local backend's test helpers (for tests/local/ and the other tests of the local backend): a
profile, a Job as ``jobspec.build_job`` makes it, backends on a ledger in tmp_path (``make_backend``,
a fixture: tests/local/conftest.py provides it there, other modules import it), the ledger's rows,
and waits on events with generous deadlines. Jobs run ``tests/fake_trainer.py`` (prints, sleeps,
exits as told) under the supervisor.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import time
from dataclasses import dataclass, field

import pytest

from jupyter_quota.backends.local import LocalBackend, procfs
from jupyter_quota.jobspec import JobRequest, build_job

TRAINER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_trainer.py")
NS = "team-a"
GPU_KEY = "requests.nvidia.com/gpu"
INVENTORY = {
    "source": "declared",
    "gpus": [{"index": i, "model": "A100 80GB", "memory": "80Gi"} for i in range(2)],
    "cpu": "8",
    "memory": "16Gi",
}
NO_GPUS = dict(INVENTORY, gpus=[])
# Trainer args for a job that runs until it is cancelled or the test ends (make_backend kills
# it): a path that can never exist. A job on ``--sleep N`` would race the test's own steps,
# which take seconds on a loaded machine.
UNTIL_CANCELLED = ("--until-file", os.path.join(os.devnull, "never"))


def priority_job(profile, name: str, priority: str, *trainer_args: str, cpu: str = "1") -> dict:
    """A one-GPU Job of ``priority`` (normal, best-effort, ...), built by ``jobspec.build_job``
    for ``profile`` (a ``TeamProfile``), owned by alice."""
    one = {"nvidia.com/gpu": "1", "memory": "1Gi"}
    request = JobRequest(
        name=name,
        args=list(trainer_args),
        resources={"requests": {**one, "cpu": cpu}, "limits": one},
        priority=priority,
    )
    return build_job(profile, request, "alice", [sys.executable, TRAINER])


@dataclass
class Profile:
    """Stands in for ``profiles.TeamProfile``: one ResourceQuota, optional LimitRange."""

    team: str = "a"
    namespace: str = NS
    hard: dict = field(default_factory=lambda: {GPU_KEY: "2"})
    limits: list = field(default_factory=list)
    windows: list = field(default_factory=list)
    borrowingLimit: dict = field(default_factory=dict)

    def resource_quotas(self) -> list[dict]:
        return [
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": f"{self.team}-quota", "namespace": self.namespace},
                "spec": {"hard": dict(self.hard)},
            }
        ]

    def limit_ranges(self) -> list[dict]:
        if not self.limits:
            return []
        return [
            {
                "apiVersion": "v1",
                "kind": "LimitRange",
                "metadata": {"name": f"{self.team}-limits", "namespace": self.namespace},
                "spec": {"limits": list(self.limits)},
            }
        ]

    def to_json(self) -> dict:
        return {"team": self.team, "namespace": self.namespace}


def make_job(name, *trainer_args, gpus=1, namespace=NS, cpu="1", memory="1Gi", command=None):
    """A batch/v1 Job shaped as ``jobspec.build_job`` makes it."""
    requests = {"cpu": cpu, "memory": memory}
    limits = {"memory": memory}
    if gpus:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpus)
    argv = command or [sys.executable, TRAINER, *trainer_args]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"jupyter-quota/team": "a", "jupyter-quota/user": "alice", "jupyter-quota/job": name},
            "annotations": {"jupyter-quota/args": json.dumps(list(trainer_args))},
        },
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "train",
                            "image": "local",
                            "command": argv,
                            "resources": {"requests": requests, "limits": limits},
                        }
                    ],
                }
            },
        },
    }


@pytest.fixture
def make_backend(tmp_path):
    """Build backends on one ledger in tmp_path; at the end kill any job still running."""
    ledger_path = tmp_path / "state" / "ledger.sqlite"
    state_dir = tmp_path / "state"

    def make(inventory=INVENTORY, **kwargs):
        kwargs.setdefault("workdir", str(tmp_path))
        return LocalBackend(ledger_path, state_dir, inventory, **kwargs)

    make.ledger_path = ledger_path
    make.state_dir = state_dir
    yield make
    if ledger_path.exists():
        running = ledger_rows(ledger_path, "phase = 'Running'")
        for row in running:
            proc = procfs.ProcessId(row["pid"], row["pid_start"], row["boot_id"])
            if procfs.is_running(proc):
                os.killpg(row["pid"], signal.SIGKILL)
        # A reaper kills what those supervisors left and removes their (emptied) cgroups.
        backend, deadline = make(), time.monotonic() + 120
        while running and time.monotonic() < deadline:
            backend.reap()
            running = ledger_rows(ledger_path, "phase = 'Running'")
            time.sleep(0.02)


def ledger_rows(ledger_path, where="1"):
    """The ledger's job rows (``sqlite3.Row``) that match ``where``, oldest first."""
    con = sqlite3.connect(ledger_path)
    con.row_factory = sqlite3.Row
    try:
        return con.execute(f"SELECT * FROM jobs WHERE {where} ORDER BY id").fetchall()
    finally:
        con.close()


def wait_for(backend, profile, name, predicate, timeout=120.0):
    """Reap until ``predicate(job)`` holds; fail with the job's last state if it never does."""
    deadline = time.monotonic() + timeout
    while True:
        backend.reap()
        job = backend.get_job(profile, name)
        if predicate(job):
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting; job is {job}")
        time.sleep(0.02)


def phase_is(*phases):
    return lambda job: job["phase"] in phases


def wait_log(backend, profile, name, text, timeout=120.0):
    deadline = time.monotonic() + timeout
    while text not in backend.logs(profile, name):
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} never appeared in the log: {backend.logs(profile, name)!r}")
        time.sleep(0.02)


def downgrade_to_version_1(path) -> None:
    """Turn a ledger back into what version 1 wrote: no rev column, index or triggers."""
    con = sqlite3.connect(path)
    with con:
        for trigger in ("jobs_rev_on_insert", "jobs_rev_on_update"):
            con.execute(f"DROP TRIGGER {trigger}")
        con.execute("DROP INDEX jobs_by_rev")
        con.execute("ALTER TABLE jobs DROP COLUMN rev")
        con.execute("UPDATE meta SET value = 1 WHERE key = 'schema_version'")
    con.close()
    downgrade_to_version_2(path, version=1)


def downgrade_to_version_3(path) -> None:
    """Turn a ledger back into what version 3 wrote: no ``job_runs`` (usage read the jobs' own
    start and finish through two covering indexes)."""
    con = sqlite3.connect(path)
    with con:
        con.execute("DROP TABLE IF EXISTS job_runs")
        con.execute(
            "CREATE INDEX IF NOT EXISTS jobs_usage ON jobs"
            " (finished_at, started_at, namespace, team, owner, name, gpus, usage, phase) WHERE finished_at IS NOT NULL"
        )
        con.execute(
            "CREATE INDEX IF NOT EXISTS job_history_usage ON job_history"
            " (finished_at, started_at, namespace, team, owner, name, gpus, usage)"
        )
        con.execute("UPDATE meta SET value = 3 WHERE key = 'schema_version'")
    con.close()


def downgrade_to_version_2(path, version: int = 2) -> None:
    """Turn a ledger back into what version 2 wrote: no elastic columns (priority, borrowed, ...)."""
    downgrade_to_version_3(path)
    con = sqlite3.connect(path)
    with con:
        for column in ("priority", "borrowed", "preempted", "history"):
            con.execute(f"ALTER TABLE jobs DROP COLUMN {column}")
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
    con.close()


def insert_raw(ledger_path, name, requests, namespace="team-b"):
    """A Pending row written straight into the ledger, as an older version admitted it.

    In another team's namespace: the scheduler is shared by every team (admission and balance
    of the row's own namespace are ``badinput``'s tests).
    """
    job = make_job(name, *UNTIL_CANCELLED)
    container = job["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": requests, "limits": {}}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"namespace": namespace},
        "spec": job["spec"]["template"]["spec"],
    }
    con = sqlite3.connect(ledger_path)
    with con:
        con.execute(
            "INSERT INTO jobs (namespace, name, team, owner, phase, args, gpus, pod, usage, job, created_at)"
            " VALUES (?, ?, 'a', 'mallory', 'Pending', '[]', 0, ?, '{}', ?, '2026-11-29T08:30:00Z')",
            (namespace, name, json.dumps(pod), json.dumps(job)),
        )
        con.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")
    con.close()
