"""Increase requests and the audit log at scale (issue 25, item 9): paged as ``GET .../jobs`` is
(``limit``, ``continue``, ``metadata``), filtered in SQL, read again only when something changed
(``ETag``/``If-None-Match``), capped per team, and decided requests archived past the retention
while the audit log stays whole."""

from __future__ import annotations

import pytest
from openapi_contract import assert_matches
from quota_testing import HeaderIdentityProvider

GPU = "requests.nvidia.com/gpu"
BETA, ALPHA = "team-beta", "team-alpha"
BETA_USERS = ["bea", "ben", "bob", "bud"]


@pytest.fixture
def extra_quota_config():
    return {"admin_users": ["ada"], "max_open_increases": 5, "max_open_increases_per_team": 3}


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config.ServerApp.identity_provider_class = HeaderIdentityProvider
    profiles = jp_server_config.JupyterQuota.profiles
    profiles[1] = {**profiles[1], "users": BETA_USERS}
    profiles[0] = {**profiles[0], "users": [*profiles[0]["users"], "carl"]}
    return jp_server_config


@pytest.fixture
def service(jp_serverapp):
    return jp_serverapp.web_app.settings["jupyter_quota_service"]


def ask(reason="deadline"):
    return {"resources": {GPU: "1"}, "hours": 1, "reason": reason}


async def file(api, namespace, user, reason="deadline"):
    status, made = await api("POST", "namespaces", namespace, "increases", body=ask(reason), user=user)
    assert status == 201, made
    return made["name"]


async def test_increases_are_paged_newest_first_and_a_member_pages_only_their_teams(api):
    beta = [await file(api, BETA, "bea", "b1"), await file(api, BETA, "ben", "b2")]
    alpha = await file(api, ALPHA, "carl", "a1")
    beta.append(await file(api, BETA, "bob", "b3"))
    status, first = await api("GET", "increases", user="bea", params={"limit": "2"})
    assert status == 200, first
    assert_matches("IncreaseList", first)
    assert [i["name"] for i in first["increases"]] == beta[::-1][:2]
    assert first["metadata"]["remainingItemCount"] == 1  # beta's only: alpha's is filtered in SQL
    status, last = await api(
        "GET", "increases", user="bea", params={"limit": "2", "continue": first["metadata"]["continue"]}
    )
    assert [i["name"] for i in last["increases"]] == [beta[0]] and last["metadata"] == {}
    _, everyone = await api("GET", "increases", user="ada")
    assert [i["name"] for i in everyone["increases"]] == [beta[2], alpha, beta[1], beta[0]]
    status, refused = await api("GET", "increases", user="ada", params={"continue": "not-ours"})
    assert status == 400 and "invalid continue token" in refused["message"], refused
    status, refused = await api("GET", "increases", user="ada", params={"limit": "0"})
    assert status == 400 and "limit must be a whole number" in refused["message"], refused


async def test_an_unchanged_list_answers_304_and_a_change_answers_the_new_list(api, jp_fetch):
    await file(api, BETA, "bea")

    async def get(etag=None):
        headers = {"X-Test-User": "bea", **({"If-None-Match": etag} if etag else {})}
        return await jp_fetch("quota", "v1", "increases", headers=headers, raise_error=False)

    first = await get()
    assert first.code == 200 and first.headers.get("Etag")
    unchanged = await get(first.headers["Etag"])
    assert unchanged.code == 304 and not unchanged.body
    await file(api, BETA, "ben")
    changed = await get(first.headers["Etag"])
    assert changed.code == 200 and changed.headers["Etag"] != first.headers["Etag"]


async def test_a_team_has_at_most_its_cap_of_open_requests_whoever_files_them(api):
    for user in BETA_USERS[:3]:
        await file(api, BETA, user)
    status, refused = await api("POST", "namespaces", BETA, "increases", body=ask(), user="bud")
    assert (status, refused["reason"]) == (409, "TooManyOpenRequests"), refused
    assert "team beta" in refused["message"] and "max_open_increases_per_team = 3" in refused["message"]
    await file(api, ALPHA, "carl")  # another team is not held by beta's


async def test_decided_requests_past_the_retention_are_archived_and_the_audit_log_stays_whole(api, service):
    old = await file(api, BETA, "bea", "old")
    status, _ = await api("POST", "increases", old, "deny", body={"comment": "no"}, user="ada")
    assert status == 200
    pending = await file(api, BETA, "ben", "pending")
    later = service.clock() + service.config.increase_retention_days * 86400 + 1
    assert service.increases.archive_decided(later) == 1
    _, listed = await api("GET", "increases", user="ada")
    assert [i["name"] for i in listed["increases"]] == [pending]
    status, log = await api("GET", "audit", user="ada", params={"limit": "1000"})
    assert status == 200
    targets = [e["target"] for e in log["entries"] if e["action"].startswith("increase.")]
    assert f"increase/{BETA}/{old}" in targets  # its request and its denial are still there
    assert any(e["action"] == "increase.archived" for e in log["entries"])
    # an archived request keeps its number: the next one does not reuse it
    assert await file(api, BETA, "bob") not in (old, pending)


async def test_the_audit_log_is_paged_newest_first(api):
    names = [await file(api, BETA, user) for user in BETA_USERS[:3]]
    status, first = await api("GET", "audit", user="ada", params={"limit": "2"})
    assert status == 200, first
    assert_matches("AuditLog", first)
    assert [e["target"].rsplit("/", 1)[1] for e in first["entries"]] == names[::-1][:2]
    assert first["metadata"]["remainingItemCount"] == 1
    _, rest = await api("GET", "audit", user="ada", params={"limit": "2", "continue": first["metadata"]["continue"]})
    assert [e["target"].rsplit("/", 1)[1] for e in rest["entries"]] == [names[0]] and rest["metadata"] == {}
