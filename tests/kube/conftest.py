"""Fixtures of the kube tier: one real v1.20.2 control plane per run (see ``kubecluster``).

When the cluster cannot start, every test that needs it FAILS with the reason (missing binaries
and how to build them, or the failing component's log). ``JUPYTER_QUOTA_KUBE_TESTS=skip``
skips the tier instead, and says so in the summary.
"""

from __future__ import annotations

import itertools
import logging
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kubecluster

from jupyter_quota.backends.kube import KubeBackend

_counter = itertools.count()


@pytest.fixture(scope="session")
def kube_cluster(request) -> kubecluster.Cluster:
    return kubecluster.cluster_or_fail(request.config)


@pytest.fixture
def kube(kube_cluster):
    return kube_cluster.kube()


@pytest.fixture
def namespace_name(kube_cluster):
    """A fresh namespace name; the namespace (and all in it) is deleted after the test."""
    name = f"jq-k{next(_counter)}-{uuid.uuid4().hex[:6]}"
    yield name
    try:
        kube_cluster.kube().delete(f"/api/v1/namespaces/{name}")
    except Exception:  # noqa: BLE001 - it may not exist, or the test deleted it
        pass


@pytest.fixture
def make_kube_backend(kube_cluster):
    """Backends on the test cluster, started and synced; closed at the end of the test."""
    made = []

    def make(**kwargs) -> KubeBackend:
        kwargs.setdefault("job_image", kubecluster.JOB_IMAGE)
        kwargs.setdefault("backoff_max", 1.0)
        kwargs.setdefault("log", logging.getLogger("jupyter_quota.kube.test"))
        backend = KubeBackend(kube_cluster.kube(), **kwargs)
        made.append(backend)
        backend.start()
        assert backend.wait_synced(30), f"the cache never synced: {backend.cache.errors()}"
        return backend

    yield make
    for backend in made:
        backend.close()
