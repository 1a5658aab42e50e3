"""Endpoints as use cases: create, list, get, delete, the proxy's target, and the one loop that
watches them (``/health`` for readiness, ``/v1/models`` for the models, idle stop).

An endpoint is a job of the backend (``jupyter_quota.endpoints``): the quota it holds, its
scheduling, its end and its cancel are the job machinery's. This manager adds only what a job
cannot know: whether its server answers, what it serves, and when a request last went through
the proxy. That is kept in memory; after a restart an endpoint is probed again (it shows
Starting until it answers) and its idle time counts from the restart.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from traitlets import Float, List, Unicode
from traitlets.config import Configurable

from .. import endpoints, reasons
from ..deploy import parse_deploy_args
from ..endpoints import endpoint_json, is_endpoint, parse_endpoint_request, port_of, served_args
from ..errors import Conflict, Forbidden, NotFound
from ..estimator.serving import check_servable
from ..identity import Identity
from ..jobspec import create_named
from ..profiles import TeamProfile
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
    ):
        self.registry = registry
        self.backend = backend
        self.profile_for = profile_for
        self.deploy_command = deploy_command
        self.idle_minutes = idle_minutes
        self.log = log
        self.interval = interval
        self.clock = clock
        self._lock = threading.Lock()
        #: (namespace, name) -> {"team", "port", "models", "readyAt", "lastRequest"}: live endpoints
        self._watched: dict[tuple[str, str], dict] = {}
        self.ticker: Ticker | None = None
        self.served_jobs = ServedJobs(registry, backend)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Watch the live endpoints a previous server left, then every ``interval`` seconds."""
        if self.backend.name != "local":
            return  # endpoints run on the local backend only (so far)
        for profile in self.registry.all():
            for job in self.backend.list_jobs(profile):
                if is_endpoint(job) and job["phase"] in ("Pending", "Running"):
                    self._watch(job)
        if self.ticker is None:
            self.ticker = Ticker(self.watch_pass, self.interval, name="jupyter-quota-endpoints", log=self.log)
            self.ticker.start()

    def close(self) -> None:
        if self.ticker is not None:
            self.ticker.close()
            self.ticker = None

    # -- use cases -------------------------------------------------------------------------------

    def create(self, who: Identity, namespace: str, body) -> dict:
        profile = self.profile_for(who, namespace)
        if self.backend.name != "local":
            raise Conflict(
                f"endpoints run on the local backend only for now; this server's backend is {self.backend.name}",
                reason=reasons.UNSUPPORTED_BACKEND,
            )
        request = parse_endpoint_request(self.served_jobs.body_for(profile, body), profile)
        self.served_jobs.check_paths(who, request.args)
        check_servable(parse_deploy_args(request.args))

        def create(named):
            port = free_port()
            named.args = served_args(named.args, port)
            job = self.backend.build_job(profile, named, who.name, list(self.deploy_command))
            return self.backend.submit(profile, job, who.name)

        job = create_named(request, create)
        self._watch(job)
        if self.ticker is not None:
            self.ticker.wake()
        return self._shown(job)

    def list(self, who: Identity, namespace: str) -> dict:
        profile = self.registry.for_namespace(who, namespace)
        return {"endpoints": [self._shown(j) for j in self.backend.list_jobs(profile) if is_endpoint(j)]}

    def get(self, who: Identity, namespace: str, name: str) -> dict:
        return self._shown(self._job(self.registry.for_namespace(who, namespace), name))

    def delete(self, who: Identity, namespace: str, name: str) -> dict:
        profile = self.registry.for_namespace(who, namespace)
        job = self._job(profile, name)
        if job["owner"] != who.name and not who.admin:
            raise Forbidden(f'endpoint "{name}" belongs to {job["owner"]}; only its owner or an admin may delete it')
        return self._shown(self.backend.cancel(profile, name, who.name))

    def target(self, who: Identity, namespace: str, name: str) -> str:
        """The server's base URL for the proxy (a member of the team may call it); 409 unless Ready.
        Counts as a request for the idle policy."""
        job = self._job(self.registry.for_namespace(who, namespace), name)
        with self._lock:
            watched = self._watched.get((namespace, name))
            if watched is not None and watched.get("readyAt") and job["phase"] == "Running":
                watched["lastRequest"] = self.clock()
                return f"http://{endpoints.HOST}:{watched['port']}"
        phase = endpoint_json(job, watched)["phase"]
        wait = f"; wait until GET .../endpoints/{name} says Ready" if phase in ("Pending", "Starting") else ""
        raise Conflict(f'endpoint "{name}" is {phase}, not Ready{wait}', reason=reasons.NOT_READY)

    # -- the watch loop ----------------------------------------------------------------------------

    def watch_pass(self) -> None:
        """Probe endpoints not yet Ready, stop idle ones, forget those that ended."""
        with self._lock:
            watched = list(self._watched.items())
        for (namespace, name), state in watched:
            try:
                job = self.backend.get_job(self.registry.get(state["team"]), name)
            except (NotFound, KeyError):
                job = None
            if job is None or job["phase"] not in ("Pending", "Running"):
                with self._lock:
                    self._watched.pop((namespace, name), None)
                continue
            if job["phase"] != "Running" or job.get("reason") == reasons.TERMINATING:
                continue
            if not state.get("readyAt"):
                self._probe(namespace, name, state)
            elif self.idle_minutes > 0 and self.clock() - state["lastRequest"] >= self.idle_minutes * 60:
                self._stop_idle(namespace, name, state)

    def _probe(self, namespace: str, name: str, state: dict) -> None:
        base = f"http://{endpoints.HOST}:{state['port']}"
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
            state.update(models=models, readyAt=now, lastRequest=now)
        self.log.info("endpoint %s/%s ready on port %s, serving %s", namespace, name, state["port"], models)

    def _stop_idle(self, namespace: str, name: str, state: dict) -> None:
        message = endpoints.idle_message(self.idle_minutes)
        self.log.info("endpoint %s/%s: %s", namespace, name, message)
        try:
            self.backend.cancel(
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
            self._watched.setdefault((job["namespace"], job["name"]), {"team": job["team"], "port": port})

    def _job(self, profile: TeamProfile, name: str) -> dict:
        try:
            job = self.backend.get_job(profile, name)
        except NotFound:
            job = None
        if job is None or not is_endpoint(job):
            raise NotFound(f'endpoint "{name}" not found in namespace {profile.namespace}')
        return job

    def _shown(self, job: dict) -> dict:
        with self._lock:
            state = dict(self._watched.get((job["namespace"], job["name"])) or {})
        probe = {
            "models": state.get("models"),
            "readyAt": rfc3339(state["readyAt"]) if state.get("readyAt") else None,
            "lastRequestAt": rfc3339(state["lastRequest"]) if state.get("lastRequest") else None,
        }
        return endpoint_json(job, probe)
