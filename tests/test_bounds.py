"""Input bounds: int64 magnitude, length checked before parsing, stored values clamped."""

from __future__ import annotations

import time

import pytest

from jupyter_quota import bounds
from jupyter_quota.errors import InvalidRequest
from jupyter_quota.quantity import Quantity

MAX = str(2**63 - 1)


@pytest.mark.parametrize(
    "raw",
    [
        MAX,
        "-" + MAX,
        "8Ei",
        "9223372036854775807000m",
        "9.223372036854775807E",
        "7Ei",
        2**63 - 1,
        1.5,
        "0." + "0" * 40 + "1",
    ],
)
def test_quantities_up_to_int64_are_accepted_exactly(raw):
    assert bounds.quantity(raw, "x") == Quantity(str(raw) if not isinstance(raw, float) else repr(raw))


@pytest.mark.parametrize(
    "raw", ["9223372036854775808", "1e19", "10E", "1e200000", "1e2147483647", "-1e19", 2**63, 10**4000, 1e300]
)
def test_quantities_past_int64_are_refused_naming_field_and_bound(raw):
    with pytest.raises(InvalidRequest) as e:
        bounds.quantity(raw, 'resources.limits["cpu"]')
    assert e.value.message.startswith('resources.limits["cpu"]: Invalid value: ')
    assert MAX in e.value.message and len(e.value.message) < 300


def test_binary_si_capped_by_parsing_is_within_the_bound():
    # upstream caps BinarySI at 2^63-1 while parsing: "9Ei" is accepted as exactly the bound
    assert str(bounds.quantity("9Ei", "x").value()) == MAX


def test_a_long_quantity_is_refused_before_parsing():
    text = "1" + "0" * 1_000_000
    started = time.process_time()
    with pytest.raises(InvalidRequest) as e:
        bounds.quantity(text, "hard[cpu]")
    assert time.process_time() - started < 0.5  # parsing it costs seconds
    assert "1000001 characters" in e.value.message and "at most 64" in e.value.message
    assert len(e.value.message) < 300


@pytest.mark.parametrize("raw", [None, True, [], {}])
def test_a_quantity_of_the_wrong_type_is_refused(raw):
    with pytest.raises(InvalidRequest, match="must be a quantity string"):
        bounds.quantity(raw, "x")


def test_a_parse_error_keeps_upstreams_text():
    with pytest.raises(InvalidRequest, match="quantities must match the regular expression"):
        bounds.quantity("lots", "x")


@pytest.mark.parametrize(
    "text,expected",
    [
        ("2", "2"),
        ("16Gi", "16Gi"),
        ("1e200000", MAX),
        ("-1e200000", "-" + MAX),
        ("9" * 100_000, MAX),
        ("lots", "lots"),
    ],
)
def test_stored_quantities_are_clamped_to_the_bound(text, expected):
    assert bounds.clamp(text) == expected


@pytest.mark.parametrize("text,value", [("4096", 4096), ("-3", -3), (MAX, 2**63 - 1)])
def test_whole_numbers_up_to_int64(text, value):
    assert bounds.whole_number(text, "--max_length") == value


@pytest.mark.parametrize(
    "text,words", [("9" * 300, "300 characters"), ("9223372036854775808", "at most"), ("4k", "expected a whole number")]
)
def test_whole_numbers_past_int64_or_not_whole_are_refused(text, words):
    with pytest.raises(InvalidRequest) as e:
        bounds.whole_number(text, "--max_length")
    assert e.value.message.startswith("--max_length ") and words in e.value.message
