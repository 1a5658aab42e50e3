"""``GET /recommendations`` and ``POST /replay`` on a real server over a seeded week (``usage_seed``)."""

from __future__ import annotations

import time

import pytest
import usage_seed
from openapi_contract import assert_matches
from quota_testing import HeaderIdentityProvider

from jupyter_quota import usage
from jupyter_quota.profiles import TeamProfile

WEEK_START = int(time.time()) - 8 * 86400  # within the 28 days a recommendation reads
SINCE, UNTIL = usage.format_time(WEEK_START), usage.format_time(WEEK_START + 7 * 86400)


@pytest.fixture
def extra_quota_config():
    return {"admin_users": ["ada"], "prices": {"currency": "EUR", "gpuHour": 2.5}}


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config.ServerApp.identity_provider_class = HeaderIdentityProvider
    profiles = jp_server_config.JupyterQuota.profiles
    profiles[1] = {**profiles[1], "users": ["beta-user", "bea"]}
    return jp_server_config


@pytest.fixture
def seeded(jp_server_config, quota_state):
    profiles = [TeamProfile(**p) for p in jp_server_config.JupyterQuota.profiles]
    usage_seed.seed(quota_state, profiles, jobs=300, running=False, week_start=WEEK_START)
    return profiles


@pytest.fixture
def recommender(jp_serverapp):
    return jp_serverapp.web_app.settings["jupyter_quota_service"].recommender


async def test_an_admin_sees_every_teams_recommendation_and_a_member_only_their_own(seeded, api):
    status, everyone = await api("GET", "recommendations", user="ada")
    assert status == 200, everyone
    assert_matches("RecommendationList", everyone)
    assert {r["team"] for r in everyone["recommendations"]} == {p.team for p in seeded}
    assert all(r["waitP90Seconds"] is not None for r in everyone["recommendations"])  # the ledger's jobs were read
    status, mine = await api("GET", "recommendations", user="bea")
    assert status == 200 and {r["team"] for r in mine["recommendations"]} == {"beta"}
    assert "teamsWithoutProfile" not in mine
    assert_matches("RecommendationList", mine)


async def test_a_replay_under_a_proposed_profile_answers_per_team_and_a_capacity_curve(seeded, api):
    proposed = [{**seeded[0].to_json(), "hard": {**seeded[0].hard, "requests.nvidia.com/gpu": "1"}}]
    status, out = await api("POST", "replay", user="ada", body={"profiles": proposed, "since": SINCE, "until": UNTIL})
    assert status == 200, out
    assert_matches("Replay", out)
    assert {t["team"] for t in out["teams"]} == {p.team for p in seeded}
    assert sum(t["jobs"] for t in out["teams"]) > 0 and out["curve"]["currency"] == "EUR"


async def test_only_admins_replay(seeded, api):
    status, refused = await api("POST", "replay", user="bea", body={"profiles": [seeded[1].to_json()]})
    assert (status, refused["reason"]) == (403, "Forbidden") and "replays are for JupyterHub admins" in refused[
        "message"
    ]


@pytest.mark.parametrize(
    "body, says",
    [
        ({"profiles": [{"team": "alpha", "hard": {"requests.nvidia.com/gpu": "lots"}}]}, "profile 'alpha'"),
        ({"profiles": []}, '"profiles" must be a non-empty list'),
        (
            {"profiles": [{"team": "alpha"}], "since": "2020-01-01T00:00:00Z", "until": "2020-01-08T00:00:00Z"},
            "nothing to replay",
        ),
        (
            {"profiles": [{"team": "alpha"}], "since": "2020-01-01T00:00:00Z", "until": "2021-01-01T00:00:00Z"},
            "at most 92 days",
        ),
        ({"profiles": [{"team": "alpha"}], "gpus": 0}, '"gpus" must be a whole number'),
        ({"profiles": [{"team": "alpha"}], "speed": 2}, "unknown field(s) speed"),
    ],
)
async def test_bad_replays_are_a_400_that_says_what_to_fix(seeded, api, body, says):
    status, refused = await api("POST", "replay", user="ada", body=body)
    assert status == 400 and says in refused["message"], refused


