"""The replay keeps one ``elastic.Cohort`` between passes (a pass costs what changed); here every
pass is also decided from scratch by ``elastic.decide`` on copies of the same running and pending
jobs, and every decision (action, reason, message, borrowed, preemptor) and every running job's
borrowing must be the same, on generated histories that borrow, lend, reclaim, preempt within a
team and close windows."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from datetime import UTC, datetime

import pytest

from jupyter_quota import elastic, reasons, replay
from jupyter_quota.history import JobRecord
from jupyter_quota.profiles import TeamProfile

GPU = "requests.nvidia.com/gpu"
START = int(datetime(2026, 11, 30, tzinfo=UTC).timestamp())  # a Monday
DAYS = 3


class Checked(replay._Replay):
    """A replay whose every pass is compared with ``elastic.decide`` from scratch."""

    def __init__(self, *args):
        super().__init__(*args)
        self.seen: Counter = Counter()

    def _decide(self, teams, pending):
        running = [dataclasses.replace(live.job) for live in self.running.values()]
        expected = elastic.decide(
            teams, {replay.GPU: self.capacity}, running, [dataclasses.replace(j) for j in pending]
        )
        plan = super()._decide(teams, pending)
        assert plan.decisions == expected.decisions
        assert plan.borrowed == expected.borrowed
        self.seen.update((d.action, d.reason, d.borrowed) for d in plan.decisions)
        return plan


def profiles(rng: random.Random, teams: int) -> list[TeamProfile]:
    out = []
    for i in range(teams):
        extra = {}
        if i % 4 == 1:  # a window on weekdays' working hours, some preempting what is over when it closes
            extra["windows"] = [
                {
                    "name": "days",
                    "days": ["Mon", "Tue", "Wed", "Thu", "Fri"],
                    "start": "09:00",
                    "end": "17:00",
                    "timezone": "Europe/Paris",
                    "extra": {GPU: "2"},
                    "onClose": "preempt" if i % 8 == 1 else "finish",
                }
            ]
        out.append(
            TeamProfile(
                team=f"t{i}",
                hard={GPU: str(rng.randint(1, 4))},
                borrowingLimit={GPU: str(rng.randint(1, 3))} if i % 3 else {},
                lendingLimit={GPU: "1"} if i % 5 == 2 else {},
                **extra,
            )
        )
    return out


def history(rng: random.Random, teams: list[TeamProfile], jobs: int) -> list[JobRecord]:
    records = []
    for _ in range(jobs):
        t = rng.randrange(START, START + DAYS * 86400)
        work = rng.randint(600, 4 * 3600)
        level = rng.choices(["high", "normal", "best-effort"], [1, 4, 5])[0]
        gpus = float(rng.choice([1, 1, 2, 0.5]))
        records.append(JobRecord(rng.choice(teams).team, "u", t, t, t + work, gpus, priority=level))
    return records


@pytest.mark.parametrize("seed", [1, 2])
def test_the_kept_cohort_decides_every_pass_as_elastic_decide_from_scratch(seed):
    rng = random.Random(seed)
    teams = profiles(rng, 12)
    records = history(rng, teams, 700)
    capacity = int(0.7 * sum(replay.gpus_of(p) for p in teams))
    checked = Checked(records, teams, capacity, START, START + DAYS * 86400, replay.PASS_SECONDS, replay.GRACE_SECONDS)
    result = checked.run()
    # the histories exercise every kind of decision: a comparison of only starts would prove little
    seen = {(action, reason) for action, reason, _ in checked.seen}
    for kind in [
        (elastic.PREEMPT, reasons.RECLAIMED),
        (elastic.PREEMPT, reasons.PREEMPTED_BY_PRIORITY),
        (elastic.PREEMPT, reasons.WINDOW_CLOSED),
        (elastic.WAIT, reasons.WAITING_FOR_QUOTA),
        (elastic.WAIT, reasons.WAITING_FOR_PREEMPTION),
        (elastic.WAIT, reasons.WAITING_FOR_BORROWING),
    ]:
        assert kind in seen, (kind, checked.seen)
    assert checked.seen[(elastic.START, None, True)] > 0  # started on borrowed GPUs
    # and the checked replay's figures are those of the plain one
    plain = replay.replay(records, teams, capacity, START, START + DAYS * 86400)
    assert result.to_json() == plain.to_json()
