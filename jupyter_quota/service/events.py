"""Push, not poll: a team's balance and job changes sent to its subscribers (``GET /events``, issue 23).

Two parts:

- :class:`FanOut`, the pure core (no I/O, no threads of its own): subscribers register by team,
  and :meth:`FanOut.publish` hands one frame, made once, to every subscriber of that team.
- :class:`EventHub`, the adapter around it: the service's change points call
  :meth:`EventHub.changed` (a team's quota was written: a profile edit, an increase decided or
  expired, a window) or :meth:`EventHub.job_changed` (a submit, a cancel). One pass, on a
  :class:`~jupyter_quota.ticker.Ticker`, then computes each changed team's balance once, whatever
  its number of subscribers, and sends it if it differs from the last one sent (``observedAt``
  aside). The same pass asks the backend for the jobs that changed since its last pass
  (``Backend.job_changes``: a local job that ended, a kube Job the watch saw move), so changes
  nobody called about arrive too, within :data:`POLL_SECONDS`.

Frames are delivered on the subscribers' IO loop (``call_soon_threadsafe``); a subscriber's
``send`` writes the frame to its stream. An event's ``data`` is the JSON of the matching REST
answer: ``balance`` is ``GET /namespaces/{ns}/balance``'s body, ``job`` a job object,
``endpoint`` an endpoint as ``GET .../endpoints/{name}`` answers it (without ``url``, which
depends on the server asked): its readiness and models change with no job row changing.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable

from ..ticker import Ticker

#: event names (the ``event:`` line); the frontend's ``events.ts`` names the same ones
BALANCE = "balance"
JOB = "job"
#: an endpoint's phase, readiness, models or reason changed (``service/endpoints.py`` tells)
ENDPOINT = "endpoint"
#: a temporary increase requested, decided or ended: the request as ``GET /increases`` lists it
INCREASE = "increase"
#: how often the pass asks the backend what changed while anyone subscribes (seconds)
POLL_SECONDS = 1.0
#: how often every subscribed team's balance is recomputed, for changes no job or write reports
#: (on Kubernetes, the API server updating a ResourceQuota's status.used after a pod starts)
SWEEP_SECONDS = 10.0
#: a comment line this often keeps proxies (configurable-http-proxy, the user's server) from
#: closing an idle stream, and lets a relay notice a client that left
HEARTBEAT_SECONDS = 15.0
#: what a client waits before reconnecting (the ``retry:`` field), in milliseconds
RETRY_MS = 5000
HEARTBEAT_FRAME = b": heartbeat\n\n"
#: subscribers sent a heartbeat per turn of the IO loop: requests are served between turns
HEARTBEAT_SLICE = 200
_FINISHED = ("Succeeded", "Failed")


def frame(event: str, data: dict) -> bytes:
    """One server-sent event: ``event:`` and a one-line JSON ``data:`` (json.dumps writes no newline)."""
    return text_frame(event, json.dumps(data))


def text_frame(event: str, text: str) -> bytes:
    return f"event: {event}\ndata: {text}\n\n".encode()


class Subscription:
    """One subscriber: the teams it hears about and where its frames go (``send(frame)``)."""

    __slots__ = ("send", "teams")

    def __init__(self, teams: Iterable[str], send: Callable[[bytes], object]):
        self.teams = frozenset(teams)
        self.send = send


class FanOut:
    """Subscribers by team. ``subscribe``/``unsubscribe``/``teams`` may be called from any thread;
    ``publish`` and ``heartbeat`` run where the subscribers' ``send`` may be called (their loop)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._by_team: dict[str, set[Subscription]] = {}
        self._all: set[Subscription] = set()

    def subscribe(self, teams: Iterable[str], send: Callable[[bytes], object]) -> Subscription:
        sub = Subscription(teams, send)
        with self._lock:
            self._all.add(sub)
            for team in sub.teams:
                self._by_team.setdefault(team, set()).add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            self._all.discard(sub)
            for team in sub.teams:
                subs = self._by_team.get(team)
                if subs is not None:
                    subs.discard(sub)
                    if not subs:
                        del self._by_team[team]

    def teams(self) -> set[str]:
        """The teams someone subscribes to now."""
        with self._lock:
            return set(self._by_team)

    def __len__(self) -> int:
        return len(self._all)

    def publish(self, team: str, data: bytes) -> int:
        """Send ``data`` (one frame) to each subscriber of ``team``; how many got it. A subscriber
        whose ``send`` raises is dropped (its stream is gone), the others still get it."""
        with self._lock:
            subs = list(self._by_team.get(team, ()))
        return self._send(subs, data)

    def heartbeat(self) -> int:
        with self._lock:
            subs = list(self._all)
        return self._send(subs, HEARTBEAT_FRAME)

    def heartbeat_in_slices(self, later: Callable, size: int = HEARTBEAT_SLICE) -> None:
        """:meth:`heartbeat`, ``size`` subscribers at a time, the next slice through ``later(fn,
        *args)`` (the loop's ``call_soon``): 10,000 streams at once held the loop for seconds."""
        with self._lock:
            subs = list(self._all)

        def step(start: int) -> None:
            self._send(subs[start : start + size], HEARTBEAT_FRAME)
            if start + size < len(subs):
                later(step, start + size)

        step(0)

    def _send(self, subs: list[Subscription], data: bytes) -> int:
        sent = 0
        for sub in subs:
            try:
                sub.send(data)
                sent += 1
            except Exception:  # noqa: BLE001 - a closed stream: forget it, keep serving the rest
                self.unsubscribe(sub)
        return sent


