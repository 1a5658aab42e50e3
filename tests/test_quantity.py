"""jupyter_quota.quantity against upstream apimachinery's own test tables, plus focused tests.

tests/data/quantity_cases.tsv is transcribed from kubernetes/apimachinery
pkg/api/resource/quantity_test.go (its header names the commit and the columns' origin).
Rows whose note starts with "deviation:" hold our documented result instead of upstream's.
"""

from __future__ import annotations

import copy
import json
import pickle
import random
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from jupyter_quota.quantity import (
    ERR_FORMAT_WRONG,
    ERR_NUMERIC,
    ERR_SUFFIX,
    Quantity,
    QuantityError,
    parse_quantity,
)

CASES = Path(__file__).parent / "data" / "quantity_cases.tsv"


def _load_cases() -> list[dict[str, str]]:
    lines = [ln.rstrip("\n") for ln in CASES.read_text(encoding="utf-8").splitlines(True)]
    lines = [ln for ln in lines if not ln.startswith("#")]
    header = lines[0].split("\t")
    return [dict(zip(header, ln.split("\t"), strict=True)) for ln in lines[1:]]


ROWS = _load_cases()


def _row_id(row: dict[str, str]) -> str:
    text = row["input"] + (f" {row['operand']}" if row["operand"] else "")
    return f"{row['kind']}[{text}]"


def _operand(text: str) -> Quantity:
    """A TSV operand: a quantity string, or "V@F" for Quantity(Decimal(V), format=F)."""
    if "@" in text:
        value, fmt = text.split("@")
        return Quantity(Decimal(value), format=fmt)
    return Quantity(text)


def _exact(text: str) -> Fraction:
    return Fraction(Decimal(text))


# -- one checker per kind of TSV row ----------------------------------------------------


def check_parse(row):
    text, expect = row["input"], row["expect"]
    if expect.startswith("ERROR: "):
        reason = expect.removeprefix("ERROR: ")
        for parse in (Quantity, Quantity.parse, parse_quantity):
            with pytest.raises(ValueError) as err:  # noqa: PT011 - the message is checked whole below
                parse(text)
            assert err.value.reason == reason
            assert str(err.value) == f"{reason}: {text!r}"
        return
    q = Quantity(text)
    assert str(q) == expect
    assert q.format == row["format"]
    assert q.as_fraction() == _exact(row["exact"])
    if row["value"]:
        assert q.value() == int(row["value"])
    if row["milli"]:
        assert q.milli_value() == int(row["milli"])
    assert Quantity.parse(text) == q and parse_quantity(text) == q


def check_string(row):
    q = _operand(row["input"])
    assert q.format == row["format"]
    assert str(q) == row["expect"]
    assert q.as_fraction() == _exact(row["exact"])


def check_cmp(row):
    a, b, want = _operand(row["input"]), _operand(row["operand"]), int(row["expect"])
    assert a.cmp(b) == want
    assert b.cmp(a) == -want
    assert (a < b, a == b, a > b) == (want < 0, want == 0, want > 0)
    assert (a <= b, a != b, a >= b) == (want <= 0, want != 0, want >= 0)
    if want == 0:
        assert hash(a) == hash(b)


def check_add(row):
    _check_arith(row, lambda a, b: a + b)


def check_sub(row):
    _check_arith(row, lambda a, b: a - b)


def _check_arith(row, op):
    result = op(_operand(row["input"]), _operand(row["operand"]))
    assert result.as_fraction() == _exact(row["exact"])
    if row["expect"]:
        assert str(result) == row["expect"]
    if row["format"]:
        assert result.format == row["format"]


def check_mul(row):
    q, n = _operand(row["input"]), int(row["operand"])
    assert (q * n).as_fraction() == _exact(row["exact"])
    assert (n * q).as_fraction() == _exact(row["exact"])
    assert (q * n).format == q.format


def check_neg(row):
    q = _operand(row["input"])
    assert (-q).as_fraction() == _exact(row["exact"])
    if row["expect"]:
        assert str(-q) == row["expect"]
    assert (-q).format == q.format
    assert -(-q) == q  # noqa: B002 - negating twice is the point


def check_roundup(row):
    q = Quantity(row["input"])
    rounded = q.round_up(int(row["operand"]))
    assert rounded.as_fraction() == _exact(row["exact"])
    assert (rounded == q) == (row["expect"] == "exact")
    assert rounded.format == row["format"]