async def test_a_replay_too_large_is_refused_before_any_work(seeded, api, recommender):
    recommender.max_replay_jobs = 10
    status, refused = await api(
        "POST", "replay", user="ada", body={"profiles": [seeded[0].to_json()], "since": SINCE, "until": UNTIL}
    )
    assert status == 400 and "a replay takes at most 10 (Recommendations.max_replay_jobs)" in refused["message"], (
        refused
    )


async def test_a_second_replay_while_one_runs_is_a_429(seeded, api, recommender):
    assert recommender._busy.acquire(blocking=False)  # a replay in progress
    try:
        status, refused = await api("POST", "replay", user="ada", body={"profiles": [seeded[0].to_json()]})
    finally:
        recommender._busy.release()
    assert (status, refused["reason"]) == (429, "TooManyRequests"), refused


async def test_series_true_adds_each_rows_demand_over_time_and_plain_rows_stay_as_they_were(seeded, api):
    status, plain = await api("GET", "recommendations", user="bea")
    assert status == 200 and all("series" not in r for r in plain["recommendations"])
    status, plotted = await api("GET", "recommendations", user="bea", params={"series": "true"})
    assert status == 200, plotted
    assert_matches("RecommendationList", plotted)
    assert [{k: v for k, v in r.items() if k != "series"} for r in plotted["recommendations"]] == plain[
        "recommendations"
    ]
    gpu = next(r for r in plotted["recommendations"] if r["resource"] == "requests.nvidia.com/gpu")
    series = gpu["series"]
    assert series["quota"] == float(gpu["current"]) and series["unit"] == "GPUs"
    assert len(series["demand"]) == 28 * 12 and max(series["demand"]) > 0  # the seeded week shows


async def test_series_other_than_true_or_false_is_a_400(seeded, api):
    status, refused = await api("GET", "recommendations", user="bea", params={"series": "yes"})
    assert status == 400 and "series must be true or false" in refused["message"], refused


async def test_a_profile_edit_such_as_an_applied_recommendation_is_audited_and_a_refused_one_is_not(seeded, api):
    alpha = seeded[0].to_json()
    old = alpha["hard"]["requests.nvidia.com/gpu"]
    status, refused = await api(
        "PUT", "profiles", "alpha", user="ada", body={**alpha, "hard": {"requests.nvidia.com/gpu": "lots"}}
    )
    assert status == 400, refused
    applied = {**alpha, "hard": {**alpha["hard"], "requests.nvidia.com/gpu": "3"}}
    status, saved = await api("PUT", "profiles", "alpha", user="ada", body=applied)
    assert status == 200, saved
    assert_matches("Profile", saved)
    assert isinstance(saved["warnings"], list)  # the Apply shows them (issue 25's overcommit warning)
    _, log = await api("GET", "audit", user="ada")
    edits = [e for e in log["entries"] if e["action"] == "profile.replaced"]
    assert [(e["who"], e["target"], e["detail"]) for e in edits] == [
        ("ada", "profile/alpha", f"hard requests.nvidia.com/gpu {old} -> 3")
    ]


class _SpansOnly:
    """The backend as Kubernetes' is for history: usage spans, no job records (no submission times)."""

    def __init__(self, backend):
        self._backend = backend

    def usage_spans(self, since, until, namespaces=None):
        return self._backend.usage_spans(since, until, namespaces)

    def __getattr__(self, name):
        if name == "job_records":
            raise AttributeError(name)
        return getattr(self._backend, name)


async def test_a_history_of_usage_spans_says_its_waits_are_not_recorded_instead_of_zero(
    seeded, api, recommender, monkeypatch
):
    monkeypatch.setattr(recommender, "backend", _SpansOnly(recommender.backend))
    status, out = await api("GET", "recommendations", user="ada")
    assert status == 200, out
    assert_matches("RecommendationList", out)
    rows = out["recommendations"]
    assert rows and all(r["waitP90Seconds"] is None for r in rows), rows
    assert all("p90 wait not recorded (this history is usage spans" in r["explanation"] for r in rows), rows
