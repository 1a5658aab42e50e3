"""Increase requests as use cases: ask, list, approve or deny, expire; each one audited.

The façade (``service/__init__.py``) owns an :class:`Increases` and delegates to it. Requests
and the audit log live in ``records`` (one SQLite file in the state directory, for both
backends). A decision and its audit entry commit together; an approval writes the team's raised
quota to the backend inside that transaction (the kube backend's ResourceQuota, through
``apply_profile``), so an apiserver refusal leaves the request Pending. Expiry needs no action
on the local backend (admission reads the effective hard quota at its own time,
``increases.phase_at``); on Kubernetes the ResourceQuota is put back by
:meth:`Increases.expire_due`, which its Ticker runs at each end, and :meth:`Increases.reconcile`
at start, so a restart in between leaves nothing raised.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from traitlets import Float, Int, validate
from traitlets.config import Configurable

from .. import audit, increases, paging, reasons
from ..errors import Conflict, Forbidden, InvalidRequest, NotFound
from ..identity import Identity
from ..records import open_records
from ..ticker import Ticker
from ..times import rfc3339

_COLUMNS = (
    "name, namespace, team, user, phase, resources, hours, reason, created_at, decided_at, decided_by, comment, "
    "expires_at"
)
MAX_COMMENT_CHARS = 1000


class IncreaseSettings(Configurable):
    """The increases' settings (``c.JupyterQuota.<name>``: ``config.JupyterQuota`` is composed of it)."""

    max_open_increases = Int(
        3,
        help="Temporary increase requests (``POST .../increases``) a user may have Pending at once; "
        "one more is refused (409 TooManyOpenRequests) until an admin decides one. At least 1. Default: 3.",
    ).tag(config=True)

    max_increase_hours = Float(
        168.0,
        help="The longest a temporary increase may be asked for, in hours (a request's ``hours`` must be "
        "more than 0 and at most this). Default: 168 (one week).",
    ).tag(config=True)

    max_open_increases_per_team = Int(
        20,
        help="Temporary increase requests a team may have Pending at once, whoever filed them; one "
        "more is refused (409 TooManyOpenRequests) until an admin decides one. At least 1. Default: 20.",
    ).tag(config=True)

    increase_retention_days = Float(
        90.0,
        help="Days a decided increase request (Denied or Expired) stays in ``GET .../increases``; "
        "past them it is moved to the records' archive table (the audit log keeps every entry). "
        "0 keeps every request listed. Default: 90.",
    ).tag(config=True)

    @validate("max_open_increases", "max_open_increases_per_team", "max_increase_hours")
    def _valid_increase_limits(self, proposal):
        if proposal["value"] <= 0:
            raise ValueError(f"JupyterQuota.{proposal['trait'].name} must be more than 0, not {proposal['value']}")
        return proposal["value"]


#: requests in a page of ``GET increases`` without ``limit``
PAGE_SIZE = 100
#: the teams a caller may list (``?1``: a JSON list of namespaces; NULL for an admin: every one)
_VISIBLE = "(?1 IS NULL OR namespace IN (SELECT value FROM json_each(?1)))"


