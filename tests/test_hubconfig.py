"""``configure_hub``: the quota service's part of a ``jupyterhub_config.py`` (a pure function over ``c``)."""

from __future__ import annotations

import sys

import pytest
from quota_testing import ROOT
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from jupyter_quota.hubservice.hubconfig import ADMIN_ROLE, DEFAULT_SERVER_SCOPES, configure_hub
from jupyter_quota.hubservice.names import ACCESS_SCOPE, ADMIN_SCOPE, SERVICE_NAME, SERVICE_URL_ENV


def service_entry(c: Config) -> dict:
    [entry] = [s for s in c.JupyterHub.services if s["name"] == SERVICE_NAME]
    return entry


def test_the_service_is_managed_on_loopback_and_the_servers_find_it():
    c = Config()
    configure_hub(
        c,
        service_port=10101,
        environment={"JUPYTER_CONFIG_PATH": "/etc/q"},
        service_environment={"JUPYTER_QUOTA_STATE_DIR": "/srv/q"},
    )
    entry = service_entry(c)
    assert entry["url"] == "http://127.0.0.1:10101"
    assert entry["command"] == [sys.executable, "-m", "jupyter_quota", "serve"]
    assert entry["oauth_no_confirm"] is True
    assert entry["environment"] == {"JUPYTER_CONFIG_PATH": "/etc/q", "JUPYTER_QUOTA_STATE_DIR": "/srv/q"}
    assert c.Spawner.environment == {
        "JUPYTER_CONFIG_PATH": "/etc/q",  # the service's state directory is not the servers' business
        SERVICE_URL_ENV: "http://127.0.0.1:10101/services/jupyter-quota/",
    }


def test_server_tokens_get_the_default_server_scopes_plus_the_service_and_admin_scopes():
    c = Config()
    configure_hub(c, service_port=1)
    assert set(c.Spawner.server_token_scopes) == {*DEFAULT_SERVER_SCOPES, ACCESS_SCOPE, ADMIN_SCOPE}
    c = Config()
    c.Spawner.server_token_scopes = ["access:servers!server", "users:activity!user", "read:users:name!user"]
    configure_hub(c, service_port=1)
    assert "read:users:name!user" in c.Spawner.server_token_scopes
    c = Config()
    c.Spawner.server_token_scopes = lambda spawner: []
    with pytest.raises(ValueError, match="callable"):
        configure_hub(c, service_port=1)


@pytest.mark.parametrize("has_extra_user_scopes", [True, False])
def test_every_user_may_call_the_service(has_extra_user_scopes):
    c = Config()
    configure_hub(c, service_port=1, extra_user_scopes=has_extra_user_scopes)
    user_roles = [r for r in c.JupyterHub.load_roles if r["name"] == "user"]
    if has_extra_user_scopes:  # JupyterHub 6: added to the default user role, which stays as it is
        assert c.JupyterHub.extra_user_scopes == {ACCESS_SCOPE}
        assert user_roles == []
    else:  # JupyterHub 5: the user role redefined as its default (self) plus the scope
        assert user_roles == [{"name": "user", "scopes": sorted({"self", ACCESS_SCOPE})}]
        assert "extra_user_scopes" not in c.JupyterHub


def test_a_user_role_of_the_admins_own_is_extended_not_replaced():
    c = Config()
    c.JupyterHub.load_roles = [{"name": "user", "scopes": ["self", "read:groups"]}]
    configure_hub(c, service_port=1, extra_user_scopes=True)
    [user_role] = [r for r in c.JupyterHub.load_roles if r["name"] == "user"]
    assert set(user_role["scopes"]) == {"self", "read:groups", ACCESS_SCOPE}
    assert "extra_user_scopes" not in c.JupyterHub  # 6 ignores it when `user` is redefined


