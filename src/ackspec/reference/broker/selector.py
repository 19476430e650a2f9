"""Jakarta Messaging 3.1 message selectors (section 3.8.1), sans-IO: parse once, match many messages.

A subscription's selector is parsed when the consumer is made (an invalid one is refused there, as a
:class:`SelectorError` naming what and where) and then evaluated against every message routed to it,
so parsing builds a small tree of frozen dataclasses and compiles it once into closures.

Values are the selector's SQL types mapped onto Python: ``str``, ``int`` (a Java ``long``: arithmetic
wraps at 64 bits and ``/`` truncates, as in Java), ``float`` (a Java ``double``), ``bool``, and ``None``
for NULL, which is also the truth value UNKNOWN. Identifiers name:

* the header fields ``JMSDeliveryMode`` (``'PERSISTENT'`` / ``'NON_PERSISTENT'``), ``JMSMessageID``,
  ``JMSPriority`` (the ``priority`` header as an integer, else 4, the JMS default), ``JMSTimestamp``
  (the ``timestamp`` header as an integer, else NULL), ``JMSCorrelationID`` (``correlation-id``) and
  ``JMSType`` (``type``); any other ``JMS...`` or ``JMSX...`` name is NULL;
* otherwise, for a message that carries types (an AMQP message, :mod:`.typed`), the application property
  of that name with its type (every integer type a long, float and double a double, booleans, strings);
  for a STOMP message the header of that exact name (first occurrence), always as a **string** (ActiveMQ's
  STOMP connector makes headers String properties too). For JMSPriority and JMSTimestamp a typed message
  gives its priority and creation time. A numeric comparison with a string property (``weight > 2500``)
  compares unlike types, which 3.8.1 makes FALSE ("If the comparison of non-like type values is
  attempted, the value of the operation is false"), as in ActiveMQ with its default settings; so it
  never matches, and neither does the whole selector unless an ``OR`` or a ``NOT`` says otherwise.

Where 3.8.1 leaves room: ``<``, ``>``, ``<=``, ``>=`` and ``BETWEEN`` with a string or boolean literal
or a condition as an operand is refused when parsed (3.8.1: string and boolean comparison is
restricted to ``=`` and ``<>``; ActiveMQ refuses them too); with two string properties it is UNKNOWN.
Arithmetic on a non-number, division by zero, and ``IN`` / ``LIKE`` on a non-string are UNKNOWN.
The left of ``IN``, ``LIKE`` and ``IS`` must be an identifier, and ``NULL`` appears only in ``IS [NOT]
NULL`` (both as in the 3.8.1 grammar). In a ``LIKE`` pattern the escape character makes the next
character literal, whatever it is; a pattern ending in it is refused. Comparisons do not chain
(``a = b = c`` is refused; ``(a = b) = c`` is fine). Octal (``010``) and hex (``0x1F``) literals follow
Java; ``L`` may end an exact literal. Whitespace is space, tab, form feed, CR and LF.
Positions in error messages are 0-based indexes into the string given to :func:`parse_selector`.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from ackspec.reference.broker.model import Headers, Message

MAX_SELECTOR_LENGTH: Final = 4096
MAX_NESTING: Final = 100
"""Sub-expressions (parentheses, operands) nested deeper than this are refused: parsing and matching
recurse, and a selector must never be able to exhaust the stack."""
_MAX_TREE_HEIGHT: Final = 250  # backstop on the compiled tree, whose closures recurse once per level
_LONG_MIN: Final = -(2**63)
_WHITESPACE: Final = " \t\f\r\n"
_KEYWORDS: Final = frozenset({"NULL", "TRUE", "FALSE", "NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "ESCAPE"})
_UNLIKE_TYPES: Final = False
"""3.8.1: comparing non-like types is FALSE (not UNKNOWN: ``NOT (weight > 2500)`` matches a string weight)."""

Value = str | int | float | bool | None
Eval = Callable[[Message], Value]


class SelectorError(ValueError):
    """A selector that is not valid JMS selector syntax; str(exc) is one readable line naming what and where
    (character position)."""


@dataclass(frozen=True, slots=True, eq=False)
class Selector:
    """A parsed selector. Equality is identity; compare :attr:`text` to compare selectors."""

    text: str
    """The selector as given, without surrounding whitespace."""
    _eval: Eval = field(repr=False)

    def matches(self, message: Message) -> bool:
        """True only when the selector is TRUE for ``message`` (FALSE and UNKNOWN do not match). Never raises."""
        return self._eval(message) is True


def parse_selector(text: str | None) -> Selector | None:
    """None or a blank string -> None (JMS: an empty selector is no selector). Otherwise a Selector, or
    SelectorError."""
    if text is None:
        return None
    stripped = text.strip(_WHITESPACE)
    if not stripped:
        return None
    if len(stripped) > MAX_SELECTOR_LENGTH:
        raise SelectorError(f"selector: longer than {MAX_SELECTOR_LENGTH} characters ({len(stripped)})")
    offset = len(text) - len(text.lstrip(_WHITESPACE))
    tree = _Parser(stripped, offset).parse()
    return Selector(stripped, _compile(tree, 0))


# --- tokens -----------------------------------------------------------------------------------------

class _Tok(NamedTuple):
    kind: str
    """``str``, ``int`` (unsigned decimal, range checked by the parser), ``num``, ``id``, ``kw``, ``op``, ``end``."""
    value: str | int | float
    pos: int
    """Index in the text given to parse_selector."""
    src: str

    def show(self) -> str:
        return "end of selector" if self.kind == "end" else _clip(self.src)


_NUMBER = re.compile(r"(?P<float>(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)"
                     r"|0[xX](?P<hex>[0-9a-fA-F]+)[lL]?|(?P<int>[0-9]+)[lL]?")
_OPERATORS: Final = ("<>", "<=", ">=", "=", "<", ">", "+", "-", "*", "/", "(", ")", ",")


def _is_start(c: str) -> bool:
    return c == "$" or c.isidentifier()


def _is_part(c: str) -> bool:
    return c == "$" or ("a" + c).isidentifier()


def _clip(src: str) -> str:
    """A piece of the selector, quoted for an error message: one line, not too long."""
    return repr(src if len(src) <= 24 else src[:20] + "...")


def _error(what: str, pos: int) -> SelectorError:
    return SelectorError(f"selector: {what} at position {pos}")


def _signed64(value: int, src: str, pos: int) -> int:
    """A hex or octal literal is its 64 bits, two's complement (Java: ``0xFFFFFFFFFFFFFFFFL`` is -1)."""
    if value >= 2**64:
        raise _error(f"number {_clip(src)} out of range", pos)
    return value - 2**64 if value >= 2**63 else value


