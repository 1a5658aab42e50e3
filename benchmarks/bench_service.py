"""The quota service the push and open-loop benchmarks drive, in a process of its own.

``hubservice.app`` (the same handlers and ``QuotaService`` a hub runs), local backend, N teams
``t000``.. with namespaces ``team-000``.. Callers are simulated users ``u0``, ``u1``, ..., user i in
team i mod N, identified by their token alone (``Authorization: token u17``): a stand-in for the
hub's token check, which these benchmarks leave out. Beside the API:

- ``GET /bench/computations``: balances the event pass computed, open subscriptions, and the
  longest the IO loop was held (a 50 ms timer's lateness; ``?reset=1`` starts it again);
- ``GET /bench/served``: the service's own time per request (arrival to answer, its p50 and p99)
  and its longest garbage collection since the last call: beside the client's, where the time goes;
- ``GET /bench/bare``: the stack's limit, a tornado handler that checks the token and answers a
  fixed JSON body (a real balance's bytes, made once at start). With ``BENCH_USERS`` it checks the
  token as the lean balance read does (``HubServiceIdentityProvider.cached_token_user``: HubOAuth's
  cache); it is routed before every other route, so it pays for no other route's match.

Environment: ``BENCH_READ_PATH=before`` serves balances as before issue 23's cheap read path
(the ETag the computed answer's hash, the namespace's team found by a scan of every team);
``BENCH_OFF=answer-cache,static-headers,token-cache,lean-read,gc-freeze`` turns those of ``handlers.OPTIMISATIONS`` off;
``BENCH_HEARTBEAT=whole`` sends the 15 s heartbeat to every stream in one turn of the IO loop (as
before it went in slices); ``BENCH_PROFILE=FILE`` runs the service under cProfile and writes its
stats to FILE on SIGTERM; ``BENCH_STALLS=FILE`` counts, while the IO loop is held over 20 ms, what
every thread runs (sampled each 2 ms) and writes the commonest stacks to FILE on SIGTERM.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from quota_testing import FAKE_TRAINER  # noqa: E402

PREFIX = "/services/jupyter-quota/"

SCRIPT = textwrap.dedent(
    """
    import cProfile, json, logging, os, signal, sys
    import tornado.web
    from jupyter_server.auth.identity import IdentityProvider
    from tornado.ioloop import IOLoop
    from traitlets.config import Config
    from jupyter_quota.config import JupyterQuota
    from jupyter_quota.hubservice.app import make_app
    from jupyter_quota.hubservice.identity import HubUser
    from jupyter_quota.service.app import build_service

    port, state, teams, trainer = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]

    def user_of(header):
        scheme, _, name = header.partition(" ")
        return name if scheme == "token" and name[:1] == "u" and name[1:].isdigit() else None

    class TokenIsUser(IdentityProvider):
        # "token u17": user u17 of group g{17 % teams}, as a hub's token check would answer
        async def get_user(self, handler):
            name = user_of(handler.request.headers.get("Authorization", ""))
            if name is None:
                return None
            handler._token_authenticated = True
            group = f"g{int(name[1:]) % teams:03d}"
            return HubUser({"kind": "user", "name": name, "groups": [group], "admin": False, "scopes": []})

        def is_token_authenticated(self, handler):
            return True

    def hub_identity(users):
        # the service's own HubServiceIdentityProvider, its HubOAuth token cache holding each
        # user's model as the hub answered it (no hub runs: a token it does not hold fails)
        import hashlib
        from jupyterhub.services.auth import HubOAuth
        from jupyter_quota.hubservice.identity import HubServiceIdentityProvider
        from jupyter_quota.hubservice.names import ACCESS_SCOPE

        auth = HubOAuth(api_token="bench", api_url="http://127.0.0.1:9/hub/api", cache_max_age=24 * 3600)
        auth.access_scopes = {ACCESS_SCOPE}
        for i in range(users):
            key = "token::" + hashlib.sha256(f"u{i}".encode()).hexdigest()
            auth.cache[key] = {"kind": "user", "name": f"u{i}", "groups": [f"g{i % teams:03d}"],
                               "admin": False, "scopes": [ACCESS_SCOPE]}
        return HubServiceIdentityProvider(hub_auth=auth)

    c = Config()
    c.JupyterQuota.state_dir = state
    c.JupyterQuota.job_command = [sys.executable, trainer]
    c.JupyterQuota.inventory = {"gpus": 0, "cpu": "10000", "memory": "10000Gi"}
    c.JupyterQuota.profiles = [
        {"team": f"t{i:03d}", "namespace": f"team-{i:03d}", "groups": [f"g{i:03d}"],
         "hard": {"requests.cpu": "100", "limits.memory": "100Gi"}}
        for i in range(teams)
    ]
    from jupyter_quota import handlers
    for name in filter(None, os.environ.get("BENCH_OFF", "").split(",")):
        handlers.OPTIMISATIONS[name] = False  # KeyError: a name that is no optimisation
    service = build_service(JupyterQuota(config=c), log=logging.getLogger("bench"))
    service.start()
    if os.environ.get("BENCH_READ_PATH") == "before":
        # as before the cheap read path: the balance computed on every read and its hash the
        # ETag, the namespace's owner found by scanning every team, access read twice
        registry, cheap = service.registry, service.balance_read

        def scanning(who, namespace, checked=registry.for_namespace):
            owner = next((p for p in registry.all() if p.namespace == namespace), None)
            return owner if owner is not None and owner in registry.teams_of(who) else checked(who, namespace)

        registry.for_namespace = scanning
        service.balance_read = lambda who, namespace: (None, lambda: service.balance(who, namespace))
        service.namespaces_read = lambda who: (None, lambda: service.namespaces(who))
    if os.environ.get("BENCH_HEARTBEAT") == "whole":  # as before: every stream in one turn of the loop
        service.events.fanout.heartbeat_in_slices = lambda later, size=0: service.events.fanout.heartbeat()
    BARE = json.dumps(service.balance_of(service.registry.all()[0]))

    import time
    from tornado.ioloop import PeriodicCallback

    lag = {"last": time.monotonic(), "max": 0.0}

    def tick():  # how late a 50 ms timer fires: the longest the IO loop was held
        now = time.monotonic()
        lag["max"] = max(lag["max"], now - lag["last"] - 0.05)
        lag["last"] = now

    PeriodicCallback(tick, 50).start()

    class Computations(tornado.web.RequestHandler):
        def get(self):
            self.finish({
                "balances": service.events.balance_computations,
                "subscribers": len(service.events.fanout),
                "loopLagMaxMs": round(lag["max"] * 1000, 1),
            })
            if self.get_query_argument("reset", None):
                lag["max"] = 0.0

    class Bare(tornado.web.RequestHandler):
        def get(self):
            if token_user(self.request) is None:
                raise tornado.web.HTTPError(403)
            self.set_header("Content-Type", "application/json")
            self.finish(BARE)

    served = []  # seconds from each request's arrival to its answer, in this process
    collections = []  # seconds each garbage collection held the IO loop
    import gc
    started = {}

    def timed(phase, info):
        if phase == "start":
            started["at"] = time.perf_counter()
        elif "at" in started:
            collections.append(time.perf_counter() - started.pop("at"))

    gc.callbacks.append(timed)

    class Served(tornado.web.RequestHandler):
        def get(self):  # the service's own time per request, since the last call
            times = sorted(served)
            served.clear()
            pick = lambda q: round(1000 * times[min(len(times) - 1, int(q * len(times)))], 3) if times else None
            gc_max = round(1000 * max(collections, default=0.0), 2)
            collections.clear()
            self.finish({"count": len(times), "p50Ms": pick(0.5), "p99Ms": pick(0.99), "gcMaxMs": gc_max})

    stalls = None
    if os.environ.get("BENCH_STALLS"):
        # What runs while the IO loop is held: a thread of its own looks every 2 ms at a 5 ms
        # timer's last beat, and while the beat is over 20 ms old counts every thread's stack.
        import collections as counting, threading, traceback
        beat = {"at": time.monotonic()}
        PeriodicCallback(lambda: beat.update(at=time.monotonic()), 5).start()
        stalls = counting.Counter()
        held = {"stalls": 0, "seconds": 0.0, "last": None}

        def where(frame):
            return " < ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.name}"
                              for f in reversed(traceback.extract_stack(frame)[-5:]))

        def watch():
            me = threading.get_ident()
            looked = time.monotonic()
            while True:
                time.sleep(0.002)
                now, before = time.monotonic(), looked
                looked = now
                if now - beat["at"] <= 0.02:
                    continue
                if held["last"] != beat["at"]:
                    held["last"] = beat["at"]
                    held["stalls"] += 1
                held["seconds"] += now - max(before, beat["at"] + 0.02)  # held past 20 ms, measured
                names = {t.ident: t.name for t in threading.enumerate()}
                for ident, frame in sys._current_frames().items():
                    if ident != me:
                        stalls[(names.get(ident, str(ident)), where(frame))] += 1

        threading.Thread(target=watch, name="bench-stalls", daemon=True).start()

    users = int(os.environ.get("BENCH_USERS", "0"))
    identity = hub_identity(users) if users else TokenIsUser()
    # the bare handler checks a token as the service's lean read does: in HubOAuth's cache
    token_user = (identity.cached_token_user if users
                  else lambda request: user_of(request.headers.get("Authorization", "")))
    app = make_app(service, identity, "PREFIX", logging.getLogger("bench"))
    from tornado.routing import PathMatches, Rule
    bench = [(r"/bench/computations$", Computations), (r"/bench/bare$", Bare), (r"/bench/served$", Served)]
    # tried first, before the service's ~30 routes: the bare handler pays for no other route
    app.default_router.rules[:0] = [Rule(PathMatches(path), handler) for path, handler in bench]
    logged = app.settings["log_function"]

    def log_function(handler):
        if not isinstance(handler, Served):
            served.append(handler.request.request_time())
        logged(handler)

    app.settings["log_function"] = log_function
    app.listen(port, address="127.0.0.1", backlog=1024)
    profiler = None
    if os.environ.get("BENCH_PROFILE"):
        profiler = cProfile.Profile()
        profiler.enable()
    signal.signal(signal.SIGTERM, lambda *a: IOLoop.current().add_callback_from_signal(IOLoop.current().stop))
    from jupyter_quota.hubservice.startup_heap import freeze_startup_heap
    freeze_startup_heap()  # as hubservice.app.serve does, just before its IO loop runs
    print("ready", flush=True)
    IOLoop.current().start()
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(os.environ["BENCH_PROFILE"])
    if stalls is not None:
        with open(os.environ["BENCH_STALLS"], "w") as out:
            out.write(f"{held['stalls']} stalls over 20 ms, {held['seconds']:.2f} s held past 20 ms in all\\n")
            for (thread, stack), n in stalls.most_common(40):
                out.write(f"{n:6d}  {thread}: {stack}\\n")
    """
).replace("PREFIX", PREFIX)


def start(port: int, state_dir: Path, teams: int, env: dict | None = None) -> subprocess.Popen:
    """The service on ``port``, ready to answer."""
    environ = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        **(env or {}),
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(port), str(state_dir), str(teams), str(FAKE_TRAINER)],
        stdout=subprocess.PIPE,
        env=environ,
    )
    if proc.stdout.readline().strip() != b"ready":
        proc.kill()
        raise SystemExit("the service did not start")
    return proc


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(60)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of the process, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
