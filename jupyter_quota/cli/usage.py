"""``jupyter quota usage`` and ``jupyter quota chargeback``: the usage API on the command line.

As ``jupyter quota plan`` does: under a hub (``JupyterQuota.service_url``) the quota service
answers, as this server's user; otherwise the configured backend is read in this process (the
local ledger, or the kube service's usage store in ``state_dir``) for the server's owner
(``JupyterQuota.owner``), with the same access rules as the REST API.
"""

from __future__ import annotations

import csv
import io
import json
import sys

from .. import chargeback, usage
from ..errors import QuotaError
from .common import config_option, hub_client, load_config, owner_service

FORMATS = ("table", "csv", "json")
USAGE_EPILOG = """examples:
  jupyter quota usage                                   # the last 24 hours, by team
  jupyter quota usage --since 2026-11-16T00:00:00Z --until 2026-11-23T00:00:00Z --by user --format csv
  jupyter quota usage --by job --namespace team-alpha --step 3600 --format json
  jupyter quota chargeback --month 2026-11 --format csv > chargeback-2026-11.csv
"""


def add_commands(sub) -> None:
    """The ``usage`` and ``chargeback`` subcommands of ``jupyter quota``."""
    import argparse

    formatter = argparse.RawDescriptionHelpFormatter
    use = sub.add_parser(
        "usage",
        help="GPU-, CPU- and memory GiB-seconds requested per team, user or job over a window",
        description="Requested resources (the admitted pods' requests, LimitRange defaults included) "
        "integrated over each job's lifetime within [--since, --until): a job overlapping the window "
        "counts only the overlap, a running job up to now. Admins see every team, others their own. "
        "With JupyterQuota.prices each row has a cost.",
        epilog=USAGE_EPILOG,
        formatter_class=formatter,
    )
    use.add_argument("--since", metavar="TIME", help="RFC 3339, e.g. 2026-11-16T00:00:00Z (default: --until - 24h)")
    use.add_argument("--until", metavar="TIME", help="RFC 3339 (default: now)")
    use.add_argument("--by", choices=usage.BY, default="team", help="one row per team (default), user or job")
    use.add_argument("--namespace", "-n", metavar="NS", help="only this team namespace")
    use.add_argument("--step", metavar="SECONDS", help="cut the window into buckets of this many seconds")
    use.add_argument("--format", choices=FORMATS, default="table", help="table (default), csv or json")
    config_option(use)
    use.set_defaults(func=_usage)

    bill = sub.add_parser(
        "chargeback",
        help="a month's usage and cost per team, with a totals row (admins)",
        description="Usage of a UTC calendar month in hours per resource, priced with "
        "JupyterQuota.prices (per GPU-, CPU- and memory GiB-hour): a cost per resource and team, "
        "rounded to cents, and a totals row that is the sum of the rows.",
        epilog=USAGE_EPILOG,
        formatter_class=formatter,
    )
    bill.add_argument("--month", metavar="YYYY-MM", help="the month (default: the current one)")
    bill.add_argument("--format", choices=FORMATS, default="table", help="table (default), csv or json")
    config_option(bill)
    bill.set_defaults(func=_chargeback)


def _usage(args) -> int:
    params = {"since": args.since, "until": args.until, "by": args.by, "namespace": args.namespace, "step": args.step}
    answer = _ask(args.config, "usage", {k: v for k, v in params.items() if v is not None})
    columns = [
        "namespace",
        "team",
        *(["user"] if args.by != "team" else []),
        *(["job", "kind"] if args.by == "job" else []),
    ]
    columns += [*(["start"] if answer["step"] else []), *usage.FIGURES, "cost"]
    if args.by == "job" and args.format != "json":  # an endpoint's requests, as one number a cell holds
        columns.append("requests")
        answer = {**answer, "rows": [{**r, "requests": (r.get("requests") or {}).get("total")} for r in answer["rows"]]}
    _print(answer, columns, args.format)
    return 0


def _chargeback(args) -> int:
    answer = _ask(args.config, "chargeback", {"month": args.month} if args.month else {})
    if args.format == "csv":
        sys.stdout.write(chargeback.chargeback_csv(answer))
        return 0
    _print(answer, list(chargeback.CSV_COLUMNS), args.format)
    return 0


def _ask(config_file: str | None, route: str, params: dict) -> dict:
    """The route's answer: from the hub's quota service, or from the configured backend here."""
    config = load_config(config_file)
    if config.service_url:
        from ..magics.client import QuotaClientError

        try:
            return hub_client(config).call("GET", f"/{route}", params=params)
        except QuotaClientError as e:
            raise QuotaError(e.message) from None
    service, who = owner_service(config)
    try:
        if route == "usage":
            return service.usage(who, **params)
        return service.chargeback(who, params.get("month"))
    finally:
        service.backend.close()


def _print(answer: dict, columns: list[str], form: str) -> None:
    if form == "json":
        print(json.dumps(answer, indent=1))
        return
    rows = [*answer["rows"], {columns[0]: "total", **answer["totals"]}]
    if form == "csv":  # the numbers as the API answers them; the table rounds to cents
        cells = [[chargeback.csv_cell(row.get(c)) for c in columns] for row in rows]
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(cells)
        sys.stdout.write(out.getvalue())
        return
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(line[i]) for line in cells)) for i, c in enumerate(columns)]
    for line in [columns, *cells]:
        print(
            "  ".join(v.rjust(w) if i >= 2 else v.ljust(w) for i, (v, w) in enumerate(zip(line, widths, strict=True)))
        )
    prices = answer.get("prices")
    print(f"prices per hour: {json.dumps(prices)}" if prices else "no prices configured (JupyterQuota.prices)")


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.2f}" if value != int(value) else str(int(value))
    return str(value)