def check_scan(row):
    # Upstream's scanner split (positive|value|num|denom|suffix): re-assembling the parts must
    # parse to the same quantity, as TestQuantityParse checks for its own table.
    positive, _value, num, denom, suffix = row["operand"].split("|")
    q = Quantity(row["input"])
    rebuilt = ("" if positive == "true" else "-") + num + (f".{denom}" if denom else "") + suffix
    assert Quantity(rebuilt) == q
    assert q.sign() >= 0 if positive == "true" else q.sign() <= 0


def check_copy(row):
    q = _operand(row["input"])
    for twin in (Quantity(q), copy.copy(q), copy.deepcopy(q), pickle.loads(pickle.dumps(q))):
        assert twin == q and str(twin) == str(q) and twin.format == q.format


def check_json(row):
    q = Quantity.from_json(json.loads(row["input"]))
    assert str(q) == row["expect"]


def check_new(row):
    _check_constructed(row, lambda n, fmt: Quantity(n, format=fmt))


def check_milli(row):
    _check_constructed(row, Quantity.from_milli)


def _check_constructed(row, make):
    n, fmt = int(row["input"]), row["operand"]
    if row["expect"].startswith("ERROR: "):
        with pytest.raises(ValueError, match=row["expect"].removeprefix("ERROR: ")):
            make(n, fmt)
        return
    q = make(n, fmt)
    assert str(q) == row["expect"]
    if row["value"]:
        assert Quantity(str(q)).value() == int(row["value"])
    if row["milli"]:
        assert Quantity(str(q)).milli_value() == int(row["milli"])


def check_scaled(row):
    n, scale = int(row["input"]), int(row["operand"])
    q = Quantity.from_scaled(n, scale)
    assert str(q) == row["expect"]
    assert Quantity(str(q)).scaled_value(scale) == int(row["value"])


def check_scaledvalue(row):
    n, scale = row["input"].split("@")
    q = Quantity.from_scaled(int(n), int(scale))
    assert q.scaled_value(int(row["operand"])) == int(row["value"])


CHECKS = {name.removeprefix("check_"): fn for name, fn in globals().items() if name.startswith("check_")}


@pytest.mark.parametrize("row", ROWS, ids=[_row_id(r) for r in ROWS])
def test_upstream_case(row):
    CHECKS[row["kind"]](row)


def test_every_transcribed_row_is_checked():
    assert {r["kind"] for r in ROWS} <= set(CHECKS)
    assert len(ROWS) == 788
    sources = {r["source"].split("/")[0] for r in ROWS}
    for name in (
        "TestQuantityParse",
        "TestQuantityParseZero",
        "TestParseQuantityString",
        "TestQuantityString",
        "TestQuantityParseEmit",
        "TestParseQuantity",
        "TestQuantityCmp",
        "TestAdd",
        "TestSub",
        "TestMul",
        "ExampleMustParse",
    ):
        assert name in sources
    # deviations are spelled out, never silent
    for r in ROWS:
        if "deviation" in r["note"]:
            assert r["note"].startswith("deviation: ") or "; deviation: " in r["note"]


# -- focused tests ------------------------------------------------------------------------


def test_contract_examples():
    assert str(Quantity("1.5Gi")) == "1536Mi"
    assert Quantity("1.5Gi").format == "BinarySI"
    one_milli = Quantity("0.001")
    assert str(one_milli) == "1m"
    assert (one_milli.value(), one_milli.milli_value()) == (1, 1)
    assert one_milli.as_fraction() == Fraction(1, 1000)
    assert str(Quantity(3)) == "3" and Quantity(3).format == "DecimalSI"
    assert str(Quantity(1024, format="BinarySI")) == "1Ki"
    assert str(Quantity(Fraction(3, 2))) == "1500m"
    assert str(Quantity(Decimal("0.25"))) == "250m"
    q = Quantity("001")
    assert str(Quantity(q)) == "001" and Quantity(q) == q


def test_fractions_round_up_to_nano_like_parsing():
    assert str(Quantity(Fraction(1, 3))) == "333333334n"
    assert str(Quantity(Fraction(-1, 3))) == "-333333334n"
    assert Quantity(Fraction(1, 3)) == Quantity("0.3333333333")
    assert str(Quantity.from_scaled(1, -12)) == "1n"


