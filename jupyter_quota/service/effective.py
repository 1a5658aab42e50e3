"""A team's effective hard quota, owned in one place: its profile's ``hard``, plus approved,
unexpired increases, plus the extras of its time windows open now.

:class:`EffectiveQuota` reads the increases in force (the records store, cached until it
changes), composes them with the open windows (``effectivequota.effective_hard``, the pure sum on
the domain floor), keeps the composed profile per team (the same object while nothing changed:
the local backend caches a balance per profile object), and writes it where jobs run
(``Backend.apply_profile``). Every reader takes it from here: the façade's balances and
admissions, the increases (an approval, an expiry), the time windows, the local scheduler
(``Backend.use_profiles``) and the metrics. Its clock is the service's one clock.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from .. import increases
from ..effectivequota import effective_hard
from ..errors import QuotaError
from ..profiles import TeamProfile
from ..records import open_records
from ..times import Clock, system_clock
from ..windows import open_windows, window_extra


class EffectiveQuota:
    def __init__(self, registry, backend, state_dir: str, clock: Clock = system_clock, log=None):
        self.registry = registry
        self.backend = backend
        self.state_dir = state_dir
        #: epoch seconds now; tests drive it (through ``QuotaService.clock``) to move time
        self.clock = clock
        self.log = log or logging.getLogger("jupyter_quota")
        #: team -> (profile, key of its extras, effective profile, the extras the key's ids name)
        self._raised: dict[str, tuple] = {}
        #: team -> why its raised quota cannot be applied (``GET /namespaces``' ``profileError``)
        self.broken: dict[str, str] = {}
        self._lock = threading.Lock()
        self._store = None
        self._cache: tuple | None = None  # ((connection, data_version, writes), approved rows)
        #: called with a team after its effective quota is written (``EventHub.changed``)
        self.on_write: Callable[[str], object] = lambda team: None

    # -- what the others read ----------------------------------------------------------------------

    def now(self) -> float:
        return self.clock()

    def moment(self) -> datetime:
        """Now, as the local scheduler reads it."""
        return datetime.fromtimestamp(self.clock(), UTC)

    def hard(self, team: str, now: float | None = None) -> dict[str, str]:
        """The team's hard quota at ``now`` (epoch seconds): the one place that composes it."""
        now = self.clock() if now is None else now
        profile = self.registry.get(team)
        return effective_hard(profile.hard, *self.increase_extras(team, now), _opened(profile, now))

    def of(self, profile: TeamProfile, now: float | None = None, extras: list | None = None) -> TeamProfile:
        """``profile`` with its effective hard quota; the same object while that does not change
        (the local backend caches a balance per profile object)."""
        now = self.clock() if now is None else now
        extras = self.increase_extras(profile.team, now) if extras is None else extras
        if not extras and not profile.windows:
            if profile.team in self.broken:  # what broke it ended (an increase expired)
                self._flag(profile.team, None)
            return profile  # the common case, without arithmetic
        # the same extras are the same objects (``_approved`` caches them), so a read between
        # changes costs a lookup, not the sums
        opened = _opened(profile, now)
        key = (tuple(map(id, extras)), tuple(sorted(opened.items())))
        with self._lock:
            cached = self._raised.get(profile.team)
            if cached is not None and cached[0] is profile and cached[1] == key:
                return cached[2]
        try:
            hard = effective_hard(profile.hard, *extras, opened)
            raised = profile if hard == {k: str(v) for k, v in profile.hard.items()} else _with_hard(profile, hard)
            problem = None
        except QuotaError as e:  # held to its own hard quota, so no other team's pass or scrape fails
            raised, problem = profile, _unraisable(profile, now, extras, e)
        if self.broken.get(profile.team) != problem:  # a change only: most reads take no lock here
            self._flag(profile.team, problem)
        with self._lock:
            self._raised[profile.team] = (profile, key, raised, extras)  # extras: their ids stay theirs
        return raised

    def _flag(self, team: str, problem: str | None) -> None:
        """Note (and log, once per change) that the team's raised quota cannot be applied."""
        with self._lock:
            before = self.broken.get(team)
            if problem is None:
                self.broken.pop(team, None)
            else:
                self.broken[team] = problem
        if problem is not None and problem != before:
            self.log.error("jupyter_quota: the raised quota of team %s cannot be applied: %s", team, problem)
        elif problem is None and before is not None:
            self.log.info("jupyter_quota: the raised quota of team %s applies again", team)

    def profiles(self) -> list[TeamProfile]:
        """Every team's profile with its effective hard quota now (the local scheduler's view):
        the approved increases read once for all teams, not once per team."""
        now = self.clock()
        by_team = self._extras_by_team(now)
        return [self.of(p, now, by_team.get(p.team, [])) for p in self.registry.all()]

    # -- writing it where jobs run -----------------------------------------------------------------

    def write(self, team: str, now: float | None = None, increase_extras: list | None = None) -> None:
        """Write the team's effective quota at ``now`` where jobs run (the kube backend's
        ResourceQuota; nothing on the local backend)."""
        now = self.clock() if now is None else now
        self.backend.apply_profile(self.of(self.registry.get(team), now, increase_extras))
        self.on_write(team)

    def write_profile(self, profile: TeamProfile, now: float | None = None) -> None:
        """As :meth:`write`, for a profile in hand (a window's pass, an admin's edit before it is stored)."""
        self.backend.apply_profile(self.of(profile, now))
        self.on_write(profile.team)

    # -- the increases in force --------------------------------------------------------------------

    @property
    def store(self):
        if self._store is None:
            self._store = open_records(self.state_dir)
        return self._store

    def increase_extras(self, team: str, now: float) -> list[dict]:
        """The resources of the team's increases in force at ``now``.

        Balances read this: an unreadable store (a read-only or full state directory) is logged
        and counts as no increase, as the balance must still be served.
        """
        return self._extras_by_team(now).get(team, [])

    def _extras_by_team(self, now: float) -> dict[str, list[dict]]:
        """:meth:`increase_extras` of every team with one in force at ``now``."""
        if not self.store.exists():
            return {}
        try:
            approved = self._approved()
        except (sqlite3.Error, OSError) as e:
            self.log.warning("jupyter_quota: cannot read increases from %s: %s", self.store.path, e)
            return {}
        by_team: dict[str, list[dict]] = {}
        for owner, resources, end in approved:
            if end > now:
                by_team.setdefault(owner, []).append(resources)
        return by_team

    def _approved(self) -> list[tuple[str, dict, float]]:
        """Every Approved request as (team, resources, expires_at), read again only when the store
        changed: a commit here (``Records.writes``) or by another process (its beacon, read
        without SQLite; ``PRAGMA data_version`` where the beacon cannot be used)."""
        con = self.store.connection()
        published = self.store.beacon.read()
        changes = con.execute("PRAGMA data_version").fetchone()[0] if published is None else published
        key = (con, changes, self.store.writes)
        cached = self._cache
        if cached is not None and cached[0][0] is key[0] and cached[0][1:] == key[1:]:
            return cached[1]
        rows = con.execute(
            "SELECT team, resources, expires_at FROM increases WHERE phase = ?", (increases.APPROVED,)
        ).fetchall()
        approved = [(r["team"], json.loads(r["resources"]), r["expires_at"]) for r in rows]
        self._cache = (key, approved)
        return approved


def _opened(profile: TeamProfile, now: float) -> dict[str, str]:
    """What the profile's windows open at ``now`` add (``windows.window_extra``)."""
    return window_extra(profile, datetime.fromtimestamp(now, UTC)) if profile.windows else {}


def _unraisable(profile: TeamProfile, now: float, extras: list, error: QuotaError) -> str:
    """Why the profile's raised quota cannot be applied, naming what raises it now."""
    opened = open_windows(profile, datetime.fromtimestamp(now, UTC)) if profile.windows else []
    raising = [f'window "{w.name}"' for w in opened] + ([f"{len(extras)} increase(s)"] if extras else [])
    return (
        f"its hard quota plus {' and '.join(raising) or 'its extras'} cannot be applied: {error.message}; "
        "the team is held to its profile's own hard quota until an admin lowers them"
    )


def _with_hard(profile: TeamProfile, hard: dict[str, str]) -> TeamProfile:
    return TeamProfile(**{**profile.to_json(), "hard": hard})
