"""Which teams a user may see and act in: members see their teams, admins see all.

The team registry holds the profiles from config plus the changes admins made over the API
(kept in ``<state_dir>/profiles.json`` so they survive a restart).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading

from .errors import Forbidden, InvalidRequest, NotFound
from .identity import Identity
from .profiles import TeamProfile, load_profiles


class TeamRegistry:
    """Profiles by team, with the access rules applied."""

    def __init__(
        self,
        entries: list[dict],
        default_team: str = "",
        overrides_path: str | None = None,
        log: logging.Logger | None = None,
    ):
        self._lock = threading.Lock()
        self._log = log or logging.getLogger(__name__)
        self._overrides_path = overrides_path
        self._overrides = self._valid(self._read_overrides())
        self._profiles = load_profiles(self._merged(entries))
        self._index: tuple | None = None  # (the profiles it indexes, namespace -> profile)
        self.default_team = default_team
        if default_team and default_team not in self._profiles:
            raise InvalidRequest(f"JupyterQuota.default_team {default_team!r} is not a configured team")

    # -- reading ------------------------------------------------------------------------------

    def all(self) -> list[TeamProfile]:
        return sorted(self._profiles.values(), key=lambda p: p.namespace)

    def teams_of(self, who: Identity) -> list[TeamProfile]:
        """The profiles ``who`` may see: all for an admin, else their teams (or the default team)."""
        if who.admin:
            return self.all()
        mine = [p for p in self.all() if p.has_member(who.name, who.groups)]
        if not mine and self.default_team:
            mine = [self._profiles[self.default_team]]
        return mine

    def for_namespace(self, who: Identity, namespace: str) -> TeamProfile:
        """The profile owning ``namespace`` if ``who`` may use it; else 404 or 403."""
        owner = self._by_namespace().get(namespace)
        if owner is None:
            raise NotFound(f'namespace "{namespace}" is not a team namespace here; yours: {self._names(who)}')
        # as ``owner in self.teams_of(who)``, without reading every team on each request
        if not (who.admin or owner.has_member(who.name, who.groups)) and owner not in self.teams_of(who):
            raise Forbidden(
                f'user "{who.name}" may not use namespace "{namespace}": it belongs to a '
                f"team you are not a member of. Yours: {self._names(who)}. Ask a hub admin "
                "to add you to the team."
            )
        return owner

    def _by_namespace(self) -> dict[str, TeamProfile]:
        """The profiles by namespace, made again when the profiles are replaced (``put``)."""
        profiles, index = self._profiles, self._index
        if index is None or index[0] is not profiles:
            index = self._index = (profiles, {p.namespace: p for p in profiles.values()})
        return index[1]

    def get(self, team: str) -> TeamProfile:
        try:
            return self._profiles[team]
        except KeyError:
            raise NotFound(f'team "{team}" is not defined') from None

    def _names(self, who: Identity) -> str:
        return ", ".join(p.namespace for p in self.teams_of(who)) or "none"

    # -- changing (admins) --------------------------------------------------------------------

    def put(self, team: str, body: dict, before_store=None) -> TeamProfile:
        """Create or replace a team's profile; the new one is validated before anything changes.

        ``before_store(profile)`` runs once the profile is valid and before it is stored (the kube
        backend writes the namespace's ResourceQuota and LimitRange there): if it raises, nothing
        is stored.
        """
        if not isinstance(body, dict):
            raise InvalidRequest("the body must be a JSON object with the profile's fields")
        if body.get("team", team) != team:
            raise InvalidRequest(f"the body names team {body.get('team')!r} but the path names {team!r}")
        profile = TeamProfile(**{**body, "team": team})
        with self._lock:
            candidate = {**self._profiles, team: profile}
            load_profiles(candidate.values())  # duplicate namespaces are refused here
            if before_store is not None:
                before_store(profile)
            overrides = {**self._overrides, team: profile.to_json()}
            self._write_overrides(overrides)  # first: a failed write changes nothing
            self._overrides, self._profiles = overrides, candidate
        return profile

    def _merged(self, entries: list[dict]) -> list[dict]:
        by_team = {e.get("team"): e for e in entries if isinstance(e, dict)}
        others = [e for e in entries if not isinstance(e, dict)]
        by_team.update(self._overrides)
        return [*by_team.values(), *others]

    def _valid(self, overrides: dict) -> dict:
        """The stored changes that still validate. One an older version accepted and today's checks
        refuse is skipped (the config's profile, if any, stands) and logged: the server must start."""
        valid = {}
        for team, entry in overrides.items():
            try:
                TeamProfile(**entry)
            except (InvalidRequest, TypeError) as e:
                self._log.error(
                    "jupyter_quota: skipping the stored change to team %r in %s: %s",
                    team,
                    self._overrides_path,
                    getattr(e, "message", e),
                )
                continue
            valid[team] = entry
        return valid

    def _read_overrides(self) -> dict:
        if not self._overrides_path or not os.path.exists(self._overrides_path):
            return {}
        with open(self._overrides_path, encoding="utf-8") as f:
            return json.load(f)

    def _write_overrides(self, overrides: dict) -> None:
        """Atomically: a crash or a full disk leaves the old file or the new one, never half of one.

        A failed write removes its temporary file and raises an ``OSError`` naming the file, so
        ``statedir.storage_error`` can tell a full or read-only state directory.
        """
        if not self._overrides_path:
            return
        folder = os.path.dirname(self._overrides_path)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".profiles.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(overrides, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._overrides_path)
        except OSError as e:
            os.unlink(tmp)
            if e.filename is None:  # a write or fsync names no file
                raise OSError(e.errno, e.strerror, self._overrides_path) from e
            raise
