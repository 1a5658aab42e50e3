"""How big a number from a user or an admin may be: checked where input enters, before any arithmetic.

Magnitude: Kubernetes carries quantities in int64. apimachinery's ``resource.Quantity`` names
2^63-1 its "largest (in magnitude) number allowed" (``maxAllowed`` in ``math.go``, the cap on
parsed BinarySI values), and ResourceQuota, LimitRanger and the scheduler read quantities
through the int64 ``Value()``/``MilliValue()``. Our arithmetic (``quantity``) is exact and would
carry more, but a value past int64 is a typo or an attack: ``"1e200000"`` made every later sum
build a 200,000-digit number and then refuse (OverflowError), stopping scheduling for every team.

Length: checked before parsing, so a 100,000-digit string costs a ``len()`` instead of seconds of
big-number work. Any quantity within the bound is written in at most 30 characters (sign, 19
integer digits, a point, 9 digits down to nano); ``MAX_QUANTITY_CHARS`` leaves room for leading
zeros and suffixes. Whole-number command-line arguments (``--max_length`` ...) get the same int64
bound: ms-swift hands them to torch, whose sizes are int64.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping

from .errors import InvalidRequest
from .quantity import MAX_INT64, Quantity

#: apimachinery's maxAllowed: the largest magnitude a quantity may have
MAX_QUANTITY = MAX_INT64
MAX_QUANTITY_CHARS = 64
MAX_INT_ARG = MAX_INT64
#: 19 digits of int64, a sign, and room for a few leading zeros
MAX_INT_ARG_CHARS = 24
_SHOWN_CHARS = 40


def quantity(raw, where: str, unreadable: str | None = None) -> Quantity:
    """A Quantity from untrusted JSON (a string or a number), bounded; else InvalidRequest naming ``where``.

    Parse errors keep upstream's text (``quantities must match the regular expression ...``), or
    say ``unreadable`` where the caller gives one.
    """
    text = quantity_text(raw, where)
    try:
        q = Quantity(text)
    except ValueError as err:
        message = unreadable or f"{where}: Invalid value: {shown(text)}: {getattr(err, 'reason', err)}"
        raise InvalidRequest(message) from None
    check_magnitude(q, where, text)
    return q


def quantity_text(raw, where: str) -> str:
    """The text of a JSON quantity, refused before any parsing when it is the wrong type or too long."""
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        raise InvalidRequest(
            f'{where}: Invalid value: {shown(raw)}: must be a quantity string like "4", "500m" or "32Gi"'
        )
    if isinstance(raw, int) and abs(raw) > MAX_QUANTITY:  # a JSON integer: no need to print its digits
        raise InvalidRequest(_too_large(where, raw))
    text = raw if isinstance(raw, str) else repr(raw)  # repr: the shortest text of a float, or an int's digits
    if len(text) > MAX_QUANTITY_CHARS:
        raise InvalidRequest(
            f"{where}: Invalid value: {shown(text)}: a quantity of {len(text)} characters is too "
            f"long; at most {MAX_QUANTITY_CHARS} are accepted (write a suffix or an exponent, "
            'e.g. "64Gi" or "1e9")'
        )
    return text


def check_magnitude(q: Quantity, where: str, text: str | None = None) -> None:
    """Refuse |q| > 2^63-1, cheaply (no big power of ten is built)."""
    if abs(q) > MAX_QUANTITY:
        raise InvalidRequest(_too_large(where, text if text is not None else str(q)))


def check_raised(hard: Mapping, extras: Iterable[tuple[str, Mapping]], where: str) -> None:
    """Refuse a hard quota that, with every extra added at once, could pass 2^63-1.

    ``extras`` are ``(what, {resource: quantity})`` pairs (a window, an increase); all of them are
    counted whatever the time, since any may be in force together. Each value was bounded where it
    entered, so the sums are cheap. A raised quota past the bound could not be written as a
    ResourceQuota, and once stopped every team's scheduling (issue 25).
    """
    for resource, value in hard.items():
        total, named = Quantity(str(value)), []
        for what, extra in extras:
            if resource in extra:
                total = total + Quantity(str(extra[resource]))
                named.append(what)
        if named and abs(total) > MAX_QUANTITY:
            raise InvalidRequest(
                f"{where}: hard[{resource}] {shown(str(value))} plus the extras of {', '.join(named)} "
                f"can reach {total}: must be no more than {MAX_QUANTITY} (2^63-1, the largest quantity "
                "Kubernetes carries); lower the extras"
            )


def clamp(text: str) -> str:
    """A stored quantity string, made safe to add up: past the bound (or too long to parse) it
    counts as the bound, so a job stored by an older version still holds its quota, finitely."""
    if len(text) > MAX_QUANTITY_CHARS:
        return str(MAX_QUANTITY)
    return _clamp_short(text)


@functools.lru_cache(maxsize=1024)  # a ledger holds few distinct strings ("2", "16Gi"); admission reads them all
def _clamp_short(text: str) -> str:
    try:
        q = Quantity(text)
    except ValueError:
        return text  # unparseable text is reported by whoever parses it, as before
    if abs(q) <= MAX_QUANTITY:
        return text
    return str(MAX_QUANTITY) if q.sign() > 0 else str(-MAX_QUANTITY)


def clamp_pod_spec(spec) -> None:
    """Clamp, in place, every quantity of a pod spec read back from storage or a cluster: the
    ``overhead`` and each container's and init container's resources. Malformed parts are left
    for whoever validates them."""
    if not isinstance(spec, dict):
        return
    clamp_map(spec.get("overhead"))
    for container in [*_dicts(spec.get("containers")), *_dicts(spec.get("initContainers"))]:
        resources = container.get("resources")
        if isinstance(resources, dict):
            for values in resources.values():
                clamp_map(values)


def clamp_map(values) -> None:
    """Clamp, in place, each value of a ``{resource: quantity}`` map (anything else is left)."""
    if isinstance(values, dict):
        for name, text in values.items():
            values[name] = clamp(str(text))


def _dicts(items) -> list[dict]:
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def whole_number(text: str, label: str) -> int:
    """A whole-number argument (``--max_length 4096``): at most int64, its length checked before ``int()``."""
    if len(text.strip()) > MAX_INT_ARG_CHARS:
        raise InvalidRequest(
            f"{label} {shown(text)}: a number of {len(text.strip())} characters is too large; "
            f"at most {MAX_INT_ARG} is accepted"
        )
    try:
        value = int(text)
    except ValueError:
        raise InvalidRequest(f"{label} {shown(text)}: expected a whole number") from None
    if abs(value) > MAX_INT_ARG:
        raise InvalidRequest(f"{label} {value}: too large; at most {MAX_INT_ARG} is accepted")
    return value


def shown(value) -> str:
    """``value`` as JSON, long strings cut to their first characters (a message stays readable)."""
    if isinstance(value, str) and len(value) > _SHOWN_CHARS:
        return json.dumps(value[:_SHOWN_CHARS] + "...") + f" ({len(value)} characters)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"a number of about {int(value.bit_length() * 0.30103) + 1} digits"
    if isinstance(value, (dict, list)):
        text = json.dumps(value)
        return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."
    return json.dumps(value)


def _too_large(where: str, value) -> str:
    return (
        f"{where}: Invalid value: {shown(value)}: must be no more than {MAX_QUANTITY} "
        "(2^63-1, the largest quantity Kubernetes carries)"
    )
