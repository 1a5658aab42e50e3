"""Endpoints as use cases: create, list, get, delete, the proxy's target, and the one loop that
watches them (``/health`` for readiness, ``/v1/models`` for the models, idle stop).

An endpoint is a job of the backend (``jupyter_quota.endpoints``): the quota it holds, its
scheduling, its end and its cancel are the job machinery's. This manager adds only what a job
cannot know: whether its server answers, what it serves, when a request last went through
the proxy, and what the proxy saw of its requests. Readiness is kept in memory, for the job's
current run (a preempted endpoint that starts again is probed again); after a restart an
endpoint is probed again (it shows Starting until it answers) and its idle time counts from the
restart. Request counts are written to the records every pass (``endpointrequests.py``), so they
survive a restart; latencies are kept in memory (``proxytraffic.Tally``). Each change of what
an endpoint shows (phase, readiness, models, reason) goes to ``on_change`` (the push).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable

from traitlets import Float, List, Unicode
from traitlets.config import Configurable

from .. import endpointrequests, endpoints, reasons
from ..deploy import parse_deploy_args
from ..endpoints import endpoint_json, is_endpoint, parse_endpoint_request, port_of, run_of, served_args
from ..errors import Conflict, Forbidden, NotFound
from ..estimator.serving import check_servable
from ..identity import Identity
from ..jobspec import create_named
from ..profiles import TeamProfile
from ..proxytraffic import Tally, requests_json
from ..ticker import Ticker
from ..times import rfc3339
from .servejobs import ServedJobs

#: seconds between two passes of the watch loop (sooner when an endpoint is created)
INTERVAL = 1.0
#: seconds a probe of ``/health`` or ``/v1/models`` may take (loopback: a live server answers at once)
PROBE_TIMEOUT = 2.0
#: who an idle endpoint says stopped it
IDLE_POLICY = "the idle-endpoint policy"


def free_port(host: str = endpoints.HOST) -> int:
    """A port nothing listens on now (the OS picks it). ms-swift moves to the next free port when
    the one given is taken; the readiness probe then finds nothing, and ``/v1/models`` confirms
    the server is the endpoint's."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class EndpointSettings(Configurable):
    """Endpoints (``c.JupyterQuota.<name>``: ``config.JupyterQuota`` is composed of it)."""

    endpoint_idle_minutes = Float(
        30.0,
        help="Minutes a Ready endpoint may go without a request through its proxied URL before "
        "the service stops it and its quota goes back to the team (the endpoint says so: phase "
        "Stopped, reason ``Idle``). 0 keeps endpoints until they are deleted. Default: 30.",
    ).tag(config=True)

    deploy_command = List(
        Unicode(),
        default_value=["swift", "deploy"],
        help="The argv an endpoint's ``swift deploy`` arguments are appended to, then ``--host "
        "127.0.0.1 --port N`` (a free port the service picks and proxies); never run through a "
        "shell, and looked up as ``job_command`` is. Default: ``['swift', 'deploy']``.",
    ).tag(config=True)

    endpoint_request_timeout = Float(
        600.0,
        help="Seconds one request through an endpoint's proxied URL may take, streamed answers "
        "included, before the proxy gives up on it. Default: 600.",
    ).tag(config=True)