def _tokenize(text: str, offset: int) -> list[_Tok]:
    toks: list[_Tok] = []
    i, n = 0, len(text)
    while i < n:
        c, pos = text[i], i + offset
        if c in _WHITESPACE:
            i += 1
        elif c == "'":
            tok, i = _string_literal(text, i, pos)
            toks.append(tok)
        elif (m := _NUMBER.match(text, i)) is not None:
            toks.append(_number(text, m, pos))
            i = m.end()
        elif _is_start(c):
            j = i + 1
            while j < n and _is_part(text[j]):
                j += 1
            word = text[i:j]
            upper = word.upper() if word.isascii() else ""
            toks.append(_Tok("kw", upper, pos, word) if upper in _KEYWORDS else _Tok("id", word, pos, word))
            i = j
        else:
            op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
            if op is None:
                raise _error(f"unexpected character {c!r}", pos)
            toks.append(_Tok("op", op, pos, op))
            i += len(op)
    toks.append(_Tok("end", "", n + offset, ""))
    return toks


def _string_literal(text: str, i: int, pos: int) -> tuple[_Tok, int]:
    """The string literal opening at ``text[i]`` (``''`` is a quote inside) and the index after it."""
    j, parts = i + 1, []
    while True:
        k = text.find("'", j)
        if k < 0:
            raise _error("unterminated string literal starting", pos)
        parts.append(text[j:k])
        if not text.startswith("'", k + 1):
            return _Tok("str", "".join(parts), pos, text[i:k + 1]), k + 1
        parts.append("'")
        j = k + 2


