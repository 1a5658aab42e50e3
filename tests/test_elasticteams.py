"""``elasticteams.team``: a profile as the elastic policy counts it, for the local backend's pass
(its profiles' hard quota already effective) and the replay (its windows' extra added here)."""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction

from jupyter_quota import elasticteams, windows
from jupyter_quota.profiles import TeamProfile

GPU = "requests.nvidia.com/gpu"
DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
#: closes at 08:00 and preempts what is over the quota then
NIGHT = {"name": "night", "days": DAYS, "start": "20:00", "end": "08:00", "extra": {GPU: "2"}, "onClose": "preempt"}
NOON = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # the night window is closed
MIDNIGHT = datetime(2026, 12, 1, 23, 0, tzinfo=UTC)  # and open


def beta() -> TeamProfile:
    return TeamProfile(
        team="beta", users=["bea"], hard={GPU: "3"}, borrowingLimit={GPU: "2"}, lendingLimit={GPU: "1"}, windows=[NIGHT]
    )


def test_the_replay_adds_the_open_windows_extra_and_the_pass_takes_the_hard_quota_as_composed():
    replayed = elasticteams.team(beta(), MIDNIGHT, "gpu", add_windows=True)
    passed = elasticteams.team(beta(), MIDNIGHT, GPU, add_windows=False)
    assert replayed.nominal == {"gpu": 5} and passed.nominal == {GPU: 3}
    assert replayed.borrowing_limit == {"gpu": 2} and replayed.lending_limit == {"gpu": 1}
    assert passed.borrowing_limit == {GPU: 2} and passed.lending_limit == {GPU: 1}
    assert replayed.namespace == passed.namespace == "team-beta"
    assert elasticteams.team(beta(), NOON, "gpu", add_windows=True).nominal == {"gpu": 3}


def test_a_closed_window_that_preempts_says_so_and_an_open_one_does_not():
    assert elasticteams.team(beta(), NOON, GPU, add_windows=False).on_close == windows.ON_CLOSE_PREEMPT
    assert elasticteams.team(beta(), MIDNIGHT, GPU, add_windows=False).on_close == windows.ON_CLOSE_FINISH
    plain = TeamProfile(team="alpha", users=["ann"], hard={GPU: "2"})
    assert elasticteams.team(plain, NOON, GPU, add_windows=True).on_close == windows.ON_CLOSE_FINISH


def test_a_team_without_a_gpu_quota_has_no_nominal_quota():
    cpus = TeamProfile(team="gamma", users=["gus"], hard={"requests.cpu": "4"}, windows=[NIGHT])
    assert elasticteams.team(cpus, MIDNIGHT, "gpu", add_windows=True).nominal == {}


def test_amounts_are_exact_ints_when_whole_else_fractions():
    assert elasticteams.exact("2") == 2 and type(elasticteams.exact("2")) is int
    assert elasticteams.exact("1500m") == Fraction(3, 2)
    assert elasticteams.exact("2000m") == 2 and type(elasticteams.exact("2000m")) is int
