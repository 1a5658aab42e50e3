"""Temporary increases over REST on a real jupyter-server (embedded, local backend, demo teams):
a request, an admin's decision, the raised quota in balance and admission, the expiry by a
driven clock, and the audit log. Users are named per request (``X-Test-User``)."""

from __future__ import annotations

import csv
import io

import pytest
from openapi_contract import assert_matches
from quota_testing import HeaderIdentityProvider

GPU = "requests.nvidia.com/gpu"
BETA = "team-beta"


@pytest.fixture
def extra_quota_config():
    return {"admin_users": ["ada", "otto"], "max_open_increases": 2}


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config.ServerApp.identity_provider_class = HeaderIdentityProvider
    profiles = jp_server_config.JupyterQuota.profiles
    profiles[1] = {**profiles[1], "users": ["bea", "ben"]}
    profiles[0] = {**profiles[0], "users": [*profiles[0]["users"], "carl"]}
    return jp_server_config


@pytest.fixture
def service(jp_serverapp):
    return jp_serverapp.web_app.settings["jupyter_quota_service"]


def ask(gpus="2", hours=8, reason="deadline on Friday"):
    return {"resources": {GPU: gpus}, "hours": hours, "reason": reason}


async def gpu_hard(api, user="bea"):
    status, balance = await api("GET", "namespaces", BETA, "balance", user=user)
    assert status == 200, balance
    return balance["resources"][GPU]["hard"]


async def test_request_approve_raise_and_expire(api, service):
    status, made = await api("POST", "namespaces", BETA, "increases", body=ask(), user="bea")
    assert status == 201, made
    assert_matches("Increase", made)
    assert made["phase"] == "Pending" and made["user"] == "bea" and made["namespace"] == BETA
    assert made["resources"] == {GPU: "2"} and made["hours"] == 8 and made["reason"] == "deadline on Friday"
    assert made["expiresAt"] is None and made["decidedBy"] is None and made["createdAt"].endswith("Z")
    assert await gpu_hard(api) == "2", "a pending request raises nothing"
    job = {"name": "big", "args": ["--sleep", "0"], "gpus": 3}
    status, refused = await api("POST", "namespaces", BETA, "jobs", body=job, user="bea")
    assert status == 403 and refused["reason"] == "ExceededQuota", refused

    # only another admin decides
    status, answer = await api("POST", "increases", made["name"], "approve", body={"comment": "ok"}, user="ben")
    assert status == 403 and "not a quota admin" in answer["message"]
    status, approved = await api("POST", "increases", made["name"], "approve", body={"comment": "go"}, user="ada")
    assert status == 200, approved
    assert_matches("Increase", approved)
    assert approved["phase"] == "Approved" and approved["decidedBy"] == "ada" and approved["comment"] == "go"
    assert approved["expiresAt"] is not None
    status, again = await api("POST", "increases", made["name"], "deny", body={}, user="otto")
    assert status == 409 and "already Approved" in again["message"]
    assert again["reason"] == "AlreadyDecided", again  # not AlreadyExists: nothing was created (issue 25)

    # the raised quota: in the balance of every route, and in admission
    assert await gpu_hard(api) == "4"
    _, listed = await api("GET", "namespaces", user="bea")
    assert listed["namespaces"][0]["balance"]["resources"][GPU]["hard"] == "4"
    assert service.effective_hard("beta")[GPU] == "4"
    assert service.effective_hard("alpha")[GPU] == "2"
    status, admitted = await api("POST", "namespaces", BETA, "jobs", body=job, user="bea")
    assert status == 201, admitted

    # the clock passes the end: the balance and the phase follow at once, the timer records it
    real = service.clock
    service.clock = lambda: real() + 8 * 3600 + 1
    assert await gpu_hard(api) == "2"
    _, mine = await api("GET", "increases", user="bea")
    assert_matches("IncreaseList", mine)
    assert [(i["name"], i["phase"]) for i in mine["increases"]] == [(made["name"], "Expired")]
    assert service.expire_increases() == [made["name"]]
    assert service.expire_increases() == []
    status, log = await api("GET", "audit", user="otto")
    assert status == 200, log
    assert_matches("AuditLog", log)
    entries = [(e["who"], e["action"], e["target"]) for e in reversed(log["entries"])]  # newest first
    target = f"increase/{BETA}/{made['name']}"
    assert entries == [
        ("bea", "increase.requested", target),
        ("ada", "increase.approved", target),
        ("system", "increase.expired", target),
    ]
    assert "+2 requests.nvidia.com/gpu for 8 h: deadline on Friday" in log["entries"][-1]["detail"]
    assert log["entries"][-2]["detail"].startswith("go until ")