def test_quota_admins_get_the_custom_scope_and_only_named_members_are_set():
    c = Config()
    configure_hub(c, service_port=1)
    assert ADMIN_SCOPE in c.JupyterHub.custom_scopes
    [role] = [r for r in c.JupyterHub.load_roles if r["name"] == ADMIN_ROLE]
    # no `users: []`: loading that would drop members an admin added through the hub's API
    assert role == {"name": ADMIN_ROLE, "description": role["description"], "scopes": [ADMIN_SCOPE]}
    c = Config()
    configure_hub(c, service_port=1, quota_admin_users=["ada", "ada"], quota_admin_groups=["ml-admins"])
    [role] = [r for r in c.JupyterHub.load_roles if r["name"] == ADMIN_ROLE]
    assert (role["users"], role["groups"]) == (["ada"], ["ml-admins"])


def test_other_settings_are_kept_and_a_second_call_replaces_its_own():
    c = Config()
    c.JupyterHub.services = [{"name": "idle-culler", "command": ["cull"]}]
    c.JupyterHub.load_roles = [{"name": "idle-culler", "scopes": ["list:users"], "services": ["idle-culler"]}]
    c.JupyterHub.custom_scopes = {"custom:other": {"description": "x"}}
    c.Spawner.environment.update({"EXTRA": "1"})  # a lazy value, as config files often write it
    configure_hub(c, service_port=1)
    configure_hub(c, service_port=2, extra_user_scopes=False)
    assert [s["name"] for s in c.JupyterHub.services] == ["idle-culler", SERVICE_NAME]
    assert service_entry(c)["url"] == "http://127.0.0.1:2"
    assert sorted(r["name"] for r in c.JupyterHub.load_roles) == ["idle-culler", ADMIN_ROLE, "user"]
    assert set(c.JupyterHub.custom_scopes) == {"custom:other", ADMIN_SCOPE}
    assert c.Spawner.environment["EXTRA"] == "1"
    assert c.Spawner.environment[SERVICE_URL_ENV] == "http://127.0.0.1:2/services/jupyter-quota/"


def test_the_demo_hub_config_is_valid_for_the_installed_jupyterhub(tmp_path, monkeypatch):
    """binder/jupyterhub_config.py (scripts/demo-hub) loads, and jupyterhub's own traits accept it."""
    from jupyterhub.app import JupyterHub
    from jupyterhub.spawner import SimpleLocalProcessSpawner

    monkeypatch.setenv("JUPYTER_QUOTA_DEMO_PASSWORD", "pw")
    monkeypatch.setenv("JUPYTER_QUOTA_HUB_DIR", str(tmp_path))
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", "/admin/conf")
    path = ROOT / "binder" / "jupyterhub_config.py"
    c = PyFileConfigLoader(path.name, path=str(path.parent)).load_config()
    hub = JupyterHub(config=c)
    assert hub.load_groups == {"ml-alpha": {"users": ["ann", "cat"]}, "ml-beta": {"users": ["bob", "cat"]}}
    assert hub.authenticator_class is not None and hub.bind_url == "http://127.0.0.1:8000"
    spawner = SimpleLocalProcessSpawner(config=c)
    assert ACCESS_SCOPE in spawner.server_token_scopes
    # the admin's config directory first: a jupyter_server_config.py there overrides binder/hub/'s
    assert spawner.environment["JUPYTER_CONFIG_PATH"] == f"/admin/conf:{ROOT / 'binder' / 'hub'}"
    assert service_entry(c)["environment"]["JUPYTER_QUOTA_STATE_DIR"] == str(tmp_path / "state")


def test_the_demo_teams_under_the_hub_are_hub_groups():
    path = ROOT / "binder" / "hub" / "jupyter_server_config.py"
    c = PyFileConfigLoader(path.name, path=str(path.parent)).load_config()
    members = {p["team"]: (p["users"], p["groups"]) for p in c.JupyterQuota.profiles}
    assert members == {"alpha": ([], ["ml-alpha"]), "beta": ([], ["ml-beta"])}
