#!/usr/bin/env python
"""Open-loop balance reads on one quota service, beside the stack's limit, in one run (issue 23).

    python benchmarks/open_loop_bench.py [--rates 500,1000,2000,4000] [--seconds 5] [--teams 100]
                                         [--users 1000] [--paths before,cheap,cache,headers,token,lean,frozen]
                                         [--proxy frozen]

Requests are sent on a fixed schedule, request k at ``start + k / rate``, whatever the answers do:
a request whose connection is busy waits for one, and its latency is counted from its scheduled
time, not from when it could be sent (no coordinated omission). Keep-alive connections, at most
``--connections``, are opened as the queue needs them. A request not answered within
``--timeout`` seconds after the last one was scheduled, a refused connection or a status other
than 200/304 counts as an error.

The service is ``bench_service.py``'s (``hubservice.app``, local backend, ``--teams`` teams, users
``u0``.. spread over them).
For each read path in ``--paths`` a service runs (all at once, each row measured on each path
back to back, so that another load on the machine falls on both alike), and at each rate this
process sends:

- **bare**: ``GET /bench/bare``, a tornado handler that checks the token and answers a fixed JSON
  body (a balance's bytes): the stack's limit, measured in the same run;
- **balance**: ``GET .../quota/v1/namespaces/{ns}/balance``, each user its team's namespace;
- **balance 304**: the same with ``If-None-Match`` holding the ETag the user's team got before
  (nothing changes meanwhile, so each answer is a 304).

Read paths, each one optimisation more than the one before, so the table shows before and after
of each in one run: ``before`` (``bench_service``'s ``BENCH_READ_PATH=before``: the balance
computed, then its hash compared; every team scanned); ``cheap`` (a conditional read answers from
a validator, the balance is not computed; the namespace's team looked up, not scanned for);
``cache`` (and ``handlers.OPTIMISATIONS["answer-cache"]``: a 200 writes the bytes made last time
for the same validator); ``headers`` (and ``"static-headers"``: jupyter-server's default headers
made once); ``token`` (and ``"token-cache"``: the caller read straight from HubOAuth's token
cache); ``lean`` (and ``"lean-read"``: such a read answered by a plain tornado handler,
``hubservice/leanread.py``); ``frozen`` (and ``"gc-freeze"``: the service's start-up objects out of
the garbage collector's full passes, ``hubservice/startup_heap.py``), as the service runs now.
Callers are identified as in a hub's service: the service's own ``HubServiceIdentityProvider``, its
token cache holding the simulated users (no hub runs).

``--proxy PATH`` also sends each row through configurable-http-proxy (``node_modules``), with the
service's route added through the proxy's REST API as a hub adds it: rows ``PATH>chp``.

Prints, per row, p50/p99/p99.9/max latency (client side, from the scheduled time), errors, the
answers' statuses, the service's own time per request (``svc p50``/``svc p99``: from the request's
arrival in the service to its answer, measured there: the rest of the client's figure is queueing
before the service and, for ``>chp`` rows, the proxy), the service's longest garbage collection
(``gc max``: its IO loop held meanwhile), the service's CPU (percent of one core,
all threads, and microseconds per answer: what a request costs the service whatever else shares
the cores) and RSS, the proxy's CPU, and this client's own CPU (it shares the cores: when it
nears 100 % the client, not the service, is the limit). Then, per path and target, the highest
rate held at p99 <= ``--p99-ms`` with no errors (at every lower rate too), and its ratio to the
bare handler's; beside it, the ratio to the highest rate at which the bare handler held at all (a
stall of the bare handler at a lower rate passed over: issue 23's words read literally). Asserts
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import os
import resource
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "benchmarks")]
import bench_service  # noqa: E402
from bench_service import PREFIX  # noqa: E402
from quota_testing import free_port  # noqa: E402

CHP = ROOT / "node_modules" / ".bin" / "configurable-http-proxy"

TARGETS = ("bare", "balance", "balance 304")
#: read paths: the service's environment (bench_service.py), from before issue 23 to now, each
#: adding one optimisation (``handlers.OPTIMISATIONS``) to the one before
_STEPS = ("answer-cache", "static-headers", "token-cache", "lean-read", "gc-freeze")
PATHS = {
    "before": {"BENCH_READ_PATH": "before", "BENCH_OFF": ",".join(_STEPS)},
    "cheap": {"BENCH_OFF": ",".join(_STEPS)},
    "cache": {"BENCH_OFF": ",".join(_STEPS[1:])},
    "headers": {"BENCH_OFF": ",".join(_STEPS[2:])},
    "token": {"BENCH_OFF": ",".join(_STEPS[3:])},
    "lean": {"BENCH_OFF": ",".join(_STEPS[4:])},
    "frozen": {},
}


class Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection: one request at a time, answers with Content-Length."""

    def __init__(self, client: OpenLoop):
        self.client = client
        self.buffer = bytearray()
        self.scheduled = 0.0
        self.transport = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def send(self, scheduled: float, request: bytes) -> None:
        self.scheduled = scheduled
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.buffer[:end]).lower()
        at = head.find(b"\r\ncontent-length:")
        length = (
            int(head[at + 17 : head.find(b"\r\n", at + 2) if head.find(b"\r\n", at + 2) > 0 else None]) if at > 0 else 0
        )
        if len(self.buffer) < end + 4 + length:
            return
        del self.buffer[: end + 4 + length]
        self.client.answered(self, int(head[9:12]))

    def connection_lost(self, exc) -> None:
        self.client.lost(self)


