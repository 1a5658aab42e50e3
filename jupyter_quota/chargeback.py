"""Prices turn usage into cost: the usage report's ``cost`` and the monthly chargeback. Pure.

Prices (``JupyterQuota.prices``) are per resource-hour in one currency::

    {"currency": "EUR", "gpuHour": 2.5, "cpuHour": 0.04, "memoryGibHour": 0.005}

A resource without a price costs nothing. Costs are rounded to cents per row and resource
(``decimal``, half even), and every total is the sum of the rounded figures it covers, so a
chargeback adds up to the cent: each team's cost is the sum of its resource costs, and the
totals row the sum of the teams'.
"""

from __future__ import annotations

import csv
import functools
import io
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from decimal import ROUND_HALF_EVEN, Decimal

from . import usage
from .errors import InvalidRequest

#: price key -> (Totals attribute, its thousandth-units in one unit priced, the chargeback's hour and cost columns)
RESOURCES = {
    "gpuHour": ("gpu", 1000, "gpuHours", "gpuCost"),
    "cpuHour": ("cpu", 1000, "cpuHours", "cpuCost"),
    "memoryGibHour": ("memory", 1000 * usage.GIB, "memoryGibHours", "memoryCost"),
}
CENT = Decimal("0.01")
HOUR_DIGITS = 4
_MONTH = re.compile(r"([0-9]{4})-([0-9]{2})")  # ASCII only: \d takes any script's digits


def parse_prices(prices: Mapping) -> dict | None:
    """Validated prices (``None`` when none are configured); ``ValueError`` says what is wrong."""
    if not prices:
        return None
    unknown = sorted(set(prices) - {"currency", *RESOURCES})
    if unknown:
        raise ValueError(
            f"JupyterQuota.prices: unknown key(s) {', '.join(unknown)}; use currency, {', '.join(RESOURCES)}"
        )
    currency = prices.get("currency", "")
    if not isinstance(currency, str) or not currency:
        raise ValueError('JupyterQuota.prices needs a "currency" (e.g. "EUR") for its hourly prices')
    out: dict = {"currency": currency}
    for key in RESOURCES:
        value = prices.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise ValueError(f"JupyterQuota.prices.{key} must be a number >= 0 (price per hour), not {value!r}")
        out[key] = value
    return out


def costs(totals: usage.Totals, prices: Mapping | None) -> dict[str, Decimal] | None:
    """The cost of each priced resource (price key -> cents-rounded Decimal), or None without prices."""
    if prices is None:
        return None
    return {key: _cents(_hours(totals, key) * _decimal(prices[key])) for key in RESOURCES}


def cost(totals: usage.Totals, prices: Mapping | None) -> Decimal | None:
    parts = costs(totals, prices)
    return None if parts is None else sum(parts.values(), Decimal(0))


def _hours(totals: usage.Totals, key: str) -> Decimal:
    attribute, unit, _, _ = RESOURCES[key]
    return Decimal(getattr(totals, attribute)) / _decimal(unit * 3600)


@functools.lru_cache(maxsize=64)
def _decimal(number: float) -> Decimal:
    """A configured price (or a unit) as the decimal it was written as: 0.1, not 0.1000000000000000055."""
    return Decimal(str(number))


def _cents(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_EVEN)


