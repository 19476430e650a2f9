"""The parameter domain grammar (spec/domains.py) and the strategies drawn from it (conformance/strategies.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ackspec.conformance.strategies import (
    UNBOUNDED_INTEGER_CAP,
    NoDomain,
    drawn,
    parameter_strategy,
    requirement_strategies,
    strategy,
)
from ackspec.spec import load_catalogue
from ackspec.spec.domains import (
    DomainError,
    Enumeration,
    Interval,
    IntRange,
    Pattern,
    Union,
    contains,
    describe,
    parse_domain,
)


@pytest.mark.parametrize(("text", "kind", "unit", "parsed"), [
    ("1..", "integer", None, IntRange(1)),
    ("0..9", "integer", None, IntRange(0, 9)),
    ("-1..", "integer", None, IntRange(-1)),
    ("(0, 1]", "number", None, Interval(0, 1, True, False)),
    ("[0.5, 2)", "number", None, Interval(0.5, 2, False, True)),
    ("(0, ..)", "duration", "ms", Interval(0, None, True, True)),
    ("-1 or 1..", "integer", "bytes", Union((Enumeration((-1,)), IntRange(1)))),
    ("(0, 30s]", "duration", "ms", Interval(0, 30000, True, False)),
    ("0..10MiB", "integer", "KiB", IntRange(0, 10240)),
    ("1..64KiB", "integer", "bytes", IntRange(1, 65536)),
    ("/[0-9]+,[0-9]+/", "string", None, Pattern("[0-9]+,[0-9]+")),
])
def test_grammar(text: str, kind: str, unit: str | None, parsed: object) -> None:
    assert parse_domain(text, kind, unit) == parsed


def test_a_list_is_an_enumeration() -> None:
    assert parse_domain(["auto", "client"], "enum") == Enumeration(("auto", "client"))


@pytest.mark.parametrize(("text", "kind", "unit", "says"), [
    ("1...", "integer", None, "not an enumeration"),
    ("5..1", "integer", None, "empty range"),
    ("(1, 1)", "number", None, "empty interval"),
    ("(0, ..]", "number", None, "ends with ..)"),
    ("(0, 1]", "integer", None, "interval is of reals"),
    ("0.5..2", "number", None, "range a..b is of integers"),
    ("1..", "boolean", None, "needs a numeric parameter"),
    ("/[/", "string", None, "not a regular expression"),
    ("/x/", "integer", None, "needs a string parameter"),
    ("(0, 30s]", "duration", None, "has no unit"),
    ("0..30s", "integer", "bytes", "cannot be converted"),
    ("0..30s", "integer", "furlongs", "cannot be converted"),
    ("0..1MiB", "duration", "ms", "cannot be converted"),
    ("cx,cy with integers", "string", None, "a list or a /regex/"),
])
def test_bad_domains_say_why(text: str, kind: str, unit: str | None, says: str) -> None:
    with pytest.raises(DomainError, match=says.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)")):
        parse_domain(text, kind, unit)


@pytest.mark.parametrize(("text", "kind", "inside", "outside"), [
    ("1..", "integer", [1, 7, 10**9], [0, -1, 1.5, True]),
    ("(0, 1]", "number", [1, 0.001, 0.5], [0, 1.01, -0.5, "x"]),
    ("-1 or 1..", "integer", [-1, 1, 9], [0, -2]),
    ("/[0-9]+,[0-9]+/", "string", ["0,0", "10,250"], ["0", "a,b", 1]),
])
def test_contains(text: str, kind: str, inside: list[object], outside: list[object]) -> None:
    domain = parse_domain(text, kind)
    assert all(contains(domain, v) for v in inside)
    assert not any(contains(domain, v) for v in outside)


def test_enumerations_keep_booleans_apart_from_numbers() -> None:
    assert not contains(Enumeration((1, 0)), True)
    assert not contains(Enumeration((True,)), 1)
    assert contains(Enumeration((True,)), True)


@pytest.mark.parametrize("text", ["1..", "0..9", "(0, 1]", "[0.5, 2)", "(0, ..)", "-1 or 1..", "/a+b?/"])
def test_describe_reads_back(text: str) -> None:
    kind = "string" if text.startswith("/") else "number" if "(" in text or "[" in text else "integer"
    domain = parse_domain(text, kind)
    assert parse_domain(describe(domain), kind) == domain


def _catalogue_parameters() -> list[tuple[str, str]]:
    return [(req.id, name) for req in load_catalogue() for name, p in req.parameters.items() if p.values]


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_every_catalogue_domain_draws_only_its_own_values(data: st.DataObject) -> None:
    """Whatever a test draws from the catalogue is inside the stated domain (the drawn strategy is sound)."""
    rid, name = data.draw(st.sampled_from(_catalogue_parameters()))
    parameter = load_catalogue().get(rid).parameters[name]
    assert parameter.values is not None
    value = data.draw(parameter_strategy(parameter))
    assert contains(parameter.values, value), (rid, name, value)


def test_every_default_is_in_its_domain() -> None:
    for rid, name in _catalogue_parameters():
        p = load_catalogue().get(rid).parameters[name]
        assert p.values is not None
        assert p.default is None or contains(p.values, p.default), (rid, name, p.default)


@settings(max_examples=60, deadline=None)
@given(value=drawn("STOMP-SUBSCRIBE-PREFETCH", "prefetch"))
def test_unbounded_ranges_are_capped_for_a_run(value: int) -> None:
    assert 1 <= value <= UNBOUNDED_INTEGER_CAP


@settings(max_examples=60, deadline=None)
@given(value=drawn("AMQP-2.6.7-CREDIT-BOUND", "credit", cap=50))
def test_a_cap_bounds_a_bounded_domain_too(value: int) -> None:
    assert 0 <= value <= 50


def test_the_whole_domain_is_reachable() -> None:
    """The strategy is not narrower than the domain: both ends of a capped range come up."""
    seen = set()

    @settings(max_examples=200, deadline=None, database=None)
    @given(value=strategy(IntRange(1)))
    def collect(value: int) -> None:
        seen.add(value)

    collect()
    assert {1, UNBOUNDED_INTEGER_CAP} <= seen


def test_no_domain_is_an_error_naming_the_parameter() -> None:
    with pytest.raises(NoDomain, match="has no parameter 'nope'"):
        drawn("STOMP-SUBSCRIBE-PREFETCH", "nope")


def test_requirement_strategies_cover_every_parameter_with_a_domain() -> None:
    assert set(requirement_strategies("STOMP-SUBSCRIBE-PREFETCH")) == {"prefetch", "header"}
