"""Increase requests, pure: validation as quantities are validated, phases in time, and the
effective hard quota they make."""

import pytest

from jupyter_quota import increases
from jupyter_quota.effectivequota import effective_hard
from jupyter_quota.errors import InvalidRequest

HARD = {"requests.nvidia.com/gpu": "2", "limits.memory": "128Gi", "requests.cpu": "8", "count/jobs.batch": "4"}
GPU = "requests.nvidia.com/gpu"


def parse(body, max_hours=168):
    return increases.parse_request(body, HARD, "nvidia.com/gpu", max_hours)


def test_a_valid_request_is_canonical():
    asked = parse(
        {"resources": {GPU: 2, "limits.memory": "64Gi", "requests.cpu": "1500m"}, "hours": 8, "reason": " x "}
    )
    assert asked.resources == {GPU: "2", "limits.memory": "64Gi", "requests.cpu": "1500m"}
    assert asked.hours == 8.0 and asked.reason == "x"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"resources": {GPU: "1.5"}, "hours": 8, "reason": "r"}, "GPUs come in whole units"),
        ({"resources": {GPU: "500m"}, "hours": 8, "reason": "r"}, "GPUs come in whole units"),
        ({"resources": {"count/jobs.batch": "0.5"}, "hours": 8, "reason": "r"}, "whole units"),
        ({"resources": {GPU: "-1"}, "hours": 8, "reason": "r"}, "must be greater than zero"),
        ({"resources": {GPU: "0"}, "hours": 8, "reason": "r"}, "must be greater than zero"),
        (
            {"resources": {"requests.example.com/tpu": "1"}, "hours": 8, "reason": "r"},
            "not a resource the team's quota",
        ),
        ({"resources": {GPU: "2x"}, "hours": 8, "reason": "r"}, "resources[requests.nvidia.com/gpu]"),
        ({"resources": {GPU: True}, "hours": 8, "reason": "r"}, "must be a quantity string"),
        ({"resources": {}, "hours": 8, "reason": "r"}, "resources: must be an object"),
        ({"resources": [GPU], "hours": 8, "reason": "r"}, "resources: must be an object"),
        ({"resources": {GPU: "1"}, "hours": 0, "reason": "r"}, "hours: 0 is out of range"),
        ({"resources": {GPU: "1"}, "hours": -3, "reason": "r"}, "out of range"),
        ({"resources": {GPU: "1"}, "hours": 169, "reason": "r"}, "at most 168"),
        ({"resources": {GPU: "1"}, "hours": 10**400, "reason": "r"}, "out of range"),
        ({"resources": {GPU: "1"}, "hours": 1e308, "reason": "r"}, "out of range"),
        # the smallest float once raised a quota for no time at all: at least a minute (issue 25)
        ({"resources": {GPU: "1"}, "hours": 5e-324, "reason": "r"}, "at least one minute"),
        ({"resources": {GPU: "1"}, "hours": 0.01, "reason": "r"}, "at least one minute"),
        ({"resources": {GPU: "1"}, "hours": "8", "reason": "r"}, "hours: must be a number"),
        ({"resources": {GPU: "1"}, "hours": float("nan"), "reason": "r"}, "hours: must be a number"),
        ({"resources": {GPU: "1"}, "hours": 8}, "reason: say why"),
        ({"resources": {GPU: "1"}, "hours": 8, "reason": "  "}, "reason: say why"),
        ({"resources": {GPU: "1"}, "hours": 8, "reason": "x" * 1001}, "at most 1000"),
        ({"resources": {GPU: "1"}, "hours": 8, "reason": "r", "team": "beta"}, "unknown field(s) team"),
        ([], "must be a JSON object"),
    ],
)
def test_a_bad_request_says_what_to_fix(body, says):
    with pytest.raises(InvalidRequest) as caught:
        parse(body)
    assert says in caught.value.message


def test_one_minute_is_the_shortest_increase():
    assert parse({"resources": {GPU: "1"}, "hours": 1 / 60, "reason": "r"}).hours == 1 / 60


def test_a_team_without_a_hard_quota_has_nothing_to_raise():
    with pytest.raises(InvalidRequest, match="none \\(the team has no hard quota to raise\\)"):
        increases.parse_request({"resources": {GPU: "1"}, "hours": 1, "reason": "r"}, {}, "nvidia.com/gpu", 8)


def test_an_approved_request_expires_at_its_end():
    row = {"phase": "Approved", "expires_at": 100.0, "resources": "{}"}
    assert increases.phase_at(row, 99.9) == "Approved"
    assert increases.phase_at(row, 100.0) == "Expired"
    assert increases.active([row], 99) == [row] and increases.active([row], 100) == []
    assert increases.phase_at({"phase": "Pending", "expires_at": None}, 1e12) == "Pending"
    assert increases.next_expiry([row, {"phase": "Approved", "expires_at": 50.0}], 10) == 50.0
    assert increases.next_expiry([row], 200) is None


def test_effective_hard_adds_per_resource_and_ignores_unlimited_ones():
    assert effective_hard(HARD) == HARD
    raised = effective_hard(HARD, {GPU: "2"}, {GPU: "1", "limits.memory": "64Gi"}, {"requests.memory": "1Gi"})
    assert raised == {**HARD, GPU: "5", "limits.memory": "192Gi"}
    assert "requests.memory" not in raised
    assert effective_hard({"requests.cpu": "8"}, {"requests.cpu": "500m"}) == {"requests.cpu": "8500m"}
    assert HARD[GPU] == "2"  # not changed in place


def test_words_become_a_request_body():
    from jupyter_quota.increasewords import parse_words

    keys = set(HARD)
    assert parse_words(["+2", "gpu", "8h", "paper", "deadline"], keys) == {
        "resources": {GPU: "2"},
        "hours": 8.0,
        "reason": "paper deadline",
    }
    body = parse_words(["+1", "GPUs", "+64Gi", "memory", "+2", "cpu", "90m", "why not"], keys)
    assert body["resources"] == {GPU: "1", "limits.memory": "64Gi", "requests.cpu": "2"}
    assert body["hours"] == 1.5
    assert parse_words(["+1", "count/jobs.batch", "2d", "r"], keys)["hours"] == 48
    for words, says in [
        ([], "say what you need"),
        (["+2"], "how much of what"),
        (["+2", "gpu", "r"], "for how long"),
        (["+2", "gpu", "8h"], "say why"),
    ]:
        with pytest.raises(InvalidRequest, match=says):
            parse_words(words, keys)
