"""KubeSpawner's ``profile_list`` from the team profiles: each user sees only their teams.

KubeSpawner has no group filter of its own (kubespawner #589 and #889, z2jh #1734), but it
accepts a callable ``profile_list(spawner)``, possibly async, evaluated when the spawn form is
shown and again when the server starts (where it also validates the user's choice, so a team
that is not the user's cannot be picked through the REST API either). In ``jupyterhub_config.py``
(z2jh: ``hub.extraConfig``)::

    from jupyter_quota.hubservice.profile_list import make_profile_list
    c.KubeSpawner.profile_list = make_profile_list(
        PROFILES, service_url="http://127.0.0.1:10101/services/jupyter-quota/")

``PROFILES`` is the same list as the service's ``JupyterQuota.profiles``. Each team the user
belongs to (its users, or the user's hub groups) gives one profile with a ``gpus`` option; a
GPU count above what the team's namespace has left is marked, e.g.
``2 GPUs (does not fit: team-alpha has 0 GPUs left)``. The balances come from the quota service,
asked as the user (a token of theirs that lives :data:`TOKEN_SECONDS`, with only the service's
access scope), so the service's own rules decide what they see. If it cannot answer, the
profiles are offered unmarked and the description says so: spawning never waits on it.

The server pod itself runs where KubeSpawner runs pods (the hub's namespace), so its GPUs do not
count against the team's ResourceQuota: the marks are advice that reflect the team's budget;
jobs (``%swift_sft``) are where the quota is enforced.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Iterable

from ..profiles import TeamProfile, load_profiles
from .names import ACCESS_SCOPE

log = logging.getLogger(__name__)
#: How long the user's token for one balance read lives (the hub deletes it once expired).
TOKEN_SECONDS = 60
GPU_CHOICES = (0, 1, 2, 4, 8)

#: ``balances(spawner)`` -> {namespace: balance as the REST API answers it}; may be async.
BalanceSource = Callable[[object], object]


def make_profile_list(
    profiles: Iterable[dict],
    *,
    service_url: str = "",
    balances: BalanceSource | None = None,
    gpu_choices: Iterable[int] = GPU_CHOICES,
    timeout: float = 5.0,
):
    """A ``KubeSpawner.profile_list`` callable for ``profiles`` (dicts, as ``JupyterQuota.profiles``).

    ``balances`` reads the user's namespaces' balances; by default :func:`service_balances` asks
    the quota service at ``service_url``. Neither: no marks.
    """
    teams = list(load_profiles(profiles).values())  # a malformed profile fails the hub at start
    choices = sorted({int(n) for n in gpu_choices})
    source = balances or (service_balances(service_url, timeout) if service_url else None)

    async def profile_list(spawner) -> list[dict]:
        user = spawner.user
        groups = [getattr(g, "name", g) for g in getattr(user, "groups", None) or []]
        mine = [p for p in teams if p.has_member(user.name, groups)]
        known, problem = {}, ""
        if mine and source is not None:
            try:
                known = await _maybe_await(source(spawner))
            except Exception as e:  # noqa: BLE001 - the form must still show; say why there are no marks
                log.warning("jupyter_quota profile_list: balances for %s unavailable: %s", user.name, e)
                problem = "the team's remaining quota could not be read now"
        return [team_profile(p, known.get(p.namespace), choices, problem) for p in mine]

    return profile_list


def team_profile(profile: TeamProfile, balance: dict | None, gpu_choices: list[int], problem: str = "") -> dict:
    """One KubeSpawner profile for a team: its GPU counts up to its hard quota, marked by ``balance``."""
    gpu_key = f"requests.{profile.gpuResource}"
    row = ((balance or {}).get("resources") or {}).get(gpu_key) or {}
    hard = _whole(row["hard"] if "hard" in row else profile.hard.get(gpu_key))  # live, else as configured
    remaining = _whole(row.get("remaining"))
    choices = {}
    for n in gpu_choices:
        if hard is not None and n > hard:
            continue
        label = "No GPU" if n == 0 else f"{n} GPU{'s' if n > 1 else ''}"
        if n and remaining is not None and n > remaining:
            label += f" (does not fit: {profile.namespace} has {remaining} GPU{'' if remaining == 1 else 's'} left)"
        override = {}
        if n:
            override = {
                "extra_resource_limits": {profile.gpuResource: str(n)},
                "extra_resource_guarantees": {profile.gpuResource: str(n)},
            }
            if profile.nodeSelector:
                override["node_selector"] = dict(profile.nodeSelector)
            if profile.tolerations:
                override["tolerations"] = copy.deepcopy(list(profile.tolerations))
        choices[str(n)] = {"display_name": label, "kubespawner_override": override}
    model = f" ({profile.gpuModel})" if profile.gpuModel else ""
    status = problem or (
        f"{remaining} of {hard if hard is not None else '?'} GPUs left" if remaining is not None else ""
    )
    return {
        "display_name": f"Team {profile.displayName or profile.team}{model}",
        "slug": profile.namespace,
        "description": " · ".join(x for x in (f"namespace {profile.namespace}", status) if x),
        "profile_options": {"gpus": {"display_name": "GPUs", "choices": choices}},
    }


def service_balances(service_url: str, timeout: float = 5.0) -> BalanceSource:
    """Balances read from the quota service as the spawner's user (``GET {service_url}quota/v1/namespaces``).

    In the hub process ``spawner.user`` is JupyterHub's ``User``; ``new_api_token`` makes a token
    of theirs with only the service's access scope, alive :data:`TOKEN_SECONDS` seconds.
    """
    base = service_url if service_url.endswith("/") else service_url + "/"

    async def balances(spawner) -> dict:
        from tornado.httpclient import AsyncHTTPClient

        token = spawner.user.new_api_token(
            note="jupyter-quota profile_list", scopes=[ACCESS_SCOPE], expires_in=TOKEN_SECONDS
        )
        response = await AsyncHTTPClient().fetch(
            base + "quota/v1/namespaces", request_timeout=timeout, headers={"Authorization": f"token {token}"}
        )
        return {ns["name"]: ns.get("balance") for ns in json.loads(response.body)["namespaces"]}

    return balances


def _whole(value) -> int | None:
    """A GPU count (whole number) from a quantity string; None if absent or not whole."""
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


async def _maybe_await(value):
    if hasattr(value, "__await__"):
        return await value
    return value