def test_canonical_quirks_match_upstream():
    # verbatim re-emit on the int64 fast path
    assert [str(Quantity(s)) for s in ("001", "1E3", "100.035k", "+1", "01Ki")] == [
        "001",
        "1E3",
        "100.035k",
        "+1",
        "01Ki",
    ]
    # ...but never for non-canonical-looking input, nor after arithmetic
    assert [str(Quantity(s)) for s in ("1000M", "1024Mi", "0.5", "1.5e3")] == ["1G", "1Gi", "500m", "1500"]
    assert str(Quantity("001") + 0) == "1"
    assert str(-Quantity("+1")) == "-1"
    # odd inputs that parse as zero; zero never prints a suffix or a sign
    for text in (".", "-.", "-", "+", "e3", "Ki", "-0Ki", "0m"):
        assert Quantity(text).is_zero() and str(Quantity(text)) == "0"
    # BinarySI cap and the switch to DecimalSI below one
    assert str(Quantity("8Ei")) == "9223372036854775807"
    assert Quantity("0.000000000001Ki").format == "DecimalSI"
    # upstream drops the suffix past "E" (kubernetes/kubernetes#141249); mirrored
    assert str(Quantity("1000E")) == "1" and Quantity("1000E") == 10**21
    assert str(Quantity("10E")) == "10E"


def test_arithmetic_formats_follow_go():
    gi, mi = Quantity("1Gi"), Quantity("512Mi")
    assert str(gi + mi) == "1536Mi" and (gi + mi).format == "BinarySI"
    assert str(gi - mi) == "512Mi"
    assert (Quantity("1") + gi).format == "DecimalSI"
    assert str(Quantity("1") + gi) == "1073741825"
    assert (Quantity("0") + gi).format == "BinarySI"  # a zero left side takes the right's format
    assert str(Quantity("0m") - gi) == "-1Gi"
    assert str(sum([Quantity("100m"), Quantity("250m"), "1"])) == "1350m"
    assert str(sum([gi, gi])) == "2Gi"
    assert str(gi * 3) == "3Gi" and str(3 * gi) == "3Gi"
    assert str(-Quantity("1.5")) == "-1500m" and abs(Quantity("-2Ki")) == Quantity("2Ki")
    assert str(Quantity("1Gi") + "1Gi") == "2Gi" and str(1 + Quantity("500m")) == "1500m"
    assert str("2" - Quantity("500m")) == "1500m"


def test_arithmetic_refuses_inexact_operands():
    q = Quantity("1")
    for bad in (1.5, True, None, Fraction(1, 2)):
        with pytest.raises(TypeError):
            q + bad
        with pytest.raises(TypeError):
            q * bad


def test_comparison_and_hash():
    assert Quantity("1Gi") > "1G"
    assert Quantity("1Ki") == 1024 and Quantity("1Ki") == "1024"
    assert Quantity("1.5") < 2 and Quantity("1.5") >= "1500m"
    assert hash(Quantity("1Ki")) == hash(1024) == hash(Quantity("1024"))
    assert hash(Quantity("500m")) == hash(Fraction(1, 2))
    assert hash(Quantity("-1")) == hash(-1)
    assert len({Quantity("1Gi"), Quantity("1024Mi"), Quantity("1073741824")}) == 1
    assert sorted(Quantity(s) for s in ("1Gi", "1G", "100Mi", "2")) == [
        Quantity("2"),
        Quantity("100Mi"),
        Quantity("1G"),
        Quantity("1Gi"),
    ]
    assert Quantity("1") != "garbage" and not Quantity("1") == None  # noqa: E711, SIM201 - __eq__ is under test
    with pytest.raises(ValueError, match="quantities must match"):
        Quantity("1") < "garbage"  # noqa: B015 - the comparison must raise
    with pytest.raises(TypeError):
        Quantity("1") < None  # noqa: B015 - the comparison must raise
    # huge exponents compare by magnitude without building the number
    assert Quantity("1e999999999") > Quantity("999E") > 0
    assert Quantity("-1e999999999") < Quantity("-999E")


def test_errors_name_the_input_and_upstream_text():
    with pytest.raises(ValueError) as err:  # noqa: PT011 - the message is checked whole below
        Quantity("1.5.5")
    assert str(err.value) == f"{ERR_FORMAT_WRONG}: '1.5.5'"
    assert ERR_FORMAT_WRONG == (
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )
    for text in ("1K", "1i", "1mi", "1e", "1e+", "--1", "1m3", "1e99999999999999999999"):
        with pytest.raises(QuantityError) as err:
            Quantity(text)
        assert err.value.reason == ERR_SUFFIX and err.value.input == text
        assert repr(text) in str(err.value)
    for text in (" 1", "1 ", "", "0x10", "1_000", "1,5", "NaN", "\u0661", "1\n"):
        with pytest.raises(QuantityError, match="regular expression"):
            Quantity(text)
    with pytest.raises(QuantityError) as err:
        Quantity("e-10")
    assert err.value.reason == ERR_NUMERIC
    with pytest.raises(TypeError):
        Quantity.parse(5)
    with pytest.raises(TypeError):
        Quantity(1.5)
    with pytest.raises(ValueError, match="unknown quantity format"):
        Quantity(1, format="Binary")