class Endpoints:
    def __init__(
        self,
        registry,
        backend,
        profile_for: Callable[[Identity, str], TeamProfile],
        *,
        deploy_command: list[str],
        idle_minutes: float,
        log: logging.Logger,
        interval: float = INTERVAL,
        clock: Callable[[], float] = time.time,
        state_dir: str | None = None,
    ):
        self.registry = registry
        self.backend = backend
        self.profile_for = profile_for
        self.deploy_command = deploy_command
        self.idle_minutes = idle_minutes
        self.log = log
        self.interval = interval
        self.clock = clock
        #: who runs endpoints: the local backend's jobs, or the kube backend's Deployments
        #: (``backends/kube/endpoints.py``), through the same calls
        self.runner = getattr(backend, "endpoints", None) or backend
        self._lock = threading.Lock()
        #: held while counts move from memory to the records, and while both are read together, so
        #: a read never misses a batch being written (nor counts it twice)
        self._counting = threading.Lock()
        #: (namespace, name) -> {"team", "port", "createdAt", "models", "readyAt", "readyFor",
        #: "lastRequest"}: live endpoints (``readyFor``: the run of the job the probe answered for)
        self._watched: dict[tuple[str, str], dict] = {}
        #: (namespace, name, createdAt) -> what the proxy saw (counts not yet written, latencies)
        self._tallies: dict[tuple[str, str, str], Tally] = {}
        #: (namespace, name) -> what was last given to ``on_change``
        self._pushed: dict[tuple[str, str], str] = {}
        #: where request counts are recorded (None: kept in memory only)
        self.state_dir = state_dir
        #: called with an endpoint (as GET shows it, without ``url``) whenever what it shows changes
        self.on_change: Callable[[dict], None] | None = None
        self.ticker: Ticker | None = None
        self.served_jobs = ServedJobs(registry, backend)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Watch the live endpoints a previous server left, then every ``interval`` seconds."""
        for profile in self.registry.all():
            for job in self.runner.list_jobs(profile):
                if is_endpoint(job) and job["phase"] in ("Pending", "Running"):
                    self._watch(job)
                    self._remember(job)
        if self.ticker is None:
            self.ticker = Ticker(self.watch_pass, self.interval, name="jupyter-quota-endpoints", log=self.log)
            self.ticker.start()

    def close(self) -> None:
        if self.ticker is not None:
            self.ticker.close()
            self.ticker = None
        self.flush()

    # -- use cases -------------------------------------------------------------------------------

    def create(self, who: Identity, namespace: str, body) -> dict:
        profile = self.profile_for(who, namespace)
        request = parse_endpoint_request(self.served_jobs.body_for(profile, body), profile)
        self.served_jobs.check_paths(who, request.args)
        check_servable(parse_deploy_args(request.args))

        def create(named):
            if self.runner is self.backend:  # a local process: on a free loopback port
                named.args = served_args(named.args, free_port())
            job = self.runner.build_job(profile, named, who.name, list(self.deploy_command))
            return self.runner.submit(profile, job, who.name)

        job = create_named(request, create)
        self._watch(job)
        self._remember(job)
        if self.ticker is not None:
            self.ticker.wake()
        return self._shown(job)

    def list(self, who: Identity, namespace: str) -> dict:
        profile = self.registry.for_namespace(who, namespace)
        jobs = [j for j in self.runner.list_jobs(profile) if is_endpoint(j)]
        if not jobs:
            return {"endpoints": []}
        with self._counting:
            counted = self._counted(namespace)
            return {"endpoints": [self._shown(j, counted) for j in jobs]}

    def get(self, who: Identity, namespace: str, name: str) -> dict:
        job = self._job(self.registry.for_namespace(who, namespace), name)
        with self._counting:
            return self._shown(job, self._counted(namespace))

    def delete(self, who: Identity, namespace: str, name: str) -> dict:
        profile = self.registry.for_namespace(who, namespace)
        job = self._job(profile, name)
        if job["owner"] != who.name and not who.admin:
            raise Forbidden(f'endpoint "{name}" belongs to {job["owner"]}; only its owner or an admin may delete it')
        return self._shown(self.runner.cancel(profile, name, who.name))

    def target(self, who: Identity, namespace: str, name: str) -> str:
        """The server's base URL for the proxy (a member of the team may call it); 409 unless Ready.
        Counts as a request for the idle policy."""
        job = self._job(self.registry.for_namespace(who, namespace), name)
        with self._lock:
            watched = self._watched.get((namespace, name))
            if watched is not None and _ready(watched, job):
                base = self._base(job, watched)
                if base:
                    watched["lastRequest"] = self.clock()
                    return base
        phase = endpoint_json(job, {"readyAt": watched and _ready(watched, job)})["phase"]
        wait = f"; wait until GET .../endpoints/{name} says Ready" if phase in ("Pending", "Starting") else ""
        raise Conflict(f'endpoint "{name}" is {phase}, not Ready{wait}', reason=reasons.NOT_READY)

    def observe(self, namespace: str, name: str, status: int, seconds: float) -> str | None:
        """Count one request the proxy forwarded (the status its caller got, its latency in
        seconds); the endpoint's team, or None when the endpoint ended meanwhile."""
        with self._lock:
            state = self._watched.get((namespace, name))
            if state is None:
                return None
            key = (namespace, name, state["createdAt"])
            self._tallies.setdefault(key, Tally()).observe(status, seconds, self.clock())
            return state["team"]

    def flush(self) -> None:
        """Write the counts the proxy saw since the last flush, in one transaction (kept for the
        next flush if the write fails)."""
        if self.state_dir is None:
            return
        with self._counting:
            with self._lock:
                batches = {key: tally.take() for key, tally in self._tallies.items() if tally.pending}
            if not batches:
                return
            try:
                endpointrequests.add(self.state_dir, batches)
            except Exception:  # a full or read-only state dir: counted again at the next pass
                self.log.exception("jupyter_quota: recording endpoint request counts failed")
                with self._lock:
                    for key, pending in batches.items():
                        self._tallies.setdefault(key, Tally()).give_back(pending)

    # -- the watch loop ----------------------------------------------------------------------------

    def watch_pass(self) -> None:
        """Write request counts; probe endpoints not yet Ready, stop idle ones, forget those that
        ended; tell ``on_change`` what changed."""
        self.flush()
        with self._lock:
            watched = list(self._watched.items())
        for (namespace, name), state in watched:
            try:
                job = self.runner.get_job(self.registry.get(state["team"]), name)
            except (NotFound, KeyError):
                job = None
            if job is not None and job.get("createdAt") != state["createdAt"]:
                job = None  # the name is another endpoint's now
            if job is None or job["phase"] not in ("Pending", "Running"):
                if job is not None:
                    self._push(job)
                with self._lock:
                    self._watched.pop((namespace, name), None)
                    self._pushed.pop((namespace, name), None)
                    key = (namespace, name, state["createdAt"])
                    if key in self._tallies and not self._tallies[key].pending:
                        del self._tallies[key]
                continue
            if job["phase"] == "Running" and job.get("reason") != reasons.TERMINATING:
                if not _ready(state, job):
                    self._probe(namespace, name, state, job)
                elif self.idle_minutes > 0 and self.clock() - state["lastRequest"] >= self.idle_minutes * 60:
                    self._stop_idle(namespace, name, state)
            self._push(job)

    def _push(self, job: dict) -> None:
        """Give the endpoint to ``on_change`` if what it shows changed since it last was (a
        request alone, which moves ``lastRequestAt`` and ``requests``, is not a change)."""
        if self.on_change is None:
            return
        key = (job["namespace"], job["name"])
        with self._lock:
            state = dict(self._watched.get(key) or {})
        ready = _ready(state, job)
        seen = endpoint_json(job, {"models": state.get("models") if ready else None, "readyAt": ready})
        text = json.dumps(seen, sort_keys=True)
        with self._lock:
            if self._pushed.get(key) == text:
                return
            self._pushed[key] = text
        try:
            with self._counting:
                shown = self._shown(job, self._counted(job["namespace"]))
            self.on_change(shown)
        except Exception:  # the push must not stop the watch
            self.log.exception("jupyter_quota: pushing endpoint %s/%s failed", *key)

    def _probe(self, namespace: str, name: str, state: dict, job: dict) -> None:
        base = self._base(job, state)
        if not base:
            return  # no address yet (a pod without its IP)
        try:
            with urllib.request.urlopen(base + "/health", timeout=PROBE_TIMEOUT) as r:
                if r.status != 200:
                    return
            with urllib.request.urlopen(base + "/v1/models", timeout=PROBE_TIMEOUT) as r:
                models = [m["id"] for m in json.load(r).get("data", []) if isinstance(m, dict) and "id" in m]
        except (OSError, ValueError, urllib.error.URLError):
            return  # not answering yet: the next pass asks again
        now = self.clock()
        with self._lock:
            state.update(models=models, readyAt=now, lastRequest=now, readyFor=run_of(job))
        self.log.info("endpoint %s/%s ready on port %s, serving %s", namespace, name, state["port"], models)

    def _stop_idle(self, namespace: str, name: str, state: dict) -> None:
        message = endpoints.idle_message(self.idle_minutes)
        self.log.info("endpoint %s/%s: %s", namespace, name, message)
        try:
            self.runner.cancel(
                self.registry.get(state["team"]), name, IDLE_POLICY, reason=reasons.IDLE, message=message
            )
        except (NotFound, KeyError):
            pass  # gone meanwhile: the next pass forgets it

    # -- helpers ---------------------------------------------------------------------------------

    def _watch(self, job: dict) -> None:
        port = port_of(job)
        if port is None:
            return
        with self._lock:
            self._watched.setdefault(
                (job["namespace"], job["name"]), {"team": job["team"], "port": port, "createdAt": job["createdAt"]}
            )

    def _remember(self, job: dict) -> None:
        """Record the endpoint for usage (which jobs served); a failed write is logged, not fatal:
        the endpoint serves, and its usage rows then show it as a job."""
        if self.state_dir is None:
            return
        try:
            endpointrequests.remember(self.state_dir, job)
        except Exception:
            self.log.exception("jupyter_quota: recording endpoint %s/%s failed", job["namespace"], job["name"])

    def _counted(self, namespace: str) -> dict:
        """``(name, createdAt) -> Counter`` of the requests recorded for the namespace's endpoints."""
        if self.state_dir is None:
            return {}
        try:
            return endpointrequests.totals(self.state_dir, namespace)
        except Exception:  # unreadable records: the endpoints still show, with what is in memory
            self.log.exception("jupyter_quota: reading endpoint request counts failed")
            return {}

    def _job(self, profile: TeamProfile, name: str) -> dict:
        try:
            job = self.runner.get_job(profile, name)
        except NotFound:
            job = None
        if job is None or not is_endpoint(job):
            raise NotFound(f'endpoint "{name}" not found in namespace {profile.namespace}')
        return job

    def _base(self, job: dict, state: dict) -> str | None:
        """The server's base URL: the loopback port locally, the backend's answer on a cluster."""
        if self.runner is self.backend:
            return f"http://{endpoints.HOST}:{state['port']}"
        return self.runner.base_url(job)

    def _shown(self, job: dict, counted: dict | None = None) -> dict:
        """The endpoint as the API shows it; ``counted``: the namespace's recorded request counts."""
        key = (job["namespace"], job["name"], job["createdAt"])
        with self._lock:
            state = dict(self._watched.get(key[:2]) or {})
            if state.get("createdAt") != job["createdAt"]:
                state = {}
            tally = self._tallies.get(key)
            codes = (counted or {}).get(key[1:], Counter()) + (tally.pending_codes() if tally else Counter())
            latencies = list(tally.latencies) if tally else []
        ready = _ready(state, job)
        probe = {
            "models": state.get("models") if ready else None,
            "readyAt": rfc3339(state["readyAt"]) if ready else None,
            "lastRequestAt": rfc3339(state["lastRequest"]) if ready and state.get("lastRequest") else None,
        }
        return {**endpoint_json(job, probe), "requests": requests_json(codes, latencies)}


def _ready(state: dict, job: dict) -> bool:
    """Whether the server answered ``/health`` in the job's current run (``endpoints.run_of``): a
    requeued endpoint that starts again is a new process, maybe not listening yet."""
    return bool(state.get("readyAt")) and job["phase"] == "Running" and state.get("readyFor") == run_of(job)
