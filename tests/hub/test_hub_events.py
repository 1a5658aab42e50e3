"""``GET /events`` through a real hub: each user of the matrix (tests/hub/test_hub_matrix.py)
subscribes through the hub's proxy to the quota service and through their own server (the
forwarder relays the stream), and hears of their own teams' jobs and balances only.

Jobs are submitted in the order beta, alpha, beta. One service writes every stream in the order
it publishes, so by the time a stream has the last job of its teams, an event of another team
published before it would have arrived: none may have (0 leaks), and every job of the user's
own teams must have (the test can fail both ways). Waits are on events arriving, never sleeps.
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import threading
import time

import pytest
import requests
from hub_process import SERVICE_PREFIX, USERS
from test_hub_matrix import SMALL, TEAMS

SURFACES = ("service", "own server")
#: (namespace, owner) of each job, in the order submitted
SUBMITS = [("team-beta", "bob"), ("team-alpha", "ann"), ("team-beta", "bob")]


class Stream:
    """One open ``GET /events``, read on a thread into a queue of (event, data)."""

    def __init__(self, url: str, token: str):
        self.events: queue.Queue = queue.Queue()
        self.response = requests.get(url, headers={"Authorization": f"token {token}"}, stream=True, timeout=(30, 120))
        self.status = self.response.status_code
        self.content_type = self.response.headers.get("Content-Type", "")
        if self.status == 200:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        event = None
        try:
            for line in self.response.iter_lines(decode_unicode=True):
                if line.startswith("event: "):
                    event = line[len("event: ") :]
                elif line.startswith("data: ") and event:
                    self.events.put((event, json.loads(line[len("data: ") :])))
                    event = None
        except (requests.RequestException, ValueError, AttributeError):
            pass  # closed at the end of the test

    def until(self, test, timeout: float = 90.0) -> list[tuple[str, dict]]:
        """Every event up to and including the first that passes ``test``."""
        seen = []
        while True:
            item = self.events.get(timeout=timeout)  # a bound for a broken stream, not a pace
            seen.append(item)
            if test(*item):
                return seen

    def close(self) -> None:
        """Shut the socket first: closing the response alone waits for the reader thread's read
        to return, i.e. for the next heartbeat (up to 15 s a stream)."""
        sock = getattr(getattr(self.response.raw, "connection", None), "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.response.close()


def test_events_reach_their_teams_subscribers_and_no_other(servers):
    hub = servers
    bases = {
        "service": lambda u: f"{hub.url}{SERVICE_PREFIX}quota/v1/events",
        "own server": lambda u: f"{hub.url}/user/{u}/quota/v1/events",
    }
    t0 = time.perf_counter()
    streams = {(u, s): Stream(bases[s](u), hub.token(u)) for u in USERS for s in SURFACES}
    names: list[str] = []
    times = {}
    try:
        for (user, surface), stream in streams.items():
            assert stream.status == 200 and stream.content_type.startswith("text/event-stream"), (user, surface)
            first = stream.until(lambda e, d: True)  # the stream is open and subscribed: its first balance
            assert first[0][0] == "balance"
        times["opened"] = time.perf_counter() - t0
        for ns, owner in SUBMITS:
            r = requests.post(
                f"{hub.service_url}quota/v1/namespaces/{ns}/jobs",
                timeout=60,
                headers={"Authorization": f"token {hub.token(owner)}"},
                data=json.dumps({"generateName": "ev-", "args": ["--exit", "0"], "resources": SMALL}),
            )
            assert r.status_code == 201, r.text
            names.append(r.json()["name"])
        times["submitted"] = time.perf_counter() - t0
        leaks, missed = [], []
        for (user, surface), stream in streams.items():
            mine = [name for name, (ns, _) in zip(names, SUBMITS, strict=True) if ns in TEAMS[user]]
            got = stream.until(lambda e, d, last=mine[-1]: e == "job" and d["name"] == last)
            leaks += [(user, surface, e, d.get("namespace")) for e, d in got if d.get("namespace") not in TEAMS[user]]
            heard = {d["name"] for e, d in got if e == "job"}
            missed += [(user, surface, name) for name in mine if name not in heard]
        times["heard"] = time.perf_counter() - t0
        print(f"\nevents: {len(streams)} streams, leaks {len(leaks)}, missed {len(missed)}; seconds: {times}")
        assert leaks == [], leaks
        assert missed == [], missed
    finally:
        for stream in streams.values():
            stream.close()
        for name, (ns, owner) in zip(names, SUBMITS, strict=False):
            requests.delete(
                f"{hub.service_url}quota/v1/namespaces/{ns}/jobs/{name}",
                timeout=60,
                headers={"Authorization": f"token {hub.token(owner)}"},
            )


@pytest.mark.parametrize("user,other", [("ann", "bob"), ("bob", "ann")])
def test_a_stream_through_another_users_server_is_refused(servers, user, other):
    stream = Stream(f"{servers.url}/user/{other}/quota/v1/events", servers.token(user))
    try:
        assert stream.status == 403
        assert set(stream.response.json()) >= {"reason", "message"}
    finally:
        stream.close()
