"""Usage accounting: requested resources integrated over each job's lifetime. Pure, no I/O.

A job's *span* is what it requested (GPUs, CPU cores, memory bytes: the admitted pod's requests,
after LimitRange defaults, as quota counts them) and when it held it (from its start to its end,
or to ``now`` while it runs). A window ``[since, until)`` counts only the overlap of each span
with it, optionally cut into buckets of ``step`` seconds, and sums per team, user or job:

    gpuSeconds = GPUs x seconds, cpuSeconds = cores x seconds, memoryGibSeconds = GiB x seconds

This is OpenCost's allocation model on requests (what a job reserved, whether it used it or not),
the basis of a chargeback (``chargeback.py``). The backends only produce spans: the local
backend from its ledger (``backends/local/usagespans.py``), the kube backend from the pod
records it keeps (``backends/kube/usagestore.py``). Times are whole epoch seconds and amounts
whole thousandths (Kubernetes' ``MilliValue``, rounded up), so every sum is exact integer
arithmetic: fast at 100,000 jobs (``benchmarks/usage_bench.py``) and the same in any order.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from fractions import Fraction
from typing import NamedTuple

from . import labels
from .errors import InvalidRequest
from .quantity import Quantity, QuantityError

BY = ("team", "user", "job")
DEFAULT_WINDOW = 24 * 3600  # seconds: since defaults to until minus this
MAX_BUCKETS = 1000  # buckets per answer: past this a step is too small for the window
#: Rows per answer (groups x buckets): past this a query is refused before its rows are all made,
#: so one query holds a few MB and a second of a core, however much history there is.
MAX_ROWS = 10_000
GIB = 2**30
#: The first and last seconds a time may name (epoch seconds): RFC 3339 years 0001 to 9999, UTC.
FIRST = int(datetime(1, 1, 1, tzinfo=timezone.utc).timestamp())
LAST = int(datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp())
#: The three figures of a row, in the order tables and CSV show them.
FIGURES = ("gpuSeconds", "cpuSeconds", "memoryGibSeconds")
#: Rounding of the figures in answers (exact inside).
DIGITS = 3


class Span(NamedTuple):
    """One job's (or pod's) requested resources and the time it held them (a tuple: cheap to make
    by the 100,000)."""

    namespace: str
    team: str
    user: str
    job: str
    start: int  # epoch seconds
    end: int | None  # epoch seconds; None while it runs
    gpus_milli: int = 0  # thousandths of a GPU
    cpu_milli: int = 0  # thousandths of a core
    memory_milli: int = 0  # thousandths of a byte


@dataclass(frozen=True)
class Window:
    """A parsed, valid usage query."""

    since: int
    until: int
    by: str = "team"
    step: int | None = None
    namespace: str | None = None


@dataclass
class Totals:
    """Exact sums of the three figures, in thousandth-unit-seconds."""

    gpu: int = 0
    cpu: int = 0
    memory: int = 0

    def add(self, span: Span, seconds: int) -> None:
        self.gpu += span.gpus_milli * seconds
        self.cpu += span.cpu_milli * seconds
        self.memory += span.memory_milli * seconds

    def __iadd__(self, other: Totals) -> Totals:
        self.gpu += other.gpu
        self.cpu += other.cpu
        self.memory += other.memory
        return self

    def __bool__(self) -> bool:
        return bool(self.gpu or self.cpu or self.memory)

    def exact(self) -> tuple[Fraction, Fraction, Fraction]:
        """(GPU-seconds, CPU-seconds, memory GiB-seconds), exact."""
        return Fraction(self.gpu, 1000), Fraction(self.cpu, 1000), Fraction(self.memory, 1000 * GIB)

    def to_json(self) -> dict:
        # int / int is the correctly rounded float of the exact quotient
        return {
            "gpuSeconds": round(self.gpu / 1000, DIGITS),
            "cpuSeconds": round(self.cpu / 1000, DIGITS),
            "memoryGibSeconds": round(self.memory / (1000 * GIB), DIGITS),
        }


@functools.lru_cache(maxsize=4096)
def requested(requests: tuple[tuple[str, str], ...]) -> tuple[int, int, int]:
    """(GPUs, CPU cores, memory bytes) in thousandths of a request list, as quota names them.

    Takes a pod's requests (``cpu``, ``memory``, ``nvidia.com/gpu``) or quota usage
    (``requests.cpu``, ...; quota usage also holds ``cpu`` and ``memory``, the same requests under
    their short names, so a ``requests.`` key wins over its short name), as sorted (name, quantity)
    pairs: jobs of one shape share them, so each is parsed once. A GPU is any extended resource
    named ``<vendor>/gpu``, so a profile's ``gpuResource`` (``nvidia.com/gpu``, ``amd.com/gpu``)
    counts without being named here.
    """
    named = {k: v for k, v in requests if not k.startswith("requests.")}
    named.update({k.removeprefix("requests."): v for k, v in requests if k.startswith("requests.")})
    gpus = sum(_milli(v) for k, v in named.items() if k.endswith("/gpu"))
    return gpus, _milli(named.get("cpu", "0")), _milli(named.get("memory", "0"))


def request_pairs(requests: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    """The argument :func:`requested` takes, from a mapping of names to quantities."""
    return tuple(sorted((str(k), str(v)) for k, v in requests.items()))


def _milli(value: str) -> int:
    try:
        return Quantity(value).milli_value()
    except QuantityError:
        return 0  # a value quota itself would have refused: it held nothing


def parse_window(
    since: str | None = None,
    until: str | None = None,
    by: str | None = None,
    step: str | None = None,
    namespace: str | None = None,
    *,
    now: int | None = None,
) -> Window:
    """The query parameters of ``GET /usage`` as a :class:`Window`; ``InvalidRequest`` names what to fix."""
    for name, value in (("since", since), ("until", until), ("by", by), ("step", step), ("namespace", namespace)):
        if value == "":  # as the OpenAPI file says: a parameter given is a value, left out is the default
            raise InvalidRequest(f"{name}= is empty: give it a value, or leave {name} out for its default")
    now = int(time.time()) if now is None else now
    end = parse_time(until, "until") if until else now
    start = parse_time(since, "since") if since else end - DEFAULT_WINDOW
    if start < FIRST:
        raise InvalidRequest(
            f"since (24 hours before until) would be before {format_time(FIRST)}: give a since at or after it"
        )
    if start >= end:
        raise InvalidRequest(
            f"since ({format_time(start)}) must be before until ({format_time(end)}); "
            "leave since out for the 24 hours before until"
        )
    by = by or "team"
    if by not in BY:
        raise InvalidRequest(f"by must be one of {', '.join(BY)}, not {by[:32]!r}")
    return Window(start, end, by, _step(step, end - start), namespace or None)


def _step(raw: str | None, length: int) -> int | None:
    if raw is None or raw == "":
        return None
    try:
        if not (raw.isascii() and raw.isdigit()):  # int() also reads "1_000", " 1000" and full-width digits
            raise ValueError
        step = int(raw)
    except ValueError:
        raise InvalidRequest(f"step must be a whole number of seconds, not {str(raw)[:32]!r}") from None
    if step < 1:
        raise InvalidRequest(f"step must be at least 1 second, not {step}")
    if math.ceil(length / step) > MAX_BUCKETS:
        smallest = math.ceil(length / MAX_BUCKETS)
        raise InvalidRequest(
            f"step={step} cuts the {length} s window into {math.ceil(length / step)} buckets; at most "
            f"{MAX_BUCKETS} are returned: use step >= {smallest}, or a shorter window"
        )
    return step


def parse_time(text: str, name: str) -> int:
    """An RFC 3339 time (``2026-11-30T08:00:00Z`` or with an offset) as epoch seconds, from
    0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z (what RFC 3339's four-digit year can write)."""
    if isinstance(text, str) and not text.isascii():  # Python's parser takes any script's digits
        raise InvalidRequest(f"{name} must be written in ASCII digits, such as 2026-11-30T08:00:00Z, not {text[:40]!r}")
    try:
        moment = datetime.fromisoformat(text.strip())
    except (ValueError, AttributeError):
        raise InvalidRequest(
            f"{name} must be an RFC 3339 time such as 2026-11-30T08:00:00Z, not {str(text)[:40]!r}"
        ) from None
    if moment.tzinfo is None:
        raise InvalidRequest(f"{name} {text[:40]!r} has no time zone: end it with Z (UTC) or an offset like +02:00")
    epoch = math.floor(moment.timestamp())  # an aware time's arithmetic passes years 1 and 9999
    if epoch < FIRST:
        raise InvalidRequest(f"{name} is before {format_time(FIRST)} in UTC, the earliest time accepted: {text[:40]!r}")
    if epoch > LAST:
        raise InvalidRequest(f"{name} is after {format_time(LAST)} in UTC, the latest time accepted: {text[:40]!r}")
    return epoch


def format_time(epoch: int) -> str:
    """RFC 3339 UTC, its year zero-padded to four digits (``strftime('%Y')`` writes year 999 as
    ``999``, which sorts after ``2026`` where times are compared as text)."""
    t = datetime.fromtimestamp(epoch, timezone.utc)
    return f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}Z"


