"""Usage accounting (``jupyter_quota/usage.py``) and chargeback arithmetic (``chargeback.py``): pure."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from jupyter_quota import chargeback, usage
from jupyter_quota.errors import InvalidRequest

H = 3600
T0 = 1_794_700_800  # 2026-11-15T00:00:00Z


def span(start, end, gpus=1, cpu=2, memory=4 * usage.GIB, team="alpha", user="ann", job="j"):
    return usage.Span(f"team-{team}", team, user, job, T0 + start, None if end is None else T0 + end,
                      int(gpus * 1000), int(cpu * 1000), memory * 1000)  # fmt: skip


def window(since, until, by="team", step=None):
    return usage.Window(T0 + since, T0 + until, by, step)


def test_a_job_inside_the_window_counts_its_whole_life_in_each_resource():
    sums = usage.integrate([span(H, 3 * H, gpus=2, cpu=Fraction(1, 2))], window(0, 10 * H), now=T0 + 20 * H)
    assert usage.total(sums).to_json() == {"gpuSeconds": 4 * H, "cpuSeconds": H, "memoryGibSeconds": 8 * H}


@pytest.mark.parametrize(
    "start, end, counted",
    [(-2 * H, H, H), (9 * H, 12 * H, H), (-H, 11 * H, 10 * H), (-3 * H, -H, 0), (10 * H, 11 * H, 0)],
)
def test_a_job_overlapping_the_window_counts_only_the_overlap(start, end, counted):
    sums = usage.integrate([span(start, end)], window(0, 10 * H), now=T0 + 20 * H)
    assert usage.total(sums).exact()[0] == counted


def test_a_running_job_counts_up_to_now_and_not_past_until():
    running = span(H, None)
    assert usage.total(usage.integrate([running], window(0, 10 * H), now=T0 + 4 * H)).exact()[0] == 3 * H
    assert usage.total(usage.integrate([running], window(0, 10 * H), now=T0 + 30 * H)).exact()[0] == 9 * H


def test_buckets_split_a_job_and_add_up_to_the_window_without_step():
    spans = [span(30 * 60, 5 * H + 10 * 60), span(2 * H, None, user="bob")]
    now = T0 + 7 * H
    whole = usage.integrate(spans, window(0, 8 * H, "user"), now)
    bucketed = usage.integrate(spans, window(0, 8 * H, "user", step=H), now)
    rows = [row for row, _ in usage.rows_json(bucketed, window(0, 8 * H, "user", step=H))]
    assert next(r["start"] for r in rows if r["user"] == "ann") == "2026-11-15T00:00:00Z"
    assert [r["gpuSeconds"] for r in rows if r["user"] == "ann"] == [1800, H, H, H, H, 600]
    assert [r["gpuSeconds"] for r in rows if r["user"] == "bob"] == [H] * 5  # 2h..7h (now), none after
    assert usage.total(bucketed).to_json() == usage.total(whole).to_json()


def test_rows_group_by_team_user_or_job():
    spans = [span(0, H, user="ann", job="a"), span(0, H, user="ann", job="b"), span(0, H, team="beta", user="cy")]
    by = {
        b: [r for r, _ in usage.rows_json(usage.integrate(spans, window(0, H, b), T0 + H), window(0, H, b))]
        for b in usage.BY
    }
    assert [(r["team"], r["gpuSeconds"]) for r in by["team"]] == [("alpha", 2 * H), ("beta", H)]
    assert [(r["user"], r["gpuSeconds"]) for r in by["user"]] == [("ann", 2 * H), ("cy", H)]
    assert [r["job"] for r in by["job"]] == ["a", "b", "j"]
    assert set(by["team"][0]) == {"namespace", "team", *usage.FIGURES}


def test_requests_count_once_whether_named_short_or_as_quota_usage():
    quota_usage = {"cpu": "500m", "requests.cpu": "500m", "memory": "1Gi", "requests.memory": "1Gi",
                   "requests.nvidia.com/gpu": "2", "limits.cpu": "4", "pods": "1"}  # fmt: skip
    assert usage.requested(usage.request_pairs(quota_usage)) == (2000, 500, 1000 * usage.GIB)
    assert usage.requested(usage.request_pairs({"cpu": "2", "amd.com/gpu": "1"})) == (1000, 2000, 0)
    assert usage.requested(usage.request_pairs({"cpu": "1n"})) == (0, 1, 0)  # thousandths, rounded up


def test_window_defaults_are_the_last_24_hours_by_team():
    w = usage.parse_window(now=T0)
    assert (w.since, w.until, w.by, w.step) == (T0 - 24 * H, T0, "team", None)
    w = usage.parse_window("2026-11-15T02:00:00+02:00", "2026-11-15T01:00:00Z", "job", "60")
    assert (w.since, w.until, w.step) == (T0, T0 + H, 60)


@pytest.mark.parametrize(
    "params, says",
    [
        ({"since": "2026-11-16T00:00:00Z", "until": "2026-11-15T00:00:00Z"}, "must be before until"),
        ({"since": "yesterday"}, "since must be an RFC 3339 time such as 2026-11-30T08:00:00Z"),
        ({"until": "2026-11-15T00:00:00"}, "has no time zone: end it with Z"),
        ({"by": "project"}, "by must be one of team, user, job"),
        ({"step": "ten"}, "step must be a whole number of seconds"),
        ({"step": "0"}, "step must be at least 1 second"),
        ({"step": "60"}, "1440 buckets; at most 1000 are returned: use step >= 87"),
    ],
)
def test_bad_parameters_are_refused_with_what_to_fix(params, says):
    with pytest.raises(InvalidRequest) as refused:
        usage.parse_window(**params, now=T0)
    assert says in refused.value.message and refused.value.status == 400


@pytest.mark.parametrize(
    "step", ["1_000", "\uff11\uff10\uff10\uff10", "+1000", " 1000", "1000 ", "\u0661\u0660\u0660\u0660"]
)
def test_step_is_ascii_digits_only(step):
    """``int()`` reads underscores, full-width and Arabic-Indic digits and spaces (issue 25, item 10)."""
    with pytest.raises(InvalidRequest) as refused:
        usage.parse_window(step=step, now=T0)
    assert "step must be a whole number of seconds" in refused.value.message
    assert usage.parse_window(step="1000", now=T0).step == 1000


PRICES = {"currency": "EUR", "gpuHour": 2.5, "cpuHour": 0.04, "memoryGibHour": 0.005}


def test_cost_is_hours_times_price_per_resource():
    totals = usage.Totals(gpu=2 * H * 1000, cpu=10 * H * 1000, memory=100 * H * usage.GIB * 1000)
    assert chargeback.costs(totals, PRICES) == {
        "gpuHour": Decimal("5.00"),
        "cpuHour": Decimal("0.40"),
        "memoryGibHour": Decimal("0.50"),
    }
    assert chargeback.cost(totals, None) is None


def test_a_chargeback_adds_up_to_the_cent():
    # thirds of an hour and odd prices: every row rounds, and the totals are the sums of the rounded rows
    spans = [span(0, 1200 * (i + 1), gpus=i % 3, cpu=i / 8, team=f"t{i:02d}") for i in range(25)]
    month, since, until = chargeback.month_window("2026-11", 0)
    prices = chargeback.parse_prices({"currency": "EUR", "gpuHour": 1.37, "cpuHour": 0.033, "memoryGibHour": 0.0071})
    report = chargeback.chargeback(usage.integrate(spans, usage.Window(since, until), T0), month, since, until, prices)
    rows = report["rows"]
    assert len(rows) == 25
    for row in rows:
        assert Decimal(str(row["cost"])) == sum(Decimal(str(row[c])) for c in ("gpuCost", "cpuCost", "memoryCost"))
    for column in ("gpuCost", "cpuCost", "memoryCost", "cost", "gpuHours"):
        assert Decimal(str(report["totals"][column])) == sum(Decimal(str(r[column])) for r in rows), column
    lines = chargeback.chargeback_csv(report).splitlines()
    assert lines[0].split(",") == list(chargeback.CSV_COLUMNS)
    assert len(lines) == 27 and lines[-1].startswith("total,,")


def test_usage_rows_costs_add_up_to_the_total_cost():
    spans = [span(0, 1000 + i * 77, gpus=1 + i % 2, team=f"t{i % 7}", user=f"u{i}") for i in range(40)]
    w = window(0, 10 * H, "user")
    report = chargeback.usage_json(usage.integrate(spans, w, T0), w, chargeback.parse_prices(PRICES))
    assert Decimal(str(report["totals"]["cost"])) == sum(Decimal(str(r["cost"])) for r in report["rows"])
    assert report["prices"]["currency"] == "EUR"


@pytest.mark.parametrize(
    "month, since, until",
    [
        ("2026-11", "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"),
        ("2026-12", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"),
    ],
)
def test_a_month_is_its_utc_calendar_month(month, since, until):
    _, start, end = chargeback.month_window(month, 0)
    assert (usage.format_time(start), usage.format_time(end)) == (since, until)


@pytest.mark.parametrize("month", ["2026-13", "2026-1", "nov", "2026-00"])
def test_a_bad_month_is_refused(month):
    with pytest.raises(InvalidRequest, match="month must be YYYY-MM"):
        chargeback.month_window(month, 0)


@pytest.mark.parametrize(
    "prices, says",
    [
        ({"gpuHour": 1}, 'needs a "currency"'),
        ({"currency": "EUR", "gpu": 1}, "unknown key(s) gpu"),
        ({"currency": "EUR", "gpuHour": -1}, "must be a number >= 0"),
        ({"currency": "EUR", "cpuHour": "0.1"}, "must be a number >= 0"),
    ],
)
def test_bad_prices_are_refused_naming_the_key(prices, says):
    with pytest.raises(ValueError, match=r"JupyterQuota\.prices") as refused:
        chargeback.parse_prices(prices)
    assert says in str(refused.value)


# -- issue 25 item 4: times out of range, non-ASCII digits, zero padding ---------------------------


@pytest.mark.parametrize(
    "params, says",
    [
        ({"until": "9999-12-31T23:59:59-14:00"}, "until is after 9999-12-31T23:59:59Z"),
        ({"since": "0001-01-01T00:00:00+14:00"}, "since is before 0001-01-01T00:00:00Z"),
        ({"until": "0001-01-01T00:00:00Z"}, "since (24 hours before until) would be before 0001-01-01T00:00:00Z"),
        ({"until": "\uff12\uff10\uff12\uff16-11-15T00:00:00Z"}, "ASCII digits"),
        ({"since": "2026-11-15T00:00:00Z", "until": "2026-11-15T00:00:0\u0661Z"}, "ASCII digits"),
    ],
)
def test_times_outside_years_1_to_9999_or_in_other_digits_are_refused(params, says):
    with pytest.raises(InvalidRequest) as refused:
        usage.parse_window(**params, now=T0)
    assert says in refused.value.message and refused.value.status == 400


def test_the_first_and_last_seconds_of_the_range_are_accepted():
    w = usage.parse_window("0001-01-01T00:00:00Z", "0001-01-02T00:00:00Z", now=T0)
    assert usage.format_time(w.since) == "0001-01-01T00:00:00Z"
    w = usage.parse_window("9999-12-31T00:00:00Z", "9999-12-31T23:59:59Z", now=T0)
    assert usage.format_time(w.until) == "9999-12-31T23:59:59Z"


@pytest.mark.parametrize("text", ["0037-01-03T13:46:40Z", "0987-09-26T15:06:40Z"])
def test_years_below_1000_keep_their_zero_padding(text):
    from datetime import datetime

    from jupyter_quota.times import rfc3339

    epoch = int(datetime.fromisoformat(text).timestamp())
    assert usage.format_time(epoch) == text
    assert rfc3339(epoch) == text


def test_a_window_in_year_999_sorts_before_todays_times():
    # the local backend compares RFC 3339 strings in SQL: "999-..." would sort after "2026-..."
    w = usage.parse_window("0999-01-01T00:00:00Z", "2026-11-15T00:00:00Z", now=T0)
    assert usage.format_time(w.since) < "2026-11-14T00:00:00Z"


@pytest.mark.parametrize("month", ["0000-01", "9999-12", "\uff12\uff10\uff12\uff16-\uff11\uff11", "2026-1\u0661", ""])
def test_a_month_outside_the_range_or_not_in_ascii_digits_is_refused(month):
    with pytest.raises(InvalidRequest, match="month must be YYYY-MM"):
        chargeback.month_window(month, 0)


def test_the_first_and_last_months_of_the_range_are_accepted():
    _, since, _ = chargeback.month_window("0001-01", 0)
    assert usage.format_time(since) == "0001-01-01T00:00:00Z"
    month, _, until = chargeback.month_window("9999-11", 0)
    assert (month, usage.format_time(until)) == ("9999-11", "9999-12-01T00:00:00Z")


# -- issue 25 item 3: an answer's rows (groups x buckets) are bounded ---------------------------------


def test_jobs_times_buckets_past_the_row_bound_is_refused_with_a_step_that_fits(monkeypatch):
    monkeypatch.setattr(usage, "MAX_ROWS", 500)
    spans = [span(0, 7 * 24 * H - i, job=f"j{i}", user=f"u{i % 9}") for i in range(40)]  # a week each
    w = window(0, 7 * 24 * H, "job", step=605)  # 40 jobs x 1000 buckets: 40,000 rows
    with pytest.raises(InvalidRequest) as refused:
        usage.integrate(spans, w, now=T0 + 8 * 24 * H, max_rows=usage.MAX_ROWS)
    said = refused.value.message
    assert "more than 500 rows" in said and "step >= " in said, said
    fitting = int(said.split("step >= ")[1].split()[0].rstrip(",;"))
    rows = usage.integrate(spans, window(0, 7 * 24 * H, "job", step=fitting), T0 + 8 * 24 * H, max_rows=500)
    assert 0 < len(rows) <= 500
    # the same spans by user fit at step=605 (9 users x 1000 buckets is over 500: refused too, with its own step)
    with pytest.raises(InvalidRequest, match="step >= "):
        usage.integrate(spans, window(0, 7 * 24 * H, "user", step=605), T0 + 8 * 24 * H, max_rows=500)


def test_more_jobs_than_the_row_bound_by_job_is_refused_naming_what_narrows_it(monkeypatch):
    spans = [span(0, H, job=f"j{i}") for i in range(30)]
    with pytest.raises(InvalidRequest) as refused:
        usage.integrate(spans, window(0, 2 * H, "job"), now=T0 + 3 * H, max_rows=20)
    said = refused.value.message
    assert "more than 20 rows" in said and "by=user" in said and "namespace" in said and "step >=" not in said
    assert len(usage.integrate(spans, window(0, 2 * H, "team"), now=T0 + 3 * H, max_rows=20)) == 1


@pytest.mark.parametrize("name", ["since", "until", "by", "step", "namespace"])
def test_an_empty_parameter_is_refused_not_taken_as_left_out(name):
    # the OpenAPI file's types refuse an empty value (schemathesis found `until=` answered 200)
    with pytest.raises(InvalidRequest, match=f"{name}= is empty"):
        usage.parse_window(**{name: ""}, now=T0)
