"""A simulated week of elastic quota on a fake clock: windows open and close, teams submit jobs
of every priority, and every admission and preemption decision is logged.

The log is kept at ``$JUPYTER_QUOTA_TEST_OUTPUT/elastic/elastic_week.log`` (default
``test-output/``), one JSON object a line. The checks: no team waits longer than the grace
period plus one scheduling pass for a job within its guaranteed (nominal) quota; every borrowed
GPU that a lender reclaims is free, and the lender's job running, within that time; the machine
is never over capacity and no team over its nominal quota plus its borrowing limit.
"""

from __future__ import annotations

import json
import os
import random
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path

from jupyter_quota import elastic, reasons
from jupyter_quota.profiles import TeamProfile
from jupyter_quota.windows import ON_CLOSE_PREEMPT, open_windows, window_extra

GPU = "requests.nvidia.com/gpu"
CAPACITY = {GPU: Fraction(8)}
PASS = timedelta(minutes=1)  # one scheduling pass a minute
GRACE = timedelta(minutes=2)  # a preempted job ends within this (SIGTERM, then SIGKILL)
START = datetime(2026, 11, 30, tzinfo=UTC)  # a Monday
WEEKDAYS = ["Mon", "Tue", "Wed", "Thu", "Fri"]
PROFILES = [
    # alpha: +2 GPUs on weekdays 08:00-20:00 (Paris), preempted when the window closes
    TeamProfile(
        team="alpha",
        hard={GPU: "2"},
        borrowingLimit={GPU: "2"},
        windows=[
            {
                "name": "days",
                "days": WEEKDAYS,
                "start": "09:00",
                "end": "19:00",
                "timezone": "Europe/Paris",
                "extra": {GPU: "2"},
                "onClose": "preempt",
            }
        ],
    ),
    # beta: +2 GPUs on weekday nights and all weekend (the windows never overlap: the teams' quotas
    # never add up to more than the machine); its jobs finish when a window closes
    TeamProfile(
        team="beta",
        hard={GPU: "2"},
        borrowingLimit={GPU: "4"},
        windows=[
            {"name": "nights", "days": WEEKDAYS[:4], "start": "20:00", "end": "08:00", "extra": {GPU: "2"}},
            {"name": "friday", "days": ["Fri"], "start": "20:00", "end": "00:00", "extra": {GPU: "2"}},
            {"name": "weekend", "days": ["Sat", "Sun"], "start": "00:00", "end": "00:00", "extra": {GPU: "2"}},
        ],
    ),
    TeamProfile(team="gamma", hard={GPU: "2"}, borrowingLimit={GPU: "1"}, lendingLimit={GPU: "1"}),
]


