"""The what-if replay: validated against a history recorded by stepping ``elastic.decide`` once a
minute (``recommend_history.record``), then used for what-ifs and a capacity curve."""

from __future__ import annotations

import pytest
import recommend_history as gen

from jupyter_quota import replay
from jupyter_quota.history import JobRecord
from jupyter_quota.profiles import TeamProfile

TIGHT = 10  # GPUs: the peaks of grow and deadline (6 + 7) wait for an hour and more


@pytest.fixture(scope="module")
def recorded():
    return gen.record(gen.wanted(seed=7), capacity=TIGHT)


@pytest.fixture(scope="module")
def validation(recorded):
    return replay.replay(recorded, gen.profiles(), TIGHT, gen.START, gen.UNTIL).to_json()


def show(team: dict, how: str) -> None:
    recorded_p90, replayed_p90 = team["recordedWaitP90Seconds"], team["waitP90Seconds"]
    print(
        f"{team['team']} ({how}): wait p50 recorded {team['recordedWaitP50Seconds']} s, "
        f"replayed {team['waitP50Seconds']} s; "
        f"p90 recorded {recorded_p90} s, replayed {replayed_p90} s ({replayed_p90 - recorded_p90:+d} s); "
        f"{team['jobs']} jobs, {team['refused']} refused in the replay"
    )


def test_replaying_the_history_on_the_recorders_clock_reproduces_every_recorded_wait(recorded):
    """The recorder passes on the minute (a job waits for the next tick: ~30 s at the median);
    replayed on the same clock (``aligned``), every team's waits come back to the second."""
    aligned = replay.replay(recorded, gen.profiles(), TIGHT, gen.START, gen.UNTIL, aligned=True).to_json()
    busy = 0
    for team in aligned["teams"]:
        show(team, "on the minute")
        assert team["waitP50Seconds"] == team["recordedWaitP50Seconds"], team
        assert team["waitP90Seconds"] == team["recordedWaitP90Seconds"], team
        assert team["refused"] == 0 and team["waiting"] == 0 and team["started"] == team["jobs"], team
        busy += team["recordedWaitP90Seconds"] > 1800
    assert busy == 2  # grow and deadline waited at their peaks: the validation covers real queueing


def test_replaying_the_history_under_the_recorded_quotas_reproduces_the_recorded_waits(validation):
    busy = 0
    for team in validation["teams"]:
        recorded_p90, replayed_p90 = team["recordedWaitP90Seconds"], team["waitP90Seconds"]
        # the recorder decides on the minute, the replay at the event (as the local backend's
        # loop, which wakes every reap_interval): a start differs by < 1 pass, and the median
        # wait, the recorder's tick, is 0 here
        assert abs(replayed_p90 - recorded_p90) <= max(replay.PASS_SECONDS * 2, 0.1 * recorded_p90), team
        # admission counts live jobs at the second a job arrives: a start a minute apart may tip one
        assert team["refused"] <= 0.01 * team["jobs"] and team["waiting"] == 0, team
        busy += recorded_p90 > 1800
        show(team, "at the event")
    assert busy == 2  # grow and deadline waited at their peaks: the validation covers real queueing


def test_larger_quotas_do_not_help_on_a_full_machine_but_more_gpus_do(recorded, validation):
    bigger = replay.replay(recorded, gen.profiles(), 16, gen.START, gen.UNTIL).to_json()
    before = {t["team"]: t["waitP90Seconds"] for t in validation["teams"]}
    after = {t["team"]: t["waitP90Seconds"] for t in bigger["teams"]}
    assert after["grow"] < before["grow"] / 10 and after["deadline"] < before["deadline"] / 10


def test_a_tighter_quota_refuses_jobs_and_best_effort_jobs_borrow_idle_gpus():
    day = 86400
    records = [JobRecord("a", "u", 0, 0, day, 2.0), JobRecord("a", "u", 10, 10, day, 2.0, priority="best-effort")]
    records += [JobRecord("b", "u", 0, 0, day, 1.0) for _ in range(3)]
    profiles = [
        TeamProfile(team="a", hard={gen.GPU: "2"}, borrowingLimit={gen.GPU: "2"}),
        TeamProfile(team="b", hard={gen.GPU: "2"}),
        TeamProfile(team="c", hard={gen.GPU: "2"}),  # idle: lends its 2 GPUs
    ]
    out = {t["team"]: t for t in replay.replay(records, profiles, 6, 0, day).to_json()["teams"]}
    assert out["b"]["refused"] == 1 and out["b"]["started"] == 2
    # the best-effort job starts at the next pass (one a minute) and borrows c's GPUs to the end
    borrowed = 2 * (day - replay.PASS_SECONDS) / 3600
    assert out["a"]["started"] == 2 and out["a"]["borrowedGpuHours"] == pytest.approx(borrowed, abs=0.01)


def test_a_lender_reclaims_its_quota_and_the_borrower_is_preempted():
    records = [JobRecord("a", "u", 0, 0, 7200, 2.0, priority="best-effort"), JobRecord("b", "u", 600, 600, 4200, 2.0)]
    profiles = [
        TeamProfile(team="a", hard={gen.GPU: "0"}, borrowingLimit={gen.GPU: "2"}),
        TeamProfile(team="b", hard={gen.GPU: "2"}),
    ]
    out = {t["team"]: t for t in replay.replay(records, profiles, 2, 0, 20000).to_json()["teams"]}
    assert out["a"]["preemptions"] == 1
    assert out["b"]["waitP90Seconds"] <= replay.GRACE_SECONDS + replay.PASS_SECONDS


def test_teams_without_a_profile_are_reported_not_fatal():
    records = [JobRecord("ghost", "u", 0, 0, 60, 1.0), JobRecord("a", "u", 0, 0, 60, 1.0)]
    result = replay.replay(records, [TeamProfile(team="a", hard={gen.GPU: "1"})], 1, 0, 100).to_json()
    assert result["teamsWithoutProfile"] == [{"team": "ghost", "jobs": 1}]
    assert result["teams"][0]["started"] == 1


def test_the_capacity_curve_finds_the_gpus_that_keep_every_p90_wait_under_an_hour(recorded):
    curve = replay.capacity_curve(
        recorded, gen.profiles(), gen.START, gen.UNTIL, [8, 10, 12, 14], gpu_hour=2.5, currency="EUR"
    )
    waits = [p["worstWaitP90Seconds"] for p in curve["points"]]
    assert waits == sorted(waits, reverse=True) and waits[0] > 3600
    assert curve["gpusForWaitTarget"] in (10, 12, 14)
    chosen = next(p for p in curve["points"] if p["gpus"] == curve["gpusForWaitTarget"])
    assert chosen["worstWaitP90Seconds"] <= 3600
    assert curve["points"][0]["cost"] == round(8 * (gen.UNTIL - gen.START) / 3600 * 2.5, 2)
