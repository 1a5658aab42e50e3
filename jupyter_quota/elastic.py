"""Elastic quota: which pending jobs start, and which running jobs are preempted (pure; no I/O).

The model is Kueue's cohort (``ClusterQueue.spec.resourceGroups[].flavors[].resources[]``:
``nominalQuota``, ``borrowingLimit``, ``lendingLimit``; ``preemption.reclaimWithinCohort`` and
``withinClusterQueue: LowerPriority``), on the resources of ``capacity`` (the machine's GPUs, as
the quota key ``requests.nvidia.com/gpu``):

- A team's **nominal** quota is its effective hard quota: ``hard`` plus its open windows'
  ``extra`` (``windows.window_extra``). What a team uses within it is **guaranteed**.
- A **best-effort** job may also run on what other teams' nominal quotas leave unused: its team
  may go over its nominal quota by at most its ``borrowingLimit``, and the teams over theirs
  together by at most what the others lend (each lends ``nominal - used``, at most its
  ``lendingLimit``). Such a job runs **borrowed**. High and normal jobs never borrow.
- **Reclaim**: a job that fits its team's nominal quota (a guaranteed job) and cannot start
  preempts jobs running borrowed in other teams, newest first, until it fits: it waits at most
  for their grace period and one more pass.
- **Within a team**, a high or normal job may preempt the team's own best-effort jobs (newest
  first); nothing preempts another team's jobs within its nominal quota, nor a team's high or
  normal jobs for a job of the same team.
- **A window closes** while the team uses more than its (now smaller) nominal quota: with
  ``onClose: finish`` its jobs run on, those over the quota now counted as borrowed (so a
  reclaim may preempt them); with ``onClose: preempt`` the jobs over it are preempted at once,
  lowest priority then newest first, until the rest fit (best-effort jobs may stay within the
  borrowing limit).

Pending jobs are decided in two rounds, each highest priority first, then oldest first: the jobs
within their team's nominal quota (of one priority, those that preempted others and wait for
them first), then
those that would borrow (so a requeued borrower does not take back what a lender reclaimed). A guaranteed job that waits
(for preempted jobs to end, or for capacity) keeps what it needs reserved, so a later job does not
take it. Preempted jobs count as running until they are gone (they hold their GPUs through their
grace period), but no second job is preempted for what they will free. Every decision carries a
reason code (``reasons``) and a message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction

from . import priority, reasons

#: Amounts are exact numbers: ints where whole (GPUs; much cheaper to add up), else Fractions.
ZERO = 0


@dataclass(frozen=True)
class Team:
    """One team's elastic settings, as exact numbers per resource (absent from ``nominal``: no quota)."""

    namespace: str
    nominal: dict[str, Fraction]
    borrowing_limit: dict[str, Fraction] = field(default_factory=dict)
    #: absent resource: lends all it leaves unused
    lending_limit: dict[str, Fraction] = field(default_factory=dict)
    #: ``windows.ON_CLOSE_PREEMPT`` when a closed window of the team says so
    on_close: str = "finish"


@dataclass
class Job:
    """A pending or running job: ``order`` is its submission order (older is smaller)."""

    key: object
    namespace: str
    priority: str
    usage: dict[str, Fraction]
    order: int
    #: running only: a preemption is under way (it holds its GPUs until it has ended)
    preempting: bool = False
    #: running only, while ``preempting``: the key of the job it makes room for, if any
    preempted_for: object = None
    #: pending only: it waits for jobs preempted for it (its last reason was WaitingForPreemption),
    #: so it goes first, and what they free is its (kube-scheduler's nominated pod)
    nominated: bool = False


@dataclass
class Decision:
    """What happens to one job in this pass."""

    key: object
    action: str  # START, WAIT or PREEMPT
    reason: str | None = None
    message: str | None = None
    #: START: the job runs on borrowed quota
    borrowed: bool = False
    #: PREEMPT for a job that needs the room: its key
    preemptor: object = None


START, WAIT, PREEMPT = "start", "wait", "preempt"