@pytest.mark.parametrize(
    ("text", "value", "milli"),
    [
        ("0.5", 1, 500),
        ("1.5m", 1, 2),
        ("100n", 1, 1),
        ("1.1Ki", 1127, 1126400),
        ("-0.5", -1, -500),
        ("-1.5m", -1, -2),
        ("-1.1Ki", -1127, -1126400),
        ("-0.1n", -1, -1),
        ("9Ei", 2**63 - 1, (2**63 - 1) * 1000),
        ("12E", 12 * 10**18, 12 * 10**21),
    ],
)
def test_value_and_milli_round_away_from_zero(text, value, milli):
    q = Quantity(text)
    assert (q.value(), q.milli_value()) == (value, milli)


def test_is_zero_and_sign():
    assert Quantity("0Ki").is_zero() and not Quantity("1n").is_zero()
    assert [Quantity(s).sign() for s in ("-1n", "0", "1n")] == [-1, 0, 1]
    assert not Quantity("0") and Quantity("1n")


def test_format_override_and_repr():
    q = Quantity("5120", format="BinarySI")
    assert q.format == "BinarySI" and str(q) == "5Ki"
    assert eval(repr(q)) == q and eval(repr(q)).format == "BinarySI"  # noqa: S307
    assert str(Quantity(Quantity("1E3"), format="DecimalSI")) == "1k"  # re-formatting drops the cache
    assert str(Quantity(Quantity("1E3"))) == "1E3"


def test_immutable_and_slotted():
    q = Quantity("1Gi")
    with pytest.raises(AttributeError):
        q._coef = 5
    with pytest.raises(AttributeError):
        q.format = "DecimalSI"
    assert not hasattr(q, "__dict__")
    assert pickle.loads(pickle.dumps(Quantity("001"))).__str__() == "001"


def test_from_json_trims_like_the_api_server():
    assert str(Quantity.from_json(" 1Gi\n")) == "1Gi"
    assert str(Quantity.from_json(1.5)) == "1500m"
    assert str(Quantity.from_json(10)) == "10"
    with pytest.raises(ValueError, match="quantities must match"):
        Quantity.parse(" 1Gi")
    with pytest.raises(TypeError):
        Quantity.from_json(True)


def test_extreme_magnitudes_stay_cheap():
    assert str(Quantity("1e999999999")) == "1e999999999"
    assert str(Quantity("1e-999999999")) == "1e-9"
    with pytest.raises(OverflowError):
        Quantity("1e999999999").value()
    long = "1" + "0" * 5000
    assert Quantity(long).as_fraction() == 10**5000
    assert str(Quantity("0." + "0" * 5000 + "1")) == "1n"
    assert str(Quantity(Quantity(long).as_fraction(), format="DecimalExponent")) == "100e4998"


def test_round_up():
    assert str(Quantity("9.01").round_up(-1)) == "9100m"
    assert str(Quantity("-9.01").round_up(0)) == "-10"
    q = Quantity("9.01")
    assert q.round_up(-2) is q


def test_add_sub_round_trip_cancels():
    # upstream TestAddSubRoundTrip / TestAddSubRoundTripAcrossScales / TestNegateRoundTrip
    rng = random.Random(20260723)
    for k in range(-10, 11):
        parts = [Quantity.from_scaled(rng.getrandbits(63), k) for _ in range(100)]
        total = sum(parts, Quantity(0))
        for p in parts:
            total -= p
        assert total.is_zero()
        assert all(-(-p) == p for p in parts)  # noqa: B002 - negating twice is the point
    mixed = [Quantity.from_scaled(j, j % 20 - 10) for j in (rng.getrandbits(63) for _ in range(100))]
    assert (sum(mixed) - sum(reversed(mixed))).is_zero()


def test_canonical_strings_reparse_to_the_same_value():
    rng = random.Random(7)
    for _ in range(2000):
        fmt = rng.choice(["DecimalSI", "BinarySI", "DecimalExponent"])
        q = Quantity.from_scaled(rng.randrange(-(10**12), 10**12), rng.randrange(-9, 7), fmt)
        again = Quantity(str(q))
        assert again == q, (q, str(q))
        # BinarySI 1000 prints "1000", which reads back as DecimalSI "1k": stable after one trip
        assert str(Quantity(str(again))) == str(again)
