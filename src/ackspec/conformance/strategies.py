"""Hypothesis strategies from the catalogue: a test draws its values from the rule's own domain.

    from ackspec.conformance.strategies import drawn
    prefetch = drawn("STOMP-SUBSCRIBE-PREFETCH", "prefetch")   # integers 1.. (capped, see below)
    ack = drawn("STOMP-ACK-AUTO", "ack").map(AckMode)         # auto | client | client-individual

A parameter's domain (:mod:`ackspec.spec.domains`) becomes a strategy: an enumeration is sampled, a
range of integers or an interval of reals is drawn from, a pattern generates matching strings, a union
draws from any alternative. No test of the suite writes a strategy of its own for a value the
catalogue has a domain for, so widening a domain in the YAML widens the tests that cite it.

**Practical caps.** A domain may be unbounded (``1..``, ``(0, ..)``) or bounded far beyond what a run
can exercise (AMQP credit ``0..4294967295``): every drawn value costs messages on a real broker. An
unbounded upper end is replaced by :data:`UNBOUNDED_INTEGER_CAP` (integers) or
:data:`UNBOUNDED_REAL_CAP` (reals, in the parameter's unit); a test whose cost grows with the value
passes its own ``cap`` (an upper limit applied to bounded domains too) and says why beside it. The
caps bound one run only: ``--examples`` draws more values, never larger ones.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from ackspec.spec import load_catalogue
from ackspec.spec.domains import Domain, Enumeration, Interval, IntRange, Pattern, Union
from ackspec.spec.model import Parameter

UNBOUNDED_INTEGER_CAP = 32
"""Largest integer drawn from a domain with no upper end (``1..``): a count of messages, a prefetch or
window size, which a test fills, so each example sends about this many messages at most. 32 reaches
well past the small bounds where off-by-one bugs hide (a prefetch that breaks above 7) while keeping a
default run of a property test to a few hundred messages."""

UNBOUNDED_REAL_CAP = 1000.0
"""Largest real drawn from an interval with no upper end (``(0, ..)``), in the parameter's unit."""


class NoDomain(LookupError):
    """A parameter without a domain to draw from: the catalogue must state one first."""


def strategy(domain: Domain, *, cap: float | None = None) -> st.SearchStrategy[Any]:
    """Values of ``domain``; ``cap`` limits the largest number drawn (see the module's caps)."""
    match domain:
        case Enumeration(values):
            return st.sampled_from(values)
        case IntRange(low, high):
            return st.integers(low, _integer_top(low, high, cap))
        case Interval(low, high, low_open, high_open):
            top = _real_top(low, high, cap)
            return st.floats(low, top, exclude_min=low_open, exclude_max=high_open and top == high,
                             allow_nan=False, allow_infinity=False)
        case Pattern(regex):
            return st.from_regex(regex, fullmatch=True)
        case Union(alternatives):
            return st.one_of(*(strategy(part, cap=cap) for part in alternatives))
    raise TypeError(f"not a domain: {domain!r}")  # pragma: no cover - exhaustive


def _integer_top(low: int, high: int | None, cap: float | None) -> int:
    top = high if high is not None else max(low, UNBOUNDED_INTEGER_CAP)
    if cap is not None:
        top = min(top, int(cap))
    return max(low, top)


def _real_top(low: float, high: float | None, cap: float | None) -> float:
    top = high if high is not None else max(low + 1.0, UNBOUNDED_REAL_CAP)
    if cap is not None and cap > low:
        top = min(top, cap)
    return top


def parameter_strategy(parameter: Parameter, *, cap: float | None = None) -> st.SearchStrategy[Any]:
    """Values of one parameter's domain; :class:`NoDomain` when the catalogue gives it none."""
    if parameter.values is None:
        raise NoDomain(f"parameter {parameter.name} ({parameter.type}) has no domain in the catalogue")
    return strategy(parameter.values, cap=cap)


def drawn(requirement_id: str, parameter: str, *, cap: float | None = None) -> st.SearchStrategy[Any]:
    """Values of ``parameter`` as the bundled catalogue's ``requirement_id`` states its domain."""
    req = load_catalogue().get(requirement_id)
    try:
        return parameter_strategy(req.parameters[parameter], cap=cap)
    except KeyError:
        known = ", ".join(req.parameters) or "none"
        raise NoDomain(f"{requirement_id} has no parameter {parameter!r} (it has: {known})") from None


def enumerated(requirement_id: str, parameter: str) -> tuple[Any, ...]:
    """Every value of an enumerated ``parameter`` of the bundled catalogue's ``requirement_id``, in its order: what
    a test parametrizes over when the rule names a few cases (``closed_object``: producer, session,
    connection), so each case runs every time and a case added to the catalogue is a test case the next run."""
    req = load_catalogue().get(requirement_id)
    domain = req.parameters[parameter].values if parameter in req.parameters else None
    if not isinstance(domain, Enumeration):
        raise NoDomain(f"{requirement_id} has no enumerated parameter {parameter!r}")
    return tuple(domain.values)


def requirement_strategies(requirement_id: str, *, caps: dict[str, float] | None = None
                           ) -> dict[str, st.SearchStrategy[Any]]:
    """A strategy for every parameter of a requirement that has a domain (for ``@given(**...)``)."""
    req = load_catalogue().get(requirement_id)
    caps = caps or {}
    return {name: parameter_strategy(p, cap=caps.get(name)) for name, p in req.parameters.items()
            if p.values is not None}
