"""A generated history with known true demand, for the recommender and replay tests and the
benchmark.

Eight weeks from a Monday, hour by hour, each team *needs* a known number of GPUs:

- ``grow``: its need grows week by week (weekdays 09-18 UTC from 2 to 6 GPUs; 1 at night);
- ``deadline``: 2 GPUs, and 7 on Thursdays and Fridays 08-20 (a weekly deadline);
- ``idle``: one GPU on Monday mornings, nothing else.

The need becomes 1-GPU jobs of 1-6 hours, submitted a few minutes either side of the hour. They
run on a machine with fewer GPUs than the quotas add up to, through ``elastic.decide`` stepped
once a minute (as ``tests/test_elastic_week.py`` steps it, and as the local backend's loop
runs), which makes the recorded ``started`` and ``finished``: peaks wait. A job past its team's
quota is refused at submission (the admission), so the record, like a ledger, never holds it.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from fractions import Fraction

from jupyter_quota import elastic
from jupyter_quota.history import JobRecord
from jupyter_quota.profiles import TeamProfile

START = int(datetime(2026, 10, 5, tzinfo=UTC).timestamp())  # a Monday
WEEKS = 8
HOURS = WEEKS * 7 * 24
UNTIL = START + HOURS * 3600
GPU = "requests.nvidia.com/gpu"
CAPACITY = 12
QUOTAS = {"grow": 10, "deadline": 10, "idle": 2}  # 22 on 12 GPUs: peaks wait


def need(team: str, hour: int) -> int:
    """GPUs the team needs in the hour ``hour`` (0 = the first hour of the history)."""
    day, clock = divmod(hour, 24)
    weekday, week = day % 7, day // 7
    work = weekday < 5 and 9 <= clock < 18
    if team == "grow":
        return 2 + (4 * week) // (WEEKS - 1) if work else 1
    if team == "deadline":
        return 7 if weekday in (3, 4) and 8 <= clock < 20 else 2
    if team == "idle":
        return 1 if weekday == 0 and 9 <= clock < 12 else 0
    raise KeyError(team)


def profiles() -> list[TeamProfile]:
    return [TeamProfile(team=t, hard={GPU: str(q)}) for t, q in QUOTAS.items()]


def wanted(seed: int = 7, teams=tuple(QUOTAS)) -> list[tuple[str, int, int]]:
    """(team, submitted, seconds of work): the need cut into jobs."""
    rng = random.Random(seed)
    jobs = []
    for team in teams:
        top = max(need(team, h) for h in range(HOURS))
        for level in range(1, top + 1):
            hour = 0
            while hour < HOURS:
                if need(team, hour) < level:
                    hour += 1
                    continue
                end = hour
                while end < HOURS and need(team, end) >= level:
                    end += 1
                while hour < end:  # the run [hour, end) becomes jobs of 1-6 hours
                    length = min(rng.randint(1, 6), end - hour)
                    jitter = rng.randint(-300, 300)
                    submitted = max(START, START + hour * 3600 + jitter)
                    finish = START + (hour + length) * 3600 + rng.randint(-300, 300)
                    jobs.append((team, submitted, max(600, finish - submitted)))
                    hour += length
    jobs.sort(key=lambda j: j[1])
    return jobs


def record(jobs, capacity: int = CAPACITY, quotas=QUOTAS) -> list[JobRecord]:
    """Run the jobs through ``elastic.decide`` one pass a minute; what a ledger would have kept."""
    teams = {t: elastic.Team(t, {"gpu": Fraction(q)}) for t, q in quotas.items()}
    pending: dict[int, tuple] = {}
    running: dict[int, elastic.Job] = {}
    ends: dict[int, int] = {}
    started: dict[int, int] = {}
    refused: set[int] = set()
    nxt, now = 0, START
    while now < UNTIL:
        for key in [k for k, e in ends.items() if e <= now]:
            del ends[key], running[key]
        while nxt < len(jobs) and jobs[nxt][1] <= now:
            team, submitted, work = jobs[nxt]
            live = sum(1 for j in running.values() if j.namespace == team)
            live += sum(1 for j, _ in pending.values() if j.namespace == team)
            if live + 1 <= quotas[team]:  # the admission: a job past the quota is refused, never recorded
                pending[nxt] = (elastic.Job(nxt, team, "normal", {"gpu": 1}, nxt), work)
            else:
                refused.add(nxt)
            nxt += 1
        if pending:
            plan = elastic.decide(teams, {"gpu": capacity}, list(running.values()), [j for j, _ in pending.values()])
            for d in plan.of(elastic.START):
                job, work = pending.pop(d.key)
                running[d.key] = job
                ends[d.key] = now + work
                started[d.key] = now
        now += 60
    out = []
    for key, (team, submitted, work) in enumerate(jobs):
        if key in refused:
            continue
        begin = started.get(key)
        end = None if begin is None or begin + work > UNTIL else begin + work
        out.append(JobRecord(team, f"{team}-user", submitted, begin, end, 1.0, 4.0, 32 * 2**30, "normal"))
    return out


if __name__ == "__main__":  # python tests/recommend_history.py [GPUS] > jobs.csv: the record as a CSV history
    import sys

    from jupyter_quota.history import to_csv

    sys.stdout.write(to_csv(record(wanted(seed=7), capacity=int(sys.argv[1]) if len(sys.argv) > 1 else CAPACITY)))
