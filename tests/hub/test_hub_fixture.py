"""The real hub itself, as the other hub tests rely on it (users, groups, scopes, the service's token)."""

from __future__ import annotations

from pathlib import Path

from hub_process import USERS

from jupyter_quota.hubservice.names import ACCESS_SCOPE


def test_the_demo_users_and_groups(hub):
    users = {u["name"]: u for u in hub.api("GET", "/users").json()}
    assert {name: (sorted(u["groups"]), u["admin"]) for name, u in users.items() if name in USERS} == {
        "ann": (["ml-alpha"], False),
        "bob": (["ml-beta"], False),
        "cat": (["ml-alpha", "ml-beta"], False),
        "ada": ([], True),
    }


def test_every_user_may_call_the_service(hub):
    for user in USERS:
        me = hub.api("GET", "/user", token=hub.token(user)).json()
        # the hub reduces scopes: an admin's unfiltered access:services covers the filtered one
        assert {ACCESS_SCOPE, "access:services"} & set(me["scopes"]), (user, me["scopes"])


def test_the_browser_login_reaches_the_users_lab(servers):
    session = servers.browser("bob")
    assert any(c.name == "jupyterhub-user-bob" for c in session.cookies)


def service_token(hub) -> str:
    """The quota service's own hub token, read from its process's environment."""
    want = f"JUPYTERHUB_SERVICE_URL=http://127.0.0.1:{hub.service_port}"
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            env = environ.read_bytes().split(b"\0")
        except OSError:
            continue
        if want.encode() in env:
            return next(kv for kv in env if kv.startswith(b"JUPYTERHUB_API_TOKEN=")).decode().split("=", 1)[1]
    raise AssertionError("no quota service process of this hub")


def test_the_service_token_holds_no_hub_permission(hub):
    """hubconfig gives the service no role: identifying callers needs only the callers' own tokens."""
    token = service_token(hub)
    me = hub.api("GET", "/user", token=token).json()
    assert me["kind"] == "service" and me["name"] == "jupyter-quota", me
    print(f"\nthe quota service's token: scopes {me['scopes']}")
    assert me["scopes"] == [], me["scopes"]
    for path in ("/users", "/users/ann", "/groups", "/services"):
        assert hub.api("GET", path, token=token).status_code == 403, path
    assert hub.api("POST", "/users/ann/tokens", token=token, json={}).status_code in (403, 404)