def _number(text: str, m: re.Match[str], pos: int) -> _Tok:
    """The numeric literal ``m`` matched: approximate, hexadecimal, octal or decimal."""
    src, n = m.group(), len(text)
    if m.end() < n and (_is_part(text[m.end()]) or text[m.end()] == "."):
        raise _error(f"malformed number {_clip(text[m.start():m.end() + 1])}", pos)
    if (f := m.group("float")) is not None:
        value = float(f)
        if value in (float("inf"), float("-inf")):
            raise _error(f"number {_clip(src)} out of range", pos)
        return _Tok("num", value, pos, src)
    if (h := m.group("hex")) is not None:
        return _Tok("num", _signed64(int(h, 16), src, pos), pos, src)
    d = m.group("int")
    if len(d) > 1 and d.startswith("0"):
        if not set(d) <= set("01234567"):
            raise _error(f"malformed octal number {_clip(src)}", pos)
        return _Tok("num", _signed64(int(d, 8), src, pos), pos, src)
    return _Tok("int", int(d) if len(d) <= 20 else 2**64, pos, src)


# --- tree -------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Lit:
    value: str | int | float | bool


@dataclass(frozen=True, slots=True)
class _Ident:
    name: str


@dataclass(frozen=True, slots=True)
class _Unary:
    operand: _Node
    negate: bool


@dataclass(frozen=True, slots=True)
class _Arith:
    """``first op1 x1 op2 x2 ...``, left to right, all ops of one precedence: flat, so a long chain
    does not make a deep tree."""
    first: _Node
    rest: tuple[tuple[str, _Node], ...]


@dataclass(frozen=True, slots=True)
class _Compare:
    op: str
    left: _Node
    right: _Node


@dataclass(frozen=True, slots=True)
class _Between:
    operand: _Node
    low: _Node
    high: _Node
    negated: bool


@dataclass(frozen=True, slots=True)
class _In:
    operand: _Ident
    values: frozenset[str]
    negated: bool


@dataclass(frozen=True, slots=True)
class _Like:
    operand: _Ident
    match: Callable[[str], bool]
    negated: bool


@dataclass(frozen=True, slots=True)
class _IsNull:
    operand: _Ident
    negated: bool


@dataclass(frozen=True, slots=True)
class _Not:
    operand: _Node
    invert: bool
    """False for an even run of NOTs: the operand is still taken as a truth value."""


@dataclass(frozen=True, slots=True)
class _Logic:
    op: str  # "AND" | "OR"
    terms: tuple[_Node, ...]


_Node = _Lit | _Ident | _Unary | _Arith | _Compare | _Between | _In | _Like | _IsNull | _Not | _Logic

_ANY, _BOOL, _NUM, _STR = "any", "bool", "num", "str"
_NUMERIC: Final = (_NUM, _ANY)
_CONDITION: Final = (_BOOL, _ANY)


def _kind(node: _Node) -> str:
    """What a node is known to yield before any message is seen (an identifier: anything)."""
    if isinstance(node, _Lit):
        return _BOOL if isinstance(node.value, bool) else _STR if isinstance(node.value, str) else _NUM
    if isinstance(node, _Ident):
        return _ANY
    return _NUM if isinstance(node, _Unary | _Arith) else _BOOL


# --- parser: precedence climbing ----------------------------------------------------------------------

_OR, _AND, _NOT, _CMP, _ADD, _MUL = 1, 2, 3, 4, 5, 6
_BINARY: Final = {"OR": _OR, "AND": _AND, "=": _CMP, "<>": _CMP, "<": _CMP, "<=": _CMP, ">": _CMP, ">=": _CMP,
                  "BETWEEN": _CMP, "LIKE": _CMP, "IN": _CMP, "IS": _CMP, "+": _ADD, "-": _ADD, "*": _MUL, "/": _MUL}


