"""Usage and the monthly chargeback as use cases: the backend's spans, integrated over a window
(``jupyter_quota/usage.py``) and priced (``chargeback.py``), as each caller may see them; rows
of endpoints carry the requests their proxy counted (``endpointrequests.py``)."""

from __future__ import annotations

import time

from traitlets import Dict, validate
from traitlets.config import Configurable

from .. import chargeback, endpointrequests, usage
from ..identity import Identity


class UsageSettings(Configurable):
    """Usage's settings (``c.JupyterQuota.<name>``: ``config.JupyterQuota`` is composed of it)."""

    prices = Dict(
        help="Prices per resource-hour that turn usage (``GET .../usage``) into cost and the monthly "
        'chargeback (``GET .../chargeback``): ``{"currency": "EUR", "gpuHour": 2.5, '
        '"cpuHour": 0.04, "memoryGibHour": 0.005}``, each the price of one GPU, one CPU core or '
        "one GiB of memory requested for an hour (``jupyter_quota/chargeback.py``). A resource left "
        "out costs 0. Default: empty (usage has no cost; ``cost`` is null).",
    ).tag(config=True)

    @validate("prices")
    def _valid_prices(self, proposal):
        from ..chargeback import parse_prices

        parse_prices(proposal["value"])  # raises ValueError naming the bad key
        return proposal["value"]


class UsageReports:
    def __init__(self, registry, backend, prices: dict, state_dir: str | None = None):
        self.registry = registry
        self.backend = backend
        self.prices = chargeback.parse_prices(prices)
        #: where endpoints' request counts are recorded (None: rows carry no ``kind``/``requests``)
        self.state_dir = state_dir

    def usage(self, who: Identity, since=None, until=None, by=None, namespace=None, step=None) -> dict:
        """Requested resources integrated over the window, per team, user or job: an admin sees
        every team, a user their teams (a ``namespace`` not theirs: 403)."""
        window = usage.parse_window(since, until, by, step, namespace)
        if window.namespace is not None:
            visible = {self.registry.for_namespace(who, window.namespace).namespace}
        else:
            visible = {p.namespace for p in self.registry.teams_of(who)}
        now = int(time.time())
        everyone = who.admin and window.namespace is None
        spans = self.backend.usage_spans(window.since, window.until, None if everyone else visible)
        sums = usage.integrate(spans, window, now, max_rows=usage.MAX_ROWS)  # a 400 past it
        report = chargeback.usage_json(sums, window, self.prices)
        if window.by == "job" and self.state_dir is not None:
            namespaces = None if everyone else {window.namespace} if window.namespace else visible
            names, counts = endpointrequests.in_window(self.state_dir, window.since, window.until, namespaces)
            usage.mark_endpoints(report["rows"], window, names, counts)
        return report

    def chargeback(self, month=None) -> dict:
        """A month's usage and cost per team, with a totals row that adds up (the façade checks admin)."""
        now = int(time.time())
        month, since, until = chargeback.month_window(month, now)
        window = usage.Window(since, until, "team")
        sums = usage.integrate(self.backend.usage_spans(since, until), window, now)
        report = chargeback.chargeback(sums, month, since, until, self.prices)
        if self.state_dir is not None:
            _, counts = endpointrequests.in_window(self.state_dir, since, until)
            chargeback.add_requests(report, counts)
        return report