class EventHub:
    """Finds what changed and publishes it through a :class:`FanOut`, one computation per change.

    ``balance(team)``: the team's balance as ``GET .../balance`` answers it;
    ``job_changes(teams, cursor)``: ``Backend.job_changes`` for those teams (a ``JobChanges``);
    ``decorate(job)``: the job as the REST API shows it (its estimate beside it);
    ``increase_changes(cursor)``: ``(cursor, requests changed since)`` (``Increases.changed_since``).

    Every ``sweep_seconds`` the pass also reads every subscribed team's balance and live jobs, for
    changes nothing reports: a job's ``stalled`` flag is read from its log's silence, and on
    Kubernetes the API server updates a ResourceQuota's ``status.used`` by itself.
    """

    def __init__(
        self,
        balance: Callable[[str], dict],
        job_changes: Callable[[list[str], object], object],
        decorate: Callable[[dict], dict],
        increase_changes: Callable[[object], tuple[object, list[dict]]] | None = None,
        log: logging.Logger | None = None,
        poll_seconds: float = POLL_SECONDS,
        sweep_seconds: float = SWEEP_SECONDS,
    ):
        self.fanout = FanOut()
        self._balance = balance
        self._job_changes = job_changes
        self._decorate = decorate
        self._increase_changes = increase_changes
        self._increase_cursor = None
        self.log = log or logging.getLogger("jupyter_quota")
        self._poll = poll_seconds
        self._sweep_every = max(1, round(sweep_seconds / poll_seconds))
        self._lock = threading.Lock()
        self._dirty: set[str] = set()
        self._jobs: list[dict] = []  # told by the service (submit, cancel), sent by the next pass
        self._sent_balance: dict[str, str] = {}
        self._sent_job: dict[tuple[str, str], str] = {}
        self._cursor = None
        self._baselined = False  # the backend's jobs as subscribers found them are known
        self._snapshots = False  # the backend answers every live job each time (no cursor)
        self._passes_since_sweep = 0
        self._loop = None
        self._ticker: Ticker | None = None
        self._heartbeat = None
        #: balances computed by passes (a test checks one per change, not one per subscriber)
        self.balance_computations = 0

    # -- the change points ---------------------------------------------------------------------

    def changed(self, team: str) -> None:
        """The team's quota or usage may have changed: recompute its balance in the next pass (now)."""
        with self._lock:
            self._dirty.add(team)
        self._wake()

    def job_changed(self, job: dict) -> None:
        """A job the service just submitted or cancelled: send it, and its team's balance."""
        with self._lock:
            self._jobs.append(job)
            self._dirty.add(job["team"])
        self._wake()

    def endpoint_changed(self, endpoint: dict) -> None:
        """An endpoint shows something new (``Endpoints.on_change``): send it to its team's
        subscribers now (the endpoint manager sends each change once)."""
        self._deliver(endpoint["team"], frame(ENDPOINT, endpoint))

    # -- subscribers -----------------------------------------------------------------------------

    def subscribe(self, teams: Iterable[str], send: Callable[[bytes], object], loop) -> Subscription:
        """Register ``send`` for ``teams``' events, delivered on ``loop`` (the caller's IO loop)."""
        if self._loop is None:
            self._loop = loop
        if self._heartbeat is None:  # one timer for every subscriber, on their loop
            from tornado.ioloop import PeriodicCallback

            self._heartbeat = PeriodicCallback(
                lambda: self.fanout.heartbeat_in_slices(loop.call_soon), HEARTBEAT_SECONDS * 1000
            )
            self._heartbeat.start()
        sub = self.fanout.subscribe(teams, send)
        self._wake()  # the pass starts polling the backend for this team
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self.fanout.unsubscribe(sub)

    # -- the pass ------------------------------------------------------------------------------

    def start(self) -> None:
        if self._ticker is None:
            self._ticker = Ticker(self.run_pass, self._poll, name="jupyter-quota-events", log=self.log)
            self._ticker.start()

    def close(self) -> None:
        if self._ticker is not None:
            self._ticker.close()
            self._ticker = None
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None

    @property
    def passes(self) -> int:
        return self._ticker.passes if self._ticker is not None else 0

    def run_pass(self) -> float | None:
        """Once: the jobs that changed, then each changed team's balance, each sent to that
        team's subscribers. With nobody subscribed it forgets its state, and waits."""
        with self._lock:
            dirty, self._dirty = self._dirty, set()
            told, self._jobs = self._jobs, []
        teams = self.fanout.teams()
        if not teams:
            self._sent_balance.clear()
            self._sent_job.clear()
            self._cursor, self._baselined = None, False
            self._increase_cursor = None
            return None
        for job in told:
            if job["team"] in teams:
                self._send_job(job)
        dirty |= self._backend_job_changes(teams)
        dirty |= self._send_increases(teams)
        self._passes_since_sweep += 1
        if self._passes_since_sweep >= self._sweep_every:
            self._passes_since_sweep = 0
            dirty |= teams
            if not self._snapshots:  # a snapshot pass has just read every live job
                self._sweep_live_jobs(teams)
        for team in sorted(dirty & teams):
            self._send_balance(team)
        for team in set(self._sent_balance) - teams:  # nobody hears it: a new subscriber starts afresh
            del self._sent_balance[team]
        return None

    def _backend_job_changes(self, teams: set[str]) -> set[str]:
        """Send the jobs that changed since the last pass; the teams they belong to."""
        changes = self._job_changes(sorted(teams), self._cursor)
        self._cursor, self._snapshots = changes.cursor, changes.snapshot and changes.cursor is None
        first, self._baselined = not self._baselined, True
        jobs = [job for job in changes.jobs if job["team"] in teams]
        if changes.snapshot:  # every live job: those gone since are forgotten
            seen = {(j["namespace"], j["name"]) for j in jobs}
            for key in set(self._sent_job) - seen:
                del self._sent_job[key]
        if first:  # the baseline: what subscribers already had when they came
            for job in jobs:
                self._sent_job[(job["namespace"], job["name"])] = json.dumps(job, sort_keys=True)
            return set()
        return {job["team"] for job in jobs if self._send_job(job)}

    def _sweep_live_jobs(self, teams: set[str]) -> None:
        """Send the live jobs that read differently now though no row changed (a stall flag)."""
        for job in self._job_changes(sorted(teams), None).jobs:
            if job["team"] in teams and job.get("phase") not in _FINISHED:
                self._send_job(job)

    def _send_increases(self, teams: set[str]) -> set[str]:
        """Send the increase requests changed since the last pass; the teams they belong to (their
        balances may have changed too: an approval or an end raises or lowers the quota)."""
        if self._increase_changes is None:
            return set()
        first = self._increase_cursor is None
        self._increase_cursor, items = self._increase_changes(self._increase_cursor)
        if first:  # the baseline: subscribers read the list when they came
            return set()
        sent = set()
        for item in items:
            if item["team"] in teams:
                self._deliver(item["team"], frame(INCREASE, item))
                sent.add(item["team"])
        return sent

    def _send_job(self, job: dict) -> bool:
        """Send the job unless it was sent as it is; True if it was sent."""
        key = (job["namespace"], job["name"])
        try:
            job = self._decorate(job)  # as the REST API shows it (told jobs already are: the same)
        except Exception:  # its estimate could not be read: the job still goes out
            self.log.exception("jupyter_quota: job %s/%s for its subscribers", *key)
        text = json.dumps(job, sort_keys=True)
        if self._sent_job.get(key) == text:
            return False
        if job.get("phase") in _FINISHED and not self._snapshots:
            self._sent_job.pop(key, None)  # it changes no more, and a cursor reports no repeats
        else:
            self._sent_job[key] = text
        self._deliver(job["team"], text_frame(JOB, text))
        return True

    def _send_balance(self, team: str) -> None:
        try:
            balance = self._balance(team)
        except Exception:  # a team removed, a broken profile: the others still hear
            self.log.exception("jupyter_quota: the balance of team %s for its subscribers failed", team)
            return
        self.balance_computations += 1
        text = json.dumps({k: v for k, v in balance.items() if k != "observedAt"}, sort_keys=True)
        if self._sent_balance.get(team) == text:
            return
        self._sent_balance[team] = text
        self._deliver(team, frame(BALANCE, balance))

    def _deliver(self, team: str, data: bytes) -> None:
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self.fanout.publish, team, data)

    def _wake(self) -> None:
        if self._ticker is not None:
            self._ticker.wake()
