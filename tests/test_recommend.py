"""The recommender on a generated 8-week history whose true demand is known (``recommend_history``)."""

from __future__ import annotations

import pytest
import recommend_history as gen

from jupyter_quota import demand, recommend
from jupyter_quota.history import JobRecord
from jupyter_quota.times import rfc3339

SETTINGS = recommend.Settings()
SINCE = gen.UNTIL - 28 * 86400


@pytest.fixture(scope="module")
def recorded():
    return gen.record(gen.wanted(seed=7))


def true_p90(team: str) -> float:
    """The weighted P90 of the team's need itself, hour by hour, weighed as the recommender weighs."""
    hours = [
        JobRecord(
            team, "u", gen.START + i * 3600, gen.START + i * 3600, gen.START + (i + 1) * 3600, float(gen.need(team, i))
        )
        for i in range(gen.HOURS)
    ]
    step = demand.demand(hours, SINCE, gen.UNTIL, lambda r: r.gpus)
    return recommend.weighted_percentiles(step, SETTINGS.half_life_hours * 3600, [SETTINGS.percentile])[0]


def row_of(records, team: str, hard: str | None = None) -> dict:
    hard = hard or str(gen.QUOTAS[team])
    mine = [r for r in records if r.team == team]
    (row,) = recommend.recommend_team(team, f"team-{team}", {gen.GPU: hard}, "nvidia.com/gpu", mine, SINCE, gen.UNTIL)
    return row


@pytest.mark.parametrize("team", ["grow", "deadline", "idle"])
def test_the_recommendation_recovers_the_true_p90_demand_within_ten_percent_and_its_bounds_hold_it(recorded, team):
    truth = true_p90(team)
    row = row_of(recorded, team)
    found = float(row["demandP90"])
    assert abs(found - truth) <= 0.1 * truth, (team, found, truth)
    target = truth * (1 + SETTINGS.margin)  # what a perfect recommender would recommend
    assert float(row["lower"]) <= target <= float(row["upper"]), row
    assert float(row["lower"]) <= float(row["recommended"]) <= float(row["upper"]), row


def test_the_generated_teams_differ_as_designed(recorded):
    # the growing team's recent need is its peak, the deadline team's P90 is its Thursday-Friday peak
    assert true_p90("grow") == 6 and true_p90("deadline") == 7 and true_p90("idle") == 0
    assert row_of(recorded, "grow")["recommended"] == "7"  # 6 x 1.15 = 6.9, rounded up to whole GPUs
    assert row_of(recorded, "idle")["idleShare"] > 0.95


def test_a_quota_below_demand_shows_how_often_demand_exceeded_it_in_working_hours_in_words(recorded):
    row = row_of(recorded, "deadline", hard="3")
    # the deadline peak (7 GPUs) runs Thursday and Friday 08-20 UTC: 18 of the 45 working hours
    # (Monday to Friday 09-18 UTC) a week
    assert row["exceededShare"] == pytest.approx(18 / 45, abs=0.02)
    share = round(100 * row["exceededShare"])
    assert row["explanation"].startswith(
        f"in the last 28 days deadline needed more than 3 GPUs {share}% of working hours (Mon-Fri 09:00-18:00 UTC); "
    )


@pytest.mark.parametrize(
    ("hours", "timezone", "share", "words"),
    [
        # every hour: 24 of 168 hours a week
        ("", "UTC", 24 / 168, "of the time; "),
        # 09-18 in New York (UTC-5 in November) is 14-23 UTC: the peak covers 6 of its 9 hours
        ("09:00-18:00", "America/New_York", 12 / 45, "of working hours (Mon-Fri 09:00-18:00 America/New_York); "),
    ],
)
def test_working_hours_are_configured_hours_in_a_timezone_or_every_hour(recorded, hours, timezone, share, words):
    settings = recommend.Settings(working=recommend.working_hours(hours=hours, timezone=timezone))
    mine = [r for r in recorded if r.team == "deadline"]
    (row,) = recommend.recommend_team(
        "deadline", "team-deadline", {gen.GPU: "3"}, "nvidia.com/gpu", mine, SINCE, gen.UNTIL, settings
    )
    assert row["exceededShare"] == pytest.approx(share, abs=0.02)
    assert f"needed more than 3 GPUs {round(100 * row['exceededShare'])}% {words}" in row["explanation"]


