"""Who sees what: members their teams, admins everything, profiles changed only by admins."""

from __future__ import annotations

import getpass
import json

import pytest
from quota_testing import HeaderIdentityProvider


@pytest.fixture
def extra_quota_config():
    return {"admin_users": ["ada"], "groups": {"ml-beta": ["bea"]}}


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config.ServerApp.identity_provider_class = HeaderIdentityProvider
    # Membership by group outside a hub: beta also admits group ml-beta.
    profiles = jp_server_config.JupyterQuota.profiles
    profiles[1] = {**profiles[1], "groups": ["ml-beta"]}
    profiles[0] = {**profiles[0], "users": [*profiles[0]["users"], "carl"]}
    return jp_server_config


async def test_each_user_sees_only_their_teams(api):
    _, bea = await api("GET", "namespaces", user="bea")
    assert [n["name"] for n in bea["namespaces"]] == ["team-beta"]
    _, stranger = await api("GET", "namespaces", user="mallory")
    assert stranger["namespaces"] == []
    status, _ = await api("GET", "namespaces", "team-alpha", "balance", user="bea")
    assert status == 403


async def test_admin_sees_all_and_changes_a_profile(api):
    _, ada = await api("GET", "namespaces", user="ada")
    assert [n["name"] for n in ada["namespaces"]] == ["team-alpha", "team-beta"]
    status, profiles = await api("GET", "profiles", user="ada")
    assert status == 200 and [p["team"] for p in profiles["profiles"]] == ["alpha", "beta"]
    beta = next(p for p in profiles["profiles"] if p["team"] == "beta")
    beta["hard"] = {**beta["hard"], "requests.nvidia.com/gpu": "3"}
    status, stored = await api("PUT", "profiles", "beta", body=beta, user="ada")
    assert status == 200, stored
    _, balance = await api("GET", "namespaces", "team-beta", "balance", user="bea")
    assert balance["resources"]["requests.nvidia.com/gpu"]["hard"] == "3"


@pytest.mark.parametrize(
    "change, words",
    [
        ({"hard": {"pods": "1.5"}}, "must be an integer"),
        ({"hard": {"gpu": "1"}}, "must be a standard resource for quota"),
        ({"hard": {"requests.cpu": "lots"}}, "lots"),
        ({"namespace": "Team_Beta"}, "a lowercase RFC 1123 label must consist of"),
        ({"namespace": "team-alpha"}, "team-alpha"),
        ({"colour": "blue"}, "unknown profile field"),
        (
            {"volumes": [{"name": "home", "mountPath": "home", "emptyDir": {}}]},
            'volumes[0].mountPath: Invalid value: "home": must be an absolute path',
        ),
        (
            {
                "volumes": [
                    {"name": "home", "mountPath": "/home", "persistentVolumeClaim": {"claimName": "Claim-{username}"}}
                ]
            },
            "which is not a PersistentVolumeClaim name",
        ),
    ],
)
async def test_bad_profile_is_refused_and_nothing_changes(api, change, words):
    _, profile = await api("GET", "profiles", "beta", user="ada")
    status, answer = await api("PUT", "profiles", "beta", body={**profile, **change}, user="ada")
    assert status == 400, answer
    assert words in answer["message"], answer["message"]
    _, after = await api("GET", "profiles", "beta", user="ada")
    assert after == profile


async def test_only_the_owner_or_an_admin_cancels(api):
    status, job = await api(
        "POST",
        "namespaces",
        "team-alpha",
        "jobs",
        body={"name": "mine", "args": ["--sleep", "30"], "gpus": 0},
        user="carl",
    )
    assert status == 201 and job["owner"] == "carl", job
    status, answer = await api("DELETE", "namespaces", "team-alpha", "jobs", "mine", user=getpass.getuser())
    assert status == 403 and "belongs to carl" in answer["message"]
    status, answer = await api("DELETE", "namespaces", "team-alpha", "jobs", "mine", user="ada")
    assert status == 200 and answer["name"] == "mine"


async def test_profile_change_survives_a_restart(api, quota_state):
    _, profile = await api("GET", "profiles", "alpha", user="ada")
    profile["hard"]["requests.cpu"] = "12"
    assert (await api("PUT", "profiles", "alpha", body=profile, user="ada"))[0] == 200
    stored = json.loads((quota_state / "profiles.json").read_text())
    assert stored["alpha"]["hard"]["requests.cpu"] == "12"


async def test_unenforced_quota_keys_come_back_as_warnings(api):
    _, profile = await api("GET", "profiles", "beta", user="ada")
    profile["hard"] = {"nvidia.com/gpu": "2", "limits.nvidia.com/gpu": "2", "requests.cpu": "8"}
    status, stored = await api("PUT", "profiles", "beta", body=profile, user="ada")
    assert status == 200, stored  # Kubernetes accepts these keys ...
    _, balance = await api("GET", "namespaces", "team-beta", "balance", user="bea")
    flagged = {w["resource"]: w["message"] for w in balance["warnings"]}
    assert set(flagged) == {"nvidia.com/gpu", "limits.nvidia.com/gpu"}  # ... and never enforces them
    assert all("requests.nvidia.com/gpu" in m for m in flagged.values()), flagged
    status, _ = await api("POST", "namespaces", "team-beta", "jobs", body={"args": [], "gpus": 4}, user="bea")
    assert status == 201, "no enforced GPU quota, so the API server would admit it too"
