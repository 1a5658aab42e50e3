"""The Kubernetes backend: teams' jobs as batch/v1 Jobs, quota from the cluster's own objects.

Reads (balance, jobs, job) are served from a :class:`cache.ClusterCache` kept current by
watches, so a balance read makes no API call; ``observedAt`` (the last data from the API server)
and ``stale`` (broken, or silent for ``kube_stale_after`` seconds) say how current it is. Writes
go to the API server; one that gets no answer is a 503 whose message names no address (the log
has it):

- ``build_job`` is ``jobspec.build_job`` with this server's ``JobSettings`` (default image,
  ``backoffLimit``, ``ttlSecondsAfterFinished``, the profile's volumes with ``{username}``
  expanded and the cache volumes); ``submit`` creates that Job as it is, in its namespace's turn
  (``admission.py``: after the pods of earlier Jobs are charged) pre-checks it with
  ``quota.admit_job`` against the ResourceQuota status read from the API server and the cached
  LimitRanges (all of a Job's pods together, since Kubernetes admits them one by one and could
  leave a job half-running), then creates it. The API server's admission stays the
  authority: its 403 on the Job is raised with its text, and a refusal of the pods afterwards
  shows on the job as the ``FailedCreate`` event's reason and message. A submit the quota
  refuses is written down as demand (``usagestore.refusal``) until the user's next submit there.
  With Kueue (``kueue_queue``) the Job is created suspended and labelled for its LocalQueue,
  without the pre-check and the turn: Kueue admits it, possibly beyond what the quota has left
  now (``jupyter_quota/kueue.py``).
- ``cancel`` deletes the Job with ``propagationPolicy: Background``; the garbage collector
  removes its pods. The cancelled job is remembered by this process (Failed/Cancelled) until
  restart: the cluster keeps no record of a deleted Job.
- ``logs`` reads the pod log API; when the cluster cannot serve them, a ``LogsUnavailable``
  error says why (no logs are invented).
- ``stalled``: a Running job whose pod logged nothing for ``stalled_job_minutes`` is flagged
  (``logprogress.py``: the kubelet's timestamp of the pod's last log line).
- Preemption: a fine-tune whose pod the scheduler preempted for a higher-priority pod is
  requeued under the same name and resumes from its last checkpoint (``preemption.py``,
  ``requeue.py``); not with Kueue, which requeues its own workloads.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import sqlite3
import threading
import time
from datetime import datetime

from ... import errors, jobfields, labels, paging, quota, reasons, stall
from ...jobspec import JobSettings
from ...times import rfc3339
from ..base import Backend, balance_json
from . import jobview, usagestore
from .admission import Turns
from .bounded import bounded
from .cache import STALE_AFTER, ClusterCache
from .client import ClusterUnavailable, Kube, KubeError, load_api_client, ns_path
from .endpoints import KubeEndpoints
from .logprogress import LogProgress
from .refusals import refusal
from .requeue import Requeuer
from .usagerecorder import UsageRecorder
from .usagestore import UsageStore

BALANCE_KINDS = ("resourcequotas", "limitranges")


class LogsUnavailable(errors.QuotaError):
    """The cluster cannot serve a job's logs now (no pod yet, node unreachable, ...)."""

    status = 503
    reason = "LogsUnavailable"


