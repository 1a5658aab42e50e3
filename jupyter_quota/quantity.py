"""Kubernetes ``resource.Quantity``, exactly as apimachinery behaves.

Public contract::

    q = Quantity("1.5Gi")          # also Quantity(3), Quantity(Fraction), Quantity(other_q)
    str(q) == "1536Mi"             # canonical form, as the API server emits it
    q.format                       # "DecimalSI" | "BinarySI" | "DecimalExponent"
    q.value() / q.milli_value()    # ints, rounded up (away from zero) like Value()/MilliValue()
    q.as_fraction()                # exact value as fractions.Fraction (after nano rounding)
    q + r, q - r, -q, q * int      # exact; result keeps the left operand's format
    ==, <, <=, >, >=, hash         # by exact value (Cmp); str and int operands are parsed
    q.is_zero(), q.sign()          # sign() in {-1, 0, 1}
    Quantity.parse(s)              # same as Quantity(s)
    parse_quantity(s)              # same, for symmetry with the kubernetes client
    Quantity("1K")                 # ValueError naming the input and the upstream error text
    Quantity.from_milli(1500)      # NewMilliQuantity; also Quantity.from_scaled(n, scale)

Mirrors ``k8s.io/apimachinery/pkg/api/resource`` (quantity.go, amount.go, suffix.go) at
apimachinery commit eed236ceee2c19c2753a3d93ac0631dc20750454, checked against upstream's own
table-driven tests (tests/data/quantity_cases.tsv). Values are exact (int mantissa and power
of ten, never float) and always on the nano grid: parsing rounds non-zero values up, away from
zero, to the next 10^-9; only BinarySI input is capped at 2^63-1; BinarySI input with
0 < |v| < 1 becomes DecimalSI. ``str()`` reproduces upstream quirks on purpose: input that
"looks canonical" on Go's int64 fast path is re-emitted verbatim (``"001"``, ``"1e3"``,
``"100.035k"``, ``"+1"``), and magnitudes past the suffix tables (>= 10^21 DecimalSI, >= 2^70
BinarySI) lose their suffix (``"1000E"`` prints ``"1"``; kubernetes/kubernetes#141249).
Exponents wrap to int32 as in Go (``"1e4294967296"`` is 1).

Deliberate deviations, where upstream returns garbage: ``value()``/``milli_value()`` are exact
Python ints (Go's int64 silently wraps, e.g. ``"9Ei"`` MilliValue -1000, ``"12E"`` Value 0) and
negatives always round away from zero (Go's big-decimal path gets some wrong: ``"-1.1Ki"``
Value -1125, ``"-0.1n"`` Value 1); a computation needing 10^100000 or more raises OverflowError instead of
allocating it; ``format`` must be one of the three names (Go treats unknown ones as
DecimalExponent).

``kubernetes.utils.parse_quantity`` is not a substitute: it returns a bare ``decimal.Decimal``
(no format, no canonical string, no nano rounding: ``"0.1n"`` gives 1E-10 where the API server
stores ``"1n"``; no BinarySI cap: ``"9Ei"``), and its grammar is Python's ``Decimal`` plus one
suffix letter, so it accepts what the API server rejects (``"1K"`` -> 1000, ``" 1"``, ``"1_000"``,
``"NaN"``, ``"1e3k"``, floats) and rejects what it accepts (``"."``, ``"e3"``, ``"Ki"`` are 0).
"""

from __future__ import annotations

import re
import sys
from decimal import Decimal
from fractions import Fraction

__all__ = [
    "BINARY_SI",
    "DECIMAL_EXPONENT",
    "DECIMAL_SI",
    "ERR_FORMAT_WRONG",
    "ERR_NUMERIC",
    "ERR_SUFFIX",
    "MAX_MILLI_VALUE",
    "Quantity",
    "QuantityError",
    "parse_quantity",
]

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"
_FORMATS = (DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT)

# Upstream's error texts (quantity.go ErrFormatWrong / ErrNumeric / ErrSuffix), verbatim.
ERR_FORMAT_WRONG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"

MAX_INT64 = (1 << 63) - 1
MAX_MILLI_VALUE = MAX_INT64 // 1000  # math.go MaxMilliValue, LimitRanger's milli guard


class QuantityError(ValueError):
    """A string the API server would reject; ``.input`` and upstream's ``.reason``."""

    def __init__(self, text: str, reason: str):
        super().__init__(f"{reason}: {text!r}")
        self.input = text
        self.reason = reason


