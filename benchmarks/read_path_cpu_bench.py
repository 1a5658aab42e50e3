#!/usr/bin/env python
"""CPU per balance read in the service's own code, without sockets (issue 23).

    python benchmarks/read_path_cpu_bench.py [--requests 3000] [--repeats 5] [--teams 100] [--users 1000]

The hub service's tornado application (``hubservice.app.make_app``, local backend, its
``HubServiceIdentityProvider`` with the users' tokens in ``HubOAuth``'s cache, no hub running) is
called directly: each request goes through tornado's routing and the handler (the lean balance
read, ``hubservice/leanread.py``; ``full route``: the same read with it off, through
jupyter-server's prepare and finish), and its answer is written to a connection that drops it. What sockets, HTTP
parsing and the IO loop's polling cost (the same for every route) is left out, so the figure is the
route's own. Beside it, a bare handler that checks the token in the same cache and answers a fixed
JSON body, as in ``open_loop_bench.py``. Prints the thread CPU per request of each (the least of
``--repeats`` rounds: CPU time, so another load on the machine moves it little) and their ratio.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import tornado.web
from tornado import httputil

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from jupyterhub.services.auth import HubOAuth  # noqa: E402
from quota_testing import teams_config  # noqa: E402

from jupyter_quota.config import JupyterQuota  # noqa: E402
from jupyter_quota.handlers import OPTIMISATIONS  # noqa: E402
from jupyter_quota.hubservice.app import make_app  # noqa: E402
from jupyter_quota.hubservice.identity import HubServiceIdentityProvider  # noqa: E402
from jupyter_quota.hubservice.names import ACCESS_SCOPE  # noqa: E402
from jupyter_quota.service.app import build_service  # noqa: E402

PREFIX = "/services/jupyter-quota/"


class _Dropped:
    """An HTTP/1 connection as a handler writes to it; what is written goes nowhere."""

    def __init__(self):
        self.context = type("Context", (), {"remote_ip": "127.0.0.1", "protocol": "http"})()
        self.status = None

    def set_close_callback(self, callback) -> None:
        pass

    def set_max_body_size(self, size: int) -> None:
        pass

    def write_headers(self, start_line, headers, chunk=None):
        self.status = start_line.code
        return self._done()

    def write(self, chunk):
        return self._done()

    def finish(self) -> None:
        pass

    @staticmethod
    def _done():
        future = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future


def application(state_dir: str, teams: int, users: int) -> tornado.web.Application:
    config = teams_config(state_dir, teams, {"requests.cpu": "100", "limits.memory": "100Gi"})
    service = build_service(JupyterQuota(config=config), log=logging.getLogger("bench"))
    auth = HubOAuth(api_token="bench", api_url="http://127.0.0.1:9/hub/api", cache_max_age=24 * 3600)
    auth.access_scopes = {ACCESS_SCOPE}
    width = len(str(teams - 1))
    for i in range(users):
        auth.cache[_key(f"u{i}")] = {
            "kind": "user",
            "name": f"u{i}",
            "groups": [f"g{i % teams:0{width}d}"],
            "admin": False,
            "scopes": [ACCESS_SCOPE],
        }
    app = make_app(service, HubServiceIdentityProvider(hub_auth=auth), PREFIX, logging.getLogger("bench"))
    body = json.dumps(service.balance_of(service.registry.all()[0]))

    class Bare(tornado.web.RequestHandler):
        def get(self):
            token = self.request.headers.get("Authorization", "").partition(" ")[2]
            if auth.cache.get(_key(token)) is None:
                raise tornado.web.HTTPError(403)
            self.set_header("Content-Type", "application/json")
            self.finish(body)

    app.add_handlers(".*$", [(r"/bench/bare", Bare)])
    app.bench_width = width
    return app


def _key(token: str) -> str:
    return f"token::{hashlib.sha256(token.encode()).hexdigest()}"


async def request(app, path: str, user: int) -> int:
    connection = _Dropped()
    delegate = app.start_request(None, connection)
    headers = httputil.HTTPHeaders({"Host": "127.0.0.1", "Authorization": f"token u{user}"})
    started = delegate.headers_received(httputil.RequestStartLine("GET", path, "HTTP/1.1"), headers)
    if started is not None:
        await started
    delegate.finish()
    for _ in range(3):  # the handler's coroutine finishes on the loop's next turns
        await asyncio.sleep(0)
    return connection.status


async def measure(args) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as state_dir:
        app = application(state_dir, args.teams, args.users)
        paths = {
            "bare": lambda user: "/bench/bare",
            "balance": lambda user: f"{PREFIX}quota/v1/namespaces/team-{user % args.teams:0{app.bench_width}d}/balance",
        }
        for user in range(min(args.users, 200)):  # warm: each team's answer cached once
            for name, path in paths.items():
                status = await request(app, path(user), user)
                if status != 200:
                    raise SystemExit(f"{name} answered {status}, not 200")
        paths["full route"] = paths["balance"]  # the same read with OPTIMISATIONS["lean-read"] off
        best = {name: float("inf") for name in paths}
        for _ in range(args.repeats):
            for name, path in paths.items():
                OPTIMISATIONS["lean-read"] = name != "full route"
                start = time.thread_time()
                for i in range(args.requests):
                    await request(app, path(i % args.users), i % args.users)
                best[name] = min(best[name], (time.thread_time() - start) / args.requests * 1e6)
        OPTIMISATIONS["lean-read"] = True
        return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000, help="requests per round and route")
    parser.add_argument("--repeats", type=int, default=5, help="rounds; the least CPU per request is shown")
    parser.add_argument("--teams", type=int, default=100)
    parser.add_argument("--users", type=int, default=1000, help="simulated users, spread over the teams")
    args = parser.parse_args()
    best = asyncio.run(measure(args))
    for name, us in best.items():
        print(f"{name:10} {us:7.0f} us thread CPU per request ({us / best['bare']:.2f} of bare)")


if __name__ == "__main__":
    main()
