"""Who is asking: a user name, their groups and whether they are an admin.

Under JupyterHub the single-user server's current user (and the quota service's, see
``hubservice/identity.py``) carries the hub's model (``hub_user``:
name, groups, admin). Outside a hub, jupyter-server's built-in token/password login has one
account, the server's owner, so its anonymous per-browser user names mean the owner
(``JupyterQuota.owner``); a custom identity provider's user names are taken as they are.
Groups then come from ``JupyterQuota.groups``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from jupyter_server.auth.identity import IdentityProvider, LegacyIdentityProvider, PasswordIdentityProvider

from .hubservice.names import ADMIN_SCOPE

if TYPE_CHECKING:  # pragma: no cover - the config imports the service's settings
    from .config import JupyterQuota

_OWNER_ONLY_PROVIDERS = (IdentityProvider, PasswordIdentityProvider, LegacyIdentityProvider)


@dataclass(frozen=True)
class Identity:
    name: str
    groups: tuple[str, ...] = ()
    admin: bool = False
    #: "jupyterhub", "owner" (built-in login) or "identity-provider" (a custom one)
    source: str = "owner"

    def to_json(self) -> dict:
        return {"name": self.name, "groups": list(self.groups), "admin": self.admin, "source": self.source}


def identify(user, identity_provider, config: JupyterQuota) -> Identity:
    """The quota identity of jupyter-server's ``current_user``."""
    hub_user = getattr(user, "hub_user", None)
    if isinstance(hub_user, dict) and hub_user.get("name"):
        name = str(hub_user["name"])
        groups = tuple(sorted(str(g) for g in hub_user.get("groups") or ()))
        admin = (
            bool(hub_user.get("admin"))
            or ADMIN_SCOPE in (hub_user.get("scopes") or ())
            or _configured_admin(name, groups, config)
        )
        return Identity(name, groups, admin, "jupyterhub")
    if type(identity_provider) in _OWNER_ONLY_PROVIDERS:
        return owner_identity(config)
    return _configured_identity(str(getattr(user, "username", "") or ""), config, "identity-provider")


def owner_identity(config: JupyterQuota) -> Identity:
    """The server's owner, as the built-in login (and the command line) act for."""
    return _configured_identity(config.owner, config, "owner")


def _configured_identity(name: str, config: JupyterQuota, source: str) -> Identity:
    groups = tuple(sorted(g for g, members in config.groups.items() if name in (members or ())))
    return Identity(name, groups, _configured_admin(name, groups, config), source)


def _configured_admin(name: str, groups: tuple[str, ...], config: JupyterQuota) -> bool:
    return name in config.admin_users or bool(set(groups) & set(config.admin_groups))