class _Parser:
    def __init__(self, text: str, offset: int) -> None:
        self.toks = _tokenize(text, offset)
        self.i = 0
        self.depth = 0

    def peek(self, ahead: int = 0) -> _Tok:
        return self.toks[min(self.i + ahead, len(self.toks) - 1)]

    def next(self) -> _Tok:
        tok = self.toks[self.i]
        self.i = min(self.i + 1, len(self.toks) - 1)
        return tok

    def expect(self, kind: str, value: str | None = None, what: str = "") -> _Tok:
        tok = self.next()
        if tok.kind != kind or (value is not None and tok.value != value):
            raise _error(f"expected {what or value} but found {tok.show()}", tok.pos)
        return tok

    def need(self, node: _Node, kinds: tuple[str, ...], tok: _Tok, what: str) -> None:
        if _kind(node) not in kinds:
            raise _error(f"{tok.show()} {what}", tok.pos)

    def parse(self) -> _Node:
        first = self.peek()
        node = self.expr(0)
        if (tok := self.peek()).kind != "end":
            raise _error(f"unexpected {tok.show()}", tok.pos)
        if _kind(node) not in _CONDITION:
            what = "string" if _kind(node) == _STR else "numeric"
            raise _error(f"a {what} value where the selector needs a condition, starting", first.pos)
        return node

    def binary(self, tok: _Tok) -> int | None:
        """The precedence of ``tok`` as an infix operator (``NOT`` only before BETWEEN, LIKE or IN)."""
        if tok.kind == "kw" and tok.value == "NOT":
            nxt = self.peek(1)
            return _CMP if nxt.kind == "kw" and nxt.value in ("BETWEEN", "LIKE", "IN") else None
        return _BINARY.get(str(tok.value)) if tok.kind in ("op", "kw") else None

    def expr(self, min_prec: int) -> _Node:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise _error(f"expression nested too deeply (more than {MAX_NESTING} levels)", self.peek().pos)
        left, compared = self.prefix(min_prec), False
        while (prec := self.binary(tok := self.peek())) is not None and prec >= min_prec:
            if prec == _CMP:
                if compared:
                    raise _error(f"unexpected {tok.show()} (comparisons do not chain; use parentheses)", tok.pos)
                left, compared = self.comparison(left), True
                continue
            self.next()
            right = self.expr(prec + 1)
            op = str(tok.value)
            if prec in (_ADD, _MUL):
                self.need(left, _NUMERIC, tok, "needs numeric operands")
                self.need(right, _NUMERIC, tok, "needs numeric operands")
                if isinstance(left, _Arith) and _BINARY[left.rest[0][0]] == prec:  # a - b - c: one flat node
                    left = _Arith(left.first, (*left.rest, (op, right)))
                else:
                    left = _Arith(left, ((op, right),))
            else:
                self.need(left, _CONDITION, tok, "needs conditions as operands")
                self.need(right, _CONDITION, tok, "needs conditions as operands")
                terms = left.terms if isinstance(left, _Logic) and left.op == op else (left,)
                left = _Logic(op, (*terms, right))
        self.depth -= 1
        return left

    def prefix(self, min_prec: int) -> _Node:
        """NOT (binding looser than comparison) and unary signs, each run taken in a loop, not recursion."""
        if (tok := self.peek()).kind == "kw" and tok.value == "NOT":
            if min_prec > _NOT:
                raise _error("unexpected 'NOT' where a value is expected", tok.pos)
            count = 0
            while (t := self.peek()).kind == "kw" and t.value == "NOT":
                self.next()
                count += 1
            operand = self.expr(_CMP)
            self.need(operand, _CONDITION, tok, "needs a condition as its operand")
            return _Not(operand, count % 2 == 1)
        signs: list[_Tok] = []
        while (t := self.peek()).kind == "op" and t.value in ("+", "-"):
            signs.append(self.next())
        if signs and self.peek().kind in ("int", "num"):
            num = self.next()
            value = num.value
            assert isinstance(value, int | float)
            if num.kind == "int":
                if signs[-1].value == "-" and value == 2**63:
                    value, signs = _LONG_MIN, signs[:-1]
                elif value >= 2**63:
                    raise _error(f"number {num.show()} out of range", num.pos)
            for sign in signs:
                value = -value if sign.value == "-" else value
            return _Lit(_wrap(value) if isinstance(value, int) else value)
        operand = self.primary()
        if not signs:
            return operand
        self.need(operand, _NUMERIC, signs[-1], "needs a numeric operand")
        return _Unary(operand, sum(s.value == "-" for s in signs) % 2 == 1)

    def primary(self) -> _Node:
        tok = self.next()
        if tok.kind == "op" and tok.value == "(":
            if self.peek().kind == "op" and self.peek().value == ")":
                raise _error("empty parentheses", tok.pos)
            node = self.expr(0)
            self.expect("op", ")", "')'")
            return node
        if tok.kind == "str":
            return _Lit(str(tok.value))
        if tok.kind in ("int", "num"):
            if tok.kind == "int" and int(tok.value) >= 2**63:
                raise _error(f"number {tok.show()} out of range", tok.pos)
            return _Lit(tok.value)
        if tok.kind == "id":
            return _Ident(str(tok.value))
        if tok.kind == "kw" and tok.value in ("TRUE", "FALSE"):
            return _Lit(tok.value == "TRUE")
        if tok.kind == "kw" and tok.value == "NULL":
            raise _error("NULL outside IS [NOT] NULL", tok.pos)
        if tok.kind == "kw":
            raise _error(f"keyword {tok.show()} where an identifier or a value is expected", tok.pos)
        raise _error(f"unexpected {tok.show()}", tok.pos)

    def comparison(self, left: _Node) -> _Node:
        tok = self.next()
        if tok.kind == "op":
            right = self.expr(_ADD)
            if tok.value not in ("=", "<>"):
                self.need(left, _NUMERIC, tok, "compares numbers only")
                self.need(right, _NUMERIC, tok, "compares numbers only")
            return _Compare(str(tok.value), left, right)
        negated = tok.value == "NOT"
        if negated:
            tok = self.next()
        if tok.value == "BETWEEN":
            low = self.expr(_ADD)
            self.expect("kw", "AND", "AND")
            high = self.expr(_ADD)
            for node in (left, low, high):
                self.need(node, _NUMERIC, tok, "compares numbers only")
            return _Between(left, low, high, negated)
        if not isinstance(left, _Ident):
            raise _error(f"{tok.show()} needs an identifier on its left", tok.pos)
        if tok.value == "IS":
            negated = self.peek().kind == "kw" and self.peek().value == "NOT"
            if negated:
                self.next()
            self.expect("kw", "NULL", "NULL")
            return _IsNull(left, negated)
        if tok.value == "IN":
            self.expect("op", "(", "'('")
            values = {str(self.expect("str", what="a string literal").value)}
            while self.peek().kind == "op" and self.peek().value == ",":
                self.next()
                values.add(str(self.expect("str", what="a string literal").value))
            self.expect("op", ")", "',' or ')'")
            return _In(left, frozenset(values), negated)
        pattern = self.expect("str", what="a string literal (the pattern)")
        escape = None
        if self.peek().kind == "kw" and self.peek().value == "ESCAPE":
            esc = self.next()
            escape = str(self.expect("str", what="a string literal (the escape character)").value)
            if len(escape) != 1:
                raise _error("the ESCAPE character must be one character", esc.pos)
        return _Like(left, _like_matcher(str(pattern.value), escape, pattern.pos), negated)


