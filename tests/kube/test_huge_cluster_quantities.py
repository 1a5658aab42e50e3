"""Huge quantities written straight into a real cluster (as ``kubectl`` would) are read bounded.

The kube-apiserver stores a ResourceQuota ``hard`` of ``1e200000`` or of 100,000 digits; the
backend's balance, submit pre-check and job list answer with such a value counted as 2^63-1
(``backends/kube/bounded.py``), and the normal values stay exact. ``tests/test_kube_bounds.py``
covers the same at the pure level, objects fed to the watch cache.
"""

from __future__ import annotations

import kubecluster
from test_kube_backend import GPU_KEY, build, setup_team, wait

from jupyter_quota import bounds
from jupyter_quota.backends.kube.client import ns_path

BOUND = str(bounds.MAX_QUANTITY)
#: Requests for every container, which a quota on requests.cpu and requests.memory asks for
DEFAULTS = {
    "limits": [
        {"type": "Container", "default": {"cpu": "1", "memory": "1Gi"}, "defaultRequest": {"cpu": "1", "memory": "1Gi"}}
    ]
}


def test_a_quota_past_int64_written_into_the_cluster_reads_as_the_bound(kube, namespace_name, make_kube_backend):
    profile = setup_team(kube, namespace_name, limitRange=DEFAULTS)
    quota_path = ns_path(namespace_name, "resourcequotas", "team-quota")
    kube.patch(quota_path, {"spec": {"hard": {"requests.cpu": "1e200000", "requests.memory": "9" * 100_000}}})
    kubecluster.wait_quota_status(kube, namespace_name)
    backend = make_kube_backend()

    def huge_balance():
        resources = backend.balance(profile)["resources"]
        return resources if resources.get("requests.memory", {}).get("hard") == BOUND else None

    resources = wait(huge_balance, what="the huge quota in the balance")
    assert resources["requests.cpu"]["hard"] == BOUND
    assert resources[GPU_KEY] == {"hard": "2", "used": "0", "remaining": "2"}

    created = backend.submit(profile, build(backend, profile, "fits"), "alice")  # the pre-check reads the quota
    assert created["phase"] == "Pending"
    listed = wait(lambda: backend.page_jobs(profile, 10).items, what="the job in the list")
    assert [job["name"] for job in listed] == [created["name"]]
    used = wait(
        lambda: backend.balance(profile)["resources"][GPU_KEY]["used"] == "1" and backend.balance(profile)["resources"],
        what="the job's GPU charged",
    )
    assert used["requests.memory"]["hard"] == BOUND
