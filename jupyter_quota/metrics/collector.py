"""The gauges read at scrape time: quotas (hard, used, remaining), live jobs, holders, stalls.

Everything here comes from what the service already keeps current (the backends' balance
caches, the tracker's live jobs, the backend's stall flags), so a scrape costs a pass over the
teams and the live jobs, never over finished ones. Labels are namespaces, teams, quota objects,
resources, phases, reasons and user names: never a job's arguments or paths.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..quantity import parse_quantity
from ..stall import REASONS as STALL_REASONS
from .tracker import LIVE

TEAM = ["namespace", "team"]


def number(text) -> float:
    """A Kubernetes quantity (``"128Gi"``, ``"500m"``) as a plain number (bytes, cores)."""
    return float(parse_quantity(str(text)).as_fraction())


class StateCollector(Collector):
    def __init__(self, profiles: Callable[[], list], balance: Callable, live: Callable[[], Iterable[dict]], stalled):
        self._profiles, self._balance, self._live, self._stalled = profiles, balance, live, stalled

    def describe(self):
        return []  # no describe at registration: the families depend on the teams configured

    def collect(self):
        profiles = self._profiles()
        yield from self._quotas(profiles)
        yield from self._jobs(profiles)

    def _quotas(self, profiles):
        per_quota = GaugeMetricFamily(
            "jupyter_quota_resourcequota",
            "Hard limit and use of a resource in a team's ResourceQuota (as kube_resourcequota).",
            labels=[*TEAM, "resourcequota", "resource", "type"],
        )
        remaining = GaugeMetricFamily(
            "jupyter_quota_resourcequota_remaining",
            "What a team may still request of a resource: the tightest hard minus used over its quotas.",
            labels=[*TEAM, "resource"],
        )
        stale = GaugeMetricFamily(
            "jupyter_quota_balance_stale",
            "1 when the team's balance may be out of date (kube watch broken).",
            labels=TEAM,
        )
        for profile in profiles:
            team = [profile.namespace, profile.team]
            balance = self._balance(profile)
            stale.add_metric(team, 1.0 if balance.get("stale") else 0.0)
            for q in balance["quotas"]:
                for resource, row in q["resources"].items():
                    for kind in ("hard", "used"):
                        per_quota.add_metric([*team, q["name"], resource, kind], number(row[kind]))
            for resource, row in balance["resources"].items():
                remaining.add_metric([*team, resource], number(row["remaining"]))
        yield from (per_quota, remaining, stale)

    def _jobs(self, profiles):
        teams = {p.namespace: p.team for p in profiles}
        phases = Counter({(ns, team, phase): 0 for ns, team in teams.items() for phase in LIVE})
        held: Counter = Counter()
        for job in self._live():
            ns, team = job.get("namespace", ""), job.get("team", "")
            phases[(ns, team, job.get("phase", ""))] += 1
            if job.get("phase") == "Running":
                for resource, amount in ((job.get("resources") or {}).get("requests") or {}).items():
                    held[(ns, team, job.get("owner", ""), resource)] += number(amount)
        jobs = GaugeMetricFamily(
            "jupyter_quota_jobs", "Live jobs per team and phase (Pending, Running).", labels=[*TEAM, "phase"]
        )
        for labels, count in sorted(phases.items()):
            jobs.add_metric(list(labels), count)
        holders = GaugeMetricFamily(
            "jupyter_quota_running_requests",
            "Resources requested by a user's Running jobs in a team (cores, bytes, GPUs): who holds what.",
            labels=[*TEAM, "owner", "resource"],
        )
        for labels, amount in sorted(held.items()):
            holders.add_metric(list(labels), amount)
        stalls = Counter({(ns, team, reason): 0 for ns, team in teams.items() for reason in STALL_REASONS})
        for job in self._stalled():
            stalls[(job["namespace"], job["team"], job["stalled"]["reason"])] += 1
        stalled = GaugeMetricFamily(
            "jupyter_quota_stalled_jobs",
            "Running jobs flagged as stalled (no log progress, or idle GPUs) per team and reason.",
            labels=[*TEAM, "reason"],
        )
        for labels, count in sorted(stalls.items()):
            stalled.add_metric(list(labels), count)
        yield from (jobs, holders, stalled)
