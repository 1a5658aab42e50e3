#!/usr/bin/env python
"""The balance read under a real JupyterHub, beside embedded mode, in one run.

    python benchmarks/hub_balance_bench.py [--seconds 5] [--levels 1,10,50]

``GET quota/v1/namespaces/{ns}/balance`` from N concurrent keep-alive clients (threads of this
process), N in ``--levels``, each for ``--seconds``, by three routes:

- **embedded**: a plain ``jupyter server`` with the extension and the demo teams (no hub), one
  token: today's one-person mode;
- **hub → server → service**: the hub's proxy (configurable-http-proxy), the caller's own
  single-user server (service mode: forwards with its hub token) and the quota service;
- **hub → service**: the hub's proxy and the quota service, no user server (as a kernel or the
  CLI may call it).

The hub is the tests' (tests/hub/hub_process.py: binder/jupyterhub_config.py, 4 users). Spawning
50 servers is beyond a 2-core machine, so the N clients are N connections spread round-robin over
the 4 users ann, bob, cat and ada (each with their own token, their own server, and a namespace
of their team): N concurrent clients, not N hub users. The clients share this process's GIL with
each other (the same in every route). Prints figures and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "hub")]

from balance_bench import load_targets  # noqa: E402  (this script's directory is on the path)
from hub_process import SERVICE_PREFIX, USERS, HubProcess  # noqa: E402
from server_process import ServerProcess  # noqa: E402

TEAM_OF = {"ann": "team-alpha", "bob": "team-beta", "cat": "team-beta", "ada": "team-alpha"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--levels", default="1,10,50")
    args = parser.parse_args()
    levels = [int(n) for n in args.levels.split(",")]

    with tempfile.TemporaryDirectory(prefix="hub-balance-bench-") as tmp:
        root = Path(tmp)
        (root / "embedded").mkdir()
        embedded = ServerProcess(root / "embedded" / "state", root / "embedded").start()
        hub = HubProcess(root / "hub")
        try:
            t0 = time.perf_counter()
            hub.start()
            hub_up = time.perf_counter() - t0
            hub.start_servers()
            servers_up = time.perf_counter() - t0 - hub_up
            print(f"hub up in {hub_up:.1f} s; 4 servers (concurrent spawns) in {servers_up:.1f} s")
            routes = {
                "embedded": lambda i: (embedded.port, ["/quota/v1/namespaces/team-alpha/balance"], embedded.token),
                "hub -> server -> service": lambda i: (
                    hub.port,
                    [f"/user/{USERS[i % 4]}/quota/v1/namespaces/{TEAM_OF[USERS[i % 4]]}/balance"],
                    hub.token(USERS[i % 4]),
                ),
                "hub -> service": lambda i: (
                    hub.port,
                    [f"{SERVICE_PREFIX}quota/v1/namespaces/{TEAM_OF[USERS[i % 4]]}/balance"],
                    hub.token(USERS[i % 4]),
                ),
            }
            results = {}
            print(f"\nGET quota/v1/namespaces/{{ns}}/balance, {args.seconds:g} s per row")
            print(f"{'route':<26}{'clients':>8}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}")
            for name, target in routes.items():
                for n in levels:
                    figures = results[name, n] = load_targets([target(i) for i in range(n)], args.seconds)
                    print(
                        f"{name:<26}{n:>8}{figures['per_s']:>9.0f}{figures['p50_ms']:>9.1f}"
                        f"{figures['p99_ms']:>9.1f}{figures['errors']:>8}"
                    )
            print("\nratios to embedded (req/s; p50):")
            for name in list(routes)[1:]:
                for n in levels:
                    a, b = results[name, n], results["embedded", n]
                    print(
                        f"  {name:<26}{n:>4} clients: {a['per_s'] / b['per_s']:.2f}x req/s, "
                        f"{a['p50_ms'] / b['p50_ms']:.1f}x p50"
                    )
        finally:
            hub.stop()
            embedded.stop()


if __name__ == "__main__":
    main()
