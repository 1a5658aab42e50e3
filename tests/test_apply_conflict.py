"""``profiles apply`` and the service's quota writes retry a replace that met a newer
``resourceVersion`` (409), as client-go's ``RetryOnConflict`` does: the quota controller rewrites a
ResourceQuota's status whenever a pod comes or goes (seen failing a kube-tier test)."""

from __future__ import annotations

import copy

import pytest

from jupyter_quota.backends.kube.apply import CONFLICT_TRIES, apply_quota_objects
from jupyter_quota.backends.kube.client import KubeError
from jupyter_quota.profiles import TeamProfile


class RacingKube:
    """An API server whose stored ResourceQuota moves (a status update) before the first
    ``conflicts`` replaces, which therefore answer 409."""

    def __init__(self, live: dict, conflicts: int):
        self.live, self.conflicts, self.puts = live, conflicts, 0

    def get(self, path, **query):
        return copy.deepcopy(self.live)

    def put(self, path, body, **query):
        self.puts += 1
        if body["metadata"]["resourceVersion"] != self.live["metadata"]["resourceVersion"]:
            raise KubeError(409, "Conflict", "the object has been modified")
        if self.conflicts:
            self.conflicts -= 1
            self.live["metadata"]["resourceVersion"] = str(int(self.live["metadata"]["resourceVersion"]) + 1)
            raise KubeError(409, "Conflict", "the object has been modified")
        self.live = {**copy.deepcopy(body), "status": self.live.get("status")}
        return copy.deepcopy(self.live)


def quota(hard: str, version: str = "1") -> dict:
    profile = TeamProfile(team="a", hard={"requests.nvidia.com/gpu": hard})
    (obj,) = profile.resource_quotas()
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": version}, "status": {"used": {}}}


def test_a_replace_that_met_a_newer_version_is_read_and_tried_again():
    kube = RacingKube(quota("2"), conflicts=2)
    (result,) = apply_quota_objects(TeamProfile(team="a", hard={"requests.nvidia.com/gpu": "4"}), kube)
    assert result["action"] == "updated" and kube.puts == 3
    assert kube.live["spec"]["hard"] == {"requests.nvidia.com/gpu": "4"}
    assert kube.live["status"] == {"used": {}}, "the controller's status is kept"


def test_conflicts_that_never_end_are_an_error_after_a_few_tries():
    kube = RacingKube(quota("2"), conflicts=CONFLICT_TRIES)
    with pytest.raises(KubeError, match="modified"):
        apply_quota_objects(TeamProfile(team="a", hard={"requests.nvidia.com/gpu": "4"}), kube)
    assert kube.puts == CONFLICT_TRIES
