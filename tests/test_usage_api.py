"""``GET /usage`` and ``GET /chargeback`` on a real server over a seeded week (``usage_seed.py``).

The week's usage by team and by user must add up to the ledger's own totals, computed here from
its rows (both ``jobs`` and ``job_history``) without ``jupyter_quota.usage``. The CSVs and the
chargeback table are written under ``$JUPYTER_QUOTA_TEST_OUTPUT`` when it is set.
"""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
import usage_seed
from openapi_contract import assert_matches
from quota_testing import HeaderIdentityProvider

from jupyter_quota.profiles import TeamProfile

PRICES = {"currency": "EUR", "gpuHour": 2.5, "cpuHour": 0.04, "memoryGibHour": 0.005}
SINCE, UNTIL = "2026-11-16T00:00:00Z", "2026-11-23T00:00:00Z"
WEEK = {"since": SINCE, "until": UNTIL}


@pytest.fixture
def extra_quota_config():
    return {"admin_users": ["ada"], "prices": PRICES}


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config.ServerApp.identity_provider_class = HeaderIdentityProvider
    profiles = jp_server_config.JupyterQuota.profiles
    profiles[0] = {**profiles[0], "users": [*profiles[0]["users"], "carl", "dora"]}
    profiles[1] = {**profiles[1], "users": ["beta-user", "bea"]}
    return jp_server_config


@pytest.fixture
def seeded(jp_server_config, quota_state):
    """The week, half of it pruned into job_history, before the server starts."""
    profiles = [TeamProfile(**p) for p in jp_server_config.JupyterQuota.profiles]
    usage_seed.seed(quota_state, profiles, jobs=400, running=False)
    assert usage_seed.prune(quota_state, keep_count=100) > 0
    return usage_seed.ledger_totals(quota_state / "ledger.sqlite3", SINCE, UNTIL)


