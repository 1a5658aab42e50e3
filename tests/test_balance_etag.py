"""The cheap ETag of ``GET .../balance`` and ``GET /namespaces`` (issue 23, the cheap read path).

A conditional read answers 304 from a validator (``service/validators.py``: the effective
profile's serial and the backend's state) without computing the balance. What must hold: every
change a user can see (a job submitted, a profile edited, an increase approved or expired, a
window opening) changes the validator, and two reads with one validator have one content.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from jupyter_quota.config import JupyterQuota
from jupyter_quota.identity import Identity
from jupyter_quota.service.app import build_service

GPU = "requests.nvidia.com/gpu"
MONDAY_19H = datetime(2026, 11, 30, 19, 0, tzinfo=UTC).timestamp()  # before the nights window
MONDAY_21H = datetime(2026, 11, 30, 21, 0, tzinfo=UTC).timestamp()  # in it
BEA, ADA = Identity("bea"), Identity("ada", admin=True)
BETA = "team-beta"


@pytest.fixture
def service(tmp_path):
    config = JupyterQuota()
    config.state_dir = str(tmp_path / "state")
    config.inventory = {"gpus": 8, "cpu": "32", "memory": "256Gi"}
    config.job_command = ["true"]
    config.admin_users = ["ada", "otto"]
    config.profiles = [
        {
            "team": "beta",
            "users": ["bea"],
            "hard": {GPU: "2", "requests.cpu": "8"},
            "limitRange": {"limits": [{"type": "Container", "default": {"cpu": "1", "memory": "1Gi"}}]},
            "windows": [{"name": "nights", "days": ["Mon"], "start": "20:00", "end": "08:00", "extra": {GPU: "2"}}],
        },
        {"team": "gamma", "users": ["bea"], "hard": {GPU: "1"}},
    ]
    made = build_service(config)
    made.clock = lambda: MONDAY_19H
    yield made
    made.close()


def content(balance: dict) -> str:
    return json.dumps({k: v for k, v in balance.items() if k != "observedAt"}, sort_keys=True)


class Reads:
    """Every (validator, content) pair read, for the check that one validator has one content."""

    def __init__(self, service):
        self.service = service
        self.seen: dict[str, str] = {}

    def balance(self) -> str:
        version, answer = self.service.balance_read(BEA, BETA)
        self._record(version, content(answer()))
        listed, answer = self.service.namespaces_read(BEA)
        listed_text = json.dumps([{**n, "balance": content(n["balance"])} for n in answer()["namespaces"]])
        self._record(listed, listed_text)
        as_before = [{**n, "balance": content(n["balance"])} for n in self.service.namespaces(BEA)["namespaces"]]
        assert listed_text == json.dumps(as_before), "GET /namespaces answers as QuotaService.namespaces"
        return version

    def _record(self, version: str, text: str) -> None:
        assert version is not None
        assert self.seen.setdefault(version, text) == text, "one validator, two contents: a stale 304"


def test_every_change_a_user_sees_changes_the_validator_and_one_validator_has_one_content(service):
    reads = Reads(service)
    before = reads.balance()
    assert reads.balance() == before, "nothing changed: the same validator"

    def changed(what: str) -> None:
        nonlocal before
        now = reads.balance()
        assert now != before, f"{what} left the validator as it was"
        before = now
        assert reads.balance() == now, f"after {what}, a read again is unchanged"

    service.submit(BEA, BETA, {"name": "one", "args": [], "gpus": 1})
    changed("a job submitted")
    service.put_profile(
        ADA, "beta", {**service.registry.get("beta").to_json(), "hard": {GPU: "3", "requests.cpu": "8"}}
    )
    changed("a profile edited")
    made = service.request_increase(BEA, BETA, {"resources": {GPU: "1"}, "hours": 1, "reason": "r"})
    service.decide_increase(ADA, made["name"], {}, approve=True)
    changed("an increase approved")
    service.clock = lambda: MONDAY_21H
    changed("a window opening (and the increase expiring)")
    service.clock = lambda: MONDAY_19H + 1800  # the increase holds, the window is shut
    changed("the clock back before the window")
    service.cancel(BEA, BETA, "one")
    changed("a job cancelled")


def test_a_profile_edit_to_the_same_content_may_change_the_validator_but_never_the_content(service):
    reads = Reads(service)
    first = reads.balance()
    service.put_profile(ADA, "beta", service.registry.get("beta").to_json())
    assert reads.balance() != first  # a new object: one more 200, never a 304 of old content


def test_another_team_s_change_leaves_the_balance_right(service):
    reads = Reads(service)
    reads.balance()
    service.submit(BEA, "team-gamma", {"name": "g", "args": [], "gpus": 1})
    reads.balance()  # the ledger's counter is global: it may change; the content check holds either way


# -- over HTTP: a 304 computes nothing ------------------------------------------------------------


@pytest.mark.parametrize("path", [("namespaces",), ("namespaces", "team-alpha", "balance")])
async def test_a_304_is_answered_without_computing_the_balance(jp_fetch, jp_serverapp, hold, path):
    served = jp_serverapp.web_app.settings["jupyter_quota_service"]
    computed = []
    balance = served.backend.balance
    served.backend.balance = lambda profile: computed.append(profile.team) or balance(profile)
    first = await jp_fetch("quota", "v1", *path)
    assert computed, "a 200 computes the balance"
    computed.clear()
    again = await jp_fetch("quota", "v1", *path, headers={"If-None-Match": first.headers["Etag"]}, raise_error=False)
    assert again.code == 304 and again.body == b""
    assert computed == [], "a 304 computed the balance"
    job = {"name": "etag", "args": hold, "gpus": 1}
    await jp_fetch("quota", "v1", "namespaces", "team-alpha", "jobs", method="POST", body=json.dumps(job))
    changed = await jp_fetch("quota", "v1", *path, headers={"If-None-Match": first.headers["Etag"]}, raise_error=False)
    assert changed.code == 200 and changed.headers["Etag"] != first.headers["Etag"]
    assert '"used": "1"' in changed.body.decode()


async def test_an_unchanged_200_writes_the_answer_made_before_and_a_change_makes_it_anew(jp_fetch, jp_serverapp, hold):
    """``handlers.OPTIMISATIONS["answer-cache"]``: the bytes made for a validator are written again
    for it (``observedAt`` stamped now), never after the validator changed."""
    served = jp_serverapp.web_app.settings["jupyter_quota_service"]
    computed = []
    balance = served.backend.balance
    served.backend.balance = lambda profile: computed.append(profile.team) or balance(profile)
    path = ("quota", "v1", "namespaces", "team-alpha", "balance")
    first = await jp_fetch(*path)
    again = await jp_fetch(*path)
    assert len(computed) == 1, "the second 200 computed the balance again"
    assert again.headers["Etag"] == first.headers["Etag"]
    assert content(json.loads(again.body)) == content(json.loads(first.body))
    assert json.loads(again.body)["observedAt"] >= json.loads(first.body)["observedAt"]
    alpha = next(p for p in served.registry.all() if p.namespace == "team-alpha")
    assert content(json.loads(again.body)) == content(balance(served.effective.of(alpha)))
    job = {"name": "cached", "args": hold, "gpus": 1}
    await jp_fetch("quota", "v1", "namespaces", "team-alpha", "jobs", method="POST", body=json.dumps(job))
    changed = await jp_fetch(*path)
    assert len(computed) == 2 and changed.headers["Etag"] != first.headers["Etag"]
    assert content(json.loads(changed.body)) == content(balance(served.effective.of(alpha)))
    assert content(json.loads(changed.body)) != content(json.loads(first.body))


# -- Kubernetes: the watch cache's resourceVersions (no API server: events fed to the cache) ------


def test_the_kube_validator_follows_the_cache_s_resource_versions():
    import kubernetes.client

    from jupyter_quota.backends.kube import KubeBackend
    from jupyter_quota.backends.kube.client import Kube
    from jupyter_quota.profiles import TeamProfile

    backend = KubeBackend(Kube(kubernetes.client.ApiClient()), job_image="trainer:1")  # never started
    profile = TeamProfile(team="a", namespace="team-a", users=["alice"], hard={GPU: "2"})
    seen: dict[str, str] = {}

    def event(kind: str, change: str, name: str, version: str, body: dict) -> None:
        obj = {"metadata": {"name": name, "namespace": "team-a", "resourceVersion": version}, **body}
        backend.cache[kind]._event({"type": change, "object": obj})

    def read() -> str:
        version = backend.balance_version(profile)
        assert seen.setdefault(version, content(backend.balance(profile))) == content(backend.balance(profile))
        return version

    quota = {"spec": {"hard": {GPU: "2"}}, "status": {"hard": {GPU: "2"}, "used": {GPU: "0"}}}
    event("resourcequotas", "ADDED", "team-quota", "5", quota)
    first = read()
    assert read() == first
    used = {"spec": quota["spec"], "status": {"hard": {GPU: "2"}, "used": {GPU: "1"}}}
    event("resourcequotas", "MODIFIED", "team-quota", "9", used)  # a pod started: status.used moved
    second = read()
    assert second != first
    limits = {"spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}}]}}
    event("limitranges", "ADDED", "team-limits", "10", limits)
    third = read()
    assert third not in (first, second)
    event("limitranges", "DELETED", "team-limits", "11", limits)
    assert read() not in (first, third)
