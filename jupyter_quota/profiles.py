"""Team profiles: who is in a team, which namespace it owns, and the quota objects that bound it.

A hub admin writes profiles in the usual Jupyter config (``c.JupyterQuota.profiles = [...]``);
each dict becomes a :class:`TeamProfile`, whose traits carry the help text. The Kubernetes
objects a profile stands for (Namespace, ResourceQuota, LimitRange) come from here, so the local
backend, the cluster backend and ``jupyter quota profiles render`` all enforce the same thing.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from traitlets import Dict, HasTraits, List, TraitError, Unicode

from . import bounds, labels, profileshape, quota, volumes
from .errors import Invalid, InvalidRequest

#: The label every object we create carries, so admins can find them.
MANAGED_LABELS = {labels.MANAGED_BY: labels.MANAGED_BY_VALUE}


class TeamProfile(HasTraits):
    """One team: its members, its namespace, its hard quota, its LimitRange and its GPUs."""

    team = Unicode(help="Team name, shown to users (e.g. ``alpha``). Required.").tag(config=True)
    namespace = Unicode(help="Kubernetes namespace the team owns (a DNS-1123 label). Default: ``team-<team>``.").tag(
        config=True
    )
    displayName = Unicode("", help="Longer human name for the team. Default: empty.").tag(config=True)
    users = List(
        Unicode(),
        help="User names that belong to the team (JupyterHub user names, or the server owner's "
        "name outside JupyterHub). Default: none.",
    ).tag(config=True)
    groups = List(
        Unicode(),
        help="Groups whose members belong to the team: JupyterHub groups under JupyterHub, "
        "else groups from ``JupyterQuota.groups``. Default: none.",
    ).tag(config=True)
    hard = Dict(
        help="The team's ResourceQuota ``spec.hard``: resource name to quantity string, e.g. "
        "``{'requests.nvidia.com/gpu': '2', 'limits.memory': '128Gi', 'requests.cpu': '8'}``. "
        "Quantities are Kubernetes quantities (``500m`` CPU, ``64Gi`` memory); GPUs only as "
        "``requests.<resource>`` are enforced. Default: empty (no quota object).",
    ).tag(config=True)
    scopes = List(
        Unicode(),
        help="ResourceQuota ``spec.scopes`` for the main quota (BestEffort, NotBestEffort, "
        "Terminating, NotTerminating, PriorityClass). Default: none (applies to every pod).",
    ).tag(config=True)
    scopeSelector = Dict(
        help="ResourceQuota ``spec.scopeSelector`` for the main quota, e.g. "
        "``{'matchExpressions': [{'scopeName': 'PriorityClass', 'operator': 'In', "
        "'values': ['high']}]}``. Default: none.",
    ).tag(config=True)
    quotaName = Unicode(
        "team-quota",
        help="Name of the main ResourceQuota object; it appears in refusals "
        "(``exceeded quota: team-quota, ...``). Default: ``team-quota``.",
    ).tag(config=True)
    extraQuotas = List(
        Dict(),
        help="More ResourceQuota objects for the namespace, each ``{'name', 'hard', 'scopes'?, "
        "'scopeSelector'?}`` (e.g. a PriorityClass-scoped GPU quota). Default: none.",
    ).tag(config=True)
    limitRange = Dict(
        help="The team's LimitRange ``spec`` (``{'limits': [{'type': 'Container', 'default': "
        "{...}, 'defaultRequest': {...}, 'min': {...}, 'max': {...}, "
        "'maxLimitRequestRatio': {...}}]}``). Defaults let a job that states only its GPUs in. "
        "Default: empty (no LimitRange object).",
    ).tag(config=True)
    limitRangeName = Unicode("team-limits", help="Name of the LimitRange object. Default: ``team-limits``.").tag(
        config=True
    )
    gpuResource = Unicode(
        "nvidia.com/gpu",
        help="The extended resource name of the team's GPUs. Default: ``nvidia.com/gpu``.",
    ).tag(config=True)
    gpuModel = Unicode("", help="GPU model the team's jobs run on, e.g. ``A100 80GB``. Default: unknown (empty).").tag(
        config=True
    )
    gpuMemory = Unicode(
        "",
        help="Memory of one GPU as a quantity, e.g. ``80Gi``; the planner fits jobs to it. Default: unknown (empty).",
    ).tag(config=True)
    nodeSelector = Dict(help="Kubernetes backend: ``spec.nodeSelector`` for the team's job pods. Default: none.").tag(
        config=True
    )
    tolerations = List(
        Dict(),
        help="Kubernetes backend: ``spec.tolerations`` for the team's job pods. Default: none.",
    ).tag(config=True)
    priorityClassName = Unicode(
        "", help="Kubernetes backend: ``spec.priorityClassName`` for job pods. Default: none."
    ).tag(config=True)
    image = Unicode(
        "",
        help="Kubernetes backend: container image that has ms-swift, for job pods. "
        "Default: empty (the server's ``JupyterQuota.job_image``).",
    ).tag(config=True)
    volumes = List(
        Dict(),
        help="Kubernetes backend: volumes the team's job pods mount, each a volume and its mount "
        "in one dict: ``name`` (a DNS-1123 label), ``mountPath`` (absolute), optional ``readOnly`` "
        "and ``subPath``, and one volume source. ``{username}`` in ``claimName`` or ``subPath`` is "
        "the submitting user, e.g. the home claim KubeSpawner made: ``{'name': 'home', 'mountPath': "
        "'/home/jovyan', 'persistentVolumeClaim': {'claimName': 'claim-{username}'}}``; a team's "
        "shared volume: ``{'name': 'shared', 'mountPath': '/shared', 'persistentVolumeClaim': "
        "{'claimName': 'alpha-shared'}}`` (ReadWriteMany). Default: none.",
    ).tag(config=True)

    windows = List(
        Dict(),
        help="Time windows that raise the team's hard quota, each ``{'name', 'days': ['Mon'..'Sun'] "
        "(the days it starts on), 'start': 'HH:MM', 'end': 'HH:MM' (at or before start: runs past "
        "midnight), 'timezone': IANA name (default 'UTC'), 'extra': {resource: quantity} (added to "
        "``hard`` while open), 'onClose': 'finish' | 'preempt' (default 'finish': jobs over the base "
        "quota run to their end)}``; see ``jupyter_quota/windows.py``. Default: none.",
    ).tag(config=True)
    borrowingLimit = Dict(
        help="How much of other teams' unused quota the team's best-effort jobs may use at once, "
        "resource to quantity, e.g. ``{'requests.nvidia.com/gpu': '2'}``. Default: empty (no borrowing).",
    ).tag(config=True)
    lendingLimit = Dict(
        help="The most of the team's unused quota other teams may borrow at once, resource to "
        "quantity. A resource not named here may be lent in full. Default: empty (no limit).",
    ).tag(config=True)
    priorityClasses = Dict(
        help="Kubernetes backend: the PriorityClass for each job priority, "
        "``{'high': name, 'normal': name, 'best-effort': name}``; a priority not named uses "
        "``priorityClassName``. Default: none.",
    ).tag(config=True)

    def __init__(self, **kwargs):
        unknown = sorted(set(kwargs) - set(self.trait_names()))
        if unknown:
            known = ", ".join(sorted(n for n in self.trait_names() if not n.startswith("_")))
            raise InvalidRequest(f"unknown profile field(s) {', '.join(unknown)}; known fields: {known}")
        try:
            super().__init__(**kwargs)
        except TraitError as e:
            raise InvalidRequest(f"invalid profile: {e}") from None
        if not self.team:
            raise InvalidRequest("a profile needs a 'team' name")
        if not self.namespace:
            self.namespace = f"team-{self.team}"
        self._check()

    def _check(self) -> None:
        """Reject a profile Kubernetes would reject, with the API server's words."""
        try:
            profileshape.check_names(self.team, self.namespace, self.gpuResource)
            profileshape.check_shapes(self.extraQuotas, self.scopeSelector, self.limitRange)
            profileshape.check_elastic(self)
            for rq in self.resource_quotas():
                quota.validate_quota_spec(rq["spec"])
            for lr in self.limit_ranges():
                quota.validate_limit_range_spec(lr["spec"])
            if self.gpuMemory:
                bounds.quantity(self.gpuMemory, "gpuMemory")
            volumes.check(self.volumes)
        except (Invalid, InvalidRequest, ValueError) as e:
            raise InvalidRequest(f"profile {self.team!r}: {getattr(e, 'message', e)}") from None

    def check_raised(self, increases: Iterable[tuple[str, dict]] = ()) -> None:
        """Refuse (``InvalidRequest``) when ``hard`` plus every window's ``extra`` and the
        ``(name, resources)`` of ``increases`` could pass 2^63-1, whatever the time: at ``PUT
        /profiles`` and at an increase's approval. Not at construction: an effective profile
        carries its raised ``hard`` beside the same windows."""
        extras = [(f"windows[{i}].extra", w.get("extra") or {}) for i, w in enumerate(self.windows)]
        bounds.check_raised(self.hard, [*extras, *increases], f"profile {self.team!r}")

    # -- membership ---------------------------------------------------------------------------

    def has_member(self, user: str, groups: Iterable[str]) -> bool:
        return user in self.users or bool(set(groups) & set(self.groups))

    # -- the Kubernetes objects it stands for -----------------------------------------------

    def namespace_object(self) -> dict:
        return {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": self.namespace, "labels": {**MANAGED_LABELS, labels.TEAM: self.team}},
        }

    def resource_quotas(self) -> list[dict]:
        """The namespace's ResourceQuota objects (no status), main quota first."""
        specs = []
        if self.hard:
            specs.append(
                {"name": self.quotaName, "hard": self.hard, "scopes": self.scopes, "scopeSelector": self.scopeSelector}
            )
        specs.extend(self.extraQuotas)
        objects = []
        for s in specs:
            spec = {"hard": {k: str(v) for k, v in (s.get("hard") or {}).items()}}
            if s.get("scopes"):
                spec["scopes"] = list(s["scopes"])
            if s.get("scopeSelector"):
                spec["scopeSelector"] = copy.deepcopy(s["scopeSelector"])
            objects.append(self._object("ResourceQuota", s.get("name") or self.quotaName, spec))
        return objects

    def limit_ranges(self) -> list[dict]:
        """The namespace's LimitRange, as stored by the API server (defaults filled in)."""
        if not self.limitRange:
            return []
        return [
            self._object("LimitRange", self.limitRangeName, quota.default_limit_range(copy.deepcopy(self.limitRange)))
        ]

    def _object(self, kind: str, name: str, spec: dict) -> dict:
        return {
            "apiVersion": "v1",
            "kind": kind,
            "metadata": {"name": name, "namespace": self.namespace, "labels": dict(MANAGED_LABELS)},
            "spec": spec,
        }

    def to_json(self) -> dict:
        return {name: copy.deepcopy(getattr(self, name)) for name in sorted(self.trait_names())}


def load_profiles(entries: Iterable[dict]) -> dict[str, TeamProfile]:
    """Profiles by team name; duplicate teams or namespaces are a configuration error."""
    by_team: dict[str, TeamProfile] = {}
    namespaces: dict[str, str] = {}
    for entry in entries:
        if isinstance(entry, TeamProfile):
            profile = entry
        elif isinstance(entry, dict):
            profile = TeamProfile(**entry)
        else:
            raise InvalidRequest(f"a profile must be a dict, not {type(entry).__name__}")
        if profile.team in by_team:
            raise InvalidRequest(f"team {profile.team!r} is defined twice")
        if profile.namespace in namespaces:
            raise InvalidRequest(
                f"namespace {profile.namespace!r} is used by teams {namespaces[profile.namespace]!r} "
                f"and {profile.team!r}"
            )
        by_team[profile.team] = profile
        namespaces[profile.namespace] = profile.team
    return by_team