class OpenLoop:
    """Requests at fixed times over a pool of connections; latencies from the scheduled times."""

    def __init__(self, port: int, max_connections: int):
        self.port = port
        self.max_connections = max_connections
        self.idle: list[Connection] = []
        self.busy: set[Connection] = set()
        self.waiting: collections.deque = collections.deque()
        self.opening = 0
        self.latencies: list[float] = []
        self.statuses: collections.Counter = collections.Counter()
        self.errors = 0

    async def run(self, requests: list[bytes], rate: float, seconds: float, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        total = int(rate * seconds)
        start = time.perf_counter() + 0.05
        k = 0
        while k < total:
            now = time.perf_counter()
            due = start + k / rate
            if due > now:
                await asyncio.sleep(due - now)
                continue
            while k < total and start + k / rate <= now:  # every request now due, late ones at once
                self.dispatch(loop, start + k / rate, requests[k % len(requests)])
                k += 1
        deadline = time.perf_counter() + timeout
        while (self.busy or self.waiting) and time.perf_counter() < deadline:
            await asyncio.sleep(0.01)
        self.errors += len(self.busy) + len(self.waiting)  # not answered in time
        for conn in list(self.busy) + self.idle:
            conn.transport.close()

    def dispatch(self, loop, scheduled: float, request: bytes) -> None:
        if self.idle:
            conn = self.idle.pop()
            self.busy.add(conn)
            conn.send(scheduled, request)
            return
        self.waiting.append((scheduled, request))
        if len(self.busy) + self.opening < self.max_connections and self.opening < len(self.waiting):
            self.opening += 1
            loop.create_task(self.connect(loop))

    async def connect(self, loop) -> None:
        try:
            _, conn = await loop.create_connection(lambda: Connection(self), "127.0.0.1", self.port)
        except OSError:
            self.opening -= 1
            if self.waiting:
                self.waiting.popleft()
                self.errors += 1
            return
        self.opening -= 1
        self.next(conn)

    def next(self, conn: Connection) -> None:
        if self.waiting:
            self.busy.add(conn)
            conn.send(*self.waiting.popleft())
        else:
            self.busy.discard(conn)
            self.idle.append(conn)

    def answered(self, conn: Connection, status: int) -> None:
        self.latencies.append(time.perf_counter() - conn.scheduled)
        self.statuses[status] += 1
        if status not in (200, 304):
            self.errors += 1
        self.next(conn)

    def lost(self, conn: Connection) -> None:
        if conn in self.busy:
            self.busy.discard(conn)
            self.errors += 1
        if conn in self.idle:
            self.idle.remove(conn)


def request(path: str, user: int, etag: str | None = None) -> bytes:
    extra = f"If-None-Match: {etag}\r\n" if etag else ""
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: token u{user}\r\n{extra}\r\n".encode()


def balance_path(team: int) -> str:
    return f"{PREFIX}quota/v1/namespaces/team-{team:03d}/balance"


async def etags(port: int, teams: int) -> dict[int, str]:
    """Each team's balance ETag now (user ``u{team}`` is in team ``team``)."""
    found = {}
    for team in range(teams):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request(balance_path(team), team).replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
        raw = await reader.read()
        writer.close()
        head = raw.split(b"\r\n\r\n", 1)[0].decode()
        found[team] = next(
            line.split(":", 1)[1].strip() for line in head.split("\r\n") if line.lower().startswith("etag:")
        )
    return found


def percentile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


async def served(port: int) -> dict:
    """The service's own time per request since the last call (``/bench/served``), and a reset."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /bench/served HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    raw = await reader.read()
    writer.close()
    return json.loads(raw.split(b"\r\n\r\n", 1)[1])


async def measure(service: Service, requests, rate, args) -> dict:
    client = OpenLoop(service.port, args.connections)
    pid = service.proc.pid
    await served(service.service_port)  # from now on
    cpu0, mine0, t0 = bench_service.cpu_seconds(pid), time.process_time(), time.perf_counter()
    proxy0 = bench_service.cpu_seconds(service.proxy.pid) if service.proxy else 0.0
    # this client's own collector stays off while it sends: its pauses would be counted as the
    # service's latency (a load generator in C has none)
    gc.collect()
    gc.disable()
    try:
        await client.run(requests, rate, args.seconds, args.timeout)
    finally:
        gc.enable()
    wall = time.perf_counter() - t0
    ms = sorted(x * 1000 for x in client.latencies)
    own = await served(service.service_port)
    return {
        "p50": percentile(ms, 0.5),
        "p99": percentile(ms, 0.99),
        "p999": percentile(ms, 0.999),
        "max": ms[-1] if ms else float("nan"),
        "sent": int(rate * args.seconds),
        "errors": client.errors,
        "statuses": dict(client.statuses),
        "cpu": 100 * (bench_service.cpu_seconds(pid) - cpu0) / wall,
        # CPU per answer: what each costs the service, whoever else shares the cores
        "cpu_us": 1e6 * (bench_service.cpu_seconds(pid) - cpu0) / max(1, len(client.latencies)),
        "client_cpu": 100 * (time.process_time() - mine0) / wall,
        "rss": bench_service.rss_kib(pid) / 1024,
        # the service's own time per request (arrival to answer): the rest is the proxy and queues
        "svc_p50": own["p50Ms"] if own["p50Ms"] is not None else float("nan"),
        "svc_p99": own["p99Ms"] if own["p99Ms"] is not None else float("nan"),
        "gc_max": own["gcMaxMs"],  # the service's longest garbage collection, its IO loop held
        "proxy_cpu": 100 * (bench_service.cpu_seconds(service.proxy.pid) - proxy0) / wall if service.proxy else None,
    }


class Service(NamedTuple):
    port: int  # where requests go: the service, or the proxy in front of it
    proc: subprocess.Popen
    requests: dict
    service_port: int
    proxy: subprocess.Popen | None = None


def start_proxy(service_port: int) -> tuple[int, subprocess.Popen]:
    """configurable-http-proxy, as a JupyterHub runs it, with the service's route added through its
    REST API as the hub adds a service's (``/services/jupyter-quota`` to the service)."""
    port, api_port, token = free_port(), free_port(), secrets.token_hex(16)
    proc = subprocess.Popen(
        [str(CHP), "--ip", "127.0.0.1", "--port", str(port), "--api-ip", "127.0.0.1", "--api-port", str(api_port)],
        env={**os.environ, "CONFIGPROXY_AUTH_TOKEN": token},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for route in (PREFIX.rstrip("/"), "/bench"):
        body = json.dumps({"target": f"http://127.0.0.1:{service_port}"}).encode()
        deadline = time.monotonic() + 60
        while True:
            try:
                request = urllib.request.Request(
                    f"http://127.0.0.1:{api_port}/api/routes{route}",
                    data=body,
                    method="POST",
                    headers={"Authorization": f"token {token}"},
                )
                urllib.request.urlopen(request, timeout=5).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    proc.kill()
                    raise SystemExit("configurable-http-proxy did not start") from None
                time.sleep(0.1)
    return port, proc


async def run_all(paths: list[str], args, rates: list[int], results: dict) -> None:
    """One service per read path, all running at once (and configurable-http-proxy in front of
    those of ``--proxy``); at each rate every target is measured on each path back to back (the
    bare handler beside the balance), so a load from elsewhere on the machine falls on all alike."""
    with tempfile.TemporaryDirectory(prefix="open-loop-bench-") as tmp:
        services: dict[str, Service] = {}
        try:
            for path_name in paths:
                env = {**PATHS[path_name], "BENCH_USERS": str(args.users)}
                if args.profile:
                    env["BENCH_PROFILE"] = f"{args.profile}.{path_name}"
                port = free_port()
                proc = bench_service.start(port, Path(tmp) / path_name, args.teams, env)
                tags = await etags(port, args.teams)
                services[path_name] = Service(port, proc, requests_for(tags, args), port)
                if path_name in args.proxy:
                    proxy_port, proxy = start_proxy(port)
                    services[f"{path_name}>chp"] = Service(proxy_port, proc, requests_for(tags, args), port, proxy)
            for target in args.targets:
                for service in services.values():  # warm up (not shown)
                    await measure(service, service.requests[target], min(rates), args)
            for rate in rates:
                for target in args.targets:
                    for path_name, service in services.items():
                        row = await measure(service, service.requests[target], rate, args)
                        results[path_name, target, rate] = row
                        proxy = f"{row['proxy_cpu']:>6.0f}%" if row["proxy_cpu"] is not None else f"{'-':>7}"
                        print(
                            f"{path_name:<12}{target:<13}{rate:>7}{row['p50']:>9.1f}{row['p99']:>9.1f}"
                            f"{row['p999']:>9.1f}{row['max']:>9.0f}{row['errors']:>8}  {_statuses(row['statuses']):<18}"
                            f"{row['svc_p50']:>8.2f}{row['svc_p99']:>8.2f}{row['gc_max']:>8.1f}"
                            f"{row['cpu']:>7.0f}%{row['cpu_us']:>8.0f}{row['rss']:>8.1f}{proxy}{row['client_cpu']:>7.0f}%",
                            flush=True,
                        )
        finally:
            for service in services.values():
                if service.proxy is not None:
                    service.proxy.terminate()
                    service.proxy.wait(30)
            for path_name in paths:
                if path_name in services:
                    bench_service.stop(services[path_name].proc)


def requests_for(tags: dict[int, str], args) -> dict[str, list[bytes]]:
    """Each target's requests, one per user, sent round-robin."""
    users = range(args.users)
    return {
        "bare": [request("/bench/bare", u) for u in users],
        "balance": [request(balance_path(u % args.teams), u) for u in users],
        "balance 304": [request(balance_path(u % args.teams), u, tags[u % args.teams]) for u in users],
    }


def _statuses(counts: dict) -> str:
    return " ".join(f"{status}:{n}" for status, n in sorted(counts.items()))


def held(results: dict, path_name: str, target: str, rates: list[int], p99_ms: float, every_lower: bool = True) -> int:
    """The highest rate held at p99 <= p99_ms with no errors, every lower rate held too (0: none);
    with ``every_lower`` False, the highest at which it held at all (a stall below it is passed over)."""
    best = 0
    for rate in sorted(rates):
        row = results[path_name, target, rate]
        if row["errors"] or row["p99"] > p99_ms:
            if every_lower:
                break
            continue
        best = rate
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="500,1000,1500,2000,3000,4000", help="requests per second, comma-separated")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long each rate runs")
    parser.add_argument("--teams", type=int, default=100)
    parser.add_argument("--users", type=int, default=1000, help="simulated users, spread over the teams")
    parser.add_argument(
        "--paths",
        default=",".join(PATHS),
        help="read paths, in order (before: as before the cheap read path; cheap: validators only; "
        "cache: and the answer cache; headers: and static default headers; token: and the token-cache "
        "fast path; lean: and the lean balance read; frozen: and the start-up heap frozen out of the "
        "garbage collector, as the service runs now)",
    )
    parser.add_argument("--targets", default=",".join(TARGETS), help=f"of {', '.join(TARGETS)}")
    parser.add_argument("--connections", type=int, default=256, help="keep-alive connections at most")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds an answer may take after the last send")
    parser.add_argument("--p99-ms", type=float, default=10.0, help="the latency target the summary checks")
    parser.add_argument(
        "--proxy",
        default="",
        help="read paths also measured through configurable-http-proxy, as a hub routes to its service "
        "(rows PATH>chp), e.g. frozen",
    )
    parser.add_argument("--profile", help="write the service's cProfile stats to PROFILE.<path>")
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    args.targets = [t.strip() for t in args.targets.split(",")]
    paths = [p.strip() for p in args.paths.split(",")]
    args.proxy = [p.strip() for p in args.proxy.split(",") if p.strip()]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.connections * 2 + 256)), hard))

    print(f"open loop, {args.seconds:g} s per row, {args.users} users over {args.teams} teams; latency in ms")
    print(
        f"{'path':<12}{'target':<13}{'req/s':>7}{'p50':>9}{'p99':>9}{'p99.9':>9}{'max':>9}{'errors':>8}  "
        f"{'statuses':<18}{'svc p50':>8}{'svc p99':>8}{'gc max':>8}{'svc CPU':>8}{'us/req':>8}{'RSS MiB':>8}"
        f"{'chp CPU':>7}{'client':>8}"
    )
    results: dict = {}
    asyncio.run(run_all(paths, args, rates, results))
    print(
        f"\nhighest rate held at p99 <= {args.p99_ms:g} ms with no errors (its share of the bare handler's in the "
        "same service, and of the highest rate any bare handler held in this run: issue 23's target is 2/3):"
    )
    rows = paths + [f"{p}>chp" for p in paths if p in args.proxy]
    bares = {name: held(results, name, "bare", rates, args.p99_ms) if "bare" in args.targets else 0 for name in rows}
    best_bare = max((bares[name] for name in paths), default=0)  # straight to a service, not through chp
    for path_name in rows:
        bare = bares[path_name]
        for target in args.targets:
            rate = held(results, path_name, target, rates, args.p99_ms)
            share = f" ({rate / bare:.2f} of bare" if bare and target != "bare" else ""
            if share:
                share += f"; {rate / best_bare:.2f} of the run's best bare)" if best_bare else ")"
            cpu = sorted(results[path_name, target, r]["cpu_us"] for r in rates)[len(rates) // 2]
            print(f"  {path_name:<12}{target:<13}{rate:>6} req/s{share}; service CPU {cpu:.0f} us per answer (median)")
    if "bare" in args.targets:
        # read literally, "the highest rate at which the bare handler holds": a stall of the bare
        # handler at a lower rate passed over
        print("\nthe same, beside the highest rate at which the bare handler held at all:")
        for path_name in rows:
            anywhere = held(results, path_name, "bare", rates, args.p99_ms, every_lower=False)
            for target in args.targets:
                if target == "bare":
                    print(f"  {path_name:<12}{target:<13}{anywhere:>6} req/s at the highest")
                    continue
                rate = held(results, path_name, target, rates, args.p99_ms)
                share = f" ({rate / anywhere:.2f} of it)" if anywhere else ""
                print(f"  {path_name:<12}{target:<13}{rate:>6} req/s{share}")


if __name__ == "__main__":
    main()