def group_key(span: Span, by: str) -> tuple:
    """(namespace, team[, user[, job]]): what a row of ``by`` names."""
    base = (span.namespace, span.team)
    if by == "team":
        return base
    if by == "user":
        return (*base, span.user)
    return (*base, span.user, span.job)


_KEY_FIELDS = {"team": ("namespace", "team"), "user": ("namespace", "team", "user")}
_KEY_FIELDS["job"] = (*_KEY_FIELDS["user"], "job")


def integrate(spans: Iterable[Span], window: Window, now: int, max_rows: int | None = None) -> dict[tuple, Totals]:
    """Exact usage per (group key, bucket start) of the spans' overlap with the window; past
    ``max_rows`` rows, ``InvalidRequest`` says how to ask for fewer (:func:`too_many_rows`)."""
    spans = spans if max_rows is None else list(spans)
    sums: dict[tuple, Totals] = {}
    since, until, step = window.since, window.until, window.step or (window.until - window.since)
    for span in spans:
        if window.namespace is not None and span.namespace != window.namespace:
            continue
        begin = max(span.start, since)
        end = min(until, now if span.end is None else span.end)
        if begin >= end:
            continue
        key = group_key(span, window.by)
        bucket = since + (begin - since) // step * step
        while bucket < end:
            seconds = min(end, bucket + step) - max(begin, bucket)
            totals = sums.get((key, bucket))
            if totals is None:
                if max_rows is not None and len(sums) >= max_rows:
                    raise too_many_rows(spans, window, now, max_rows)
                totals = sums[key, bucket] = Totals()
            totals.add(span, seconds)
            bucket += step
    return sums


