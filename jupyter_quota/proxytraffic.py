"""What the proxy saw of an endpoint's requests: counts by status class and latency. Pure, no I/O.

ms-swift's server has no ``/metrics``, so the service measures at its proxy
(``handlers.EndpointProxyHandler``): each request that reached the proxy's forwarding step (the
caller may call the endpoint and it was Ready) is one observation, with the status the caller got
and the time from the proxy's start of forwarding to the answer's last byte (a streamed answer:
its end). :class:`Tally` keeps, per endpoint, the counts not yet written to the records
(``endpointrequests.py``, per minute) and the latencies of its last :data:`LATENCY_SAMPLE`
requests, for the endpoint's p50 and p99.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import dataclass, field

#: status classes, in the order answers list them
CODES = ("2xx", "3xx", "4xx", "5xx")
#: latencies kept per endpoint for its quantiles (the newest; about 8 KB)
LATENCY_SAMPLE = 1000
MINUTE = 60


def status_class(status: int) -> str:
    """``200`` -> ``"2xx"``; anything outside 200..599 (599: no answer at all) counts as ``"5xx"``."""
    return f"{status // 100}xx" if 200 <= status < 599 else "5xx"


def quantile(values: list[float], q: float) -> float | None:
    """The nearest-rank ``q`` quantile of ``values`` (None when there are none)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass
class Tally:
    """One endpoint's observations: ``pending`` counts (minute, code) -> [count, seconds] not yet
    written; ``latencies`` the last :data:`LATENCY_SAMPLE` request times in seconds."""

    pending: dict[tuple[int, str], list] = field(default_factory=dict)
    latencies: deque = field(default_factory=lambda: deque(maxlen=LATENCY_SAMPLE))

    def observe(self, status: int, seconds: float, at: float) -> str:
        """Count one request that ended at ``at`` (epoch seconds); its status class."""
        code = status_class(status)
        key = (int(at) // MINUTE * MINUTE, code)
        row = self.pending.setdefault(key, [0, 0.0])
        row[0] += 1
        row[1] += seconds
        self.latencies.append(seconds)
        return code

    def take(self) -> dict[tuple[int, str], list]:
        """The pending counts, handed over to be written (and forgotten here)."""
        pending, self.pending = self.pending, {}
        return pending

    def give_back(self, pending: dict[tuple[int, str], list]) -> None:
        """Counts whose write failed: kept for the next write."""
        for key, (count, seconds) in pending.items():
            row = self.pending.setdefault(key, [0, 0.0])
            row[0] += count
            row[1] += seconds

    def pending_codes(self) -> Counter:
        out: Counter = Counter()
        for (_, code), (count, _) in self.pending.items():
            out[code] += count
        return out


def requests_json(codes: Counter | dict, latencies) -> dict:
    """An endpoint's ``requests``: total, by status class, and p50/p99 latency in milliseconds of
    the sampled requests (``latencyMs`` null before any)."""
    by_code = {code: int(codes[code]) for code in CODES if codes.get(code)}
    sample = list(latencies or ())
    latency = None
    if sample:
        latency = {
            "p50": round(quantile(sample, 0.5) * 1000, 1),
            "p99": round(quantile(sample, 0.99) * 1000, 1),
            "sample": len(sample),
        }
    return {"total": sum(by_code.values()), "byStatus": by_code, "latencyMs": latency}
