"""The matrix through a real hub: every route x each user x own and foreign namespaces x token and
browser cookie x where the call goes (the quota service through the hub's proxy, the caller's own
server, another user's server).

A leak is a foreign namespace's data in any successful answer, or a call that succeeds where it
must not (a read of a team you are not in, a write of another's job, an admin route for a
non-admin, anything through another user's server). Every refusal must be a 4xx with the API's
``{"reason", "message"}`` body. The counts are printed (``pytest -s``).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from dataclasses import dataclass

import pytest
import requests
from hub_process import SERVICE_PREFIX, USERS

TEAMS = {
    "ann": {"team-alpha"},
    "bob": {"team-beta"},
    "cat": {"team-alpha", "team-beta"},
    "ada": {"team-alpha", "team-beta"},
}  # ada: a hub admin, so a quota admin of every team
ADMINS = {"ada"}
NAMESPACES = ("team-alpha", "team-beta", "team-gamma")  # gamma: no such team
JOB_OWNER = {"team-alpha": "ann", "team-beta": "bob"}
SMALL = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}
QWEN = ["--model", "Qwen/Qwen2.5-0.5B-Instruct", "--tuner_type", "lora"]


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # below quota/v1; {ns} and {job} filled per cell
    body: object = None

    @property
    def write(self) -> bool:
        return self.method in ("POST", "PUT", "DELETE")


NS_ROUTES = [
    Route("GET", "/namespaces/{ns}/balance"),
    Route("GET", "/namespaces/{ns}/jobs"),
    Route("POST", "/namespaces/{ns}/jobs", {"generateName": "mx-", "args": ["--exit", "0"], "resources": SMALL}),
    Route("GET", "/namespaces/{ns}/jobs/{job}"),
    Route("GET", "/namespaces/{ns}/jobs/{job}/logs"),
    Route("DELETE", "/namespaces/{ns}/jobs/{job}"),
    Route("POST", "/namespaces/{ns}/plan", {"args": QWEN}),
]
GLOBAL_ROUTES = [
    Route("GET", "/namespaces"),
    Route("GET", "/identity"),
    Route("GET", "/inventory"),
    Route("GET", "/models"),
    Route("POST", "/estimate", {"args": QWEN}),
    Route("GET", "/profiles"),
    Route("GET", "/profiles/{team}"),
    Route("PUT", "/profiles/{team}"),
    Route("GET", "/metrics"),
]
ADMIN_ONLY = {"/profiles", "/profiles/{team}", "/metrics"}


def allowed(user: str, route: Route, ns: str | None, surface: str) -> bool:
    if surface == "other's server":
        return False  # a server serves its owner only
    if route.path in ADMIN_ONLY:
        return user in ADMINS
    if ns is None:
        return True
    if ns not in TEAMS[user]:
        return False
    if route.method == "DELETE":  # cancel: the job's owner or an admin
        return user == JOB_OWNER[ns] or user in ADMINS
    return True


class Caller:
    """One user's token and browser session, and where each surface's quota/v1 is."""

    def __init__(self, hub, user):
        self.hub, self.user = hub, user
        self.token = hub.token(user)
        self.session = hub.browser(user)  # the OAuth dance of /user/<u>/lab ...
        hub.visit(self.session, SERVICE_PREFIX)  # ... and of the quota service's sign-in page
        other = {"ann": "bob", "bob": "cat", "cat": "ada", "ada": "ann"}[user]
        self.bases = {
            "service": f"{hub.url}{SERVICE_PREFIX}quota/v1",
            "own server": f"{hub.url}/user/{user}/quota/v1",
            "other's server": f"{hub.url}/user/{other}/quota/v1",
        }

    def call(self, auth: str, surface: str, method: str, path: str, body=None) -> requests.Response:
        url = self.bases[surface] + path
        kwargs = {"timeout": 60, "allow_redirects": False}
        if body is not None:
            kwargs["data"] = json.dumps(body)
        if auth == "token":
            return requests.request(method, url, headers={"Authorization": f"token {self.token}"}, **kwargs)
        headers = self.hub.xsrf(self.session, url) if method != "GET" else {}
        return self.session.request(method, url, headers=headers, **kwargs)


@pytest.fixture(scope="module")
def callers(hub_servers):
    return {user: Caller(hub_servers, user) for user in USERS}


def submit(hub, user, ns, args, name_prefix="keep-"):
    r = requests.post(
        f"{hub.service_url}quota/v1/namespaces/{ns}/jobs",
        timeout=60,
        headers={"Authorization": f"token {hub.token(user)}"},
        data=json.dumps({"generateName": name_prefix, "args": args, "resources": SMALL}),
    )
    assert r.status_code == 201, r.text
    return r.json()["name"]


def cancel(hub, user, ns, name):
    requests.delete(
        f"{hub.service_url}quota/v1/namespaces/{ns}/jobs/{name}",
        timeout=60,
        headers={"Authorization": f"token {hub.token(user)}"},
    )


def test_the_matrix_has_no_leaks_and_every_refusal_is_the_apis(servers, callers):
    hub = servers
    kept = {ns: submit(hub, owner, ns, ["--sleep", "600"]) for ns, owner in JOB_OWNER.items()}
    counts, problems = Counter(), []
    cells = itertools.product(USERS, ("token", "cookie"), ("service", "own server", "other's server"))
    try:
        for user, auth, surface in cells:
            caller = callers[user]
            for route, ns in [(r, ns) for r in NS_ROUTES for ns in NAMESPACES] + [(r, None) for r in GLOBAL_ROUTES]:
                job = victim = None
                if "{job}" in route.path:
                    if ns == "team-gamma":
                        job = "no-such-job"
                    elif route.method == "DELETE":  # a fresh job of the namespace's owner to try to cancel
                        job = victim = submit(hub, JOB_OWNER[ns], ns, ["--sleep", "600"], "victim-")
                    else:
                        job = kept[ns]
                team = "beta" if user == "bob" else "alpha"
                body = route.body
                if route.method == "PUT":  # the team's profile as it is: an admin's PUT changes nothing
                    body = requests.get(
                        f"{hub.service_url}quota/v1/profiles/{team}",
                        timeout=60,
                        headers={"Authorization": f"token {hub.token('ada')}"},
                    ).json()
                path = route.path.format(ns=ns, job=job, team=team)
                r = caller.call(auth, surface, route.method, path, body)
                ok = allowed(user, route, ns, surface)
                counts["calls"] += 1
                cell = f"{user} {auth} {surface} {route.method} {path}: {r.status_code} {r.text[:200]}"
                if 200 <= r.status_code < 300:
                    counts["answered"] += 1
                    foreign = [n for n in NAMESPACES[:2] if n not in TEAMS[user]]
                    if not ok or any(n in r.text for n in foreign):
                        counts["leaks"] += 1
                        problems.append("LEAK " + cell)
                    elif route.method == "POST" and "/jobs" in path:
                        cancel(hub, user, ns, r.json()["name"])
                else:
                    counts["refused"] += 1
                    try:
                        api_body = set(r.json()) >= {"reason", "message"}
                    except ValueError:
                        api_body = False
                    if not (400 <= r.status_code < 500 and api_body):
                        counts["refusals without the API's 4xx body"] += 1
                        problems.append("BAD REFUSAL " + cell)
                    if ok and not (r.status_code == 403 and "ExceededQuota" in r.text):
                        counts["refused though allowed"] += 1
                        problems.append("REFUSED " + cell)
                if victim:
                    cancel(hub, JOB_OWNER[ns], ns, victim)
    finally:
        for ns, name in kept.items():
            cancel(hub, JOB_OWNER[ns], ns, name)
    print(f"\nhub matrix: {dict(counts)}")
    for line in problems[:40]:
        print("  " + line)
    assert counts["leaks"] == 0 and counts["refusals without the API's 4xx body"] == 0, problems[:20]
    assert counts["refused though allowed"] == 0, problems[:20]


@pytest.mark.parametrize("surface", ["service", "own server"])
def test_a_cookie_write_without_the_xsrf_header_is_refused(callers, surface):
    caller = callers["ann"]
    url = caller.bases[surface] + "/estimate"
    r = caller.session.post(url, data=json.dumps({"args": QWEN}), timeout=60, allow_redirects=False)
    assert r.status_code == 403, (r.status_code, r.text[:300])
    r = caller.session.post(
        url, data=json.dumps({"args": QWEN}), headers=caller.hub.xsrf(caller.session, url), timeout=60
    )
    assert r.status_code == 200, (r.status_code, r.text[:300])
