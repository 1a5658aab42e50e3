"""``identify``: the hub's user model (a single-user server's or the quota service's caller)."""

from __future__ import annotations

from jupyter_server.auth.identity import User

from jupyter_quota.config import JupyterQuota
from jupyter_quota.hubservice.identity import HubUser
from jupyter_quota.hubservice.names import ADMIN_SCOPE
from jupyter_quota.identity import identify


def _model(name="ann", groups=("ml-alpha",), admin=False, scopes=()):
    return {"kind": "user", "name": name, "groups": list(groups), "admin": admin, "scopes": list(scopes)}


def test_the_hub_model_gives_name_groups_and_admin():
    who = identify(HubUser(_model(groups=("ml-beta", "ml-alpha"))), None, JupyterQuota())
    assert (who.name, who.groups, who.admin, who.source) == ("ann", ("ml-alpha", "ml-beta"), False, "jupyterhub")
    assert identify(HubUser(_model(name="ada", groups=(), admin=True)), None, JupyterQuota()).admin


def test_the_custom_admin_scope_makes_a_quota_admin():
    assert identify(HubUser(_model(scopes=[ADMIN_SCOPE])), None, JupyterQuota()).admin
    assert not identify(HubUser(_model(scopes=["custom:something-else"])), None, JupyterQuota()).admin


def test_configured_admins_count_under_a_hub_too():
    config = JupyterQuota(admin_users=["ann"], admin_groups=["ml-ops"])
    assert identify(HubUser(_model()), None, config).admin
    assert identify(HubUser(_model(name="bob", groups=("ml-ops",))), None, config).admin
    assert not identify(HubUser(_model(name="bob", groups=("ml-beta",))), None, config).admin


def test_a_user_without_a_hub_model_is_not_taken_for_a_hub_user():
    who = identify(User(username="carl"), object(), JupyterQuota(groups={"ml-alpha": ["carl"]}))
    assert (who.name, who.groups, who.source) == ("carl", ("ml-alpha",), "identity-provider")