def test_a_window_without_working_hours_judges_no_share():
    saturday = gen.START + 5 * 86400
    records = [JobRecord("a", "u", saturday, saturday, saturday + 7200, 4.0)]
    (row,) = recommend.recommend_team(
        "a", "team-a", {gen.GPU: "2"}, "nvidia.com/gpu", records, saturday, saturday + 86400
    )
    assert row["exceededShare"] is None
    assert "a had no working hours (Mon-Fri 09:00-18:00 UTC) to judge its quota of 2 GPUs by;" in row["explanation"]


def test_bounds_widen_when_the_history_is_short(recorded):
    mine = [r for r in recorded if r.team == "deadline"]
    since = gen.UNTIL - 3 * 86400
    short = recommend.recommend_team(
        "deadline",
        "team-deadline",
        {gen.GPU: "10"},
        "nvidia.com/gpu",
        [r for r in mine if r.submitted >= since],
        since,
        gen.UNTIL,
    )[0]
    full = row_of(recorded, "deadline")
    assert float(short["upper"]) - float(short["recommended"]) > float(full["upper"]) - float(full["recommended"])


def test_demand_counts_waiting_and_never_started_jobs_until_the_history_ends():
    records = [
        JobRecord("a", "u", 0, 100, 200, 2.0),  # waited 100 s, ran 100 s
        JobRecord("a", "u", 50, None, None, 1.0),  # never started: asks until the end
    ]
    step = demand.demand(records, 0, 400, lambda r: r.gpus)
    assert list(step.segments()) == [(0, 50, 2.0), (50, 200, 3.0), (200, 400, 1.0)]
    held = demand.demand(records, 0, 400, lambda r: r.gpus, running=True)
    assert list(held.segments()) == [(0, 100, 0.0), (100, 200, 2.0), (200, 400, 0.0)]


def test_the_weighted_percentile_weighs_recent_time_more():
    # 0 GPUs for 9 days, then 4 GPUs for the last day: with a 1-day half-life the last day weighs half
    records = [JobRecord("a", "u", 9 * 86400, 9 * 86400, 10 * 86400, 4.0)]
    step = demand.demand(records, 0, 10 * 86400, lambda r: r.gpus)
    assert recommend.weighted_percentiles(step, 86400, [0.4, 0.6]) == [0.0, 4.0]
    assert recommend.weighted_percentiles(step, 1e9, [0.6, 0.95]) == [0.0, 4.0]  # no decay: 10% at 4


def test_a_rows_series_shows_each_buckets_peak_of_demand_and_of_what_ran_beside_the_quota():
    hour, t0 = 3600, 1_700_000_000 - 1_700_000_000 % 3600
    records = [
        # 2 GPUs asked 00:30, started 01:30, done 02:15: demand 2 from 00:30, held from 01:30
        JobRecord("a", "u", t0 + hour // 2, t0 + 3 * hour // 2, t0 + 9 * hour // 4, 2.0),
        # 3 GPUs asked for 10 minutes in the fourth hour and refused: a peak a mean would hide
        JobRecord("a", "u", t0 + 3 * hour, t0 + 3 * hour, t0 + 3 * hour + 600, 3.0),
    ]
    (row,) = recommend.recommend_team(
        "a", "team-a", {gen.GPU: "2"}, "nvidia.com/gpu", records, t0, t0 + 5 * hour, series=True
    )
    assert row["series"] == {
        "since": rfc3339(t0),
        "step": hour,
        "unit": "GPUs",
        "quota": 2.0,
        "demand": [2.0, 2.0, 2.0, 3.0, 0.0],
        "held": [0.0, 2.0, 2.0, 3.0, 0.0],
    }
    (plain,) = recommend.recommend_team("a", "team-a", {gen.GPU: "2"}, "nvidia.com/gpu", records, t0, t0 + 5 * hour)
    assert "series" not in plain and plain == {k: v for k, v in row.items() if k != "series"}


def test_a_series_of_four_weeks_has_at_most_400_points_of_whole_hours(recorded):
    row = recommend.recommend_team(
        "grow",
        "team-grow",
        {gen.GPU: "4"},
        "nvidia.com/gpu",
        [r for r in recorded if r.team == "grow"],
        SINCE,
        gen.UNTIL,
        series=True,
    )[0]
    series = row["series"]
    assert series["step"] == 2 * 3600 and len(series["demand"]) == len(series["held"]) == 28 * 12
    # the peaks bound the percentile the row reports, and what ran never exceeds what was asked
    assert max(series["demand"]) >= float(row["demandP90"])
    assert all(h <= d for h, d in zip(series["held"], series["demand"], strict=True))