class KubeBackend(Backend):
    """Jobs on a Kubernetes cluster, admitted by the cluster's ResourceQuota and LimitRange."""

    name = "kube"

    def __init__(
        self,
        kube: Kube,
        *,
        job_image: str = "",
        job_image_pull_policy: str = "",
        backoff_limit: int = 0,
        ttl_seconds_after_finished: int = -1,
        cache_volumes: list | None = None,
        watch_timeout: int = 10,
        stale_after: float = STALE_AFTER,
        backoff_max: float = 30.0,
        sync_timeout: float = 10.0,
        namespaced: bool = False,
        kueue_queue: str = "",
        usage_path: str = ":memory:",
        stall_policy: stall.StallPolicy | None = None,
        log: logging.Logger | None = None,
    ):
        self.kube = kube
        #: What ``build_job`` gives every Job besides the profile's and the request's part.
        self.job_settings = JobSettings(
            image=job_image,
            image_pull_policy=job_image_pull_policy,
            backoff_limit=backoff_limit,
            ttl_seconds_after_finished=ttl_seconds_after_finished,
            mounts=True,
            cache_volumes=tuple(dict(v) for v in cache_volumes or []),
            kueue_queue=kueue_queue,
        )
        self.sync_timeout = sync_timeout
        self.log = log or logging.getLogger(__name__)
        self.cache = ClusterCache(
            kube,
            watch_timeout=watch_timeout,
            stale_after=stale_after,
            backoff_max=backoff_max,
            log=self.log,
            namespaced=namespaced,
        )
        # A turn waits for earlier Jobs' pods, then reads the quotas and creates the Job.
        self.turns = Turns(
            self.cache, settle_timeout=sync_timeout, turn_timeout=sync_timeout + 2 * kube.request_timeout
        )
        #: pod starts and finishes, kept by the service for usage (``usagestore``, ``usagerecorder``)
        self.usage = UsageRecorder(self.cache, UsageStore(usage_path), self.log)
        #: when a Running job's pod last logged (``stalled``)
        self.log_progress = LogProgress(kube, stall_policy or stall.StallPolicy())
        #: requeues Jobs whose pods the scheduler preempted (``preemption.py``); Kueue does its own
        self.requeuer = None if kueue_queue else Requeuer(kube, self.cache, self.log)
        self._cancelled: dict[tuple[str, str], dict] = {}
        self._lock = threading.Lock()
        self._started = False
        #: endpoints: Deployments and Services (``endpoints.py``; ``service/endpoints.py`` drives them)
        self.endpoints = KubeEndpoints(self)

    @classmethod
    def from_config(cls, config, log: logging.Logger | None = None) -> KubeBackend:
        api_client = load_api_client(config.kube_config_file, config.kube_context, config.kube_in_cluster)
        return cls(
            Kube(api_client, request_timeout=config.kube_request_timeout),
            job_image=config.job_image,
            job_image_pull_policy=config.job_image_pull_policy,
            backoff_limit=config.kube_backoff_limit,
            ttl_seconds_after_finished=config.kube_ttl_seconds_after_finished,
            cache_volumes=config.kube_cache_volumes,
            watch_timeout=config.kube_watch_timeout,
            stale_after=config.kube_stale_after,
            backoff_max=config.kube_watch_backoff_max,
            namespaced=config.kube_watch_scope == "namespaces",
            kueue_queue=config.kueue_queue,
            usage_path=os.path.join(config.state_dir, usagestore.FILE),
            stall_policy=stall.StallPolicy(config.stalled_job_minutes, config.stalled_gpu_utilization),
            log=log,
        )

    @property
    def job_image(self) -> str:
        return self.job_settings.image

    @property
    def backoff_limit(self) -> int:
        return self.job_settings.backoff_limit

    # -- background work -----------------------------------------------------------------------

    def start(self) -> None:
        """Start the watches; returns at once (reads say ``stale`` until the first list)."""
        if not self._started:
            self._started = True
            self.cache.start()
            self.usage.start()
            if self.requeuer is not None:
                self.requeuer.start()

    def close(self) -> None:
        if self.requeuer is not None:
            self.requeuer.stop()
        self.usage.stop()
        self.cache.stop()
        self._started = False

    def track(self, namespaces) -> None:
        """Watch these team namespaces from now on, so their pods' usage is recorded from the start."""
        self.usage.track(namespaces)

    def usage_spans(self, since: int, until: int, namespaces=None) -> list:
        """Pods that held their requests in ``[since, until)``, as the service recorded them."""
        return self.usage.store.spans(since, until, namespaces)

    def job_records(self, since: int, until: int, namespaces=None) -> list:
        """The history recommendations and replays read (``usagestore.UsageStore.records``):
        pods with their Jobs' submission, Jobs that waited, and submits the quota refused."""
        return self.usage.store.records(since, until, namespaces)

    def apply_profile(self, profile) -> None:
        """An admin's profile change reaches the cluster first: the namespace's ResourceQuota and
        LimitRange objects are written (the watch then updates every user's balance); a refusal
        from the API server stores nothing."""
        from .apply import apply_quota_objects

        for result in apply_quota_objects(profile, self.kube):
            if result["action"] != "unchanged":
                self.log.info(
                    "jupyter_quota: %s %s %s/%s for an admin's change to team %s",
                    result["action"],
                    result["kind"],
                    result["namespace"],
                    result["name"],
                    profile.team,
                )

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Block until every kind was listed once (tests, and ``submit`` right after start)."""
        self.start()
        return self.cache.wait_synced(self.sync_timeout if timeout is None else timeout)

    # -- reads, from the cache -------------------------------------------------------------------

    def balance(self, profile) -> dict:
        namespace = self._watched(profile)
        quotas = sorted(self.cache["resourcequotas"].items(namespace), key=_name)
        limit_ranges = sorted(self.cache["limitranges"].items(namespace), key=_name)
        return {
            **balance_json(profile, quotas, limit_ranges),
            "observedAt": self.cache.observed_at(BALANCE_KINDS, namespace),
            "stale": self.cache.stale(BALANCE_KINDS, namespace),
        }

    def balance_version(self, profile) -> str:
        """The cache's resourceVersions of what :meth:`balance` reads, and whether it is stale."""
        namespace = self._watched(profile)
        names = sorted(
            f"{kind}/{_name(o)}@{(o.get('metadata') or {}).get('resourceVersion', '')}"
            for kind in BALANCE_KINDS
            for o in self.cache[kind].items(namespace)
        )
        return f"{int(self.cache.stale(BALANCE_KINDS, namespace))}." + ",".join(names)

    def page_jobs(self, profile, limit: int, start: str | None = None) -> paging.Page:
        """Keyset pages of the watch cache, newest first by (creationTimestamp, name).

        ``start`` is the last shown job's key, ``<creationTimestamp>/<name>``; the cache changes
        between pages, but a key order is stable, so no job shows twice or is skipped (one
        created since the first page is newer than every key and is not shown).
        """
        namespace = self._watched(profile)
        after = _start_key(start) if start is not None else None
        jobs = {_name(j): j for j in self.cache["jobs"].items(namespace)}
        entries = [
            ((_created(j), _name(j)), lambda j=j: self._view(profile, j))
            for j in jobs.values()
            if not _is_cancelled_copy(j, self._cancelled)
        ]
        with self._lock:  # cancelled jobs this process remembers, shown as they were
            entries += [
                ((v.get("createdAt") or "", n), lambda v=v: _shown(v))
                for (ns, n), v in self._cancelled.items()
                if ns == namespace and not _replaced(jobs.get(n), v)
            ]
        entries.sort(key=lambda entry: entry[0], reverse=True)
        if after is not None:
            entries = [entry for entry in entries if entry[0] < after]
        shown, rest = entries[:limit], entries[limit:]
        views = [view() for _, view in shown]  # only the page's jobs are joined with pods and events
        if not rest:
            return paging.Page(views)
        return paging.Page(views, "/".join(shown[-1][0]), len(rest))

    def get_job(self, profile, name: str) -> dict:
        job = self.cache["jobs"].get(self._watched(profile), name)
        with self._lock:
            cancelled = self._cancelled.get((profile.namespace, name))
        if cancelled is not None and not _replaced(job, cancelled):
            return _shown(cancelled)
        if job is None:
            job = self._job_from_server(profile.namespace, name)
        return self._view(profile, job)

    def _job_from_server(self, namespace: str, name: str) -> dict:
        """A cache miss asks the API server once: a job just created may not have come by watch yet."""
        try:
            with self._reported(f"read job {namespace}/{name}"):
                return bounded("jobs", self.kube.get(ns_path(namespace, "jobs", name, group="batch/v1")))
        except KubeError as e:
            if e.code == 404:
                raise errors.NotFound(f'jobs.batch "{name}" not found') from None
            raise

    # -- writes, to the API server ---------------------------------------------------------------

    def submit(self, profile, job: dict, owner: str) -> dict:
        namespace = self._watched(profile)
        name = _checked(profile, job)
        self._require_synced(namespace)
        if self.cache["jobs"].get(namespace, name) is not None:
            raise errors.Conflict(f'jobs.batch "{name}" already exists')
        if self.job_settings.kueue_queue:
            # Kueue admits: the Job is created suspended and waits in its LocalQueue, possibly
            # beyond what the quota has left now; its pods come (and are charged) on admission.
            created = self._create_job(namespace, name, job)
            template = quota.apply_limit_ranges(quota.job_pod(job), self.cache["limitranges"].items(namespace))
        else:
            with self.turns.turn(namespace):  # admission.py: whole-job admission, one submit at a time
                quotas = self._quotas_from_server(namespace)
                limit_ranges = self.cache["limitranges"].items(namespace)
                try:
                    admitted = quota.admit_job(job, quotas, limit_ranges)  # AdmissionDenied: same text as local
                    created = self._create_job(namespace, name, job)
                except errors.AdmissionDenied as e:
                    if e.reason in reasons.QUOTA_REFUSALS:  # demand the quota hid (recommendations)
                        self._history(self.usage.store.refused, usagestore.refusal(job, limit_ranges, owner, _now()))
                    raise
                self.turns.created(namespace, created, admitted.pods)
            template = admitted.pod
        with self._lock:
            self._cancelled.pop((namespace, name), None)
        # the user's refused submits before it were this demand, waiting: they end now
        self._history(self.usage.store.submitted, namespace, owner, _epoch_of(created))
        self.log.info("job %s/%s created for %s", namespace, name, owner)
        return jobview.job_json(created, [], [], profile.gpuResource, template_pod=template)

    def _history(self, write, *args) -> None:
        """A write of the recommendations' history; its failure is logged, never the submit's answer."""
        try:
            write(*args)
        except sqlite3.Error as e:
            self.log.warning("jupyter_quota: could not record a submit in the usage store: %s", e)

    def _create_job(self, namespace: str, name: str, job: dict) -> dict:
        try:
            with self._reported(f"create job {namespace}/{name}"):
                created = self.kube.post(ns_path(namespace, "jobs", group="batch/v1"), job)
        except KubeError as e:
            raise refusal(e, name) from None
        self.cache["jobs"].remember(created)
        return created

    def _quotas_from_server(self, namespace: str) -> list[dict]:
        """The namespace's ResourceQuotas read from the API server, which has charged every pod
        created so far (the watch may lag); the cache gets them too."""
        with self._reported(f"read the quotas of {namespace}"):
            items = self.kube.get(ns_path(namespace, "resourcequotas")).get("items") or []
        quotas = [bounded("resourcequotas", item) for item in items]
        for item in quotas:
            self.cache["resourcequotas"].remember(item)
        return quotas

    def logs(self, profile, name: str, tail_lines: int = 200) -> str:
        namespace = profile.namespace
        self.get_job(profile, name)  # NotFound for an unknown job
        pods = self._pods_of(namespace, name, None)
        if not pods:
            return ""
        pod = _newest(pods)
        pod_name = pod["metadata"]["name"]
        if ((pod.get("status") or {}).get("phase") or "Pending") == "Pending":
            return ""
        try:
            with self._reported(f"logs of pod {namespace}/{pod_name}"):
                return self.kube.request(
                    "GET",
                    ns_path(namespace, "pods", pod_name) + "/log",
                    query={"container": jobfields.TRAIN, "tailLines": max(0, int(tail_lines))},
                    raw=True,
                )
        except KubeError as e:
            raise LogsUnavailable(
                f'the cluster could not serve the logs of pod "{pod_name}" of job "{name}": {e.message}'
            ) from None

    def cancel(self, profile, name: str, by: str) -> dict:
        namespace = profile.namespace
        current = self.get_job(profile, name)
        # A job failed for its image still has a Pending pod holding quota: cancel deletes it.
        held = current.get("reason") in reasons.IMAGE_PULL_FAILURES
        if (current["phase"] in ("Succeeded", "Failed") and not held) or current.get("reason") == reasons.TERMINATING:
            return current
        try:
            with self._reported(f"delete job {namespace}/{name}"):
                self.kube.delete(
                    ns_path(namespace, "jobs", name, group="batch/v1"),
                    body={"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"},
                )
        except KubeError as e:
            if e.code == 404:
                raise errors.NotFound(f'jobs.batch "{name}" not found') from None
            raise
        job = self.cache["jobs"].get(namespace, name) or {}
        cancelled = dict(
            current,
            phase="Failed",
            reason=reasons.CANCELLED,
            message=f"cancelled by {by}",
            finishedAt=rfc3339(time.time()),
        )
        cancelled.pop("exitCode", None)
        cancelled["_uid"] = (job.get("metadata") or {}).get("uid", "")
        with self._lock:
            self._cancelled[(namespace, name)] = cancelled
        self.log.info("job %s/%s cancelled by %s (deleted, background propagation)", namespace, name, by)
        return _shown(cancelled)

    def inventory(self) -> dict:
        return {"source": "cluster", "gpus": []}

    def stalled(self) -> list[dict]:
        flagged = []
        for namespace in self.cache["jobs"].namespaces():
            for job in self.cache["jobs"].items(namespace):
                meta = job["metadata"]
                if jobview.end_condition(job) is not None or meta.get("deletionTimestamp"):
                    continue
                pods = self._pods_of(namespace, meta["name"], meta.get("uid"))
                flag = self.log_progress.stalled(_newest(pods))
                if flag is not None:
                    team = (meta.get("labels") or {}).get(labels.TEAM, "")
                    flagged.append({"namespace": namespace, "team": team, "name": meta["name"], "stalled": flag})
        return flagged

    # -- helpers -----------------------------------------------------------------------------------

    def _view(self, profile, job: dict) -> dict:
        namespace, name = job["metadata"].get("namespace", ""), job["metadata"]["name"]
        pods = self._pods_of(namespace, name, job["metadata"].get("uid"))
        events = [
            e for e in self.cache["events"].items(namespace) if (e.get("involvedObject") or {}).get("name") == name
        ]
        template_pod = None
        if not pods:
            template_pod = quota.apply_limit_ranges(quota.job_pod(job), self.cache["limitranges"].items(namespace))
        view = jobview.job_json(
            job,
            pods,
            events,
            profile.gpuResource,
            template_pod=template_pod,
            preemptions=self.cache["preemptions"].items(namespace),
        )
        if view["phase"] == "Running" and view.get("reason") != reasons.TERMINATING:
            view["stalled"] = self.log_progress.stalled(_newest(pods), wait=False)  # reads never wait
        return view

    def _pods_of(self, namespace: str, name: str, uid: str | None) -> list[dict]:
        return jobview.pods_of(self.cache["pods"].items(namespace), name, uid)

    @contextlib.contextmanager
    def _reported(self, what: str):
        """Log where and how the API server failed to answer; the user's message names no address."""
        try:
            yield
        except ClusterUnavailable as e:
            self.log.warning("kube: %s: %s", what, e.detail)
            raise

    def _watched(self, profile) -> str:
        """The profile's namespace, watched from now on; its first read waits for the first list
        (``kube_watch_scope = "namespaces"``: a namespace is watched from its first request)."""
        namespace = profile.namespace
        if self.cache.watch(namespace) and self._started:
            self.cache.wait(lambda: self.cache.synced(namespace=namespace), self.sync_timeout)
        return namespace

    def _require_synced(self, namespace: str) -> None:
        kinds = BALANCE_KINDS + ("jobs",)
        if not self.cache.synced(kinds, namespace):
            self.start()
            if not self.cache.wait(lambda: self.cache.synced(kinds, namespace), self.sync_timeout):
                problems = (
                    "; ".join(f"{k}: {v}" for k, v in self.cache.errors(namespace=namespace).items()) or "no answer yet"
                )
                raise ClusterUnavailable(
                    f"the cluster's quotas could not be read, so nothing is submitted ({problems})"
                )