def month_window(month: str | None, now: int) -> tuple[str, int, int]:
    """``YYYY-MM`` (absent: the current UTC month) as (month, since, until) epoch seconds; months
    0001-01 to 9999-11, whose ends RFC 3339 can write."""
    if month is None:
        month = usage.format_time(now)[:7]
    match = _MONTH.fullmatch(month)
    if not match or not 1 <= int(match[2]) <= 12 or not "0001-01" <= month <= "9999-11":
        raise InvalidRequest(f"month must be YYYY-MM (e.g. 2026-11), from 0001-01 to 9999-11, not {str(month)[:32]!r}")
    year, number = int(match[1]), int(match[2])
    start = datetime(year, number, 1, tzinfo=timezone.utc)
    end = datetime(year + number // 12, number % 12 + 1, 1, tzinfo=timezone.utc)
    return month, int(start.timestamp()), int(end.timestamp())


def usage_json(sums: Mapping[tuple, usage.Totals], window: usage.Window, prices) -> dict:
    """The answer of ``GET /usage``: rows with their cost, totals, and the prices used."""
    rows = []
    for row, totals in usage.rows_json(sums, window):
        row["cost"] = _number(cost(totals, prices))
        rows.append(row)
    return {
        "since": usage.format_time(window.since),
        "until": usage.format_time(window.until),
        "by": window.by,
        "step": window.step,
        "rows": rows,
        "totals": {
            **usage.total(sums).to_json(),
            "cost": None if prices is None else float(_sum(r["cost"] for r in rows)),
        },
        "prices": prices,
    }


def chargeback(sums: Mapping[tuple, usage.Totals], month: str, since: int, until: int, prices) -> dict:
    """Per-team rows (hours and cost per resource, total) and their totals row; ``sums`` by team."""
    rows = []
    for (key, _), totals in sorted(sums.items()):
        namespace, team = key
        rows.append({"namespace": namespace, "team": team, **_figures(totals, prices)})
    totals_row = {}
    for _, _, hours, money in RESOURCES.values():
        totals_row[hours] = round(sum(Decimal(str(r[hours])) for r in rows), HOUR_DIGITS)
        totals_row[money] = None if prices is None else _sum(r[money] for r in rows)
    totals_row["cost"] = None if prices is None else _sum(r["cost"] for r in rows)
    return {
        "month": month,
        "since": usage.format_time(since),
        "until": usage.format_time(until),
        "prices": prices,
        "rows": rows,
        "totals": {k: _number(v) for k, v in totals_row.items()},
    }


def add_requests(report: dict, counts: Mapping[tuple, Mapping[str, int]]) -> None:
    """Each team row's ``requests``: what its endpoints served through the proxy in the month
    (``counts``: ``(namespace, name, minute) -> {code: count}``), and their sum in the totals.
    A team whose endpoints served requests but held nothing has no row (nor cost)."""
    per_namespace: dict[str, int] = {}
    for (namespace, _, _), codes in counts.items():
        per_namespace[namespace] = per_namespace.get(namespace, 0) + sum(codes.values())
    for row in report["rows"]:
        row["requests"] = per_namespace.get(row["namespace"], 0)
    report["totals"]["requests"] = sum(row["requests"] for row in report["rows"])


def _figures(totals: usage.Totals, prices) -> dict:
    parts = costs(totals, prices)
    out: dict = {}
    for key, (_, _, hours, money) in RESOURCES.items():
        out[hours] = float(round(_hours(totals, key), HOUR_DIGITS))
        out[money] = None if parts is None else float(parts[key])
    out["cost"] = None if parts is None else float(sum(parts.values(), Decimal(0)))
    return out


def _sum(values) -> Decimal:
    return sum((Decimal(str(v)) for v in values), Decimal(0))


def _number(value):
    return None if value is None else float(value)


CSV_COLUMNS = ("namespace", "team", *(c for _, _, h, m in RESOURCES.values() for c in (h, m)), "cost")


def chargeback_csv(report: dict) -> str:
    """The chargeback as CSV: one line per team, then a ``total`` line."""
    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in report["rows"]:
        writer.writerow(_csv_row(row))
    writer.writerow(_csv_row({"namespace": "total", "team": "", **report["totals"]}))
    return out.getvalue()


def _csv_row(row: dict) -> dict:
    return {k: csv_cell(row.get(k)) for k in CSV_COLUMNS}


def csv_cell(value) -> str:
    """A value as a spreadsheet reads it: empty for null, numbers without exponent or ``.0``."""
    if value is None:
        return ""
    if isinstance(value, float):
        return format(Decimal(str(value)).normalize(), "f")
    return str(value)
