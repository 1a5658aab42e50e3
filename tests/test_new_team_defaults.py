"""Conservative defaults (issue 13, item 5): a team an admin creates without a quota starts small."""

from __future__ import annotations

import pytest
from quota_testing import HeaderIdentityProvider

from jupyter_quota.config import JupyterQuota

ADMIN = "ada"
GPU = "requests.nvidia.com/gpu"


@pytest.fixture
def extra_quota_config():
    return {"admin_users": [ADMIN]}


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config.ServerApp.identity_provider_class = HeaderIdentityProvider
    return jp_server_config


async def test_a_new_team_without_hard_gets_the_small_default_profile_and_its_members_see_it(api):
    status, stored = await api("PUT", "profiles", "gamma", body={"users": ["gus"]}, user=ADMIN)
    assert status == 200, stored
    defaults = JupyterQuota().new_team_defaults
    assert stored["hard"] == defaults["hard"] == {GPU: "1", "requests.cpu": "8", "requests.memory": "32Gi"}
    status, balance = await api("GET", "namespaces", "team-gamma", "balance", user="gus")
    assert status == 200
    assert {k: v["hard"] for k, v in balance["resources"].items()} == defaults["hard"]
    # the LimitRange gives a job that names no CPU or memory a request, so the quota admits it
    status, job = await api("POST", "namespaces", "team-gamma", "jobs", body={"args": ["--sleep", "0"]}, user="gus")
    assert status == 201, job


async def test_what_the_admin_gives_wins_even_an_empty_quota(api):
    status, stored = await api("PUT", "profiles", "delta", body={"hard": {GPU: "4"}}, user=ADMIN)
    assert status == 200 and stored["hard"] == {GPU: "4"}
    assert stored["limitRange"] == JupyterQuota().new_team_defaults["limitRange"]  # left out: defaulted
    status, stored = await api("PUT", "profiles", "epsilon", body={"hard": {}, "limitRange": {}}, user=ADMIN)
    assert status == 200 and (stored["hard"], stored["limitRange"]) == ({}, {})


async def test_an_edit_of_an_existing_team_is_taken_as_given(api):
    _, beta = await api("GET", "profiles", "beta", user=ADMIN)
    del beta["hard"]
    status, stored = await api("PUT", "profiles", "beta", body=beta, user=ADMIN)
    assert status == 200 and stored["hard"] == {}  # as before: no defaults for a team that exists


def test_defaults_that_are_not_a_valid_profile_are_a_config_error():
    with pytest.raises(ValueError, match=r"new_team_defaults is not a valid profile: .*requests.cpu"):
        JupyterQuota(new_team_defaults={"hard": {"requests.cpu": "lots"}})
    assert JupyterQuota(new_team_defaults={}).new_team_defaults == {}


async def test_a_put_without_a_body_is_a_400_not_a_team_of_defaults(api):
    # the OpenAPI file says the body is required (issue 25 item 11: schemathesis found it accepted)
    status, refused = await api("PUT", "profiles", "epsilon", user=ADMIN)
    assert status == 400 and "the body must be the team's profile" in refused["message"], refused
    status, _ = await api("GET", "profiles", "epsilon", user=ADMIN)
    assert status == 404


async def test_a_submit_or_an_increase_request_without_a_body_is_a_400(api):
    status, refused = await api("POST", "namespaces", "team-alpha", "jobs", user=ADMIN)
    assert status == 400 and "needs a JSON body" in refused["message"], refused
    status, refused = await api("POST", "namespaces", "team-alpha", "increases", user=ADMIN)
    assert status == 400 and "needs a JSON body" in refused["message"], refused
