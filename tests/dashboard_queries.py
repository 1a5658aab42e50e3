"""The Grafana dashboard's queries (deploy/grafana/jupyter-quota.json), as the dashboard and
Prometheus tests read them (importable as ``dashboard_queries``: tests/ is on pytest's path)."""

from __future__ import annotations

import json
import re

from quota_testing import ROOT

DASHBOARD = ROOT / "deploy" / "grafana" / "jupyter-quota.json"
#: what Grafana puts in place of its variables when it runs a query (``$team`` on "All")
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "15s", "$__range": "1h", "$team": ".*"}
#: PromQL's words that are not metric names: functions, aggregations, keywords
PROMQL_WORDS = {
    *("sum", "min", "max", "avg", "count", "topk", "bottomk", "quantile", "stddev", "stdvar", "group"),
    *("rate", "irate", "increase", "delta", "idelta", "deriv", "histogram_quantile", "label_replace"),
    *("abs", "ceil", "floor", "round", "clamp_min", "clamp_max", "absent", "vector", "scalar", "time"),
    *("sum_over_time", "avg_over_time", "max_over_time", "min_over_time", "last_over_time"),
    *("by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "offset", "bool"),
}


def load() -> dict:
    return json.loads(DASHBOARD.read_text())


def queries(dashboard: dict | None = None) -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target of every panel, Grafana's variables filled in."""
    found = []
    for panel in (dashboard or load())["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for name, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(name, value)
            found.append((panel["title"], expr))
    return found


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: its words less label matchers, grouping
    labels, string literals, durations, numbers and PromQL's own words."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)  # grouping labels
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range durations
    words = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", expr))
    return {w for w in words if w not in PROMQL_WORDS}