class Quantity:
    """An immutable Kubernetes quantity: exact value, remembered format, canonical ``str``.

    ``Quantity(value, format=None)`` takes a quantity string, an int, a ``Fraction`` or
    ``Decimal`` (rounded up to nano like parsed input), or another Quantity. ``format``
    overrides the remembered format (default for numbers: DecimalSI); floats are refused.
    """

    # value == _coef * 10**_exp; _coef has no factor 10 (zero is (0, 0)); _exp >= -9.
    # _s is the verbatim input kept by Go's fast path, or None.
    __slots__ = ("_coef", "_exp", "_format", "_s")

    def __new__(cls, value, format: str | None = None):
        if isinstance(value, str):
            value = _parse(value)
            if format is None or format == value._format:
                return value
        if format is None:
            format = value._format if isinstance(value, Quantity) else DECIMAL_SI
        elif format not in _FORMATS:
            raise ValueError(f"unknown quantity format {format!r}; expected one of {_FORMATS}")
        if isinstance(value, Quantity):
            keep = value._s if format == value._format else None
            return _make(value._coef, value._exp, format, keep)
        if isinstance(value, (bool, float)):
            raise TypeError(f"Quantity needs an exact number or a string, not {value!r}")
        if isinstance(value, int):
            return _make(value, 0, format)
        if isinstance(value, Fraction):
            return _from_fraction(value, format)
        if isinstance(value, Decimal):
            if not value.is_finite():
                raise ValueError(f"Quantity needs a finite number, not {value!r}")
            sign, digits, exp = value.as_tuple()
            coef = _digits_to_int("".join(map(str, digits)))
            c, e = _round_nano(coef, exp)
            return _make(-c if sign else c, e, format)
        raise TypeError(f"cannot make a Quantity from {type(value).__name__}")

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """``resource.ParseQuantity``: parse a quantity string or raise QuantityError."""
        if not isinstance(text, str):
            raise TypeError(f"quantity must be a str, not {type(text).__name__}")
        return _parse(text)

    @classmethod
    def from_json(cls, value: str | int | float) -> Quantity:
        """``UnmarshalJSON``: a JSON string or number from an API object or manifest.

        Unlike ``parse``, surrounding whitespace is trimmed, as the API server does
        (``" 1Gi"`` is accepted in a JSON body). Numbers are read through their text form.
        """
        if isinstance(value, bool):
            raise TypeError("a quantity cannot be a boolean")
        if isinstance(value, float):
            value = repr(value)  # the shortest text that round-trips, as a JSON encoder sends
        elif isinstance(value, int):
            value = str(value)
        elif not isinstance(value, str):
            raise TypeError(f"quantity must be a str or number, not {type(value).__name__}")
        return _parse(value.strip(_GO_SPACE))

    @classmethod
    def from_milli(cls, milli: int, format: str = DECIMAL_SI) -> Quantity:
        """``NewMilliQuantity``: ``milli`` thousandths, e.g. from_milli(1500) is "1500m"."""
        return cls.from_scaled(milli, -3, format)

    @classmethod
    def from_scaled(cls, value: int, scale: int, format: str = DECIMAL_SI) -> Quantity:
        """``NewScaledQuantity``: ``value * 10**scale`` (rounded up to nano below 1n)."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("from_scaled needs an int value")
        if format not in _FORMATS:
            raise ValueError(f"unknown quantity format {format!r}; expected one of {_FORMATS}")
        if scale >= -9:
            return _make(value, scale, format)
        c, e = _round_nano(abs(value), scale)
        return _make(-c if value < 0 else c, e, format)

    # -- read-only views ---------------------------------------------------------------

    @property
    def format(self) -> str:
        """``DecimalSI``, ``BinarySI`` or ``DecimalExponent``; drives ``str()``."""
        return self._format

    def __setattr__(self, name, value):
        raise AttributeError("Quantity is immutable")

    __delattr__ = __setattr__

    def __reduce__(self):
        return (_make, (self._coef, self._exp, self._format, self._s))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def is_zero(self) -> bool:
        return self._coef == 0

    def sign(self) -> int:
        return (self._coef > 0) - (self._coef < 0)

    def __bool__(self) -> bool:
        return self._coef != 0

    def as_fraction(self) -> Fraction:
        """The exact value."""
        if self._exp >= 0:
            return Fraction(self._coef * _pow10(self._exp))
        return Fraction(self._coef, _pow10(-self._exp))

    def value(self) -> int:
        """``Value()``: whole units, rounded up away from zero (exact, never wraps)."""
        return self.scaled_value(0)

    def milli_value(self) -> int:
        """``MilliValue()``: thousandths, rounded up away from zero (exact, never wraps)."""
        return self.scaled_value(-3)

    def scaled_value(self, scale: int) -> int:
        """``ScaledValue(scale)``: the value in units of 10**scale, rounded away from zero."""
        shift = self._exp - scale
        if shift >= 0:
            return self._coef * _pow10(shift)
        q, r = divmod(abs(self._coef), _pow10(-shift))
        q += r != 0
        return -q if self._coef < 0 else q

    def round_up(self, scale: int) -> Quantity:
        """``RoundUp(scale)``: round away from zero to a multiple of 10**scale.

        Returns ``self`` when nothing is lost, so ``q.round_up(s) == q`` tells exactness.
        """
        if self._exp >= scale:  # always true below nano: values live on the nano grid
            return self
        q, r = divmod(abs(self._coef), _pow10(scale - self._exp))
        if r == 0:
            return self
        q += 1
        return _make(-q if self._coef < 0 else q, scale, self._format)

    # -- text ----------------------------------------------------------------------------

    def __str__(self) -> str:
        if self._s is not None:
            return self._s
        return _canonical(self._coef, self._exp, self._format)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r}, format={self._format!r})"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    # -- arithmetic (Go's Add/Sub/Neg/Mul; results are never cached strings) --------------

    def __add__(self, other):
        other = _coerce(other)
        if other is None:
            return NotImplemented
        c, e = _add(self._coef, self._exp, other._coef, other._exp)
        return _make(c, e, other._format if self._coef == 0 else self._format)

    def __radd__(self, other):  # int + q, and so sum(quantities)
        left = _coerce(other)
        return NotImplemented if left is None else left + self

    def __sub__(self, other):
        other = _coerce(other)
        if other is None:
            return NotImplemented
        c, e = _add(self._coef, self._exp, -other._coef, other._exp)
        return _make(c, e, other._format if self._coef == 0 else self._format)

    def __rsub__(self, other):
        left = _coerce(other)
        return NotImplemented if left is None else left - self

    def __neg__(self):
        return _make(-self._coef, self._exp, self._format)

    def __pos__(self):
        return self

    def __abs__(self):
        return -self if self._coef < 0 else self

    def __mul__(self, other):
        if isinstance(other, bool) or not isinstance(other, int):
            return NotImplemented
        return _make(self._coef * other, self._exp, self._format)

    __rmul__ = __mul__

    # -- comparison (Go's Cmp: exact) -------------------------------------------------------

    def cmp(self, other) -> int:
        """-1, 0 or 1 as ``Quantity.Cmp``; ``other`` may be a str or int."""
        o = _coerce(other)
        if o is None:
            raise TypeError(f"cannot compare Quantity with {type(other).__name__}")
        return _cmp(self._coef, self._exp, o._coef, o._exp)

    def __eq__(self, other):
        if isinstance(other, Quantity):
            return self._coef == other._coef and self._exp == other._exp
        try:
            o = _coerce(other)
        except ValueError:
            return False  # an unparseable string equals no quantity
        if o is None:
            return NotImplemented
        return self._coef == o._coef and self._exp == o._exp

    def __lt__(self, other):
        o = _coerce(other)
        return NotImplemented if o is None else _cmp(self._coef, self._exp, o._coef, o._exp) < 0

    def __le__(self, other):
        o = _coerce(other)
        return NotImplemented if o is None else _cmp(self._coef, self._exp, o._coef, o._exp) <= 0

    def __gt__(self, other):
        o = _coerce(other)
        return NotImplemented if o is None else _cmp(self._coef, self._exp, o._coef, o._exp) > 0

    def __ge__(self, other):
        o = _coerce(other)
        return NotImplemented if o is None else _cmp(self._coef, self._exp, o._coef, o._exp) >= 0

    def __hash__(self):
        # Python's numeric hash of coef * 10**exp, so hash(Quantity(5)) == hash(5).
        h = abs(self._coef) % _HASH_P * pow(10, self._exp, _HASH_P) % _HASH_P
        h = -h if self._coef < 0 else h
        return -2 if h == -1 else h


def parse_quantity(text: str) -> Quantity:
    """Parse a quantity string (named like ``kubernetes.utils.parse_quantity``)."""
    return Quantity.parse(text)


# ---------------------------------------------------------------------------------------
# Parsing (quantity.go ParseQuantity / parseQuantityString)

# Equivalent to Go's hand-written scanner: sign, leading zeros, integer digits, optional
# "." and fraction digits, suffix letters, optional sign, digits. Everything is optional,
# hence "." "-" "e3" "Ki" scan (and parse as 0); ASCII digits only.
_SCAN = re.compile(r"([+-]?)(0*)([0-9]*)(?:(\.)([0-9]*))?([eEinumkKMGTP]*[-+]?[0-9]*)")

# suffix -> (base, exponent, format), suffix.go
_SUFFIXES = {
    "": (10, 0, DECIMAL_SI),
    "n": (10, -9, DECIMAL_SI),
    "u": (10, -6, DECIMAL_SI),
    "m": (10, -3, DECIMAL_SI),
    "k": (10, 3, DECIMAL_SI),
    "M": (10, 6, DECIMAL_SI),
    "G": (10, 9, DECIMAL_SI),
    "T": (10, 12, DECIMAL_SI),
    "P": (10, 15, DECIMAL_SI),
    "E": (10, 18, DECIMAL_SI),
    "Ki": (2, 10, BINARY_SI),
    "Mi": (2, 20, BINARY_SI),
    "Gi": (2, 30, BINARY_SI),
    "Ti": (2, 40, BINARY_SI),
    "Pi": (2, 50, BINARY_SI),
    "Ei": (2, 60, BINARY_SI),
}
# Go's strings.TrimSpace (unicode.IsSpace), which differs a little from str.strip().
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + ("\u2028\u2029\u202f\u205f\u3000")
_DEC_SUFFIX = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BIN_SUFFIX = {1: "Ki", 2: "Mi", 3: "Gi", 4: "Ti", 5: "Pi", 6: "Ei"}


def _parse(text: str) -> Quantity:
    if not text:
        raise QuantityError(text, ERR_FORMAT_WRONG)
    if text == "0":
        return _ZERO_DECIMAL
    m = _SCAN.fullmatch(text)
    if m is None:
        raise QuantityError(text, ERR_FORMAT_WRONG)
    sign, zeros, num, _dot, denom, suffix = m.groups()
    negative = sign == "-"
    denom = denom or ""
    has_digit = bool(zeros or num or denom)
    num = num or "0"
    spec = _SUFFIXES.get(suffix) or _exponent_suffix(text, suffix)
    base, exponent, fmt = spec

    # Go's int64 fast path: decides whether the input string is kept verbatim.
    if base == 10:
        fast = len(num) + len(denom) <= 18
        mantissa, scale = 1, exponent - len(denom)
    else:
        fast = not denom and 15 - len(num) - exponent * 3 // 10 - 1 >= 0
        mantissa, scale = 1 << exponent, -len(denom)
    if fast and scale >= -9:
        shifted = num + denom
        digits = int(shifted)
        result = digits * mantissa
        if result <= MAX_INT64:
            if base == 2:
                keep = exponent % 10 == 0 and digits & 7 != 0
            else:
                keep = scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
            return _make(-result if negative else result, scale, fmt, text if keep else None)

    # inf.Dec path: exact value, rounded up to nano, BinarySI capped and maybe re-formatted.
    if not has_digit:  # inf.Dec.SetString finds no digit in e.g. ".e-10"
        raise QuantityError(text, ERR_NUMERIC)
    coef = _digits_to_int(num + denom)
    if base == 10:
        coef, exp = _round_nano(coef, exponent - len(denom))
    else:
        coef, exp = _round_nano(coef << exponent, -len(denom))
        if _cmp(coef, exp, MAX_INT64, 0) > 0:
            coef, exp = MAX_INT64, 0
        if coef and _cmp(coef, exp, 1, 0) < 0:
            fmt = DECIMAL_SI
    return _make(-coef if negative else coef, exp, fmt)


def _exponent_suffix(text: str, suffix: str) -> tuple[int, int, str]:
    """``e<int>`` / ``E<int>``; Go parses an int64 and then truncates it to int32."""
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[0] in "+-" else digits
        stripped = body.lstrip("0")
        if body and body.isdigit() and len(stripped) <= 19:
            value = int(digits)
            if -(1 << 63) <= value <= MAX_INT64:
                value = (value + (1 << 31)) % (1 << 32) - (1 << 31)
                return 10, value, DECIMAL_EXPONENT
    raise QuantityError(text, ERR_SUFFIX)


# ---------------------------------------------------------------------------------------
# Exact arithmetic on (coef, exp) pairs

_HASH_P = sys.hash_info.modulus
_MAX_POW10 = 100_000  # refuse to build 10**n beyond this (Go would wrap or allocate)
_POW10 = [10**i for i in range(64)]


def _pow10(n: int) -> int:
    if n < 64:
        return _POW10[n]
    if n > _MAX_POW10:
        raise OverflowError(f"quantity magnitude 10^{n} is out of range")
    return 10**n


def _make(coef: int, exp: int, fmt: str, keep: str | None = None) -> Quantity:
    """Build a Quantity from coef * 10**exp (exp >= -9), normalising trailing zeros."""
    if coef == 0:
        exp = 0
    else:
        while coef % 10 == 0:
            coef //= 10
            exp += 1
    q = object.__new__(Quantity)
    object.__setattr__(q, "_coef", coef)
    object.__setattr__(q, "_exp", exp)
    object.__setattr__(q, "_format", fmt)
    object.__setattr__(q, "_s", keep)
    return q


def _round_nano(coef: int, exp: int) -> tuple[int, int]:
    """Round |coef| * 10**exp up (away from zero) to a multiple of 10**-9."""
    if exp >= -9 or coef == 0:
        return coef, exp
    shift = -9 - exp
    if shift > _ndigits(coef):  # below 1n: rounds up to exactly 1n
        return (1 if coef > 0 else -1), -9
    q, r = divmod(abs(coef), _pow10(shift))
    q += r != 0
    return (-q if coef < 0 else q), -9


def _from_fraction(value: Fraction, fmt: str) -> Quantity:
    nanos, rest = divmod(abs(value.numerator) * 10**9, value.denominator)
    nanos += rest != 0
    return _make(-nanos if value < 0 else nanos, -9, fmt)


def _add(c1: int, e1: int, c2: int, e2: int) -> tuple[int, int]:
    if c2 == 0:
        return c1, e1
    if c1 == 0:
        return c2, e2
    if e1 >= e2:
        return c1 * _pow10(e1 - e2) + c2, e2
    return c1 + c2 * _pow10(e2 - e1), e1


def _cmp(c1: int, e1: int, c2: int, e2: int) -> int:
    if e1 != e2 and c1 and c2:
        if (c1 > 0) != (c2 > 0):
            return 1 if c1 > 0 else -1
        if abs(e1 - e2) > 64:  # compare magnitudes without building huge powers
            a1, a2 = _ndigits(c1) + e1, _ndigits(c2) + e2
            if a1 != a2:
                bigger = 1 if a1 > a2 else -1
                return bigger if c1 > 0 else -bigger
        if e1 > e2:
            c1, e1 = c1 * _pow10(e1 - e2), e2
        else:
            c2, e2 = c2 * _pow10(e2 - e1), e1
    if e1 != e2:  # one side is zero
        c1, c2 = (c1 > 0) - (c1 < 0), (c2 > 0) - (c2 < 0)
    return (c1 > c2) - (c1 < c2)


def _coerce(other) -> Quantity | None:
    """Quantity, str (parsed) or int operands; None for anything else."""
    if isinstance(other, Quantity):
        return other
    if isinstance(other, str):
        return _parse(other)
    if isinstance(other, int) and not isinstance(other, bool):
        return _make(other, 0, DECIMAL_SI)
    return None


# ---------------------------------------------------------------------------------------
# Canonical form (quantity.go CanonicalizeBytes, amount.go AsCanonical*Bytes)


def _canonical(coef: int, exp: int, fmt: str) -> str:
    if coef == 0:
        return "0"
    if fmt == BINARY_SI and exp >= 0:
        n = coef * _pow10(exp)
        if not -1024 < n < 1024:
            times = 0
            while n % 1024 == 0:
                n //= 1024
                times += 1
            # Past "Ei" Go finds no suffix and silently prints the bare mantissa.
            return _int_to_str(n) + _BIN_SUFFIX.get(times, "")
    # DecimalSI, DecimalExponent, and BinarySI values that are small or not integers.
    shift = exp % 3
    coef, exp = coef * _POW10[shift], exp - shift
    if fmt == DECIMAL_EXPONENT:
        return _int_to_str(coef) + (f"e{exp}" if exp else "")
    # Past "E" (10^18) Go finds no suffix and silently prints the bare mantissa.
    return _int_to_str(coef) + _DEC_SUFFIX.get(exp, "")


# Python refuses int<->str conversions past 4300 digits; Decimal has no such limit.


def _digits_to_int(digits: str) -> int:
    return int(digits) if len(digits) < 4000 else int(Decimal(digits))


def _int_to_str(n: int) -> str:
    return str(n) if n.bit_length() < 13000 else str(Decimal(n))


def _ndigits(n: int) -> int:
    n = abs(n)
    if n.bit_length() < 13000:
        return len(str(n))
    guess = int(n.bit_length() * 0.30102999566398120)  # digits of 2**bits, +-1
    return guess + 1 if n >= 10**guess else guess


_ZERO_DECIMAL = _make(0, 0, DECIMAL_SI, "0")
