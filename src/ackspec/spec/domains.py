"""The domain grammar of requirement parameters: what values a rule is stated over.

A parameter's ``domain`` in the catalogue YAML is either a YAML list (an **enumeration** of the
allowed values) or a string in this grammar::

    domain      := alternative ( " or " alternative )*
    alternative := range | interval | value | pattern
    range       := bound ".." [bound]            integers, both ends included: 1..  0..9  -1..
    interval    := ("(" | "[") bound ", " (bound | "..") (")" | "]")
                                                 real numbers: (0, 1]  [0.5, 2)  (0, ..)
    value       := bound                          one value: -1
    pattern     := "/" regex "/"                  strings matching the regex in full: /[0-9]+,[0-9]+/
    bound       := number [unit]                  1  0.25  30s  10MiB
    unit        := ms | s | min                   durations
                 | B | bytes | KiB | MiB | GiB    sizes

A bound's unit is converted to the parameter's own ``unit`` (so ``(0, 30s]`` of a parameter in ``ms``
is ``(0, 30000]``); a bound without a unit is already in it. ``..`` alone on the upper side means
unbounded. Examples from the catalogue: ``1..`` (a prefetch), ``(0, 1]`` (a ratio), ``-1 or 1..``
(a window size where -1 disables), ``(0, ..)`` (a round-trip time).

The grammar is checked twice: ``schema/requirement.schema.json`` rejects strings that cannot be
domains (a pattern), and :func:`parse_domain` (run by the catalogue loader) rejects the rest with
one line naming the problem. :mod:`ackspec.conformance.strategies` turns a parsed domain into a
hypothesis strategy, so widening a domain in the YAML widens the tests that draw from it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

DURATION_UNITS: dict[str, float] = {"ms": 0.001, "s": 1.0, "min": 60.0}
SIZE_UNITS: dict[str, float] = {"B": 1.0, "bytes": 1.0, "KiB": 1024.0, "MiB": 1024.0 ** 2, "GiB": 1024.0 ** 3}
UNITS: dict[str, float] = {**DURATION_UNITS, **SIZE_UNITS}

_NUMBER = r"-?[0-9]+(?:\.[0-9]+)?"
_UNIT = "|".join(sorted(UNITS, key=len, reverse=True))
_BOUND = rf"{_NUMBER}(?:{_UNIT})?"
_RANGE = re.compile(rf"(?P<low>{_BOUND})\.\.(?P<high>{_BOUND})?")
_INTERVAL = re.compile(rf"(?P<open>[(\[])(?P<low>{_BOUND}), (?P<high>{_BOUND}|\.\.)(?P<close>[)\]])")
_VALUE = re.compile(_BOUND)
_PATTERN = re.compile(r"/(?P<regex>.+)/")
_SPLIT_BOUND = re.compile(rf"(?P<number>{_NUMBER})(?P<unit>{_UNIT})?")

SCHEMA_PATTERN = rf"^(?:{_BOUND}\.\.(?:{_BOUND})?|[(\[]{_BOUND}, (?:{_BOUND}|\.\.)[)\]]|{_BOUND}|/.+/)" \
                 rf"(?: or (?:{_BOUND}\.\.(?:{_BOUND})?|[(\[]{_BOUND}, (?:{_BOUND}|\.\.)[)\]]|{_BOUND}|/.+/))*$"
"""The JSON-schema pattern of a domain string (the shape only; :func:`parse_domain` checks the rest)."""


class DomainError(ValueError):
    """A domain that does not parse, or does not fit its parameter's type or unit: one readable line."""


@dataclass(frozen=True, slots=True)
class Enumeration:
    """Exactly these values."""

    values: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class IntRange:
    """Integers from ``low`` to ``high``, both included; ``high`` None: unbounded."""

    low: int
    high: int | None = None


@dataclass(frozen=True, slots=True)
class Interval:
    """Real numbers between ``low`` and ``high`` (None: unbounded), each end open or closed."""

    low: float
    high: float | None
    low_open: bool
    high_open: bool


@dataclass(frozen=True, slots=True)
class Pattern:
    """Strings the regular expression matches in full."""

    regex: str


@dataclass(frozen=True, slots=True)
class Union:
    """Any value of any alternative."""

    alternatives: tuple[Domain, ...]


Domain = Enumeration | IntRange | Interval | Pattern | Union


def parse_domain(raw: str | Sequence[Any], kind: str, unit: str | None = None) -> Domain:
    """The domain of a parameter of type ``kind`` (and ``unit``), or :class:`DomainError`."""
    if not isinstance(raw, str):
        return Enumeration(tuple(raw))
    parts = [_alternative(text.strip(), kind, unit) for text in raw.split(" or ")]
    return parts[0] if len(parts) == 1 else Union(tuple(parts))


