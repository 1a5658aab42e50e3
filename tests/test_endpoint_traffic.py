"""What the proxy counts of an endpoint's requests: status classes, quantiles, the per-minute
tally (``proxytraffic``), its records in a real SQLite file (``endpointrequests``: a batch is
written whole or not at all), and how usage and the chargeback show them."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections import Counter
from types import SimpleNamespace

import pytest

from jupyter_quota import chargeback, endpointrequests, usage
from jupyter_quota.identity import Identity
from jupyter_quota.proxytraffic import LATENCY_SAMPLE, Tally, quantile, requests_json, status_class
from jupyter_quota.records import open_records
from jupyter_quota.service.endpoints import Endpoints

T0 = 1_796_083_200  # 2026-12-01T00:00:00Z, a whole minute


CLASSES = [(200, "2xx"), (204, "2xx"), (304, "3xx"), (404, "4xx"), (409, "4xx"), (503, "5xx"), (599, "5xx"), (0, "5xx")]


@pytest.mark.parametrize(("status", "code"), CLASSES)
def test_a_status_is_counted_in_its_class_and_no_answer_is_a_5xx(status, code):
    assert status_class(status) == code


def test_quantiles_are_nearest_rank_over_the_sample():
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert quantile(values, 0.5) == 50 and quantile(values, 0.99) == 99 and quantile(values, 1.0) == 100
    assert quantile([7.0], 0.99) == 7 and quantile([], 0.5) is None


def test_a_tally_counts_per_minute_and_class_and_keeps_the_newest_latencies():
    tally = Tally()
    for i in range(LATENCY_SAMPLE + 5):
        tally.observe(200 if i % 5 else 500, 0.001 * (i + 1), T0 + i % 90)
    pending = tally.take()
    assert sum(c for c, _ in pending.values()) == LATENCY_SAMPLE + 5
    assert {minute for minute, _ in pending} == {T0, T0 + 60}
    assert {code for _, code in pending} == {"2xx", "5xx"}
    assert tally.pending == {} and len(tally.latencies) == LATENCY_SAMPLE
    assert min(tally.latencies) == pytest.approx(0.006), "the five oldest went"
    tally.give_back(pending)  # a failed write: counted again at the next
    assert tally.pending_codes() == Counter({"2xx": 804, "5xx": 201})
    shown = requests_json(tally.pending_codes(), tally.latencies)
    assert shown["total"] == 1005 and shown["byStatus"] == {"2xx": 804, "5xx": 201}
    assert shown["latencyMs"] == {"p50": 505.0, "p99": 995.0, "sample": LATENCY_SAMPLE}
    assert requests_json(Counter(), []) == {"total": 0, "byStatus": {}, "latencyMs": None}


def endpoint(name, created="2026-12-01T00:00:00Z", namespace="team-a"):
    return {"namespace": namespace, "name": name, "createdAt": created, "team": "a", "owner": "alice"}


def test_counts_survive_in_the_records_and_a_name_reused_is_another_endpoint(tmp_path):
    state = str(tmp_path)
    assert endpointrequests.totals(state, "team-a") == {}, "nothing recorded: nothing created"
    endpointrequests.remember(state, endpoint("chat"))
    endpointrequests.remember(state, endpoint("chat"))  # once
    first, again = ("team-a", "chat", "2026-12-01T00:00:00Z"), ("team-a", "chat", "2026-12-01T05:00:00Z")
    endpointrequests.add(state, {first: {(T0, "2xx"): [3, 0.3], (T0 + 60, "4xx"): [1, 0.01]}})
    endpointrequests.add(state, {first: {(T0, "2xx"): [2, 0.2]}, again: {(T0 + 7200, "2xx"): [5, 0.5]}})
    totals = endpointrequests.totals(state, "team-a")
    assert totals == {
        ("chat", "2026-12-01T00:00:00Z"): Counter({"2xx": 5, "4xx": 1}),
        ("chat", "2026-12-01T05:00:00Z"): Counter({"2xx": 5}),
    }
    names, counts = endpointrequests.in_window(state, T0 + 60, T0 + 7200)
    assert names == {("team-a", "chat")}
    assert counts == {("team-a", "chat", T0 + 60): Counter({"4xx": 1})}, "minutes that begin in the window"
    assert endpointrequests.in_window(state, T0, T0 + 3600, {"team-b"}) == (set(), {})


def test_a_batch_is_written_whole_or_not_at_all(tmp_path):
    state = str(tmp_path)
    good = ("team-a", "chat", "2026-12-01T00:00:00Z")
    endpointrequests.add(state, {good: {(T0, "2xx"): [1, 0.1]}})
    with pytest.raises(sqlite3.IntegrityError):  # the second row breaks NOT NULL after the first was sent
        endpointrequests.add(state, {good: {(T0, "2xx"): [4, 0.4]}, ("team-a", None, "x"): {(T0, "2xx"): [1, 0.1]}})
    with open_records(state).read() as con:
        assert [tuple(r) for r in con.execute("SELECT count, seconds FROM endpoint_requests")] == [(1, 0.1)]


def test_usage_rows_by_job_say_which_served_and_their_requests_per_bucket():
    window = usage.Window(T0, T0 + 7200, "job", 3600)
    rows = [
        {"namespace": "team-a", "team": "a", "user": "alice", "job": "chat", "start": usage.format_time(T0)},
        {"namespace": "team-a", "team": "a", "user": "alice", "job": "chat", "start": usage.format_time(T0 + 3600)},
        {"namespace": "team-a", "team": "a", "user": "alice", "job": "train", "start": usage.format_time(T0)},
    ]
    counts = {
        ("team-a", "chat", T0): {"2xx": 2},
        ("team-a", "chat", T0 + 3540): {"2xx": 1, "5xx": 1},  # the last minute of the first hour
        ("team-a", "chat", T0 + 3600): {"4xx": 3},
    }
    usage.mark_endpoints(rows, window, {("team-a", "chat")}, counts)
    assert [(r["kind"], r.get("requests")) for r in rows] == [
        ("endpoint", {"total": 4, "byStatus": {"2xx": 3, "5xx": 1}}),
        ("endpoint", {"total": 3, "byStatus": {"4xx": 3}}),
        ("job", None),
    ]
    by_team = [{"namespace": "team-a", "team": "a"}]
    usage.mark_endpoints(by_team, usage.Window(T0, T0 + 7200, "team"), {("team-a", "chat")}, counts)
    assert by_team == [{"namespace": "team-a", "team": "a"}], "only by=job rows name a kind"


def test_the_chargeback_counts_each_teams_endpoint_requests_and_the_total_adds_up():
    report = {"rows": [{"namespace": "team-a"}, {"namespace": "team-b"}], "totals": {}}
    counts = {("team-a", "chat", T0): {"2xx": 2, "4xx": 1}, ("team-a", "other", T0 + 60): {"2xx": 4}}
    chargeback.add_requests(report, counts)
    assert [r["requests"] for r in report["rows"]] == [7, 0] and report["totals"]["requests"] == 7


class _Teams:
    def for_namespace(self, who, namespace):
        return SimpleNamespace(namespace=namespace)


class _Backend:
    name = "local"

    def __init__(self, job):
        self.job = job

    def get_job(self, profile, name):
        return self.job


def test_a_read_while_counts_are_being_written_neither_misses_nor_doubles_them(tmp_path, monkeypatch):
    """The watch pass moves counts from memory to the records; a GET in the middle waits for it,
    then reads them once (before, it read them in neither place and showed too few)."""
    job = {**endpoint("chat"), "kind": "endpoint", "phase": "Running", "args": ["--port", "1"], "gpus": 0,
           "priority": "normal", "resources": {}, "startedAt": "2026-12-01T00:00:01Z"}  # fmt: skip
    manager = Endpoints(_Teams(), _Backend(job), None, deploy_command=[], idle_minutes=0,
                        log=logging.getLogger("test"), state_dir=str(tmp_path))  # fmt: skip
    manager._watch(job)
    for status in (200, 200, 404):
        manager.observe("team-a", "chat", status, 0.01)
    writing, read, done = threading.Event(), threading.Event(), threading.Event()
    add, totals = endpointrequests.add, endpointrequests.totals
    during: list[bool] = []

    def slow_add(state_dir, batches):  # a write that lasts until a reader has read (2 s at most)
        writing.set()
        read.wait(2)
        add(state_dir, batches)
        done.set()

    def watched_totals(state_dir, namespace):
        during.append(writing.is_set() and not done.is_set())
        read.set()
        return totals(state_dir, namespace)

    monkeypatch.setattr(endpointrequests, "add", slow_add)
    monkeypatch.setattr(endpointrequests, "totals", watched_totals)
    flusher = threading.Thread(target=manager.flush)
    flusher.start()
    assert writing.wait(30)
    shown = manager.get(Identity("alice"), "team-a", "chat")
    flusher.join(30)
    assert during == [False], "the read waited for the write"
    assert shown["requests"]["total"] == 3 and shown["requests"]["byStatus"] == {"2xx": 2, "4xx": 1}
    assert manager.get(Identity("alice"), "team-a", "chat")["requests"]["total"] == 3, "once, from the records"
