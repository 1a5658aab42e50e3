"""The Grafana dashboard in deploy/grafana names only metrics the service exports, and shows
the views the issue asks for. The same queries run against a real Prometheus in
test_metrics_prometheus.py."""

from __future__ import annotations

from dashboard_queries import load, metric_names, queries
from prometheus_client.parser import text_string_to_metric_families
from quota_testing import demo_config

from jupyter_quota.config import JupyterQuota
from jupyter_quota.service.app import build_service


def exported_names(tmp_path) -> set[str]:
    """Every sample name a scrape of a service on the demo config has, plus the histogram and
    counter series that appear with their first event (``_bucket``, ``_total``, ...)."""
    config = demo_config()
    config.JupyterQuota.state_dir = str(tmp_path / "state")
    service = build_service(JupyterQuota(config=config))
    names = set()
    for family in text_string_to_metric_families(service.scrape(None).decode()):
        names.add(family.name)
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}.get(family.type, ("",))
        names.update(family.name + suffix for suffix in suffixes)
        names.update(sample.name for sample in family.samples)
    return names


def test_every_panel_query_names_only_exported_metrics(tmp_path):
    exported = exported_names(tmp_path)
    found = queries()
    assert len(found) >= 10
    for title, expr in found:
        names = metric_names(expr)
        assert names, (title, expr)
        assert names <= exported, (title, sorted(names - exported), sorted(exported))


def test_the_metric_name_reader_reads_promql():
    """The check above would pass vacuously if the reader found nothing: it finds the names."""
    expr = 'histogram_quantile(0.9, sum by (le, team) (rate(a_bucket{team=~"x|y", le!="1"}[5m]))) / on(team) b_total'
    assert metric_names(expr) == {"a_bucket", "b_total"}


def test_the_dashboard_shows_what_the_issue_asks_for():
    titles = " | ".join(p["title"] for p in load()["panels"]).lower()
    for view in ("per team", "remaining against hard", "refusals", "top holders", "outcomes", "estimator error"):
        assert view in titles, (view, titles)
    every = " ".join(expr for _, expr in queries())
    for metric in (
        "jupyter_quota_resourcequota",
        "jupyter_quota_resourcequota_remaining",
        "jupyter_quota_refused_jobs_total",
        "jupyter_quota_running_requests",
        "jupyter_quota_finished_jobs_total",
        "jupyter_quota_estimator_peak_ratio_sum",
        "jupyter_quota_stalled_jobs",
    ):
        assert metric in every, metric