async def test_who_sees_and_decides_what(api):
    _, by_bea = await api("POST", "namespaces", BETA, "increases", body=ask("1"), user="bea")
    _, by_ada = await api("POST", "namespaces", BETA, "increases", body=ask("1", reason="mine"), user="ada")
    status, foreign = await api("POST", "namespaces", BETA, "increases", body=ask(), user="carl")
    assert status == 403 and "team-beta" in foreign["message"]

    _, carl = await api("GET", "increases", user="carl")
    assert carl["increases"] == []
    _, ben = await api("GET", "increases", user="ben")
    assert [i["name"] for i in ben["increases"]] == [by_ada["name"], by_bea["name"]]
    _, otto = await api("GET", "increases", user="otto")
    assert len(otto["increases"]) == 2

    status, own = await api("POST", "increases", by_ada["name"], "approve", body={"comment": "x"}, user="ada")
    assert status == 403 and "your own" in own["message"] and "another admin" in own["message"]
    status, denied = await api("POST", "increases", by_ada["name"], "deny", body={"comment": "no, sorry"}, user="otto")
    assert status == 200 and denied["phase"] == "Denied" and denied["expiresAt"] is None
    assert await gpu_hard(api) == "2"
    status, missing = await api("POST", "increases", "inc-999", "approve", body={}, user="otto")
    assert status == 404 and "inc-999" in missing["message"]
    status, bad = await api("POST", "increases", by_bea["name"], "approve", body={"comment": 3}, user="otto")
    assert status == 400 and "comment" in bad["message"]
    status, bad = await api("POST", "increases", by_bea["name"], "approve", body={"why": "x"}, user="otto")
    assert status == 400


async def test_open_requests_are_capped_per_user(api):
    for _ in range(2):
        status, _made = await api("POST", "namespaces", BETA, "increases", body=ask("1"), user="bea")
        assert status == 201
    status, third = await api("POST", "namespaces", BETA, "increases", body=ask("1"), user="bea")
    assert status == 409 and third["reason"] == "TooManyOpenRequests"
    assert "max_open_increases = 2" in third["message"]
    status, _ = await api("POST", "namespaces", BETA, "increases", body=ask("1"), user="ben")
    assert status == 201, "the cap is per user"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (ask("1.5"), "whole units"),
        (ask("-2"), "greater than zero"),
        ({"resources": {"requests.example.com/tpu": "1"}, "hours": 1, "reason": "r"}, "not a resource"),
        (ask(hours=1000), "at most 168"),
        ("{not json", "not valid JSON"),
    ],
)
async def test_bad_requests_are_400(api, body, says):
    status, answer = await api("POST", "namespaces", BETA, "increases", body=body, user="bea")
    assert status == 400 and says in answer["message"], answer


async def test_the_audit_log_is_for_admins_and_exports_as_csv(api, jp_fetch):
    await api("POST", "namespaces", BETA, "increases", body=ask(reason="=cmd()"), user="bea")
    status, refused = await api("GET", "audit", user="bea")
    assert status == 403 and "audit log" in refused["message"]
    response = await jp_fetch("quota", "v1", "audit", params={"format": "csv"}, headers={"X-Test-User": "ada"})
    assert response.headers["Content-Type"].startswith("text/csv")
    assert "attachment" in response.headers["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.body.decode())))
    assert [(r["who"], r["action"]) for r in rows] == [("bea", "increase.requested")]
    assert rows[0]["detail"].endswith(": =cmd()")
    status, bad = await api("GET", "audit", params={"format": "xml"}, user="ada")
    assert status == 400 and "csv" in bad["message"]
