"""Everything a ``jupyterhub_config.py`` needs for the quota service, in one call.

    from jupyter_quota.hubservice.hubconfig import configure_hub
    configure_hub(c, service_port=10101, quota_admin_groups=["ml-admins"])

The hub then starts ``jupyter quota serve`` as the managed service ``jupyter-quota`` on loopback,
lets every user reach it, and points every single-user server at it
(``JUPYTER_QUOTA_SERVICE_URL``), so that the servers forward ``{base_url}quota/v1/*`` to it.

Scopes, and why (JupyterHub 5.5 and 6.x read the same config):

- **Users** need ``access:services!service=jupyter-quota`` to be let into the service; the default
  ``user`` role (``self``) does not include it. JupyterHub 6 adds it with
  ``c.JupyterHub.extra_user_scopes``; on 5.x the ``user`` role is redefined in ``load_roles`` as
  ``self`` plus the scope (a partial definition merged with the default, so nothing else changes).
  Either way every user has it, including users created later.
- **Servers' own tokens** (``JUPYTERHUB_API_TOKEN``, which the server forwards with): the default
  ``server`` role (``users:activity!user``, ``access:servers!server``) plus the access scope and
  ``custom:jupyter-quota:admin``. The hub gives a server token only the part of these its owner
  holds (``Spawner.server_token_scopes``), so the admin scope reaches only quota admins' servers.
- **Quota admins**: hub admins (the user model's ``admin`` flag), and the users and groups given
  the custom scope ``custom:jupyter-quota:admin`` through the role ``jupyter-quota-admin``.
- **The service's own token** needs no scope: HubAuth identifies a caller by asking the hub
  ``GET /hub/api/user`` *with the caller's token*, which always answers its owner's name, groups
  and admin flag. So no role is given to the service (least privilege: it cannot list users,
  read other tokens or start servers).
- Browser tokens of a user's server need nothing extra (``Spawner.oauth_client_allowed_scopes``
  stays as it is): the server forwards with its own token, not the browser's.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping

from .names import ACCESS_SCOPE, ADMIN_SCOPE, SERVICE_NAME, SERVICE_URL_ENV

ADMIN_ROLE = "jupyter-quota-admin"
# JupyterHub's default `server` role (roles.py), unchanged from 4.0 through 6.1.
DEFAULT_SERVER_SCOPES = ("users:activity!user", "access:servers!server")


def service_prefix() -> str:
    return f"/services/{SERVICE_NAME}/"


def service_url(host: str, port: int) -> str:
    """The service's direct address with its prefix, as the servers call it (no proxy hop)."""
    return f"http://{host}:{port}{service_prefix()}"


def configure_hub(
    c,
    *,
    service_port: int,
    service_host: str = "127.0.0.1",
    command: Iterable[str] | None = None,
    environment: Mapping[str, str] | None = None,
    service_environment: Mapping[str, str] | None = None,
    quota_admin_users: Iterable[str] = (),
    quota_admin_groups: Iterable[str] = (),
    extra_user_scopes: bool | None = None,
) -> None:
    """Add the quota service to the hub config ``c``; other settings of ``c`` are kept.

    ``environment`` goes to the service and to every server (the hub passes them almost nothing of
    its own: ``Spawner.env_keep``), e.g. ``JUPYTER_CONFIG_PATH`` so both read the same
    ``JupyterQuota`` settings; ``service_environment`` to the service only (its state directory,
    say, which no server needs to know). ``extra_user_scopes`` says whether the hub has
    ``JupyterHub.extra_user_scopes`` (6.x); by default the installed jupyterhub is asked.
    """
    environment = dict(environment or {})
    url = f"http://{service_host}:{service_port}"
    services = [s for s in _get(c.JupyterHub, "services", []) if s.get("name") != SERVICE_NAME]
    services.append(
        {
            "name": SERVICE_NAME,
            "url": url,
            "command": list(command or [sys.executable, "-m", "jupyter_quota", "serve"]),
            "environment": {**environment, **(service_environment or {})},
            # The service is the hub's own; a browser need not confirm handing it its identity.
            "oauth_no_confirm": True,
            "display": False,
        }
    )
    c.JupyterHub.services = services

    c.JupyterHub.custom_scopes = {
        **_get(c.JupyterHub, "custom_scopes", {}),
        ADMIN_SCOPE: {"description": "Administer jupyter_quota: every team's balance, jobs and profiles."},
    }
    roles = [dict(r) for r in _get(c.JupyterHub, "load_roles", []) if r.get("name") != ADMIN_ROLE]
    admin_role = {
        "name": ADMIN_ROLE,
        "description": "jupyter_quota admins (hub admins are too)",
        "scopes": [ADMIN_SCOPE],
    }
    # Members only when named: a role loaded with `users: []` would drop members added through the API.
    for kind, names in (("users", quota_admin_users), ("groups", quota_admin_groups)):
        if names:
            admin_role[kind] = sorted(set(names))
    roles.append(admin_role)
    if extra_user_scopes is None:
        extra_user_scopes = _hub_has_extra_user_scopes()
    user_role = next((r for r in roles if r.get("name") == "user"), None)
    if extra_user_scopes and user_role is None:
        c.JupyterHub.extra_user_scopes = set(_get(c.JupyterHub, "extra_user_scopes", set())) | {ACCESS_SCOPE}
    else:
        # JupyterHub 5, or a config that already redefines `user` (6 then ignores extra_user_scopes).
        if user_role is None:
            user_role = {"name": "user", "scopes": ["self"]}
            roles.append(user_role)
        user_role["scopes"] = sorted(set(user_role.get("scopes", ["self"])) | {ACCESS_SCOPE})
    c.JupyterHub.load_roles = roles

    token_scopes = _get(c.Spawner, "server_token_scopes", [])
    if callable(token_scopes):
        raise ValueError(
            "Spawner.server_token_scopes is a callable: add "
            f"{ACCESS_SCOPE!r} and {ADMIN_SCOPE!r} to what it returns instead"
        )
    c.Spawner.server_token_scopes = sorted(set(token_scopes or DEFAULT_SERVER_SCOPES) | {ACCESS_SCOPE, ADMIN_SCOPE})
    c.Spawner.environment = {
        **_get(c.Spawner, "environment", {}),
        **environment,
        SERVICE_URL_ENV: service_url(service_host, service_port),
    }


def _hub_has_extra_user_scopes() -> bool:
    from jupyterhub.app import JupyterHub

    return JupyterHub.class_traits().get("extra_user_scopes") is not None


def _get(section, key: str, default):
    """A setting of a config section, or ``default``; ``c.X.y.append(...)``-style values applied to it."""
    from traitlets.config.loader import LazyConfigValue

    value = section.get(key, default)
    return value.get_value(default) if isinstance(value, LazyConfigValue) else value
