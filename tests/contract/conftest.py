"""One backend contract, two backends: every test here runs on ``local`` and on ``kube``.

``local`` is the embedded backend on a SQLite ledger in tmp_path, running
``tests/fake_trainer.py``. ``kube`` is the real kube-apiserver v1.20.2 started once per run by
``tests/kube/kubecluster.py`` (or the cluster named by ``JUPYTER_QUOTA_TEST_KUBECONFIG``),
its node agent playing the kubelet with the same arguments (``--sleep``, ``--exit``). Profiles
are applied to the cluster with ``apply_profiles``, as an admin would. A job that must stay up
until the test cancels it sleeps 600 s (the node agent has no ``--until-file``): far beyond the
test's steps and the waits' deadlines, however loaded the machine.
"""

from __future__ import annotations

import itertools
import logging
import sys
import time
import uuid
from pathlib import Path
from typing import ClassVar

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "kube"))

import kubecluster  # noqa: E402

from jupyter_quota import jobspec  # noqa: E402
from jupyter_quota.backends.kube import KubeBackend, apply_profiles  # noqa: E402
from jupyter_quota.backends.local import LocalBackend  # noqa: E402
from jupyter_quota.profiles import TeamProfile  # noqa: E402

FAKE_TRAINER = HERE.parent / "fake_trainer.py"
GPU_KEY = "requests.nvidia.com/gpu"
INVENTORY = {
    "source": "declared",
    "gpus": [{"index": i, "model": "A100 80GB", "memory": "80Gi"} for i in range(4)],
    "cpu": "32",
    "memory": "256Gi",
}
_counter = itertools.count()


class Harness:
    """What a contract test needs from a backend kind: profiles, backends, jobs, waiting."""

    kind = ""
    command: ClassVar[list[str]] = []
    #: The settings the kind's backends build Jobs with (``Backend.job_settings``).
    settings = jobspec.JobSettings()

    def __init__(self):
        self.backends = []

    def profile(self, **fields) -> TeamProfile:
        namespace = f"jq-c{next(_counter)}-{uuid.uuid4().hex[:6]}"
        fields.setdefault("hard", {GPU_KEY: "2"})
        return TeamProfile(team=namespace[3:], namespace=namespace, users=["alice"], **fields)

    def job(self, profile, name, *trainer_args, gpus=1, resources=None) -> dict:
        body = {"name": name, "args": list(trainer_args), "gpus": gpus}
        if resources:
            body["resources"] = resources
        request = jobspec.parse_job_request(body, profile)
        return jobspec.build_job(profile, request, "alice", self.command, self.settings)

    def wait(self, backend, profile, name, predicate, timeout=120.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            job = backend.get_job(profile, name)
            if predicate(job):
                return job
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting; job is {job}")
            time.sleep(0.05)

    def wait_used(self, backend, profile, used: str, key=GPU_KEY, timeout=120.0) -> dict:
        """Until the balance shows ``used`` of ``key`` (the cluster's quota controller is async)."""
        deadline = time.monotonic() + timeout
        while True:
            balance = backend.balance(profile)
            if balance["resources"].get(key, {}).get("used") == used:
                return balance
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {key} used={used}; balance is {balance}")
            time.sleep(0.05)

    def close(self):
        for backend in self.backends:
            backend.close()


class LocalHarness(Harness):
    kind = "local"
    command: ClassVar[list[str]] = [sys.executable, str(FAKE_TRAINER)]

    def __init__(self, tmp_path: Path):
        super().__init__()
        self.tmp_path = tmp_path

    def backend(self, profile=None):
        backend = LocalBackend(
            self.tmp_path / "state" / "ledger.sqlite",
            self.tmp_path / "state",
            INVENTORY,
            grace_period=2.0,
            poll_interval=0.05,
            workdir=str(self.tmp_path),
        )
        backend.start()
        self.backends.append(backend)
        return backend

    def close(self):
        """Cancel what is still live and wait until every job has ended: a job cancelled while it
        was starting may outlive its SIGTERM, and only a running reaper sends the SIGKILL after
        the grace period (the test's backends are closed by now)."""
        super().close()
        final = LocalBackend(
            self.tmp_path / "state" / "ledger.sqlite",
            self.tmp_path / "state",
            INVENTORY,
            grace_period=0.5,
            poll_interval=0.05,
        )
        final.start()
        try:
            namespaces = [_Ns(ns) for ns in set(self._namespaces())]
            for ns in namespaces:
                for job in final.list_jobs(ns):
                    if job["phase"] in ("Pending", "Running"):
                        final.cancel(ns, job["name"], "test-teardown")
            deadline = time.monotonic() + 120
            while any(job["phase"] in ("Pending", "Running") for ns in namespaces for job in final.list_jobs(ns)):
                assert time.monotonic() < deadline, "jobs still live two minutes after teardown cancelled them"
                time.sleep(0.1)
        finally:
            final.close()

    def _namespaces(self):
        import sqlite3

        path = self.tmp_path / "state" / "ledger.sqlite"
        if not path.exists():
            return []
        con = sqlite3.connect(path)
        try:
            return [r[0] for r in con.execute("SELECT DISTINCT namespace FROM jobs")]
        finally:
            con.close()


class KubeHarness(Harness):
    """The backend as deployed: under the quota service's account with only its per-namespace
    Role (``rbac.py``), watching each team namespace on its own (on an external cluster: the
    kubeconfig's identity)."""

    kind = "kube"
    command = kubecluster.JOB_COMMAND
    settings = jobspec.JobSettings(image=kubecluster.JOB_IMAGE, mounts=True)

    def __init__(self, cluster: kubecluster.Cluster):
        super().__init__()
        self.cluster = cluster
        self.kube = cluster.kube()
        self.namespaces = []

    def profile(self, **fields) -> TeamProfile:
        profile = super().profile(**fields)
        apply_profiles([profile], self.kube, kubecluster.SERVICE_ACCOUNT)
        kubecluster.wait_quota_status(self.kube, profile.namespace)
        self.namespaces.append(profile.namespace)
        return profile

    def backend(self, profile=None):
        backend = KubeBackend(
            self.cluster.service_kube(),
            job_image=kubecluster.JOB_IMAGE,
            backoff_max=1.0,
            namespaced=True,
            log=logging.getLogger("jupyter_quota.kube.contract"),
        )
        backend.start()
        if profile is not None:  # the quota objects, with the controller's status, are in the cache
            backend.balance(profile)  # its namespace is watched from its first request on
            assert backend.cache.wait(lambda: _quotas_cached(backend, profile), 30), backend.balance(profile)
        self.backends.append(backend)
        return backend

    def close(self):
        super().close()
        for ns in self.namespaces:  # deleting the namespace deletes its jobs and pods
            try:
                self.kube.delete(f"/api/v1/namespaces/{ns}")
            except Exception:  # noqa: BLE001 - teardown of a namespace is best effort
                pass


def _quotas_cached(backend, profile) -> bool:
    cached = backend.cache["resourcequotas"].items(profile.namespace)
    return len(cached) == len(profile.resource_quotas()) and all("used" in (q.get("status") or {}) for q in cached)


class _Ns:
    def __init__(self, namespace):
        self.namespace = namespace
        self.team = ""
        self.gpuResource = "nvidia.com/gpu"


@pytest.fixture(params=["local", "kube"])
def harness(request, tmp_path):
    if request.param == "local":
        h = LocalHarness(tmp_path)
    else:
        h = KubeHarness(kubecluster.cluster_or_fail(request.config))
    yield h
    h.close()