class Sim:
    def __init__(self, log_path: Path, seed: int):
        self.rng = random.Random(seed)
        self.log = log_path.open("w", encoding="utf-8")
        self.now = START
        self.running: dict[str, elastic.Job] = {}
        self.pending: dict[str, elastic.Job] = {}
        self.ends: dict[str, datetime] = {}  # running job -> when it finishes
        self.left: dict[str, timedelta] = {}  # job -> work left (kept across preemptions)
        self.gone_at: dict[str, datetime] = {}  # preempted job -> when its process has ended
        self.reclaims: list[tuple[str, datetime, str]] = []  # (victim, when, lender's job)
        self.starts: list[tuple[str, datetime]] = []  # every start and resume
        self.asking_since: dict[str, datetime] = {}  # team -> since when a guaranteed job waits
        self.worst_wait = timedelta(0)
        self.counts = {"start": 0, "preempt": 0, "reclaimed": 0, "window": 0}
        self.order = 0
        self.nominated: set[str] = set()
        self.open = {p.namespace: set() for p in PROFILES}

    def record(self, **entry):
        self.log.write(json.dumps({"at": self.now.isoformat(), **entry}) + "\n")

    def teams(self) -> dict[str, elastic.Team]:
        out = {}
        for p in PROFILES:
            extra = window_extra(p, self.now)
            nominal = Fraction(int(p.hard[GPU]) + int(extra.get(GPU, "0")))
            opened = {w.name for w in open_windows(p, self.now)}
            for name in opened ^ self.open[p.namespace]:
                self.record(event="window", team=p.team, window=name, open=name in opened, nominal=str(nominal))
                self.counts["window"] += 1
            closed_preempt = any(w.on_close == ON_CLOSE_PREEMPT and w.name not in opened for w in _windows(p))
            self.open[p.namespace] = opened
            out[p.namespace] = elastic.Team(
                p.namespace,
                {GPU: nominal},
                {GPU: Fraction(int(p.borrowingLimit.get(GPU, "0")))},
                {GPU: Fraction(int(p.lendingLimit[GPU]))} if GPU in p.lendingLimit else {},
                ON_CLOSE_PREEMPT if closed_preempt else "finish",
            )
        return out

    def submit(self, teams):
        for namespace, team in teams.items():
            if self.rng.random() > 0.04:
                continue
            level = self.rng.choices(["high", "normal", "best-effort"], [1, 4, 5])[0]
            gpus = Fraction(self.rng.choice([1, 1, 2]))
            live = [*self.running.values(), *self.pending.values()]
            mine = [j for j in live if j.namespace == namespace]
            guaranteed = sum((j.usage[GPU] for j in mine if j.priority != "best-effort"), Fraction(0))
            total = sum((j.usage[GPU] for j in mine), Fraction(0))
            # the ledger's admission: high and normal within the quota, best-effort within quota + borrowing
            if level != "best-effort" and guaranteed + gpus > team.nominal[GPU]:
                continue
            if level == "best-effort" and total + gpus > team.nominal[GPU] + team.borrowing_limit[GPU]:
                continue
            self.order += 1
            key = f"{namespace}/j{self.order}"
            self.pending[key] = elastic.Job(key, namespace, level, {GPU: gpus}, self.order)
            self.left[key] = timedelta(minutes=self.rng.randint(10, 300))
            self.record(event="submit", job=key, priority=level, gpus=int(gpus))

    def step(self):
        teams = self.teams()
        for key, end in list(self.ends.items()):
            if end <= self.now:
                del self.ends[key], self.running[key]
                self.record(event="finished", job=key)
        for key, when in list(self.gone_at.items()):
            if when <= self.now:  # the preempted process ended: requeued with the work it had left
                job = self.running.pop(key)
                del self.gone_at[key]
                job.preempting, job.preempted_for = False, None
                self.pending[key] = job
                self.record(event="requeued", job=key)
        self.submit(teams)
        for job in self.pending.values():
            job.nominated = job.key in self.nominated
        plan = elastic.decide(teams, CAPACITY, list(self.running.values()), list(self.pending.values()))
        for d in plan.decisions:
            self.record(
                event="decision", job=d.key, action=d.action, reason=d.reason, message=d.message, borrowed=d.borrowed
            )
            if d.action == elastic.WAIT:
                if d.reason == reasons.WAITING_FOR_PREEMPTION:
                    self.nominated.add(d.key)
                else:
                    self.nominated.discard(d.key)
            if d.action == elastic.START:
                self.nominated.discard(d.key)
                job = self.pending.pop(d.key)
                self.running[d.key] = job
                self.ends[d.key] = self.now + self.left[d.key]
                self.starts.append((d.key, self.now))
                self.counts["start"] += 1
            elif d.action == elastic.PREEMPT:
                job = self.running[d.key]
                job.preempting = True
                job.preempted_for = d.preemptor
                self.left[d.key] = self.ends.pop(d.key) - self.now
                self.gone_at[d.key] = self.now + GRACE
                self.counts["preempt"] += 1
                if d.reason == reasons.RECLAIMED:
                    self.reclaims.append((d.key, self.now, d.preemptor))
                    self.counts["reclaimed"] += 1
        self.check(teams)
        self.now += PASS

    def check(self, teams):
        used = sum((j.usage[GPU] for j in self.running.values()), Fraction(0))
        assert used <= CAPACITY[GPU], f"{self.now}: {used} GPUs in use"
        for namespace, team in teams.items():
            mine = [j for j in self.running.values() if j.namespace == namespace and not j.preempting]
            asking = self.asks_guaranteed(namespace, team, mine)
            if not asking:
                self.asking_since.pop(namespace, None)
                continue
            since = self.asking_since.setdefault(namespace, self.now)
            waited = self.now - since
            self.worst_wait = max(self.worst_wait, waited)
            assert waited <= GRACE + PASS, f"{self.now}: {namespace} waited {waited} for its guaranteed quota"

    def asks_guaranteed(self, namespace, team, mine) -> bool:
        """A pending job of the team fits its nominal quota beside the team's jobs it may not preempt."""
        for job in self.pending.values():
            if job.namespace != namespace:
                continue
            kept = mine if job.priority == "best-effort" else [j for j in mine if j.priority != "best-effort"]
            if sum((j.usage[GPU] for j in kept), Fraction(0)) + job.usage[GPU] <= team.nominal[GPU]:
                return True
        return False


def _windows(profile):
    from jupyter_quota.windows import parse_windows

    return parse_windows(profile.windows)


def test_a_simulated_week_keeps_every_guarantee_and_reclaims_within_grace_plus_one_pass():
    out = Path(os.environ.get("JUPYTER_QUOTA_TEST_OUTPUT", Path(__file__).resolve().parents[1] / "test-output"))
    (out / "elastic").mkdir(parents=True, exist_ok=True)
    log = out / "elastic" / "elastic_week.log"
    sim = Sim(log, seed=13)
    while sim.now < START + timedelta(days=7):
        sim.step()
    sim.log.close()
    # every reclaim: within grace + one pass, the lender's job runs on what it reclaimed (or a
    # higher-priority job of the same team, submitted meanwhile, does)
    for victim, when, lender in sim.reclaims:
        team = lender.split("/")[0]
        deadline = when + GRACE + PASS
        started = [k for k, t in sim.starts if k.startswith(team + "/") and when < t <= deadline]
        assert started, f"{victim} was preempted for {lender} at {when}, but no job of {team} started by {deadline}"
    # the week exercised what it claims to: windows, borrowing, reclaims, window-close preemptions
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    decisions = [e for e in lines if e["event"] == "decision"]
    assert sim.counts["window"] >= 20 and sim.counts["reclaimed"] >= 5
    assert any(e["action"] == "start" and e["borrowed"] for e in decisions)
    assert any(e["reason"] == reasons.WINDOW_CLOSED for e in decisions)
    assert any(e["reason"] == reasons.PREEMPTED_BY_PRIORITY for e in decisions)
    print(f"simulated week: {sim.counts}, worst wait for a guaranteed job {sim.worst_wait}; log {log}")