def _like_matcher(pattern: str, escape: str | None, pos: int) -> Callable[[str], bool]:
    """``_`` is one character, ``%`` any run. The pattern is split at each ``%`` into fixed-length
    segments, matched leftmost in turn: linear work, none of a regular expression's backtracking."""
    segments: list[list[str]] = [[]]
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == escape:
            if i + 1 == len(pattern):
                raise _error("LIKE pattern ends with its escape character", pos)
            segments[-1].append(re.escape(pattern[i + 1]))
            i += 1
        elif c == "%":
            segments.append([])
        else:
            segments[-1].append("." if c == "_" else re.escape(c))
        i += 1
    regexes = [re.compile("".join(s), re.DOTALL) for s in segments]
    if len(regexes) == 1:
        whole = regexes[0]
        return lambda s: whole.fullmatch(s) is not None
    head, middle, tail, tail_len = regexes[0], regexes[1:-1], regexes[-1], len(segments[-1])

    def match(s: str) -> bool:
        end = len(s) - tail_len
        if end < 0 or (m := head.match(s, 0, end)) is None:
            return False
        at = m.end()
        for seg in middle:
            if (found := seg.search(s, at, end)) is None:
                return False
            at = found.end()
        return tail.fullmatch(s, end) is not None

    return match


# --- evaluation ---------------------------------------------------------------------------------------