class Increases:
    """The increase requests' use cases, over the records store; the team's quota they raise is
    written through ``effective`` (:class:`~jupyter_quota.service.effective.EffectiveQuota`), and
    :meth:`start` runs the expiry pass on a Ticker from then on."""

    def __init__(self, config, registry, effective, log: logging.Logger | None = None):
        self.config = config
        self.registry = registry
        self._effective = effective
        self.log = log or logging.getLogger(__name__)
        self._store = None
        self._ticker: Ticker | None = None

    @property
    def store(self):
        if self._store is None:
            self._store = open_records(self.config.state_dir)
        return self._store

    # -- the expiry pass ---------------------------------------------------------------------------

    def start(self) -> None:
        """Put right what ended while the service was down, then expire at each end from now on."""
        try:
            self.reconcile(self._effective.now())
        except Exception:  # the server must start (a read-only state dir); the ticker retries
            self.log.exception("jupyter_quota: reconciling increases at start failed")
        if self._ticker is None:
            self._ticker = expiry_ticker(self, self._effective.now)
            self._ticker.start()

    def close(self) -> None:
        if self._ticker is not None:
            self._ticker.close()
            self._ticker = None

    def _write(self, team: str, now: float, extras: list[dict]) -> None:
        """Write the team's effective quota where jobs run, and let the expiry pass see the change."""
        self._effective.write(team, now, extras)
        if self._ticker is not None:
            self._ticker.wake()

    # -- reads -----------------------------------------------------------------------------------

    def extras(self, team: str, now: float) -> list[dict]:
        """The resources of the team's increases in force at ``now`` (``EffectiveQuota.increase_extras``)."""
        return self._effective.increase_extras(team, now)

    def overcommit(self, team: str, asked: dict, what: str = "this increase") -> list[str]:
        """``increases.overcommit_warnings`` for the team's GPUs, against every team's quota now."""
        gpu_key = f"requests.{self.registry.get(team).gpuResource}"
        quotas = [p.hard for p in self._effective.profiles()]
        capacity = len(self._effective.backend.inventory().get("gpus") or [])
        return increases.overcommit_warnings(asked, quotas, gpu_key, capacity, what)

    def list(self, who: Identity, now: float, limit=None, token=None) -> dict:
        """A page of the requests of ``who``'s teams (every team's for an admin), newest first,
        paged as jobs are (``paging``: ``limit``, ``continue``), the teams filtered in SQL."""
        size = paging.parse_limit(limit, PAGE_SIZE)
        before = _position(paging.decode(token))
        if not self.store.exists():
            return paging.list_json("increases", paging.Page([]))
        mine = None if who.admin else json.dumps(sorted(p.namespace for p in self.registry.teams_of(who)))
        with self.store.read() as con:
            rows = con.execute(
                f"SELECT {_COLUMNS}, id FROM increases WHERE {_VISIBLE} AND (?2 IS NULL OR id < ?2) "
                "ORDER BY id DESC LIMIT ?3",
                (mine, before, size + 1),
            ).fetchall()
            if len(rows) <= size:
                return paging.list_json("increases", paging.Page([increase_json(r, now) for r in rows]))
            rows = rows[:size]
            remaining = con.execute(
                f"SELECT COUNT(*) FROM increases WHERE {_VISIBLE} AND id < ?2", (mine, rows[-1]["id"])
            ).fetchone()[0]
        return paging.list_json(
            "increases", paging.Page([increase_json(r, now) for r in rows], str(rows[-1]["id"]), remaining)
        )

    def version(self, now: float) -> str:
        """What a list answer depends on besides its query and caller: every change to a request
        appends an audit entry in its transaction, and an approval ends with time. Cheap (two
        indexed reads), so an unchanged poll is answered 304 without reading the requests."""
        if not self.store.exists():
            return "0"
        with self.store.read() as con:
            last = con.execute("SELECT COALESCE(MAX(id), 0) FROM audit").fetchone()[0]
            ended = con.execute(
                "SELECT COUNT(*) FROM increases WHERE phase = ? AND expires_at <= ?", (increases.APPROVED, now)
            ).fetchone()[0]
        return f"{last}.{ended}"

    def changed_since(self, cursor: int | None, now: float) -> tuple[int, list[dict]]:
        """The requests an audit entry after ``cursor`` (an audit id) names, as the REST API shows
        them, and the newest audit id: the event pass sends them to their teams, whichever process
        made the change (``service/events.py``). ``None`` gives the newest id only (a baseline)."""
        if not self.store.exists():
            return cursor or 0, []
        with self.store.read() as con:
            last = con.execute("SELECT COALESCE(MAX(id), 0) FROM audit").fetchone()[0]
            if cursor is None or last <= cursor:
                return last, []
            targets = con.execute(
                "SELECT DISTINCT target FROM audit WHERE id > ? AND target LIKE 'increase/%' LIMIT ?",
                (cursor, CHANGES_PER_PASS),
            ).fetchall()
            rows = [
                con.execute(f"SELECT {_COLUMNS} FROM increases WHERE name = ?", (t[0].rsplit("/", 1)[-1],)).fetchone()
                for t in targets
            ]
        return last, [increase_json(r, now) for r in rows if r is not None]  # None: archived since

    def next_expiry(self, now: float) -> float | None:
        if not self.store.exists():
            return None
        with self.store.read() as con:
            row = con.execute(
                "SELECT MIN(expires_at) FROM increases WHERE phase = ? AND expires_at > ?", (increases.APPROVED, now)
            ).fetchone()
        return row[0]

    # -- writes ----------------------------------------------------------------------------------

    def request(self, who: Identity, namespace: str, body, now: float) -> dict:
        profile = self.registry.for_namespace(who, namespace)
        asked = increases.parse_request(body, profile.hard, profile.gpuResource, self.config.max_increase_hours)
        limit = self.config.max_open_increases
        with self.store.write() as con:
            pending = con.execute(
                "SELECT COUNT(*) FROM increases WHERE user = ? AND phase = ?", (who.name, increases.PENDING)
            ).fetchone()[0]
            if pending >= limit:
                raise Conflict(
                    f'user "{who.name}" already has {pending} pending increase request(s), the most one may have '
                    f"(JupyterQuota.max_open_increases = {limit}); wait for a decision on them first",
                    reason="TooManyOpenRequests",
                )
            self._check_team_cap(con, profile.team)
            # AUTOINCREMENT's high mark: a number stays used after its request is archived
            number = con.execute(
                "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'increases'), 0), "
                "COALESCE((SELECT MAX(id) FROM increases), 0)) + 1"
            ).fetchone()[0]
            name = f"inc-{number}"
            con.execute(
                "INSERT INTO increases (id, name, namespace, team, user, phase, resources, hours, reason, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (number, name, namespace, profile.team, who.name, increases.PENDING,
                 json.dumps(asked.resources, sort_keys=True), asked.hours, asked.reason, now),
            )  # fmt: skip
            detail = f"{increases.describe(asked.resources, asked.hours)}: {asked.reason}"
            audit.append(con, who.name, audit.INCREASE_REQUESTED, _target(namespace, name), detail, now)
            return increase_json(_find(con, name), now)

    def _check_team_cap(self, con, team: str) -> None:
        limit = self.config.max_open_increases_per_team
        pending = con.execute(
            "SELECT COUNT(*) FROM increases WHERE team = ? AND phase = ?", (team, increases.PENDING)
        ).fetchone()[0]
        if pending >= limit:
            raise Conflict(
                f"team {team} already has {pending} pending increase request(s), the most a team may have "
                f"(JupyterQuota.max_open_increases_per_team = {limit}); wait for an admin to decide them",
                reason="TooManyOpenRequests",
            )

    def archive_decided(self, now: float) -> int:
        """Move Denied and Expired requests decided more than ``increase_retention_days`` ago out
        of the list, into ``increases_archive``; the audit log keeps their entries, and one more
        says how many left. Returns how many moved."""
        days = self.config.increase_retention_days
        if days <= 0 or not self.store.exists():
            return 0
        cutoff = now - days * 86400
        old = f"phase IN ('{increases.DENIED}', '{increases.EXPIRED}') AND COALESCE(expires_at, decided_at) < ?"
        # Look before taking the write lock: most passes find nothing, and a read-only state dir
        # (tests/test_state_dir.py) must keep serving reads without a failing pass every 30 s.
        with self.store.read() as con:
            if con.execute(f"SELECT 1 FROM increases WHERE {old} LIMIT 1", (cutoff,)).fetchone() is None:
                return 0
        with self.store.write() as con:
            moved = con.execute(f"INSERT INTO increases_archive SELECT * FROM increases WHERE {old}", (cutoff,))
            count = moved.rowcount
            if count:
                con.execute(f"DELETE FROM increases WHERE {old}", (cutoff,))
                detail = f"{count} decided request(s) that ended before {rfc3339(cutoff)} ({days:g} days)"
                audit.append(con, audit.SYSTEM, audit.INCREASE_ARCHIVED, "increases", detail, now)
        return count

    def decide(self, who: Identity, name: str, body, approve: bool, now: float) -> dict:
        """Approve or deny a Pending request: admins only, never their own."""
        verb = "approve" if approve else "deny"
        if not who.admin:
            raise Forbidden(f'user "{who.name}" is not a quota admin: only admins may {verb} increase requests')
        comment = _comment(body)
        with self.store.write() as con:
            row = _find(con, name)
            if row["user"] == who.name:
                raise Forbidden(
                    f'increase request "{name}" is your own: an admin may not {verb} their own request; '
                    "another admin must decide it"
                )
            phase = increases.phase_at(row, now)
            if phase != increases.PENDING:
                raise Conflict(
                    f'increase request "{name}" is already {phase}; only a Pending one can be decided',
                    reason=reasons.ALREADY_DECIDED,
                )
            if approve:  # the raised quota must stay writable (2^63-1), with every window open
                in_force = [("an increase in force", extra) for extra in _extras(con, row["team"], now)]
                asked = (f'increase "{name}"', json.loads(row["resources"]))
                self.registry.get(row["team"]).check_raised([*in_force, asked])
            expires = now + row["hours"] * 3600 if approve else None
            con.execute(
                "UPDATE increases SET phase = ?, decided_at = ?, decided_by = ?, comment = ?, expires_at = ? "
                "WHERE name = ?",
                (increases.APPROVED if approve else increases.DENIED, now, who.name, comment, expires, name),
            )
            action = audit.INCREASE_APPROVED if approve else audit.INCREASE_DENIED
            until = f" until {rfc3339(expires)}" if approve else ""
            audit.append(con, who.name, action, _target(row["namespace"], name), f"{comment}{until}".strip(), now)
            if approve:  # inside the transaction: a refusal from where jobs run leaves it Pending
                self._write(row["team"], now, _extras(con, row["team"], now))
            return increase_json(_find(con, name), now)

    def expire_due(self, now: float) -> list[str]:
        """Record every approved request whose time is up as Expired, and write its team's quota
        back; one transaction per request, so a failed write is retried by the next call."""
        if not self.store.exists():
            return []
        with self.store.read() as con:
            due = con.execute(
                "SELECT name FROM increases WHERE phase = ? AND expires_at <= ? ORDER BY expires_at",
                (increases.APPROVED, now),
            ).fetchall()
        expired = []
        for (name,) in due:
            try:
                with self.store.write() as con:
                    row = _find(con, name)
                    if row["phase"] != increases.APPROVED:
                        continue  # another process expired it first
                    con.execute("UPDATE increases SET phase = ? WHERE name = ?", (increases.EXPIRED, name))
                    detail = f"ended at {rfc3339(row['expires_at'])}"
                    audit.append(
                        con, audit.SYSTEM, audit.INCREASE_EXPIRED, _target(row["namespace"], name), detail, now
                    )
                    self._write(row["team"], now, _extras(con, row["team"], now))
                expired.append(name)
            except Exception:  # the next pass retries; the service keeps running
                self.log.exception("jupyter_quota: could not expire increase %s; retrying later", name)
        return expired

    def reconcile(self, now: float) -> None:
        """At start: expire what ended while the service was down, and write the quota of every
        team that ever had an increase as it should be now (writing what already is changes nothing)."""
        if not self.store.exists():
            return
        self.expire_due(now)
        with self.store.read() as con:
            teams = [
                r[0]
                for r in con.execute(
                    "SELECT DISTINCT team FROM increases WHERE phase IN (?, ?)", (increases.APPROVED, increases.EXPIRED)
                )
            ]
        for team in teams:
            try:
                self._write(team, now, self.extras(team, now))
            except Exception:  # the server must start; the next expiry tries again
                self.log.exception("jupyter_quota: could not write team %s's quota at start", team)


