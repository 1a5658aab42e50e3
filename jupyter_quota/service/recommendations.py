"""Quota from history, as the service serves it: ``GET /recommendations`` and ``POST /replay``.

The manager gathers the history (the backend's job records, or a CSV's), picks the teams the
caller may see, and calls the pure rules: ``recommend`` for the rows, ``replay`` for what-ifs
and the capacity curve. Replays are CPU work on the request's thread: one runs at a time, a
second is refused with 429, and a replay past ``max_replay_jobs`` or ``max_replay_days`` is
refused with 400 before any work.
"""

from __future__ import annotations

import threading
import time

from traitlets import Float, Int, List, Unicode, validate
from traitlets.config import Configurable

from .. import history, recommend, replay, usage
from ..errors import Forbidden, InvalidRequest, TooManyRequests
from ..profiles import load_profiles

#: Seconds a refused replay is told to wait (a month of 100,000 jobs replays in seconds).
RETRY_AFTER = 5


class Recommendations(Configurable):
    """Recommended quotas and what-if replays (``c.Recommendations.*``)."""

    half_life_hours = Float(
        recommend.HALF_LIFE_HOURS,
        help="Hours after which a moment of demand weighs half as much (VPA's decaying histogram). "
        "Default: 168 (a week: team demand follows the working week; VPA's 24 h sizes a container).",
    ).tag(config=True)
    percentile = Float(recommend.PERCENTILE, help="The demand percentile recommended, 0-1. Default: 0.9.").tag(
        config=True
    )
    margin = Float(recommend.MARGIN, help="Safety margin added to the percentile, a fraction. Default: 0.15.").tag(
        config=True
    )
    window_days = Float(recommend.WINDOW_DAYS, help="Days of history a recommendation reads. Default: 28.").tag(
        config=True
    )
    max_replay_jobs = Int(
        200_000, help="Most jobs one replay may take; a larger one is refused (400). Default: 200,000."
    ).tag(config=True)
    max_replay_days = Float(92, help="Longest window one replay may cover, in days. Default: 92.").tag(config=True)
    working_days = List(
        Unicode(),
        list(recommend.WORKING_DAYS),
        help="The days whose working hours exceededShare counts (Mon ... Sun). Default: Mon to Fri.",
    ).tag(config=True)
    working_hours = Unicode(
        recommend.WORKING_HOURS,
        help='The hours of those days exceededShare counts, "HH:MM-HH:MM" (an end at or before the start '
        'runs past midnight; "00:00-00:00" is the whole day); "": every hour of every day. Default: 09:00-18:00.',
    ).tag(config=True)
    working_timezone = Unicode(
        recommend.WORKING_TIMEZONE, help="The IANA timezone working hours are read in. Default: UTC."
    ).tag(config=True)

    @validate("working_days", "working_hours", "working_timezone")
    def _check_working(self, proposal):
        given = {n: getattr(self, n) for n in ("working_days", "working_hours", "working_timezone")}
        given[proposal["trait"].name] = proposal["value"]
        try:  # days and timezone are checked even where every hour counts
            recommend.working_hours(
                given["working_days"], given["working_hours"] or "00:00-00:00", given["working_timezone"]
            )
        except InvalidRequest as e:
            raise ValueError(e.message) from None
        return proposal["value"]

    def __init__(self, config, registry, backend, **kwargs):
        super().__init__(parent=config, **kwargs)
        self.prices = config.prices
        self.registry = registry
        self.backend = backend
        self._busy = threading.Lock()

    @property
    def settings(self) -> recommend.Settings:
        working = recommend.working_hours(self.working_days, self.working_hours, self.working_timezone)
        return recommend.Settings(self.percentile, self.margin, self.half_life_hours, self.window_days, working)

    # -- recommendations -------------------------------------------------------------------------

    def recommendations(self, who, records: list | None = None, until: int | None = None, series: bool = False) -> dict:
        """A row per team the caller may see and resource (admins: every team), from ``records``
        or the backend's history of the last ``window_days``; ``series`` adds each row's plot."""
        if until is None and records is not None:  # a CSV's history ends with its last event
            until = max((max(r.submitted, r.started or 0, r.finished or 0) for r in records), default=None)
        until = int(time.time()) if until is None else until
        since = until - int(self.window_days * 86400)
        teams = self.registry.teams_of(who)
        waits_known = True  # a CSV's and the local ledger's records carry submission times
        if records is None:
            records, waits_known = self._history(since, until, None if who.admin else {p.namespace for p in teams})
        by_team: dict[str, list] = {}
        for r in records:
            by_team.setdefault(r.team, []).append(r)
        rows = []
        for p in teams:
            rows += recommend.recommend_team(
                p.team,
                p.namespace,
                p.hard,
                p.gpuResource,
                by_team.get(p.team, []),
                since,
                until,
                self.settings,
                series,
                waits_known,
            )
        known = {p.team for p in self.registry.all()}
        out = {"recommendations": rows}
        if who.admin:
            unknown = {t: len(v) for t, v in by_team.items() if t not in known}
            out["teamsWithoutProfile"] = [{"team": t, "jobs": n} for t, n in sorted(unknown.items())]
        return out

    # -- replay ----------------------------------------------------------------------------------

    def replay(self, who, body, records: list | None = None) -> dict:
        """``POST /replay``: the history replayed under the proposed profiles (admins)."""
        if not who.admin:
            raise Forbidden(
                f'user "{who.name}" is not a quota admin: replays are for JupyterHub admins '
                "and the users in JupyterQuota.admin_users"
            )
        if not isinstance(body, dict):
            raise InvalidRequest('the body must be a JSON object: {"profiles": [...], "since"?, "until"?}')
        unknown = sorted(set(body) - {"profiles", "since", "until", "gpus", "curve"})
        if unknown:
            raise InvalidRequest(f"unknown field(s) {', '.join(unknown)}; use profiles, since, until, gpus, curve")
        proposed = body.get("profiles")
        if not isinstance(proposed, list) or not proposed:
            raise InvalidRequest('"profiles" must be a non-empty list of team profiles, as PUT /profiles/{team} takes')
        changed = load_profiles(proposed)  # the validation of PUT /profiles: InvalidRequest names the field
        profiles = {p.team: p for p in self.registry.all()}
        profiles.update(changed)
        now = int(time.time())
        until = usage.parse_time(body["until"], "until") if body.get("until") else now
        since = usage.parse_time(body["since"], "since") if body.get("since") else until - int(self.window_days * 86400)
        if since >= until:
            raise InvalidRequest("since must be before until")
        if until - since > self.max_replay_days * 86400:
            raise InvalidRequest(
                f"the window is {round((until - since) / 86400)} days; a replay covers at most "
                f"{self.max_replay_days:g} days (Recommendations.max_replay_days): replay a shorter window"
            )
        gpus = body.get("gpus")
        if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or not 0 < gpus <= 100_000):
            raise InvalidRequest(f'"gpus" must be a whole number of GPUs from 1 to 100000, not {str(gpus)[:20]}')
        if not self._busy.acquire(blocking=False):
            raise TooManyRequests(
                f"busy: a replay is in progress, the most this server runs at once; retry in {RETRY_AFTER} s",
                RETRY_AFTER,
            )
        try:
            curve = body.get("curve", True) is not False
            return self._replay(list(profiles.values()), since, until, gpus, curve, records)
        finally:
            self._busy.release()

    def _replay(self, profiles, since, until, gpus, curve, records) -> dict:
        if records is None:
            records = self._records(since, until, None)
        records = [r for r in records if since <= r.submitted < until]
        if not records:
            raise InvalidRequest(
                f"no jobs were submitted from {usage.format_time(since)} to {usage.format_time(until)}: "
                "nothing to replay; choose a window with jobs (since, until)"
            )
        if len(records) > self.max_replay_jobs:
            raise InvalidRequest(
                f"the window holds {len(records)} jobs; a replay takes at most {self.max_replay_jobs} "
                "(Recommendations.max_replay_jobs): replay a shorter window"
            )
        capacity = gpus or self._capacity(profiles)
        answer = replay.replay(records, profiles, capacity, since, until).to_json()
        if curve:
            prices = self.prices or {}
            largest = max((int(r.gpus + 0.999) for r in records), default=1)
            answer["curve"] = replay.capacity_curve(
                records,
                profiles,
                since,
                until,
                replay.curve_sizes(capacity, largest),
                prices.get("gpuHour"),
                prices.get("currency"),
            )
        return answer

    def _capacity(self, profiles) -> int:
        """The machine's GPUs (the local backend's inventory), else what the quotas add up to."""
        found = len(self.backend.inventory().get("gpus", []) or [])
        return found or max(1, sum(replay.gpus_of(p) or 0 for p in profiles))

    def _records(self, since: int, until: int, namespaces) -> list:
        return self._history(since, until, namespaces)[0]

    def _history(self, since: int, until: int, namespaces) -> tuple[list, bool]:
        """The backend's records, and whether they carry submission times (waits)."""
        backend = self.backend
        if hasattr(backend, "job_records"):
            return backend.job_records(since, until, namespaces), True
        # a backend that keeps usage spans only: a job counts from its start, so its wait, and
        # demand that waited or was refused, are not known
        return history.from_spans(backend.usage_spans(since, until, namespaces)), False