class Plan:
    """A pass's decisions, and which running jobs run on borrowed quota (worked out when first
    read: a caller with nothing to borrow, such as a replay without borrowing, never pays for it)."""

    def __init__(self, decisions: list[Decision], borrowed: dict[object, bool] | Callable[[], dict[object, bool]]):
        self.decisions = decisions
        self._borrowed = borrowed

    @property
    def borrowed(self) -> dict[object, bool]:
        """Every running job (not preempted now) -> whether it runs on borrowed quota."""
        if callable(self._borrowed):
            self._borrowed = self._borrowed()
        return self._borrowed

    def of(self, action: str) -> list[Decision]:
        return [d for d in self.decisions if d.action == action]


def decide(teams: dict[str, Team], capacity: dict[str, Fraction], running: list[Job], pending: list[Job]) -> Plan:
    """One pass: a decision per pending job (START or WAIT) and PREEMPT for running jobs."""
    return Cohort(teams, capacity, running).decide(pending)


class Cohort:
    """The running jobs and what they use, per team and in all, kept current as passes admit,
    reserve and preempt, and as the caller says what ended (``remove``) or which quotas hold now
    (``set_teams``). A caller that steps the scheduler (the replay) keeps one between passes and
    so pays per pass for what changed, not for every running job; ``decide`` makes one per pass.
    Its passes decide as ``decide`` would from the same running and pending jobs (a test replays
    generated histories both ways and compares every decision), given that a job keeps its key,
    priority, usage and order (what a pass works out for a pending job is kept by its key).
    """

    def __init__(self, teams: dict[str, Team], capacity: dict[str, Fraction], running: Iterable[Job] = ()):
        self.teams = teams
        self.capacity = capacity
        self.keys = tuple(capacity)
        #: guaranteed jobs waiting for preempted jobs to end: what they need is held for them (a pass)
        self.reserved: list[Job] = []
        self.preempted: list[Decision] = []
        # Kept current as jobs start, are preempted and end, so a check costs the teams, not the jobs:
        self.live: dict[str, dict[int, Job]] = {}  # running jobs not being preempted, by namespace
        self.used: dict[str, dict[str, Fraction]] = {}  # what they use
        self.used_firm: dict[str, dict[str, Fraction]] = {}  # what their high and normal jobs use
        self.total = dict.fromkeys(self.keys, ZERO)  # the same, over every namespace
        self.leaving: dict[int, Job] = {}  # being preempted: they hold what they use until they end
        #: each team's part of the cohort's excess (``_lent``) at its kept usage, and their sum:
        #: made at the first feasibility check (many passes make none), then kept current by
        #: ``_count``, so a check costs the teams it changes, not every team
        self.lent: dict[str, dict[str, Fraction]] | None = None
        self.lent_total: dict[str, Fraction] = {}
        #: namespace -> whether each of its live jobs runs borrowed; dropped when its jobs change
        self._borrowed: dict[str, dict[object, bool]] = {}
        #: namespace -> how many times its live jobs changed; what was worked out for a pending job
        #: of the namespace holds while that count and the teams do, and nothing is held for the
        #: namespace's waiting jobs (``_recall``): job key -> (job, count, guaranteed, its WAIT for
        #: quota or None), of this pass and of the one before
        self._changes: dict[str, int] = {}
        self._seen: dict[object, tuple] = {}
        self._seen_before: dict[object, tuple] = {}
        #: the teams whose jobs a closed window may preempt
        self._closing = [(ns, t) for ns, t in teams.items() if t.on_close == "preempt"]
        for job in running:
            self.add(job)

    def add(self, job: Job) -> None:
        """A running job (one being preempted holds what it uses until ``remove``)."""
        if job.preempting:
            self.leaving[id(job)] = job
        else:
            self.live.setdefault(job.namespace, {})[id(job)] = job
            self._count(job, 1)

    def remove(self, job: Job) -> None:
        """A running job ended, or a preempted one is gone."""
        if self.leaving.pop(id(job), None) is None:
            del self.live[job.namespace][id(job)]
            self._count(job, -1)

    def set_teams(self, teams: dict[str, Team]) -> None:
        """The teams' settings from now on (a window opened or closed)."""
        if teams is not self.teams:
            self.teams = teams
            self.lent = None
            self._borrowed.clear()
            self._seen.clear()
            self._closing = [(ns, t) for ns, t in teams.items() if t.on_close == "preempt"]

    def decide(self, pending: list[Job]) -> Plan:
        """One pass over the running jobs kept and ``pending``; it applies its own START and
        PREEMPT decisions to the cohort. The plan's ``borrowed`` reads the cohort when first read."""
        self.reserved, self.preempted = [], []
        self._seen_before, self._seen = self._seen, {}
        decisions = self.close_windows()
        ordered = sorted(pending, key=lambda j: (-priority.rank(j.priority), not j.nominated, j.order))
        for job in ordered:  # what was reclaimed for a job is held for it from the start of the pass
            if job.nominated and self.guaranteed(job):
                self.reserved.append(job)
        borrowers = []
        for job in ordered:
            if self.guaranteed(job):
                decisions.append(self.place(job))
            else:
                borrowers.append(job)
        decisions += [self.place(job) for job in borrowers]
        return Plan(decisions + self.preempted, self.borrowed_now)

    def borrowed_in(self, namespace: str) -> dict[object, bool]:
        """The namespace's live jobs -> whether each runs on borrowed quota (do not change it)."""
        found = self._borrowed.get(namespace)
        if found is None:
            team = self.teams.get(namespace) or Team(namespace, {})
            live = self._live(namespace)
            within = self._within_set(team, live)
            found = self._borrowed[namespace] = {j.key: j.key not in within for j in live}
        return found

    # -- the pass ------------------------------------------------------------------------------

    def close_windows(self) -> list[Decision]:
        """``onClose: preempt``: jobs over a shrunk nominal quota are preempted."""
        decisions = []
        for namespace, team in self._closing:
            mine = sorted(self._live(namespace), key=lambda j: (-priority.rank(j.priority), j.order))
            while mine and not self._team_within(team, mine):
                victim = mine.pop()  # lowest priority, newest
                self._mark(victim, None)
                decisions.append(
                    Decision(
                        victim.key,
                        PREEMPT,
                        reasons.WINDOW_CLOSED,
                        f"preempted: a quota window of namespace {namespace} closed and its jobs used more "
                        f"than its quota now ({_show(team.nominal, self.keys)}); it resumes when it fits again",
                    )
                )
        return decisions

    def place(self, job: Job) -> Decision:
        self.reserved = [r for r in self.reserved if r is not job]
        team = self.teams.get(job.namespace) or Team(job.namespace, {})
        best_effort = job.priority == priority.BEST_EFFORT
        seen = self._recall(job)
        if seen is not None and seen[3] is not None:  # it waited for quota, and nothing it counts changed
            return self._wait(job, reasons.WAITING_FOR_QUOTA, seen[3])
        if not self._fits_team(team, job):
            message = self._quota_message(team, job)
            if seen is not None:
                self._seen[job.key] = (*seen[:3], message)
            return self._wait(job, reasons.WAITING_FOR_QUOTA, message)
        if self._feasible(job, planned=False):
            self.add(job)
            return Decision(job.key, START, borrowed=self._runs_borrowed(team, job))
        if not self.guaranteed(job):
            what = "borrow" if best_effort else "use"
            return self._wait(
                job,
                reasons.WAITING_FOR_BORROWING,
                f"waiting for idle quota of other teams to {what}: {self._cohort_message(job)}",
            )
        if self._feasible(job, planned=True):
            self.reserved.append(job)
            return self._wait(job, reasons.WAITING_FOR_PREEMPTION, "waiting for preempted jobs to end")
        victims = self._victims(job)
        if victims is None:
            return self._wait(job, reasons.WAITING, "waiting for running jobs to end")
        self.reserved.append(job)
        for victim in victims:
            self._mark(victim, job.key)
        names = ", ".join(str(v.key) for v in victims)
        self.preempted.extend(
            Decision(
                v.key,
                PREEMPT,
                reasons.RECLAIMED if v.namespace != job.namespace else reasons.PREEMPTED_BY_PRIORITY,
                (
                    f"preempted: namespace {job.namespace} reclaimed its quota for job {job.key}"
                    if v.namespace != job.namespace
                    else f"preempted by the {job.priority}-priority job {job.key} of its own team"
                ),
                preemptor=job.key,
            )
            for v in victims
        )
        return self._wait(job, reasons.WAITING_FOR_PREEMPTION, f"preempting {names} to make room")

    def guaranteed(self, job: Job) -> bool:
        """Whether ``job`` is within its team's nominal quota beside the team's jobs it may not
        preempt, placed as ``_within_set`` places them (so a newer best-effort job of the team,
        borrowing, does not take an older one's guarantee)."""
        seen = self._recall(job)
        if seen is not None:
            return seen[2]
        team = self.teams.get(job.namespace) or Team(job.namespace, {})
        if _le(self._with(self._protected_sum(job), job), team.nominal, team.nominal):
            found = True  # all of them fit (``_within_set``'s first case), without a list
        else:
            found = job.key in self._within_set(team, [*self._protected(job), job])
        if not self._holds_for(job.namespace):
            self._seen[job.key] = (job, self._changes.get(job.namespace, 0), found, None)
        return found

    def _recall(self, job: Job) -> tuple | None:
        """What was worked out for ``job`` (``_seen``) if it still holds, else None."""
        seen = self._seen.get(job.key) or self._seen_before.get(job.key)
        if (
            seen is None
            or seen[0] is not job
            or seen[1] != self._changes.get(job.namespace, 0)
            or self._holds_for(job.namespace)
        ):
            return None
        self._seen[job.key] = seen
        return seen

    def _holds_for(self, namespace: str) -> bool:
        """Whether anything is held for a waiting job of ``namespace``."""
        return bool(self.reserved) and any(r.namespace == namespace for r in self.reserved)

    def borrowed_now(self) -> dict[object, bool]:
        out = {}
        for namespace in self.live:
            out.update(self.borrowed_in(namespace))
        return out

    # -- checks ---------------------------------------------------------------------------------

    def _fits_team(self, team: Team, job: Job) -> bool:
        """Within the nominal quota (high, normal: counting the team's own non-best-effort jobs),
        or within nominal plus borrowing limit (best-effort: counting all its jobs)."""
        asked = self._with(self._protected_sum(job), job)  # a best-effort job's protected: all
        if job.priority == priority.BEST_EFFORT:
            return _le(asked, _add(team.nominal, team.borrowing_limit, self.keys), team.nominal)
        return _le(asked, team.nominal, team.nominal)

    def _feasible(self, job: Job, planned: bool, without: Iterable[Job] = ()) -> bool:
        """Whether ``job`` can run beside the running jobs (less ``without``) and what is held for
        waiting jobs: within capacity, and without making its team's borrowing or the cohort's
        lending worse than it already is (a window closed with ``finish`` may leave a team over
        for a while; that alone stops no one).

        Jobs being preempted hold their GPUs until they end, and what they free is held for the
        jobs that preempted them (``_machine``); ``planned`` counts as if they had ended. Quota
        counts the holds, never the jobs on their way out.
        """
        without = [j for j in without if not j.preempting]
        gone = {id(j) for j in without}
        held = [r for r in self._held(job) if id(r) not in gone] if self.reserved else []
        if not without and not held:
            return self._fits_now(job, planned)
        changed: dict[str, dict[str, Fraction]] = {}  # namespace -> its usage, where it differs
        for j, sign in [*((j, -1) for j in without), *((r, 1) for r in held)]:
            used = changed.setdefault(j.namespace, dict(self.used.get(j.namespace, {})))
            for k in self.keys:
                used[k] = used.get(k, ZERO) + sign * j.usage.get(k, ZERO)
        machine = self._machine(without, held, planned)
        if not all(machine[k] + job.usage.get(k, ZERO) <= self.capacity[k] for k in self.keys):
            return False
        team = self.teams.get(job.namespace) or Team(job.namespace, {})
        before = changed.get(job.namespace) or self.used.get(job.namespace) or dict.fromkeys(self.keys, ZERO)
        after = {k: before.get(k, ZERO) + job.usage.get(k, ZERO) for k in self.keys}
        if _worse(self._team_excess(team, before), self._team_excess(team, after)):
            return False
        cohort = self._cohort_excess(changed)
        mine_before, mine_after = self._lent(team, before), self._lent(team, after)
        cohort_after = {k: cohort[k] - mine_before[k] + mine_after[k] for k in self.keys}
        return not _worse(cohort, cohort_after)

    def _fits_now(self, job: Job, planned: bool) -> bool:
        """``_feasible`` with nothing set aside and nothing held (most checks): the same checks
        on the kept sums, without copies."""
        leaving = () if planned else self.leaving.values()
        for k in self.keys:
            machine = self.total[k] + job.usage.get(k, ZERO)
            for j in leaving:
                machine += j.usage.get(k, ZERO)
            if machine > self.capacity[k]:
                return False
        team = self.teams.get(job.namespace) or Team(job.namespace, {})
        before = self.used.get(job.namespace) or dict.fromkeys(self.keys, ZERO)
        after = self._with(before, job)
        if _worse(self._team_excess(team, before), self._team_excess(team, after)):
            return False
        cohort = self._cohort_excess({})
        mine_before, mine_after = self._lent(team, before), self._lent(team, after)
        cohort_after = {k: cohort[k] - mine_before[k] + mine_after[k] for k in self.keys}
        return not _worse(cohort, cohort_after)

    def _machine(self, without: list[Job], held: list[Job], planned: bool) -> dict[str, Fraction]:
        """What the machine must hold: the running jobs less ``without``, and each hold less what
        the jobs preempted for it still hold (those count themselves until they end, unless
        ``planned``)."""
        total = dict(self.total)
        for j in without:
            for k in self.keys:
                total[k] -= j.usage.get(k, ZERO)
        leaving = () if planned else self.leaving.values()
        for j in leaving:
            for k in self.keys:
                total[k] += j.usage.get(k, ZERO)
        freeing: dict[object, dict] = {}
        for j in leaving:
            if j.preempted_for is not None:
                mine = freeing.setdefault(j.preempted_for, dict.fromkeys(self.keys, ZERO))
                for k in self.keys:
                    mine[k] += j.usage.get(k, ZERO)
        for r in held:
            mine = freeing.get(r.key, {})
            for k in self.keys:
                total[k] += max(ZERO, r.usage.get(k, ZERO) - mine.get(k, ZERO))
        return total

    def _team_excess(self, team: Team, used: dict[str, Fraction]) -> dict[str, Fraction]:
        """How far the team is past its nominal quota plus its borrowing limit, per resource."""
        return {
            k: used.get(k, ZERO) - team.nominal[k] - team.borrowing_limit.get(k, ZERO)
            for k in self.keys
            if k in team.nominal
        }

    def _cohort_excess(self, changed: dict[str, dict[str, Fraction]]) -> dict[str, Fraction]:
        """What the teams over their nominal quotas use past what the others lend, per resource;
        each team's usage from ``changed``, else as kept."""
        if self.lent is None:
            self.lent = {ns: self._lent(team, self.used.get(ns) or {}) for ns, team in self.teams.items()}
            self.lent_total = dict.fromkeys(self.keys, ZERO)
            for part in self.lent.values():
                for k in self.keys:
                    self.lent_total[k] += part[k]
        excess = dict(self.lent_total)
        for namespace, used in changed.items():
            team = self.teams.get(namespace)
            if team is None:
                continue
            before, after = self.lent[namespace], self._lent(team, used)
            for k in self.keys:
                excess[k] += after[k] - before[k]
        return excess

    def _lent(self, team: Team, used: dict[str, Fraction]) -> dict[str, Fraction]:
        """A team's part of the cohort's excess: what it borrows, less what it lends."""
        out = dict.fromkeys(self.keys, ZERO)
        for k in self.keys:
            if k not in team.nominal:
                continue
            spare = team.nominal[k] - used.get(k, ZERO)
            out[k] = -spare if spare < 0 else -min(spare, team.lending_limit.get(k, spare))
        return out

    def _count(self, job: Job, sign: int) -> None:
        self._borrowed.pop(job.namespace, None)
        self._changes[job.namespace] = self._changes.get(job.namespace, 0) + 1
        used = self.used.setdefault(job.namespace, dict.fromkeys(self.keys, ZERO))
        firm = self.used_firm.setdefault(job.namespace, dict.fromkeys(self.keys, ZERO))
        best_effort = job.priority == priority.BEST_EFFORT
        for k in self.keys:
            amount = sign * job.usage.get(k, ZERO)
            used[k] += amount
            self.total[k] += amount
            if not best_effort:
                firm[k] += amount
        team = self.teams.get(job.namespace)
        if team is not None and self.lent is not None:
            before, after = self.lent[job.namespace], self._lent(team, used)
            self.lent[job.namespace] = after
            for k in self.keys:
                self.lent_total[k] += after[k] - before[k]

    def _mark(self, victim: Job, preemptor) -> None:
        """``victim`` is being preempted (for ``preemptor``, if any): it holds until it ends."""
        del self.live[victim.namespace][id(victim)]
        self._count(victim, -1)
        victim.preempting, victim.preempted_for = True, preemptor
        self.leaving[id(victim)] = victim

    def _victims(self, job: Job) -> list[Job] | None:
        """The fewest newest reclaimable jobs whose end lets ``job`` run; None if none do."""
        candidates = []
        for namespace, live in self.live.items():
            if namespace == job.namespace:
                if job.priority != priority.BEST_EFFORT:
                    candidates += [j for j in live.values() if j.priority == priority.BEST_EFFORT]
                continue
            team = self.teams.get(namespace)
            nominal = team.nominal if team is not None else {}
            if not live or _le(self.used[namespace], nominal, nominal):
                continue  # all of its jobs run within its quota (``_within_set``'s first case)
            borrowed = self.borrowed_in(namespace)
            candidates += [j for j in live.values() if borrowed[j.key]]
        chosen: list[Job] = []
        for victim in sorted(candidates, key=lambda j: -j.order):
            chosen.append(victim)
            if self._feasible(job, planned=True, without=chosen):
                return chosen
        return None

    def _team_within(self, team: Team, jobs: list[Job]) -> bool:
        """onClose preempt: high and normal jobs within the nominal quota, the rest within borrowing."""
        guaranteed = [j for j in jobs if j.priority != priority.BEST_EFFORT]
        limit = _add(team.nominal, team.borrowing_limit, self.keys)
        return _le(_sum(guaranteed, self.keys), team.nominal, team.nominal) and _le(
            _sum(jobs, self.keys), limit, team.nominal
        )

    def _within_set(self, team: Team, jobs: list[Job]) -> set:
        """Keys of the jobs that run within the nominal quota: highest priority, oldest first."""
        if _le(_sum(jobs, self.keys), team.nominal, team.nominal):
            return {j.key for j in jobs}  # all of them fit, in any order (usage is never negative)
        total = dict.fromkeys(self.keys, ZERO)
        within = set()
        for j in sorted(jobs, key=lambda j: (-priority.rank(j.priority), j.order)):
            after = {k: total[k] + j.usage.get(k, ZERO) for k in self.keys}
            if _le(after, team.nominal, team.nominal):
                total = after
                within.add(j.key)
        return within

    def _over(self, team: Team, jobs: list[Job]) -> bool:
        return not _le(_sum(jobs, self.keys), team.nominal, team.nominal)

    # -- views ----------------------------------------------------------------------------------

    def _live(self, namespace: str) -> list[Job]:
        return list(self.live.get(namespace, {}).values())

    def _all(self, namespace: str, job: Job | None = None) -> list[Job]:
        """The team's running jobs (less those being preempted) and what is held for its waiting
        jobs (as ``job`` sees it: see ``_held``)."""
        held = self._held(job) if job is not None else self.reserved
        return [*self._live(namespace), *(r for r in held if r.namespace == namespace)]

    def _held(self, job: Job) -> list[Job]:
        """The reservations ``job`` must leave alone: all but its own and those of lower-priority
        jobs of its own team (which yield to it, as their running peers would)."""
        rank = priority.rank(job.priority)
        return [
            r
            for r in self.reserved
            if r is not job and not (r.namespace == job.namespace and priority.rank(r.priority) < rank)
        ]

    def _runs_borrowed(self, team: Team, job: Job) -> bool:
        """Whether ``job``, just started, runs past its team's nominal quota (``_within_set`` on
        ``_all``, without a list where all of them fit)."""
        mine = dict(self.used.get(job.namespace) or dict.fromkeys(self.keys, ZERO))
        for r in self.reserved:
            if r.namespace == job.namespace:
                mine = self._with(mine, r)
        if _le(mine, team.nominal, team.nominal):
            return False
        return job.key not in self._within_set(team, self._all(job.namespace))

    def _protected_sum(self, job: Job) -> dict[str, Fraction]:
        """What ``_protected(job)`` uses, from the kept sums and the holds."""
        best_effort = job.priority == priority.BEST_EFFORT
        kept = (self.used if best_effort else self.used_firm).get(job.namespace)
        total = dict(kept) if kept is not None else dict.fromkeys(self.keys, ZERO)
        if self.reserved:
            for r in self._held(job):
                if r.namespace == job.namespace and (best_effort or r.priority != priority.BEST_EFFORT):
                    total = self._with(total, r)
        return total

    def _with(self, amounts: dict[str, Fraction], job: Job) -> dict[str, Fraction]:
        return {k: amounts[k] + job.usage.get(k, ZERO) for k in self.keys}

    def _protected(self, job: Job) -> list[Job]:
        """The team's jobs ``job`` may not preempt: all of them for a best-effort job, else its
        high and normal ones."""
        mine = self._all(job.namespace, job)
        if job.priority == priority.BEST_EFFORT:
            return mine
        return [j for j in mine if j.priority != priority.BEST_EFFORT]

    def _wait(self, job: Job, reason: str, message: str) -> Decision:
        return Decision(job.key, WAIT, reason, message)

    def _quota_message(self, team: Team, job: Job) -> str:
        if job.priority == priority.BEST_EFFORT:
            return (
                f"waiting for quota: namespace {team.namespace} may use {_show(team.nominal, self.keys)} "
                f"and borrow {_show(team.borrowing_limit, self.keys) or 'nothing'}; its jobs use "
                f"{_show(_sum(self._all(job.namespace), self.keys), self.keys)}, this job asks for "
                f"{_show(job.usage, self.keys)}"
            )
        return (
            f"waiting for quota: namespace {team.namespace}'s high and normal jobs use "
            f"{_show(_sum(self._protected(job), self.keys), self.keys)} of "
            f"{_show(team.nominal, self.keys)}, this job asks for {_show(job.usage, self.keys)}"
        )

    def _cohort_message(self, job: Job) -> str:
        used = self.total
        return f"the machine has {_show(self.capacity, self.keys)}, running jobs use {_show(used, self.keys)}"


def _worse(before: dict, after: dict) -> bool:
    """Whether an excess grew past zero or past what it already was."""
    for k, value in after.items():  # noqa: SIM110 (a loop, not any(): the innermost check)
        if value > ZERO and value > before[k]:
            return True
    return False


def _sum(jobs: Iterable[Job], keys: tuple) -> dict[str, Fraction]:
    total = dict.fromkeys(keys, ZERO)
    for j in jobs:
        for k in keys:
            total[k] += j.usage.get(k, ZERO)
    return total


def _add(a: dict, b: dict, keys: tuple) -> dict[str, Fraction]:
    return {k: a[k] + b.get(k, ZERO) for k in keys if k in a}


def _le(used: dict, limit: dict, limited: dict) -> bool:
    """``used <= limit`` on every resource ``limited`` names (others are not limited)."""
    for k in limited:  # noqa: SIM110 (a loop, not all(): the innermost check)
        if k in used and used[k] > limit.get(k, ZERO):
            return False
    return True


def _show(amounts: dict, keys: tuple) -> str:
    return ", ".join(f"{k}={_number(amounts[k])}" for k in keys if k in amounts)


def _number(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else str(float(value))