def _now() -> int:
    return int(time.time())


def _epoch_of(created: dict) -> int:
    stamp = (created.get("metadata") or {}).get("creationTimestamp")
    return int(datetime.fromisoformat(stamp).timestamp()) if stamp else _now()


def _checked(profile, job: dict) -> str:
    """The name of ``job`` (from ``build_job``), refused as the API server would refuse it, or with
    a message naming the setting to fix when it has no image; the Job itself is not changed."""
    meta = job.get("metadata") or {}
    name = meta.get("name") or ""
    if not name:
        raise errors.Invalid('Job.batch "" is invalid: metadata.name: Required value: name is required')
    if meta.get("namespace") not in (None, "", profile.namespace):
        raise errors.Invalid("the namespace of the provided object does not match the namespace sent on the request")
    pod = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    if not all(c.get("image") for c in pod.get("containers") or []):
        raise errors.InvalidRequest(
            f"no container image for team {profile.team!r}: set the profile's 'image' or "
            "JupyterQuota.job_image to an image that has ms-swift"
        )
    return name


def _shown(cancelled: dict) -> dict:
    """A remembered cancelled job as the API shows it (without the uid kept beside it)."""
    return copy.deepcopy({k: v for k, v in cancelled.items() if k != "_uid"})


def _newest(pods: list[dict]) -> dict | None:
    return max(pods, key=_created, default=None)


def _name(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("name", "")


def _created(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("creationTimestamp") or ""


def _start_key(start: str) -> tuple[str, str]:
    """A page's ``start`` back into its (creationTimestamp, name) key; names hold no '/'."""
    created, slash, name = start.rpartition("/")
    if not slash or not name:
        raise paging.invalid_start(start)
    return created, name


def _replaced(job: dict | None, cancelled: dict) -> bool:
    """Whether ``job`` is a new Job under a cancelled one's name (created after the cancel)."""
    if job is None:
        return False
    uid = (job.get("metadata") or {}).get("uid", "")
    return bool(uid) and uid != cancelled.get("_uid") and not (job.get("metadata") or {}).get("deletionTimestamp")


def _is_cancelled_copy(job: dict, cancelled: dict) -> bool:
    meta = job.get("metadata") or {}
    entry = cancelled.get((meta.get("namespace", ""), meta.get("name", "")))
    return entry is not None and not _replaced(job, entry)
