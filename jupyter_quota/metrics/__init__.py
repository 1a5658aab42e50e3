"""Prometheus metrics of the quota service, served at ``GET {base_url}quota/v1/metrics``.

One ``CollectorRegistry`` per service (never the process-wide one: a Jupyter server has its own
metrics there, and tests run several services in one process). Counters and histograms are
updated when something happens (a submit admitted or refused, a job seen starting or ending by
the ``JobTracker``, a request an endpoint's proxy forwarded); gauges are read at scrape time
(``collector.py``). Names follow kube-state-metrics (``jupyter_quota_resourcequota{type="hard"|"used"}``) and Kueue
(``..._admitted_jobs_total``); deploy/grafana/jupyter-quota.json queries them.
"""

from __future__ import annotations

import threading
import time

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from ..errors import QuotaError
from ..proxytraffic import status_class
from ..times import epoch_of, rfc3339
from .collector import TEAM, StateCollector
from .tracker import JobTracker

#: seconds: a minute to three days
DURATION_BUCKETS = (60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400, 259200)
#: seconds: a second to a day
WAIT_BUCKETS = (1, 5, 15, 60, 300, 900, 1800, 3600, 14400, 86400)
#: measured / estimated peak GPU memory (1 is exact); a ratio, not a signed error, because
#: prometheus_client leaves out ``_sum`` of a histogram with negative buckets
RATIO_BUCKETS = (0.5, 0.75, 0.9, 0.95, 1.0, 1.05, 1.1, 1.25, 1.5, 2.0)
#: seconds: a proxied request, from a health check to a long generation (the proxy's 600 s timeout)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
ENDPOINT = [*TEAM, "endpoint"]


class QuotaMetrics:
    def __init__(self, registry, backend, memory, effective):
        """``registry``: the teams; ``backend``: their jobs; ``memory``: the jobs' estimates
        (``JobMemory``); ``effective``: their effective hard quota (``service.effective``)."""
        self._teams = registry
        self._backend = backend
        self._memory = memory
        self._lock = threading.Lock()
        self.registry = CollectorRegistry(auto_describe=False)
        self.admitted = Counter(
            "jupyter_quota_admitted_jobs", "Jobs admitted under a team's quota.", TEAM, registry=self.registry
        )
        self.refused = Counter(
            "jupyter_quota_refused_jobs",
            "Submits refused, by reason (jupyter_quota/reasons.py: ExceededQuota, LimitRangeViolation, ...).",
            [*TEAM, "reason"],
            registry=self.registry,
        )
        self.finished = Counter(
            "jupyter_quota_finished_jobs",
            "Jobs that ended, by phase (Succeeded, Failed) and reason (Error, Cancelled, ...).",
            [*TEAM, "phase", "reason"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "jupyter_quota_job_duration_seconds",
            "Run time of ended jobs, from start to end.",
            [*TEAM, "phase"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.queue_wait = Histogram(
            "jupyter_quota_job_queue_wait_seconds",
            "Time from submit to start.",
            TEAM,
            buckets=WAIT_BUCKETS,
            registry=self.registry,
        )
        self.estimator_ratio = Histogram(
            "jupyter_quota_estimator_peak_ratio",
            "Measured over estimated peak GPU memory of ended jobs that report both: 1 is exact, "
            "above 1 the estimate was short (an error of ratio - 1).",
            TEAM,
            buckets=RATIO_BUCKETS,
            registry=self.registry,
        )
        self.endpoint_requests = Counter(
            "jupyter_quota_endpoint_requests",
            "Requests forwarded by an endpoint's proxy, by the status class its caller got (2xx, 4xx, 5xx, ...).",
            [*ENDPOINT, "code"],
            registry=self.registry,
        )
        self.endpoint_latency = Histogram(
            "jupyter_quota_endpoint_request_duration_seconds",
            "Time from the proxy forwarding a request to the answer's last byte (a streamed answer: its end).",
            ENDPOINT,
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.tracker = JobTracker(self._started, self._ended, since=rfc3339(time.time()))
        self.registry.register(
            StateCollector(
                registry.all,
                lambda profile: backend.balance(effective.of(profile)),
                lambda: list(self.tracker.live.values()),
                backend.stalled,
            )
        )

    # -- events ----------------------------------------------------------------------------------

    def admission(self, profile, refusal_reason: str | None = None) -> None:
        if refusal_reason is None:
            self.admitted.labels(profile.namespace, profile.team).inc()
        else:
            self.refused.labels(profile.namespace, profile.team, refusal_reason).inc()

    def endpoint_request(self, namespace: str, team: str, endpoint: str, status: int, seconds: float) -> None:
        labels = (namespace, team, endpoint)
        self.endpoint_requests.labels(*labels, status_class(status)).inc()
        self.endpoint_latency.labels(*labels).observe(max(0.0, seconds))

    def _started(self, job: dict) -> None:
        wait = epoch_of(job["startedAt"]) - epoch_of(job["createdAt"])
        self.queue_wait.labels(job["namespace"], job["team"]).observe(max(0.0, wait))

    def _ended(self, job: dict) -> None:
        team = [job["namespace"], job["team"]]
        self.finished.labels(*team, job["phase"], job.get("reason") or "").inc()
        if job.get("startedAt") and job.get("finishedAt"):
            seconds = epoch_of(job["finishedAt"]) - epoch_of(job["startedAt"])
            self.duration.labels(*team, job["phase"]).observe(max(0.0, seconds))
        memory = job.get("memory") or self._memory_of(job) or {}
        estimated, measured = memory.get("estimatedGib"), memory.get("measuredGib")
        if isinstance(estimated, (int, float)) and isinstance(measured, (int, float)) and estimated > 0:
            self.estimator_ratio.labels(*team).observe(measured / estimated)

    def _memory_of(self, job: dict) -> dict | None:
        """An ended job's ``memory`` (jobmemory.py: its estimate, and the peak its log gave)."""
        try:
            profile = self._teams.get(job["team"])
        except QuotaError:  # a team removed since: its jobs' estimates are not looked up
            return None
        return self._memory.decorate(profile, dict(job)).get("memory")

    # -- the scrape ------------------------------------------------------------------------------

    def scrape(self) -> bytes:
        """The text exposition, after the tracker caught up with the backend's jobs."""
        with self._lock:  # one look at a time: the tracker's cursor moves once per look
            profiles = self._teams.all()
            for p in profiles:  # zero, not absent, for the dashboard (a queue wait comes with any start)
                for family in (self.admitted, self.estimator_ratio):
                    family.labels(p.namespace, p.team)
            self.tracker.update(self._backend.job_changes(profiles, self.tracker.cursor))
            return generate_latest(self.registry)