def _wrap(n: int) -> int:
    """Java long arithmetic: two's complement, 64 bits."""
    return (n - _LONG_MIN) % 2**64 + _LONG_MIN


def _is_num(x: Value) -> bool:
    return type(x) is int or type(x) is float  # not bool, a subclass of int


def _div(a: float, b: float) -> Value:
    if b == 0:
        return None
    if type(a) is int and type(b) is int:
        q = abs(a) // abs(b)  # Java truncates toward zero
        return _wrap(q if (a < 0) == (b < 0) else -q)
    return a / b


_ARITH: Final[dict[str, Callable[[float, float], Value]]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": _div}
_ORDER: Final[dict[str, Callable[[float, float], bool]]] = {
    "=": operator.eq, "<>": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _compare(op: str, a: Value, b: Value) -> Value:
    if a is None or b is None:
        return None
    if _is_num(a) and _is_num(b):
        assert isinstance(a, int | float) and isinstance(b, int | float)
        if type(a) is not type(b):  # Java numeric promotion: a long meets a double as a double
            a, b = float(a), float(b)
        return _ORDER[op](a, b)
    if type(a) is not type(b) or type(a) not in (str, bool):
        return _UNLIKE_TYPES
    if op in ("=", "<>"):
        return (a == b) == (op == "=")
    return None  # 3.8.1: strings and booleans compare only by = and <>


def _header(headers: Headers, name: str) -> str | None:
    for key, value in headers:
        if key == name:
            return value
    return None


_LONG_TEXT = re.compile(r"[+-]?[0-9]{1,19}")


def _header_long(headers: Headers, name: str, default: int | None) -> int | None:
    text = _header(headers, name)
    if isinstance(text, str) and _LONG_TEXT.fullmatch(text) and _LONG_MIN <= (n := int(text)) < 2**63:
        return n
    return default


def _property(m: Message, name: str) -> Value:
    """A message property: typed when the message carries types (an AMQP message), else its header text."""
    typed = m.typed
    return _header(m.headers, name) if typed is None else typed.value_of(name)


def _message_id(m: Message) -> Value:
    typed = m.typed
    return typed.sender_id if typed is not None and typed.sender_id else m.message_id


def _priority(m: Message) -> Value:
    typed = m.typed
    return _header_long(m.headers, "priority", 4) if typed is None else typed.priority


def _timestamp(m: Message) -> Value:
    typed = m.typed
    if typed is None:
        return _header_long(m.headers, "timestamp", None)
    return typed.created or None


def _identifier(name: str) -> Eval:
    fields: dict[str, Eval] = {
        "JMSDeliveryMode": lambda m: "PERSISTENT" if m.persistent else "NON_PERSISTENT",
        "JMSMessageID": _message_id, "JMSPriority": _priority, "JMSTimestamp": _timestamp}
    field_eval = fields.get(name)
    if field_eval is not None:
        return field_eval
    header = {"JMSCorrelationID": "correlation-id", "JMSType": "type"}.get(name, name)
    if header == name and name.startswith("JMS"):
        return lambda m: None
    if header != name:
        return lambda m: _header(m.headers, header)
    return lambda m: _property(m, name)


def _compile(node: _Node, height: int) -> Eval:
    """The node as a closure over the message; each kind of node is one small function."""
    if height > _MAX_TREE_HEIGHT:
        raise SelectorError(f"selector: expression nested too deeply (tree more than {_MAX_TREE_HEIGHT} levels)")
    return _COMPILERS[type(node)](node, height + 1)


def _compile_lit(node: _Lit, sub: int) -> Eval:
    value = node.value
    return lambda m: value


def _compile_ident(node: _Ident, sub: int) -> Eval:
    return _identifier(node.name)


def _compile_unary(node: _Unary, sub: int) -> Eval:
    f, negate = _compile(node.operand, sub), node.negate

    def unary(m: Message) -> Value:
        x = f(m)
        if not _is_num(x):
            return None
        assert isinstance(x, int | float)
        return (_wrap(-x) if type(x) is int else -x) if negate else x
    return unary


def _compile_arith(node: _Arith, sub: int) -> Eval:
    first = _compile(node.first, sub)
    rest = [(_ARITH[op], _compile(x, sub)) for op, x in node.rest]

    def arith(m: Message) -> Value:
        acc = first(m)
        for op, f in rest:
            x = f(m)
            if not (_is_num(acc) and _is_num(x)):
                return None
            assert isinstance(acc, int | float) and isinstance(x, int | float)
            acc = op(acc, x)
            if type(acc) is int:
                acc = _wrap(acc)
        return acc if _is_num(acc) else None
    return arith


def _compile_compare(node: _Compare, sub: int) -> Eval:
    op, lf, rf = node.op, _compile(node.left, sub), _compile(node.right, sub)
    return lambda m: _compare(op, lf(m), rf(m))


def _compile_between(node: _Between, sub: int) -> Eval:
    xf, lo, hi, neg = _compile(node.operand, sub), _compile(node.low, sub), _compile(node.high, sub), node.negated

    def between(m: Message) -> Value:
        x = xf(m)
        r = _and3(_compare("<=", lo(m), x), _compare("<=", x, hi(m)))
        return _not3(r) if neg else r
    return between


def _compile_string_test(node: _In | _Like, sub: int) -> Eval:
    xf, neg = _identifier(node.operand.name), node.negated
    test = node.values.__contains__ if isinstance(node, _In) else node.match

    def string_test(m: Message) -> Value:
        x = xf(m)
        return (test(x) != neg) if type(x) is str else None
    return string_test


def _compile_is_null(node: _IsNull, sub: int) -> Eval:
    xf, neg = _identifier(node.operand.name), node.negated
    return lambda m: (xf(m) is None) != neg


def _compile_not(node: _Not, sub: int) -> Eval:
    f, invert = _compile(node.operand, sub), node.invert
    return lambda m: _not3(f(m)) if invert else _truth(f(m))


def _compile_logic(node: _Logic, sub: int) -> Eval:
    fs = tuple(_compile(t, sub) for t in node.terms)
    stop = node.op == "OR"  # the value that decides the whole: FALSE for AND, TRUE for OR

    def logic(m: Message) -> Value:
        unknown = False
        for f in fs:
            v = f(m)
            if v is stop:
                return stop
            if v is not (not stop):
                unknown = True
        return None if unknown else not stop
    return logic


_COMPILERS: Final[dict[type, Callable[[Any, int], Eval]]] = {
    _Lit: _compile_lit, _Ident: _compile_ident, _Unary: _compile_unary, _Arith: _compile_arith,
    _Compare: _compile_compare, _Between: _compile_between, _In: _compile_string_test, _Like: _compile_string_test,
    _IsNull: _compile_is_null, _Not: _compile_not, _Logic: _compile_logic,
}
"""How each kind of node compiles (one function each)."""


def _truth(x: Value) -> bool | None:
    """A value as a truth value: anything but a boolean is UNKNOWN."""
    return x if type(x) is bool else None


def _not3(x: Value) -> bool | None:
    return not x if type(x) is bool else None


def _and3(a: Value, b: Value) -> bool | None:
    if a is False or b is False:
        return False
    return True if a is True and b is True else None
