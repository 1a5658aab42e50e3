#!/usr/bin/env python
"""What an endpoint's proxy adds: the same requests straight to the server and through the proxy.

    python benchmarks/endpoint_proxy_bench.py [--requests 300] [--path models]

A real ``jupyter server`` (tests/server_process.py, the demo teams, embedded mode) serves an
endpoint whose server is ``tests/fake_deploy.py`` (it answers at once, so what is timed is the
proxy: authentication, authorisation, the forward, and the counting this benchmark is about).
This process sends ``--requests`` sequential GETs of ``/v1/<path>`` to the server's own port,
then as many through ``{base_url}quota/v1/namespaces/team-alpha/endpoints/bench/v1/<path>``,
and prints p50/p99 of each (milliseconds, measured here), their ratio, and the p50/p99 the
endpoint itself reports (``requests.latencyMs``: the proxy's view, from its forward to the last
byte, so without this client's connection to the proxy nor the proxy's authentication). The
client shares the machine's cores with the server. Asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]
from server_process import ServerProcess  # noqa: E402

FAKE_DEPLOY = ROOT / "tests" / "fake_deploy.py"


def timed(url: str, headers: dict, count: int) -> list[float]:
    times = []
    for _ in range(count):
        began = time.perf_counter()
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
            response.read()
        times.append((time.perf_counter() - began) * 1000)
    return times


def quantiles(times: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(times, n=100, method="inclusive")
    return cuts[49], cuts[98]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="requests each way (default 300)")
    parser.add_argument("--path", default="models", help="the OpenAI route under /v1/ (default models)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        extra = f"c.JupyterQuota.deploy_command = [{sys.executable!r}, {str(FAKE_DEPLOY)!r}]\n"
        server = ServerProcess(Path(tmp) / "state", Path(tmp), extra).start()
        endpoint = "/namespaces/team-alpha/endpoints/bench"
        try:
            status, created = server.call(
                "POST", "/namespaces/team-alpha/endpoints", {"name": "bench", "args": ["--model", "m"]}
            )
            assert status == 201, created
            deadline = time.monotonic() + 120
            while (shown := server.call("GET", endpoint)[1])["phase"] != "Ready":
                assert time.monotonic() < deadline, shown
                time.sleep(0.1)
            port = next(shown["args"][i + 1] for i, a in enumerate(shown["args"]) if a == "--port")
            direct = timed(f"http://127.0.0.1:{port}/v1/{args.path}", {}, args.requests)
            auth = {"Authorization": f"Bearer {server.token}"}
            proxied = timed(f"http://127.0.0.1:{server.port}{shown['url']}{args.path}", auth, args.requests)
            seen = server.call("GET", endpoint)[1]["requests"]
        finally:
            server.call("DELETE", endpoint)
            server.stop()
    (d50, d99), (p50, p99) = quantiles(direct), quantiles(proxied)
    print(f"{args.requests} sequential GET /v1/{args.path} each way (ms, this client's clock)")
    print(f"  straight to the server: p50 {d50:7.2f}  p99 {d99:7.2f}")
    print(
        f"  through the proxy:      p50 {p50:7.2f}  p99 {p99:7.2f}   ratio p50 {p50 / d50:.1f}x, p99 {p99 / d99:.1f}x"
    )
    latency = seen["latencyMs"]
    print(f"  the endpoint reports:   p50 {latency['p50']:7.2f}  p99 {latency['p99']:7.2f}   "
          f"over {latency['sample']} of {seen['total']} requests {seen['byStatus']}")  # fmt: skip


if __name__ == "__main__":
    main()
