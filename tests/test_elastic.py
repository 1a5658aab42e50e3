"""The elastic scheduling policy: borrowing, reclaim, priorities within a team, window close."""

from __future__ import annotations

from fractions import Fraction

from jupyter_quota import reasons
from jupyter_quota.elastic import PREEMPT, START, WAIT, Job, Team, decide

GPU = "requests.nvidia.com/gpu"
CAPACITY = {GPU: Fraction(4)}


def team(ns, nominal, borrow=None, lend=None, on_close="finish"):
    return Team(
        ns,
        {GPU: Fraction(nominal)},
        {GPU: Fraction(borrow)} if borrow is not None else {},
        {GPU: Fraction(lend)} if lend is not None else {},
        on_close,
    )


def job(key, ns, gpus, order, priority="normal", preempting=False):
    return Job(key, ns, priority, {GPU: Fraction(gpus)}, order, preempting)


def by_key(plan):
    return {d.key: d for d in plan.decisions}


TEAMS = {"a": team("a", 2, borrow=2), "b": team("b", 2, borrow=0)}


def test_a_best_effort_job_borrows_the_gpus_another_team_leaves_idle():
    plan = decide(TEAMS, CAPACITY, [job("a1", "a", 2, 1)], [job("a2", "a", 2, 2, "best-effort")])
    d = by_key(plan)["a2"]
    assert d.action == START and d.borrowed
    assert plan.borrowed["a1"] is False


def test_normal_jobs_never_borrow():
    plan = decide(TEAMS, CAPACITY, [job("a1", "a", 2, 1)], [job("a2", "a", 1, 2)])
    d = by_key(plan)["a2"]
    assert (d.action, d.reason) == (WAIT, reasons.WAITING_FOR_QUOTA)


def test_borrowing_stops_at_the_borrowing_limit_and_the_lending_limit():
    teams = {"a": team("a", 2, borrow=1), "b": team("b", 2)}
    d = by_key(decide(teams, CAPACITY, [job("a1", "a", 2, 1)], [job("a2", "a", 2, 2, "best-effort")]))["a2"]
    assert (d.action, d.reason) == (WAIT, reasons.WAITING_FOR_QUOTA)
    teams = {"a": team("a", 2, borrow=2), "b": team("b", 2, lend=1)}
    d = by_key(decide(teams, CAPACITY, [job("a1", "a", 2, 1)], [job("a2", "a", 2, 2, "best-effort")]))["a2"]
    assert (d.action, d.reason) == (WAIT, reasons.WAITING_FOR_BORROWING)
    d = by_key(decide(teams, CAPACITY, [job("a1", "a", 2, 1)], [job("a2", "a", 1, 2, "best-effort")]))["a2"]
    assert d.action == START and d.borrowed


def test_the_lender_reclaims_its_gpus_newest_borrowed_job_first_and_waits_for_them():
    running = [job("a1", "a", 2, 1), job("a2", "a", 1, 2, "best-effort"), job("a3", "a", 1, 3, "best-effort")]
    plan = decide(TEAMS, CAPACITY, running, [job("b1", "b", 1, 4)])
    d = by_key(plan)
    assert [x.key for x in plan.decisions if x.action == PREEMPT] == ["a3"]
    assert d["a3"].reason == reasons.RECLAIMED and "namespace b reclaimed" in d["a3"].message
    assert (d["b1"].action, d["b1"].reason) == (WAIT, reasons.WAITING_FOR_PREEMPTION)
    # next pass: a3 is still ending; nothing more is preempted for b1
    running[2].preempting = True
    plan = decide(TEAMS, CAPACITY, running, [job("b1", "b", 1, 4)])
    assert plan.of(PREEMPT) == [] and by_key(plan)["b1"].reason == reasons.WAITING_FOR_PREEMPTION
    # a3 has ended: b1 starts, on its own quota
    plan = decide(TEAMS, CAPACITY, running[:2], [job("b1", "b", 1, 4)])
    assert by_key(plan)["b1"].action == START and not by_key(plan)["b1"].borrowed


def test_a_best_effort_job_within_its_own_quota_also_reclaims():
    running = [job("a1", "a", 2, 1), job("a2", "a", 2, 2, "best-effort")]
    plan = decide(TEAMS, CAPACITY, running, [job("b1", "b", 2, 3, "best-effort")])
    assert [x.key for x in plan.of(PREEMPT)] == ["a2"]


def test_a_normal_job_preempts_its_own_teams_best_effort_jobs_but_never_another_teams_guaranteed_ones():
    teams = {"a": team("a", 2, borrow=0), "b": team("b", 2, borrow=0)}
    running = [job("a1", "a", 1, 1, "best-effort"), job("a2", "a", 1, 2, "best-effort"), job("b1", "b", 2, 3)]
    plan = decide(teams, CAPACITY, running, [job("a3", "a", 1, 4, "high")])
    assert [(x.key, x.reason) for x in plan.of(PREEMPT)] == [("a2", reasons.PREEMPTED_BY_PRIORITY)]
    # team a's high job beyond a's quota: b's jobs within b's quota are never touched
    running = [job("a1", "a", 2, 1), job("b1", "b", 2, 2)]
    plan = decide(teams, CAPACITY, running, [job("a3", "a", 1, 3, "high")])
    assert plan.of(PREEMPT) == [] and by_key(plan)["a3"].reason == reasons.WAITING_FOR_QUOTA


def test_high_jobs_do_not_preempt_their_teams_normal_jobs():
    teams = {"a": team("a", 2)}
    running = [job("a1", "a", 2, 1)]
    plan = decide(teams, {GPU: Fraction(2)}, running, [job("a2", "a", 1, 2, "high")])
    assert plan.of(PREEMPT) == [] and by_key(plan)["a2"].reason == reasons.WAITING_FOR_QUOTA


def test_a_window_closing_with_preempt_preempts_the_lowest_priority_newest_jobs_over_the_quota():
    teams = {"a": team("a", 1, on_close="preempt"), "b": team("b", 3)}
    running = [job("a1", "a", 1, 1, "high"), job("a2", "a", 1, 2), job("a3", "a", 1, 3)]
    plan = decide(teams, CAPACITY, running, [])
    assert [(x.key, x.reason) for x in plan.of(PREEMPT)] == [
        ("a3", reasons.WINDOW_CLOSED),
        ("a2", reasons.WINDOW_CLOSED),
    ]


def test_a_window_closing_with_finish_lets_the_jobs_run_on_as_borrowers_until_reclaimed():
    teams = {"a": team("a", 1), "b": team("b", 3)}
    running = [job("a1", "a", 1, 1), job("a2", "a", 1, 2), job("a3", "a", 1, 3)]
    plan = decide(teams, CAPACITY, running, [])
    assert plan.of(PREEMPT) == [] and [k for k, v in plan.borrowed.items() if v] == ["a2", "a3"]
    plan = decide(teams, CAPACITY, running, [job("b1", "b", 3, 4)])
    assert [x.key for x in plan.of(PREEMPT)] == ["a3", "a2"]


def test_a_waiting_guaranteed_job_keeps_what_it_reclaims_from_later_jobs():
    running = [job("a1", "a", 2, 1), job("a2", "a", 2, 2, "best-effort")]
    pending = [job("b1", "b", 2, 3), job("a3", "a", 1, 4, "best-effort")]
    plan = decide(TEAMS, CAPACITY, running, pending)
    d = by_key(plan)
    assert d["b1"].reason == reasons.WAITING_FOR_PREEMPTION and d["a3"].action == WAIT
