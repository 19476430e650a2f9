"""Message selectors (Jakarta Messaging 3.1, 3.8.1), the reference broker's filter on every routed message.

The spec's examples, the header fields, literals and arithmetic, the three-valued truth tables, refused
selectors (one line, naming where), and properties: nothing but SelectorError ever leaves
``parse_selector``, matching never raises, deep nesting is refused rather than blowing the stack, and
generated selectors agree with an independent evaluator written here.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ackspec.reference.broker.model import Message
from ackspec.reference.broker.selector import (
    MAX_NESTING,
    MAX_SELECTOR_LENGTH,
    Selector,
    SelectorError,
    parse_selector,
)

T, F, U = True, False, None  # the three truth values; U is UNKNOWN


def msg(*headers: tuple[str, str], persistent: bool = True, message_id: str = "ID:1") -> Message:
    return Message(message_id, "/queue/q", b"", tuple(headers), persistent, "stomp-1", 1)


def parse(text: str) -> Selector:
    selector = parse_selector(text)
    assert selector is not None
    return selector


def truth(text: str, message: Message) -> bool | None:
    """The selector's three-valued value, read through the public API: TRUE when it matches, FALSE
    when ``NOT (it)`` matches, UNKNOWN when neither does."""
    if parse(text).matches(message):
        return True
    return False if parse(f"NOT ({text})").matches(message) else None


# --- the examples of 3.8.1 ---------------------------------------------------------------------------

def test_spec_example_with_a_string_weight() -> None:
    """Every property is a string here, so ``weight > 2500`` compares unlike types: FALSE (3.8.1), and
    the selector does not match though the rest does."""
    car = msg(("type", "car"), ("color", "blue"), ("weight", "3000"))
    assert not parse("JMSType = 'car' AND color = 'blue' AND weight > 2500").matches(car)
    assert truth("weight > 2500", car) is F
    assert truth("JMSType = 'car' AND color = 'blue'", car) is T
    assert truth("weight = '3000'", car) is T


@pytest.mark.parametrize(("selector", "headers", "expected"), [
    ("JMSPriority BETWEEN 3 AND 5", [("priority", "4")], T),
    ("JMSPriority BETWEEN 3 AND 5", [("priority", "7")], F),
    ("JMSPriority BETWEEN 3 AND 5", [], T),  # the default priority, 4
    ("JMSPriority NOT BETWEEN 3 AND 5", [("priority", "7")], T),
    ("JMSPriority NOT BETWEEN 3 AND 5", [("priority", "5")], F),
    ("age BETWEEN 15 AND 19", [("age", "17")], F),  # a string property: unlike types
    ("age BETWEEN 15 AND 19", [], U),
    ("Country IN ('UK', 'US', 'France')", [("Country", "UK")], T),
    ("Country IN ('UK', 'US', 'France')", [("Country", "Peru")], F),
    ("Country IN ('UK', 'US', 'France')", [], U),
    ("Country NOT IN ('UK', 'US', 'France')", [("Country", "Peru")], T),
    ("Country NOT IN ('UK', 'US', 'France')", [("Country", "UK")], F),
    ("Country NOT IN ('UK', 'US', 'France')", [], U),
    ("phone LIKE '12%3'", [("phone", "123")], T),
    ("phone LIKE '12%3'", [("phone", "12993")], T),
    ("phone LIKE '12%3'", [("phone", "1234")], F),
    ("phone LIKE '12%3'", [], U),
    ("phone NOT LIKE '12%3'", [("phone", "1234")], T),
    ("phone NOT LIKE '12%3'", [("phone", "123")], F),
    ("word LIKE 'l_se'", [("word", "lose")], T),
    ("word LIKE 'l_se'", [("word", "loose")], F),
    ("word NOT LIKE 'l_se'", [("word", "loose")], T),
    ("underscored LIKE '\\_%' ESCAPE '\\'", [("underscored", "_foo")], T),
    ("underscored LIKE '\\_%' ESCAPE '\\'", [("underscored", "bar")], F),
    ("underscored NOT LIKE '\\_%' ESCAPE '\\'", [("underscored", "bar")], T),
    ("prop_name IS NULL", [], T),
    ("prop_name IS NULL", [("prop_name", "")], F),
    ("prop_name IS NOT NULL", [("prop_name", "")], T),
    ("prop_name IS NOT NULL", [], F),
])
def test_spec_examples(selector: str, headers: list[tuple[str, str]], expected: bool | None) -> None:
    assert truth(selector, msg(*headers)) is expected


@pytest.mark.parametrize(("pattern", "value", "expected"), [
    ("%", "", T), ("a%b%c", "aXbYc", T), ("a%b%c", "abc", T), ("a%b%c", "acb", F), ("%ab", "aab", T),
    ("ab%ab", "ab", F), ("ab%ab", "abab", T), ("a_b", "a\nb", T), ("__", "x", F), ("x", "X", F),
    ("50!%", "50%", T), ("50!%", "500", F), ("!!%", "!x", T), ("!a", "a", T), ("%a%a%a%a%a%b", "a" * 200, F),
])
def test_like(pattern: str, value: str, expected: bool) -> None:
    """LIKE is case-sensitive, ``_`` matches any one character (a newline too), the escape makes the
    next character literal, and many ``%`` cost no backtracking."""
    assert truth(f"p LIKE '{pattern}' ESCAPE '!'", msg(("p", value))) is expected


# --- identifiers ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("selector", "message", "expected"), [
    ("JMSDeliveryMode = 'PERSISTENT'", msg(persistent=True), T),
    ("JMSDeliveryMode = 'NON_PERSISTENT'", msg(persistent=False), T),
    ("JMSDeliveryMode = 'PERSISTENT'", msg(persistent=False), F),
    ("JMSPriority = 4", msg(), T),
    ("JMSPriority = 9", msg(("priority", "9")), T),
    ("JMSPriority = 4", msg(("priority", "high")), T),  # not an integer: the default
    ("JMSPriority > 5", msg(("priority", "9")), T),
    ("JMSMessageID = 'ID:42'", msg(message_id="ID:42"), T),
    ("JMSMessageID <> 'ID:42'", msg(message_id="ID:1"), T),
    ("JMSTimestamp = 1700000000000", msg(("timestamp", "1700000000000")), T),
    ("JMSTimestamp IS NULL", msg(), T),
    ("JMSTimestamp IS NULL", msg(("timestamp", "soon")), T),
    ("JMSCorrelationID = 'c-1'", msg(("correlation-id", "c-1")), T),
    ("JMSCorrelationID IS NULL", msg(), T),
    ("JMSType = 'car'", msg(("type", "car")), T),
    ("JMSXGroupID IS NULL", msg(("JMSXGroupID", "g")), T),
    ("JMSRedelivered IS NULL", msg(), T),
    ("JMSfoo IS NULL", msg(("JMSfoo", "x")), T),
    ("colour = 'red'", msg(("colour", "blue"), ("colour", "red")), F),  # the first occurrence counts
    ("Colour IS NULL", msg(("colour", "red")), T),  # identifiers are case-sensitive
    ("$x_1 = 'y' AND _ = 'z' AND été = 'w'", msg(("$x_1", "y"), ("_", "z"), ("été", "w")), T),
    ("n = 1", msg(("n", "1")), F),  # a string is not a number
    ("n = '1'", msg(("n", "1")), T),
    ("missing = 'x'", msg(), U),
])
def test_identifiers(selector: str, message: Message, expected: bool | None) -> None:
    assert truth(selector, message) is expected


# --- literals, arithmetic, comparison ------------------------------------------------------------------

@pytest.mark.parametrize("selector", [
    "2 * 3 + 1 = 7", "2 + 3 * 4 = 14", "(2 + 3) * 4 = 20", "10 - 2 - 3 = 5", "12 / 2 / 3 = 2",
    "7 / 2 = 3", "-7 / 2 = -3", "7.0 / 2 = 3.5", "1 = 1.0", "- -5 = 5", "-(2) = -2", "+62 = 62",
    "-957 < +62", "7E3 = 7000", "-57.9E2 = -5790", "7. = 7", ".5 = 0.5", "1.5e-3 = 0.0015", "57L = 57",
    "010 = 8", "0x1F = 31", "0xFFFFFFFFFFFFFFFF = -1",
    "-9223372036854775808 = -9223372036854775807 - 1", "9223372036854775807 + 1 = -9223372036854775808",
    "1 < 2 AND 2 <= 2 AND 3 > 2 AND 3 >= 3 AND 1 <> 2", "NOT 1 > 2", "1 BETWEEN 1 AND 1",
    "'it''s' = 'it''s'", "'a' <> 'b'", "'' = ''", "TRUE = TRUE", "true <> false", "(1 = 1) = TRUE",
    "TRUE", "NOT FALSE", "1 = 1 and 2 = 2 or 1 = 2", "a is null AND b IS NOT NULL",
])
def test_true_without_properties(selector: str) -> None:
    assert truth(selector, msg(("b", "x"))) is T


@pytest.mark.parametrize(("selector", "expected"), [
    ("FALSE", F), ("'1' = 1", F), ("TRUE = 1", F), ("TRUE <> 'TRUE'", F), ("1 <> 1.0", F),
    ("1 / 0 = 1", U), ("1.0 / 0 = 1", U), ("0 / 0 = 0", U), ("s + 1 = 2", U), ("-s = 1", U), ("s < t", U),
    ("s", U), ("missing", U), ("NOT NOT s", U), ("s BETWEEN t AND t", U), ("s BETWEEN 1 AND 2", F),
    ("JMSPriority LIKE '4'", U), ("JMSPriority IN ('4')", U), ("missing + 1 = 2", U), ("missing > 1 OR TRUE", T),
    ("missing > 1 AND FALSE", F),
])
def test_false_and_unknown(selector: str, expected: bool | None) -> None:
    """Unlike types are FALSE (3.8.1); NULL operands, arithmetic on non-numbers, division by zero,
    ordering strings and a non-boolean condition are UNKNOWN."""
    assert truth(selector, msg(("s", "1"), ("t", "2"))) is expected


# --- three-valued logic ---------------------------------------------------------------------------------

CONDITION = {T: "t = 't'", F: "t = 'f'", U: "missing = 'x'"}
AND = {(T, T): T, (T, F): F, (T, U): U, (F, T): F, (F, F): F, (F, U): F, (U, T): U, (U, F): F, (U, U): U}
OR = {(T, T): T, (T, F): T, (T, U): T, (F, T): T, (F, F): F, (F, U): U, (U, T): T, (U, F): U, (U, U): U}
NOT = {T: F, F: T, U: U}


@pytest.mark.parametrize(("a", "b"), list(AND))
def test_and_or_truth_tables(a: bool | None, b: bool | None) -> None:
    m = msg(("t", "t"))
    assert truth(f"{CONDITION[a]} AND {CONDITION[b]}", m) is AND[(a, b)]
    assert truth(f"{CONDITION[a]} OR {CONDITION[b]}", m) is OR[(a, b)]


@pytest.mark.parametrize("a", [T, F, U])
def test_not_truth_table(a: bool | None) -> None:
    m = msg(("t", "t"))
    assert truth(f"NOT {CONDITION[a]}", m) is NOT[a]
    assert parse(f"NOT ({CONDITION[a]})").matches(m) is (NOT[a] is T)


def test_unknown_is_not_a_match_either_way() -> None:
    assert not parse("missing = 'x'").matches(msg())
    assert not parse("NOT (missing = 'x')").matches(msg())
    assert parse("missing IS NULL").matches(msg())


def test_precedence() -> None:
    """NOT binds looser than comparisons, AND tighter than OR, arithmetic tighter than comparison."""
    m = msg(("t", "t"))
    assert truth("t = 't' OR t = 'x' AND t = 'y'", m) is T
    assert truth("(t = 't' OR t = 'x') AND t = 'y'", m) is F
    assert truth("NOT t = 'x' AND t = 't'", m) is T
    assert truth("1 + 2 * 3 BETWEEN 7 AND 7 AND 2 - 1 = 1", m) is T


# --- parsing --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [None, "", "   ", " \t\r\n\f "])
def test_no_selector(text: str | None) -> None:
    assert parse_selector(text) is None


def test_text_is_stripped_and_equality_is_identity() -> None:
    one, two = parse("  a = 'x'\n"), parse("a = 'x'")
    assert one.text == two.text == "a = 'x'"
    assert one != two and len({one, one, two}) == 2


def test_length_limit() -> None:
    limit = "a = '" + "x" * (MAX_SELECTOR_LENGTH - 6) + "'"
    assert len(limit) == MAX_SELECTOR_LENGTH and parse(limit).matches(msg(("a", "x" * (MAX_SELECTOR_LENGTH - 6))))
    assert parse_selector(limit + " \n") is not None  # surrounding whitespace is not counted
    with pytest.raises(SelectorError, match="longer than"):
        parse_selector(limit + "x")


def test_long_flat_chains_do_not_nest() -> None:
    """AND/OR and arithmetic chains are flat: a selector as long as allowed evaluates without recursion."""
    ors = " OR ".join(f"a = '{i}'" for i in range(300))
    assert len(ors) <= MAX_SELECTOR_LENGTH and truth(ors, msg(("a", "299"))) is T
    sums = "1" + " + 1" * 1000 + " = 1001"
    assert truth(sums, msg()) is T
    assert truth("(" * 40 + "a = '1'" + ")" * 40, msg(("a", "1"))) is T


@pytest.mark.parametrize(("selector", "position"), [
    ("a +", 3), ("()", 0), ("a = ()", 4), ("(a = 1", 6), ("a = 'x", 4), ("a = 1 )", 6), ("  a = 1 )", 8),
    ("a # 1", 2), ("a == 1", 3), ("a != 1", 2), ("AND = 1", 0), ("a = 1 AND OR = 2", 10), ("a + 1", 0),
    ("'x'", 0), ("a = 1 = 1", 6), ("a < 'x'", 2), ("TRUE > 1", 5), ("'a' BETWEEN 'a' AND 'b'", 4),
    ("a = NULL", 4), ("a IS 'x'", 5), ("a IS NOT", 8), ("a BETWEEN 1", 11), ("a IN ()", 6), ("a IN (1)", 6),
    ("a IN ('x',)", 10), ("a IN 'x'", 5), ("1 IN ('a')", 2), ("a + 1 LIKE 'x'", 6), ("a LIKE b", 7),
    ("a LIKE 'x' ESCAPE 'ab'", 11), ("a LIKE 'x' ESCAPE ''", 11), ("a LIKE 'x!' ESCAPE '!'", 7),
    ("a NOT = 1", 2), ("a = NOT b", 4), ("NOT 1", 0), ("TRUE AND 1", 5), ("-TRUE = 1", 0), ("-'a' = 1", 0),
    ("9223372036854775808 = 1", 0), ("-9223372036854775809 = 1", 1), ("1e999 = 1", 0), ("08 = 1", 0),
    ("0x10000000000000000 = 1", 0), ("57abc = 1", 0), ("1.2.3 = 1", 0), ("1.5f = 1", 0), ("a = 1 b = 2", 6),
    ("a = 1 AND", 9), ("NOT", 3), ("a\u00a0= 1", 1), ("x" * 5000, None), ("(" * 3000, 100),
])
def test_refused(selector: str, position: int | None) -> None:
    with pytest.raises(SelectorError) as exc:
        parse_selector(selector)
    message = str(exc.value)
    assert message.startswith("selector: ") and "\n" not in message and len(message) < 200
    if position is not None:
        assert message.endswith(f"at position {position}"), message


# --- properties -----------------------------------------------------------------------------------------

TOKENS = ["a", "b", "JMSPriority", "JMSType", "'x'", "'%_'", "''''", "1", "-2", "2.5", "1e3", "(", ")", ",", "=",
          "<>", "<", ">=", "+", "-", "*", "/", "AND", "or", "NOT", "BETWEEN", "IN", "like", "ESCAPE", "IS", "NULL",
          "TRUE", "false", "'!'", "0"]
MESSAGES = [msg(), msg(("a", "x"), ("b", "1"), ("priority", "7"), ("type", "%_"))]


def _never_raises_but_selector_error(text: str) -> None:
    try:
        selector = parse_selector(text)
    except SelectorError as exc:
        assert "\n" not in str(exc)
        return
    for m in MESSAGES:
        assert selector is None or selector.matches(m) in (True, False)


@settings(max_examples=200)
@given(st.text())
def test_fuzz_any_text(text: str) -> None:
    _never_raises_but_selector_error(text)


@settings(max_examples=200)
@given(st.lists(st.sampled_from(TOKENS), max_size=12).map(" ".join))
def test_fuzz_token_soup(text: str) -> None:
    """Sequences of selector tokens reach far deeper into the parser than arbitrary text does."""
    _never_raises_but_selector_error(text)


@settings(max_examples=100)
@given(st.lists(st.tuples(st.sampled_from(["a", "priority", "timestamp", "type", "correlation-id"]), st.text()),
                max_size=6), st.booleans())
def test_odd_header_values_never_raise(headers: list[tuple[str, str]], persistent: bool) -> None:
    m = msg(*headers, persistent=persistent)
    for text in ["a > 1", "a + 1 = 2", "-a = 1", "a LIKE '%x_'", "a IN ('1')", "JMSPriority / 0 = 1",
                 "JMSTimestamp * 2 > JMSPriority", "JMSType = a", "a", "JMSCorrelationID BETWEEN 1 AND a"]:
        assert parse(text).matches(m) in (True, False)


@settings(max_examples=50)
@given(st.integers(MAX_NESTING + 1, 3000),
       st.sampled_from([("(", "a = 1", ")"), ("NOT (", "a = 1", ")"), ("a = 1 AND (", "b = 2", ")"),
                        ("-(", "1", ") = 1"), ("(", "", "")]))
def test_deep_nesting_is_refused(depth: int, shape: tuple[str, str, str]) -> None:
    opening, inner, closing = shape
    text = opening * depth + inner + closing * depth
    with pytest.raises(SelectorError) as exc:
        parse_selector(text)
    if len(text) <= MAX_SELECTOR_LENGTH:
        assert "nested too deeply" in str(exc.value)


# A generated selector and an independent evaluator over the same tree: Kleene logic as min/max over
# FALSE < UNKNOWN < TRUE, string properties only.
NAMES = ("a", "b", "c")
VALUES = ("", "x", "y", "it's", "%_")
ORDER = {"=": operator.eq, "<>": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
         ">=": operator.ge}
Tree = tuple[Any, ...]

operands = st.one_of(st.sampled_from(NAMES).map(lambda n: ("id", n)), st.sampled_from(VALUES).map(lambda v: ("str", v)))
numbers = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, -1.5, 2.0]))
leaves = st.one_of(
    st.tuples(st.just("cmp"), st.sampled_from(["=", "<>"]), operands, operands),
    st.tuples(st.just("null"), st.sampled_from(NAMES), st.booleans()),
    st.tuples(st.just("in"), st.sampled_from(NAMES), st.lists(st.sampled_from(VALUES), min_size=1, max_size=3)
              .map(tuple), st.booleans()),
    st.tuples(st.just("num"), st.sampled_from(sorted(ORDER)), numbers, numbers),
    st.tuples(st.just("bool"), st.booleans()),
)
trees = st.recursive(leaves, lambda kids: st.one_of(
    st.tuples(st.just("not"), kids), st.tuples(st.sampled_from(["and", "or"]), kids, kids)), max_leaves=12)


def render(tree: Tree, kw: Callable[[str], str]) -> str:
    def quote(v: str) -> str:
        return "'" + v.replace("'", "''") + "'"

    def operand(o: tuple[str, str]) -> str:
        return o[1] if o[0] == "id" else quote(o[1])

    match tree:
        case ("cmp", op, left, right):
            return f"{operand(left)} {op} {operand(right)}"
        case ("null", name, negated):
            return f"{name} {kw('IS')} {kw('NOT') + ' ' if negated else ''}{kw('NULL')}"
        case ("in", name, values, negated):
            return f"{name} {kw('NOT') + ' ' if negated else ''}{kw('IN')} ({', '.join(map(quote, values))})"
        case ("num", op, x, y):
            return f"{x!r} {op} {y!r}"
        case ("bool", value):
            return kw("TRUE" if value else "FALSE")
        case ("not", sub):
            return f"{kw('NOT')} ({render(sub, kw)})"
        case (("and" | "or") as op, left, right):
            return f"({render(left, kw)}) {kw(op.upper())} ({render(right, kw)})"
    raise AssertionError(tree)


def model(tree: Tree, headers: dict[str, str]) -> bool | None:
    rank = {False: 0, None: 1, True: 2}
    value = {0: False, 1: None, 2: True}

    def operand(o: tuple[str, str]) -> str | None:
        return headers.get(o[1]) if o[0] == "id" else o[1]

    match tree:
        case ("cmp", op, left, right):
            a, b = operand(left), operand(right)
            return None if a is None or b is None else bool((a == b) == (op == "="))
        case ("null", name, negated):
            return bool((name not in headers) != negated)
        case ("in", name, values, negated):
            v = headers.get(name)
            return None if v is None else bool((v in values) != negated)
        case ("num", op, x, y):
            return bool(ORDER[op](x, y))
        case ("bool", v):
            return bool(v)
        case ("not", sub):
            return value[2 - rank[model(sub, headers)]]
        case ("and", left, right):
            return value[min(rank[model(left, headers)], rank[model(right, headers)])]
        case ("or", left, right):
            return value[max(rank[model(left, headers)], rank[model(right, headers)])]
    raise AssertionError(tree)


@settings(max_examples=200)
@given(trees, st.dictionaries(st.sampled_from(NAMES), st.sampled_from(VALUES)), st.booleans())
def test_agrees_with_an_independent_evaluator(tree: Tree, headers: dict[str, str], lower: bool) -> None:
    text = render(tree, str.lower if lower else str.upper)
    expected = model(tree, headers)
    m = msg(*headers.items())
    assert parse(text).matches(m) is (expected is True), text
    assert truth(text, m) is expected, text
