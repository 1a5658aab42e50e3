"""Team profiles: validation with the API server's words, and the objects they stand for."""

from __future__ import annotations

import pytest
from quota_testing import demo_config

from jupyter_quota.errors import InvalidRequest
from jupyter_quota.profiles import TeamProfile, load_profiles


def test_demo_profiles_load_and_match_the_issue():
    profiles = load_profiles(demo_config().JupyterQuota.profiles)
    alpha, beta = profiles["alpha"], profiles["beta"]
    assert alpha.namespace == "team-alpha" and beta.namespace == "team-beta"
    assert alpha.hard == {"requests.nvidia.com/gpu": "2", "limits.memory": "128Gi", "requests.cpu": "8"}
    (rq,) = alpha.resource_quotas()
    assert rq["kind"] == "ResourceQuota" and rq["metadata"]["namespace"] == "team-alpha"
    (lr,) = alpha.limit_ranges()
    assert lr["spec"]["limits"][0]["defaultRequest"]["cpu"] == "2"


def test_namespace_defaults_from_team():
    assert TeamProfile(team="gamma").namespace == "team-gamma"


def test_limit_range_stored_with_api_server_defaults():
    (lr,) = TeamProfile(team="x", limitRange={"limits": [{"type": "Container", "max": {"cpu": "2"}}]}).limit_ranges()
    item = lr["spec"]["limits"][0]
    assert item["default"]["cpu"] == "2" and item["defaultRequest"]["cpu"] == "2"


def test_scoped_extra_quota():
    p = TeamProfile(
        team="x",
        hard={"requests.cpu": "4"},
        extraQuotas=[
            {
                "name": "high-gpus",
                "hard": {"requests.nvidia.com/gpu": "1"},
                "scopeSelector": {
                    "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]
                },
            }
        ],
    )
    names = [q["metadata"]["name"] for q in p.resource_quotas()]
    assert names == ["team-quota", "high-gpus"]


@pytest.mark.parametrize(
    "fields, words",
    [
        ({"team": ""}, "needs a 'team'"),
        ({"team": "x", "namespace": "X"}, "a lowercase RFC 1123 label must consist of"),
        ({"team": "x", "hard": {"pods": "1.5"}}, "must be an integer"),
        ({"team": "x", "hard": {"gpus": "1"}}, "must be a standard resource for quota"),
        ({"team": "x", "hard": {"requests.memory": "-1Gi"}}, "greater than or equal to 0"),
        ({"team": "x", "scopes": ["BestEffort", "NotBestEffort"], "hard": {"pods": "1"}}, "conflicting"),
        ({"team": "x", "gpuMemory": "80 GB"}, "80 GB"),
        ({"team": "x", "hardd": {}}, "unknown profile field"),
    ],
)
def test_bad_profiles_are_refused(fields, words):
    with pytest.raises(InvalidRequest) as e:
        TeamProfile(**fields)
    assert words in e.value.message


def test_duplicate_teams_and_namespaces_are_refused():
    with pytest.raises(InvalidRequest, match="defined twice"):
        load_profiles([{"team": "a"}, {"team": "a"}])
    with pytest.raises(InvalidRequest, match="used by teams"):
        load_profiles([{"team": "a", "namespace": "n"}, {"team": "b", "namespace": "n"}])


def test_membership_by_user_or_group():
    p = TeamProfile(team="x", users=["ann"], groups=["ml"])
    assert p.has_member("ann", []) and p.has_member("bob", ["ml"]) and not p.has_member("bob", ["ops"])


def test_every_trait_has_help():
    for name, trait in TeamProfile.class_traits().items():
        assert trait.help and len(trait.help) > 20, name