def too_many_rows(spans: list[Span], window: Window, now: int, max_rows: int) -> InvalidRequest:
    """The refusal of a query of more than ``max_rows`` rows, with a step that surely fits.

    A span of ``d`` seconds touches at most ``d / s + 2`` buckets of ``s`` seconds, and ``g``
    groups fill at most ``g x buckets`` rows, so a step ``s`` fits if ``D / s + 2n <= max_rows``
    (``D``: the seconds of the ``n`` spans in the window) or ``g x ceil(length / s) <= max_rows``.
    """
    length = window.until - window.since
    groups, seconds, count = set(), 0, 0
    for span in spans:
        if window.namespace is not None and span.namespace != window.namespace:
            continue
        overlap = min(window.until, now if span.end is None else span.end) - max(span.start, window.since)
        if overlap > 0:
            groups.add(group_key(span, window.by))
            seconds, count = seconds + overlap, count + 1
    steps = []
    if max_rows > 2 * count:
        steps.append(math.ceil(seconds / (max_rows - 2 * count)))
    if len(groups) <= max_rows:
        steps.append(math.ceil(length / (max_rows // len(groups))) if groups else length)
    narrower = "a namespace, or a shorter window"
    if window.by != "team":
        narrower = f"by={'user' if window.by == 'job' else 'team'}, {narrower}"
    if window.step is not None and steps and min(steps) <= length:
        fits = f"use step >= {max(min(steps), window.step + 1)}, {narrower}"
    elif window.step is not None and len(groups) <= max_rows:
        fits = f"leave step out (one row per {window.by}), or use {narrower}"
    else:
        fits = f"use {narrower}"
    buckets = f" x {math.ceil(length / window.step)} buckets" if window.step else ""
    return InvalidRequest(
        f"usage by={window.by} over {length} s gives more than {max_rows} rows "
        f"({len(groups)} {window.by}s{buckets}); {fits}"
    )


def rows_json(sums: Mapping[tuple, Totals], window: Window) -> list[tuple[dict, Totals]]:
    """Rows as the API returns them, each with its totals, ordered by group then bucket; rows with
    no usage are left out."""
    fields = _KEY_FIELDS[window.by]
    rows = []
    for (key, start), totals in sorted(sums.items()):
        row = dict(zip(fields, key, strict=True))
        if window.step is not None:
            row["start"] = format_time(start)
        row.update(totals.to_json())
        rows.append((row, totals))
    return rows


def mark_endpoints(rows: list[dict], window: Window, names: set, counts: Mapping[tuple, Mapping[str, int]]) -> None:
    """Add to ``by=job`` rows their ``kind`` (``endpoint`` for a name that served in the window,
    else ``job``) and to an endpoint's its ``requests`` (``{"total", "byStatus"}``) in the row's
    bucket. ``names``: ``{(namespace, name)}``; ``counts``: ``(namespace, name, minute) -> {code:
    count}`` (``endpointrequests.in_window``: a minute counts in the bucket it begins in)."""
    if window.by != "job":
        return
    per_row: dict[tuple, dict[str, int]] = {}
    step = window.step or (window.until - window.since)
    for (namespace, name, minute), codes in counts.items():
        bucket = window.since + (minute - window.since) // step * step
        into = per_row.setdefault((namespace, name, bucket), {})
        for code, count in codes.items():
            into[code] = into.get(code, 0) + count
    for row in rows:
        endpoint = (row["namespace"], row["job"])
        row["kind"] = labels.KIND_ENDPOINT if endpoint in names else "job"
        if row["kind"] == labels.KIND_ENDPOINT:
            bucket = parse_time(row["start"], "start") if "start" in row else window.since
            codes = per_row.get((*endpoint, bucket), {})
            row["requests"] = {"total": sum(codes.values()), "byStatus": dict(sorted(codes.items()))}


def total(sums: Mapping[tuple, Totals]) -> Totals:
    out = Totals()
    for totals in sums.values():
        out += totals
    return out