def increase_json(row, now: float) -> dict:
    """A request as the REST API shows it."""

    def when(epoch):
        return rfc3339(epoch) if epoch is not None else None

    return {
        "name": row["name"],
        "namespace": row["namespace"],
        "team": row["team"],
        "user": row["user"],
        "phase": increases.phase_at(row, now),
        "resources": json.loads(row["resources"]),
        "hours": row["hours"],
        "reason": row["reason"],
        "createdAt": when(row["created_at"]),
        "decidedAt": when(row["decided_at"]),
        "decidedBy": row["decided_by"],
        "comment": row["comment"],
        "expiresAt": when(row["expires_at"]),
    }


def _position(start: str | None) -> int | None:
    """A page's ``start`` key: the id of the last request shown."""
    if start is None:
        return None
    if not (start.isascii() and start.isdigit() and len(start) < 19):
        raise paging.invalid_start(start)
    return int(start)


def _extras(con, team: str, now: float) -> list[dict]:
    rows = con.execute(
        "SELECT resources FROM increases WHERE team = ? AND phase = ? AND expires_at > ? ORDER BY id",
        (team, increases.APPROVED, now),
    ).fetchall()
    return [json.loads(r["resources"]) for r in rows]


def _find(con, name: str):
    row = con.execute(f"SELECT {_COLUMNS} FROM increases WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise NotFound(f'increase request "{name}" not found')
    return row


def _target(namespace: str, name: str) -> str:
    return f"increase/{namespace}/{name}"


def _comment(body) -> str:
    if body in (None, {}):
        return ""
    if not isinstance(body, dict) or set(body) - {"comment"}:
        raise InvalidRequest('the body must be a JSON object with at most a "comment": {"comment": "..."}')
    comment = body.get("comment") or ""
    if not isinstance(comment, str):
        raise InvalidRequest("comment: must be a string")
    if len(comment) > MAX_COMMENT_CHARS:
        raise InvalidRequest(f"comment: {len(comment)} characters; at most {MAX_COMMENT_CHARS} are accepted")
    return comment.strip()


#: requests one event pass sends at most (a pass after a long quiet reads no more than this)
CHANGES_PER_PASS = 1000

#: seconds between two expiry passes at most (requests another process approved are seen by then)
EXPIRY_POLL = 30.0


def expiry_ticker(owner: Increases, clock: Callable[[], float]) -> Ticker:
    """A :class:`~jupyter_quota.ticker.Ticker` running ``expire_due`` at each increase's end (and
    every ``EXPIRY_POLL`` seconds); ``wake`` after an approval recomputes the next end."""

    def expire() -> float | None:
        now = clock()
        owner.expire_due(now)
        owner.archive_decided(now)
        end = owner.next_expiry(now)
        return None if end is None else max(0.0, end - now) + 0.05

    return Ticker(expire, EXPIRY_POLL, name="jupyter-quota-increases", log=owner.log)