def _alternative(text: str, kind: str, unit: str | None) -> Domain:
    if match := _PATTERN.fullmatch(text):
        if kind != "string":
            raise DomainError(f"domain {text!r}: a pattern needs a string parameter, not {kind}")
        try:
            re.compile(match["regex"])
        except re.error as exc:
            raise DomainError(f"domain {text!r}: not a regular expression ({exc})") from None
        return Pattern(match["regex"])
    if kind == "string":
        raise DomainError(f"domain {text!r}: a string parameter's domain is a list or a /regex/")
    if kind not in ("integer", "number", "duration"):
        raise DomainError(f"domain {text!r}: a range or interval needs a numeric parameter, not {kind}")
    if match := _RANGE.fullmatch(text):
        low, high = _bound(match["low"], unit), _bound(match["high"], unit) if match["high"] else None
        if not float(low).is_integer() or (high is not None and not float(high).is_integer()):
            raise DomainError(f"domain {text!r}: a range a..b is of integers; write an interval for reals")
        if high is not None and high < low:
            raise DomainError(f"domain {text!r}: empty range ({high} < {low})")
        return IntRange(int(low), None if high is None else int(high))
    if match := _INTERVAL.fullmatch(text):
        return _interval(text, match, kind, unit)
    if _VALUE.fullmatch(text):
        value = _bound(text, unit)
        return Enumeration((int(value) if kind == "integer" else value,))
    raise DomainError(f"domain {text!r}: not an enumeration, range a..b, interval (a, b], value or /regex/")


def _interval(text: str, match: re.Match[str], kind: str, unit: str | None) -> Interval:
    if kind == "integer":
        raise DomainError(f"domain {text!r}: an interval is of reals; write a range a..b for integers")
    low = _bound(match["low"], unit)
    high = None if match["high"] == ".." else _bound(match["high"], unit)
    if high is None and match["close"] == "]":
        raise DomainError(f"domain {text!r}: an unbounded interval ends with ..)")
    if high is not None and (high < low or (high == low and (match["open"] == "(" or match["close"] == ")"))):
        raise DomainError(f"domain {text!r}: empty interval")
    return Interval(low, high, match["open"] == "(", match["close"] == ")")


def _bound(text: str, unit: str | None) -> float:
    match = _SPLIT_BOUND.fullmatch(text)
    if match is None:  # pragma: no cover - the callers' patterns only pass bounds
        raise DomainError(f"bound {text!r}: not a number")
    number = float(match["number"])
    written = match["unit"]
    if written is None:
        return _integral(number)
    if unit is None:
        raise DomainError(f"bound {text!r}: the parameter has no unit to convert {written} to")
    if unit not in UNITS or (written in DURATION_UNITS) != (unit in DURATION_UNITS):
        raise DomainError(f"bound {text!r}: {written} cannot be converted to {unit}")
    return _integral(number * UNITS[written] / UNITS[unit])


def _integral(value: float) -> float:
    """Whole numbers stay whole after a unit conversion (30s in ms is 30000, not 29999.999...)."""
    rounded = round(value)
    return float(rounded) if math.isclose(value, rounded, rel_tol=1e-12, abs_tol=1e-12) else value


def contains(domain: Domain, value: Any) -> bool:
    """Whether ``value`` is in ``domain``."""
    match domain:
        case Enumeration(values):
            return any(_same(value, v) for v in values)
        case IntRange(low, high):
            return (isinstance(value, int) and not isinstance(value, bool) and value >= low
                    and (high is None or value <= high))
        case Interval(low, high, low_open, high_open):
            if not _numeric(value):
                return False
            above = value > low if low_open else value >= low
            below = high is None or (value < high if high_open else value <= high)
            return above and below
        case Pattern(regex):
            return isinstance(value, str) and re.fullmatch(regex, value) is not None
        case Union(alternatives):
            return any(contains(part, value) for part in alternatives)
    return False  # pragma: no cover - exhaustive


def _same(value: Any, allowed: Any) -> bool:
    """Equal, with booleans apart from numbers (YAML's true is not 1)."""
    if isinstance(value, bool) or isinstance(allowed, bool):
        return isinstance(value, bool) and isinstance(allowed, bool) and value == allowed
    return bool(value == allowed)


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def describe(domain: Domain) -> str:
    """The domain in the grammar's own notation (for docs and messages)."""
    match domain:
        case Enumeration(values):
            if all(_numeric(v) for v in values):
                return " or ".join(_num(v) for v in values)
            return "[" + ", ".join(map(str, values)) + "]"
        case IntRange(low, high):
            return f"{low}..{'' if high is None else high}"
        case Interval(low, high, low_open, high_open):
            return f"{'(' if low_open else '['}{_num(low)}, {'..' if high is None else _num(high)}" \
                   f"{')' if high_open else ']'}"
        case Pattern(regex):
            return f"/{regex}/"
        case Union(alternatives):
            return " or ".join(describe(part) for part in alternatives)
    return "?"  # pragma: no cover - exhaustive


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
