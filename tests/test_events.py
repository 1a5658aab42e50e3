"""``GET /events`` (server-sent events) and the ETags of balance and namespaces (issue 23).

The fan-out core and the pass on their own first, then the real jupyter-server in both modes:
the server as the quota authority, and the server relaying the quota service's stream. The
server tests wait on events arriving (a queue), never on a sleep.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from quota_testing import QUOTA_MODES
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from jupyter_quota.backends.base import JobChanges
from jupyter_quota.service.events import BALANCE, ENDPOINT, HEARTBEAT_FRAME, INCREASE, JOB, EventHub, FanOut, frame

GPU = "requests.nvidia.com/gpu"


def parse(data: bytes) -> list[tuple[str, dict]]:
    """The events in ``data`` (whole frames), comments and ``retry:`` left out."""
    out = []
    for block in data.decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":"))
        if "event" in fields:
            out.append((fields["event"], json.loads(fields["data"])))
    return out


# -- the core ------------------------------------------------------------------------------------


def test_a_publish_reaches_each_subscriber_of_the_team_once_with_one_frame():
    fan = FanOut()
    got = {name: [] for name in ("a1", "a2", "b1", "ab")}
    fan.subscribe(["alpha"], got["a1"].append)
    fan.subscribe(["alpha"], got["a2"].append)
    fan.subscribe(["beta"], got["b1"].append)
    fan.subscribe(["alpha", "beta"], got["ab"].append)
    data = frame(BALANCE, {"team": "alpha"})
    assert fan.publish("alpha", data) == 3
    assert got["a1"] == got["a2"] == got["ab"] == [data] and got["b1"] == []
    assert got["a1"][0] is got["a2"][0], "one frame, made once, for every subscriber"
    assert fan.teams() == {"alpha", "beta"}


def test_a_subscriber_whose_stream_is_gone_is_dropped_and_the_others_still_hear():
    fan = FanOut()
    heard = []

    def broken(_data):
        raise OSError("closed")

    fan.subscribe(["alpha"], broken)
    fan.subscribe(["alpha"], heard.append)
    assert fan.publish("alpha", b"x") == 1 and heard == [b"x"]
    assert len(fan) == 1
    assert fan.heartbeat() == 1 and heard[-1] == HEARTBEAT_FRAME


def test_a_heartbeat_to_many_streams_goes_in_slices_with_the_loop_free_between():
    fan = FanOut()
    heard = [[] for _ in range(450)]
    for got in heard:
        fan.subscribe(["alpha"], got.append)
    later = []
    fan.heartbeat_in_slices(lambda fn, *args: later.append((fn, args)), size=200)
    for sent in (200, 400, 450):  # one slice per turn of the loop, the next one queued behind
        assert sum(map(len, heard)) == sent
        if later:
            fn, args = later.pop()
            fn(*args)
    assert later == [] and all(got == [HEARTBEAT_FRAME] for got in heard), "each stream once"


class ImmediateLoop:
    def call_soon_threadsafe(self, fn, *args):
        fn(*args)


class FakeBackend:
    def __init__(self):
        self.used = {"alpha": "0", "beta": "0"}
        self.balances = 0
        self.jobs: list[dict] = []
        self.generation = 0

    def balance(self, team):
        self.balances += 1
        return {"team": team, "resources": {GPU: {"used": self.used[team]}}, "observedAt": self.balances}

    def job_changes(self, teams, cursor):
        rows = [j for j in self.jobs if cursor is None or j["rev"] > cursor]
        return JobChanges([{k: v for k, v in j.items() if k != "rev"} for j in rows], self.generation, cursor is None)


def hub_with_subscribers(backend, count_alpha=5, count_beta=3):
    hub = EventHub(backend.balance, backend.job_changes, lambda job: job, sweep_seconds=1e9)
    got = {"alpha": [[] for _ in range(count_alpha)], "beta": [[] for _ in range(count_beta)]}
    for team, lists in got.items():
        for heard in lists:
            hub.fanout.subscribe([team], heard.append)
    hub._loop = ImmediateLoop()
    return hub, got


def test_a_change_is_computed_once_and_reaches_only_that_teams_subscribers():
    backend = FakeBackend()
    hub, got = hub_with_subscribers(backend)
    hub.run_pass()  # the baseline of the backend's jobs
    backend.used["alpha"] = "1"
    hub.changed("alpha")
    hub.run_pass()
    assert backend.balances == 1, "one computation for five subscribers"
    for heard in got["alpha"]:
        assert parse(b"".join(heard)) == [
            (BALANCE, {"team": "alpha", "resources": {GPU: {"used": "1"}}, "observedAt": 1})
        ]
    assert all(heard == [] for heard in got["beta"]), "no beta subscriber hears of alpha"
    hub.changed("alpha")  # written again, unchanged: computed, not sent
    hub.run_pass()
    assert backend.balances == 2 and all(len(heard) == 1 for heard in got["alpha"])


def test_a_job_the_backend_reports_changed_is_sent_once_with_its_teams_balance():
    backend = FakeBackend()
    job = {"namespace": "team-beta", "team": "beta", "name": "j", "phase": "Running", "rev": 1}
    backend.jobs.append(job)
    hub, got = hub_with_subscribers(backend)
    hub.run_pass()  # baseline: the running job is what subscribers found
    assert all(heard == [] for lists in got.values() for heard in lists)
    job.update(phase="Succeeded", rev=2)
    backend.generation, backend.used["beta"] = 2, "0"
    hub.run_pass()
    for heard in got["beta"]:
        events = parse(b"".join(heard))
        assert [name for name, _ in events] == [JOB, BALANCE]
        assert events[0][1]["phase"] == "Succeeded"
    assert backend.balances == 1 and all(heard == [] for heard in got["alpha"])
    hub.run_pass()  # nothing new since the cursor
    assert all(len(heard) == 2 for heard in got["beta"])


def test_a_submitted_job_the_backend_then_reports_as_it_is_is_sent_once():
    backend = FakeBackend()
    hub, got = hub_with_subscribers(backend)
    hub.run_pass()
    job = {"namespace": "team-alpha", "team": "alpha", "name": "new", "phase": "Pending"}
    hub.job_changed(dict(job))  # the service's submit
    backend.jobs.append({**job, "rev": 1})  # the ledger's row of it, seen by the next pass
    backend.generation = 1
    hub.run_pass()
    hub.run_pass()
    for heard in got["alpha"]:
        assert [name for name, _ in parse(b"".join(heard))] == [JOB, BALANCE]


def test_a_stall_flag_read_at_the_sweep_is_sent_though_no_row_changed():
    """A job's ``stalled`` is read from its log's silence, not from its row: the sweep finds it."""
    backend = FakeBackend()
    job = {"namespace": "team-alpha", "team": "alpha", "name": "quiet", "phase": "Running", "rev": 1}
    backend.jobs.append(job)
    backend.generation = 1
    hub = EventHub(backend.balance, backend.job_changes, lambda job: job, poll_seconds=1, sweep_seconds=2)
    heard: list[bytes] = []
    hub.fanout.subscribe(["alpha"], heard.append)
    hub._loop = ImmediateLoop()
    hub.run_pass()  # the baseline
    job["stalled"] = {"reason": "NoLogProgress", "since": "2026-12-01T00:00:00Z"}  # same rev
    hub.run_pass()  # the sweep's pass
    jobs = [data for name, data in parse(b"".join(heard)) if name == JOB]
    assert [j["stalled"]["reason"] for j in jobs] == ["NoLogProgress"]
    hub.run_pass()
    hub.run_pass()  # the next sweep: unchanged, not sent again
    assert [name for name, _ in parse(b"".join(heard))].count(JOB) == 1


def test_an_increase_request_changed_anywhere_reaches_its_teams_subscribers_with_the_balance():
    """The pass reads the requests changed since its cursor (the audit log), so a request another
    process made or decided arrives too; only its team hears, and its balance is read again."""
    backend = FakeBackend()
    changed: list[tuple[int, dict]] = []

    def increase_changes(cursor):
        last = len(changed)
        return last, ([] if cursor is None else [item for i, item in changed if i > cursor])

    hub = EventHub(backend.balance, backend.job_changes, lambda job: job, increase_changes, sweep_seconds=1e9)
    got = {"alpha": [], "beta": []}
    for team, heard in got.items():
        hub.fanout.subscribe([team], heard.append)
    hub._loop = ImmediateLoop()
    changed.append((1, {"name": "inc-1", "team": "beta", "phase": "Pending"}))  # before anyone came
    hub.run_pass()
    assert got == {"alpha": [], "beta": []}
    changed.append((2, {"name": "inc-2", "team": "alpha", "phase": "Pending"}))
    hub.run_pass()
    events = parse(b"".join(got["alpha"]))
    assert [(n, d.get("name")) for n, d in events] == [(INCREASE, "inc-2"), (BALANCE, None)]
    assert got["beta"] == [], "no beta subscriber hears of alpha's request"


def test_with_nobody_subscribed_a_pass_computes_nothing():
    backend = FakeBackend()
    hub = EventHub(backend.balance, backend.job_changes, lambda job: job)
    hub.changed("alpha")
    hub.run_pass()
    assert backend.balances == 0


# -- the server, both modes ----------------------------------------------------------------------


@pytest.fixture(params=QUOTA_MODES)
def quota_mode(request):
    return request.param


@pytest.fixture
def open_stream(jp_base_url, jp_http_port, jp_auth_header):
    """``await open_stream()`` opens ``GET /events`` and gives a function that waits for the next
    event matching a test (the fixture is sync: jupyter-server's test plugin runs async tests only)."""
    opened = []

    async def open_():
        queue: asyncio.Queue = asyncio.Queue()
        buffer = bytearray()
        headers = {}

        def on_chunk(chunk: bytes) -> None:
            buffer.extend(chunk)
            while b"\n\n" in buffer:
                block, _, rest = bytes(buffer).partition(b"\n\n")
                buffer[:] = rest
                for event in parse(block + b"\n\n"):
                    queue.put_nowait(event)

        def on_header(line: str) -> None:
            if ":" in line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()

        client = AsyncHTTPClient(force_instance=True)
        url = f"http://127.0.0.1:{jp_http_port}{jp_base_url}quota/v1/events"
        request = HTTPRequest(
            url, headers=jp_auth_header, request_timeout=0, streaming_callback=on_chunk, header_callback=on_header
        )
        opened.append((client, asyncio.ensure_future(client.fetch(request, raise_error=False))))

        async def next_event(test=lambda name, data: True, timeout=60.0):
            while True:
                name, data = await asyncio.wait_for(queue.get(), timeout)  # a bound, not a pace
                if test(name, data):
                    return name, data

        next_event.headers = headers
        next_event.queue = queue
        return next_event

    yield open_
    for client, task in opened:
        task.cancel()
        client.close()


async def test_the_stream_starts_with_the_balances_and_carries_a_submit(open_stream, api, hold):
    stream = await open_stream()
    name, balance = await stream()
    assert stream.headers["content-type"] == "text/event-stream"
    assert name == BALANCE and balance["namespace"] == "team-alpha"
    status, rest = await api("GET", "namespaces", "team-alpha", "balance")
    assert {k: v for k, v in balance.items() if k != "observedAt"} == {
        k: v for k, v in rest.items() if k != "observedAt"
    }, "the same JSON as GET .../balance"
    status, job = await api("POST", "namespaces", "team-alpha", "jobs", body={"args": hold, "gpus": 1})
    assert status == 201, job
    _, pushed = await stream(lambda n, d: n == JOB and d["name"] == job["name"])
    assert pushed["namespace"] == "team-alpha" and pushed["owner"] == job["owner"]
    _, after = await stream(lambda n, d: n == BALANCE and d["resources"][GPU]["used"] == "1")
    assert after["namespace"] == "team-alpha"
    status, _ = await api("DELETE", "namespaces", "team-alpha", "jobs", job["name"])
    assert status == 200
    await stream(lambda n, d: n == BALANCE and d["resources"][GPU]["used"] == "0")
    assert all(d.get("namespace") == "team-alpha" for _, d in _drain(stream.queue)), "no other team's events"


async def test_an_increase_request_is_pushed_to_its_team(open_stream, api):
    stream = await open_stream()
    await stream(lambda n, d: n == BALANCE)
    body = {"resources": {GPU: "1"}, "hours": 1, "reason": "a deadline"}
    status, made = await api("POST", "namespaces", "team-alpha", "increases", body=body)
    assert status == 201, made
    _, pushed = await stream(lambda n, d: n == INCREASE)
    status, listed = await api("GET", "increases")
    assert pushed == listed["increases"][0], "the same JSON as GET /increases"
    assert pushed["name"] == made["name"] and pushed["phase"] == "Pending"


@pytest.mark.parametrize(
    "extra_quota_config", [{"deploy_command": [sys.executable, str(Path(__file__).parent / "fake_deploy.py")]}]
)
async def test_an_endpoints_readiness_and_end_are_pushed_though_no_job_row_changes(open_stream, api):
    """Ready is learnt from the server's ``/health``, not from the job: it still reaches the stream,
    as the endpoint ``GET .../endpoints/{name}`` shows (without ``url``), and so does its end."""
    stream = await open_stream()
    await stream(lambda n, d: n == BALANCE)
    phases: list[tuple] = []

    def endpoint_in(phase):
        def test(name, data):
            if name != ENDPOINT:
                return False
            phases.append((data["phase"], data.get("reason")))
            return data["phase"] == phase

        return test

    body = {"name": "chat", "args": ["--model", "/m/tiny-chat"]}
    status, created = await api("POST", "namespaces", "team-alpha", "endpoints", body=body)
    assert status == 201, created
    _, ready = await stream(endpoint_in("Ready"))
    status, shown = await api("GET", "namespaces", "team-alpha", "endpoints", "chat")
    assert ready == {k: v for k, v in shown.items() if k != "url"}, "the same JSON as GET, less url"
    assert ready["models"] == ["tiny-chat"] and ready["team"] == "alpha"
    status, _ = await api("GET", "namespaces", "team-alpha", "endpoints", "chat", "v1", "models")
    assert status == 200  # a request through the proxy is not a change
    status, _ = await api("DELETE", "namespaces", "team-alpha", "endpoints", "chat")
    assert status == 200
    _, stopped = await stream(endpoint_in("Stopped"))
    assert stopped["reason"] == "Cancelled" and stopped["models"] == []
    # each change once (a Ready being deleted may show once more, with reason Terminating)
    assert phases[0][0] in ("Pending", "Starting") and phases.count(("Ready", None)) == 1, phases


def _drain(queue: asyncio.Queue) -> list:
    items = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items


@pytest.mark.parametrize("path", [("namespaces",), ("namespaces", "team-alpha", "balance")])
async def test_an_unchanged_read_is_a_304_with_no_body_and_a_change_is_a_200(jp_fetch, api, hold, path):
    first = await jp_fetch("quota", "v1", *path)
    etag = first.headers["Etag"]
    again = await jp_fetch("quota", "v1", *path, headers={"If-None-Match": etag}, raise_error=False)
    assert again.code == 304 and again.body == b""
    status, job = await api("POST", "namespaces", "team-alpha", "jobs", body={"args": hold, "gpus": 1})
    assert status == 201, job
    changed = await jp_fetch("quota", "v1", *path, headers={"If-None-Match": etag}, raise_error=False)
    assert changed.code == 200 and changed.headers["Etag"] != etag
    assert '"used": "1"' in changed.body.decode()
