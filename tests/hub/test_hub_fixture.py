"""The real hub itself, as the other hub tests rely on it (users, groups, scopes, the service's token)."""

from __future__ import annotations

from hub_process import USERS

from jupyter_quota.hubservice.names import ACCESS_SCOPE


def test_the_demo_users_and_groups(hub):
    users = {u["name"]: u for u in hub.api("GET", "/users").json()}
    assert {name: (sorted(u["groups"]), u["admin"]) for name, u in users.items() if name in USERS} == {
        "ann": (["ml-alpha"], False), "bob": (["ml-beta"], False),
        "cat": (["ml-alpha", "ml-beta"], False), "ada": ([], True)}


def test_every_user_may_call_the_service(hub):
    for user in USERS:
        me = hub.api("GET", "/user", token=hub.token(user)).json()
        # the hub reduces scopes: an admin's unfiltered access:services covers the filtered one
        assert {ACCESS_SCOPE, "access:services"} & set(me["scopes"]), (user, me["scopes"])


def test_the_browser_login_reaches_the_users_lab(servers):
    session = servers.browser("bob")
    assert any(c.name == "jupyterhub-user-bob" for c in session.cookies)