def as_csv(answer: dict, columns: list[str]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(answer["rows"])
    writer.writerow({columns[0]: "total", **answer["totals"]})
    return out.getvalue()


FIGURES = ["gpuSeconds", "cpuSeconds", "memoryGibSeconds"]


async def test_a_seeded_weeks_usage_by_team_and_by_user_adds_up_to_the_ledgers_totals(seeded, api):
    status, by_team = await api("GET", "usage", user="ada", params={**WEEK, "by": "team"})
    assert status == 200, by_team
    status, by_user = await api("GET", "usage", user="ada", params={**WEEK, "by": "user"})
    assert status == 200, by_user
    usage_seed.save("usage-week-by-team.csv", as_csv(by_team, ["namespace", "team", *FIGURES, "cost"]))
    usage_seed.save("usage-week-by-user.csv", as_csv(by_user, ["namespace", "team", "user", *FIGURES, "cost"]))

    assert {(r["team"], r["user"]) for r in by_user["rows"]} == set(seeded) and len(seeded) == 5
    for i, figure in enumerate(FIGURES):
        ledger = sum(f[i] for f in seeded.values())
        assert by_team["totals"][figure] == by_user["totals"][figure] == pytest.approx(float(ledger), abs=1e-3)
        for row in by_user["rows"]:
            assert row[figure] == pytest.approx(float(seeded[row["team"], row["user"]][i]), abs=1e-3)
        for row in by_team["rows"]:
            mine = sum(f[i] for (team, _), f in seeded.items() if team == row["team"])
            assert row[figure] == pytest.approx(float(mine), abs=1e-3)
    for answer in (by_team, by_user):  # costs to the cent: the total is the sum of the rows
        assert Decimal(str(answer["totals"]["cost"])) == sum(Decimal(str(r["cost"])) for r in answer["rows"])
    assert by_team["prices"] == PRICES and by_team["step"] is None
    assert_matches("UsageReport", by_team)
    assert_matches("UsageReport", by_user)


async def test_the_chargeback_of_the_month_adds_up_and_downloads_as_csv(seeded, quota_state, api, jp_fetch):
    status, report = await api("GET", "chargeback", user="ada", params={"month": "2026-11"})
    assert status == 200, report
    assert_matches("Chargeback", report)
    assert [r["team"] for r in report["rows"]] == ["alpha", "beta"]
    for column in ("gpuCost", "cpuCost", "memoryCost", "cost"):
        assert Decimal(str(report["totals"][column])) == sum(Decimal(str(r[column])) for r in report["rows"])
    month = usage_seed.ledger_totals(quota_state / "ledger.sqlite3", "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z")
    assert report["totals"]["gpuHours"] == pytest.approx(float(sum(f[0] for f in month.values()) / 3600), abs=1e-3)
    response = await jp_fetch(
        "quota", "v1", "chargeback", params={"month": "2026-11", "format": "csv"}, headers={"X-Test-User": "ada"}
    )
    assert response.headers["Content-Disposition"] == "attachment; filename=chargeback-2026-11.csv"
    assert response.headers["Content-Type"] == "text/csv; charset=utf-8"
    text = response.body.decode()
    usage_seed.save("chargeback-2026-11.csv", text)
    lines = list(csv.DictReader(io.StringIO(text)))
    assert [line["team"] for line in lines] == ["alpha", "beta", ""] and lines[-1]["namespace"] == "total"
    assert Decimal(lines[-1]["cost"]) == Decimal(lines[0]["cost"]) + Decimal(lines[1]["cost"])


async def test_a_user_sees_only_their_teams_usage(seeded, api):
    status, mine = await api("GET", "usage", user="bea", params={**WEEK, "by": "job"})
    assert status == 200
    assert {r["namespace"] for r in mine["rows"]} == {"team-beta"}
    assert all(r["job"] and r["user"] for r in mine["rows"])
    assert_matches("UsageReport", mine)
    status, refused = await api("GET", "usage", user="bea", params={**WEEK, "namespace": "team-alpha"})
    assert (status, refused["reason"]) == (403, "Forbidden")
    assert 'may not use namespace "team-alpha"' in refused["message"]
    status, refused = await api("GET", "chargeback", user="bea")
    assert status == 403 and "the chargeback is for JupyterHub admins" in refused["message"]


async def test_usage_in_buckets_adds_up_to_the_window(seeded, api):
    params = {**WEEK, "namespace": "team-alpha"}
    _, whole = await api("GET", "usage", user="carl", params=params)
    status, daily = await api("GET", "usage", user="carl", params={**params, "step": "86400"})
    assert status == 200 and daily["step"] == 86400
    assert_matches("UsageReport", daily)
    assert {r["start"] for r in daily["rows"]} == {f"2026-11-{d}T00:00:00Z" for d in range(16, 23)}
    assert sum(r["gpuSeconds"] for r in daily["rows"]) == pytest.approx(whole["totals"]["gpuSeconds"], abs=1e-3)


@pytest.mark.parametrize(
    "params, says",
    [
        ({"since": UNTIL, "until": SINCE}, "must be before until"),
        ({"since": "last week"}, "since must be an RFC 3339 time"),
        ({"by": "owner"}, "by must be one of team, user, job"),
        ({"step": "1"}, "at most 1000 are returned: use step >= 87"),
    ],
)
async def test_bad_usage_parameters_are_a_400_that_says_what_to_fix(api, params, says):
    status, refused = await api("GET", "usage", params=params)
    assert status == 400 and says in refused["message"], refused


@pytest.mark.parametrize("params", [{"month": "2026-13"}, {"format": "xlsx"}])
async def test_bad_chargeback_parameters_are_a_400(api, params):
    status, refused = await api("GET", "chargeback", user="ada", params=params)
    assert status == 400 and refused["reason"] == "BadRequest", refused


@pytest.mark.parametrize(
    "params",
    [
        {"until": "9999-12-31T23:59:59-14:00"},
        {"until": "0001-01-01T00:00:00Z"},
        {"since": "\uff12\uff10\uff12\uff16-11-16T00:00:00Z", "until": UNTIL},
    ],
)
async def test_times_out_of_range_are_a_400_for_any_user(api, params):
    status, refused = await api("GET", "usage", params=params)
    assert status == 400 and refused["reason"] == "BadRequest", refused


@pytest.mark.parametrize("month", ["0000-01", "9999-12", "\uff12\uff10\uff12\uff16-\uff11\uff11", ""])
@pytest.mark.parametrize("form", ["json", "csv"])
async def test_a_chargeback_month_out_of_range_or_empty_is_a_400(api, month, form):
    status, refused = await api("GET", "chargeback", user="ada", params={"month": month, "format": form})
    assert status == 400 and "month must be YYYY-MM" in refused["message"], refused


async def test_usage_since_year_999_counts_the_whole_seeded_week(seeded, api):
    status, week = await api("GET", "usage", user="ada", params=WEEK)
    since_999 = {"since": "0999-01-01T00:00:00Z", "until": UNTIL}
    status_999, since_999 = await api("GET", "usage", user="ada", params=since_999)
    assert status == status_999 == 200, since_999
    assert since_999["since"] == "0999-01-01T00:00:00Z"
    assert since_999["totals"]["gpuSeconds"] == week["totals"]["gpuSeconds"] > 0


async def test_usage_by_job_in_small_buckets_is_a_400_with_a_step_that_fits(seeded, api, monkeypatch):
    from jupyter_quota import usage

    monkeypatch.setattr(usage, "MAX_ROWS", 1000)  # the week has 400 jobs
    status, refused = await api("GET", "usage", user="ada", params={**WEEK, "by": "job", "step": "605"})
    assert status == 400 and refused["reason"] == "BadRequest", refused
    assert "more than 1000 rows" in refused["message"], refused
    fitting = refused["message"].split("step >= ")[1].split()[0].rstrip(",;")
    status, answer = await api("GET", "usage", user="ada", params={**WEEK, "by": "job", "step": fitting})
    assert status == 200 and 0 < len(answer["rows"]) <= 1000, answer.get("message")
