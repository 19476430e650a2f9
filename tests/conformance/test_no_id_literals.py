"""Requirement IDs are written once per test, in its ``@requirement`` decorator (static scan of the suite).

Check helpers take the requirement from the running test (:mod:`ackspec.conformance.cited`), so an ID
literal anywhere else in the suite's files is a second copy that can drift from the decorator. Allowed:
the arguments of a ``requirement(...)`` marker (a decorator, or a marker built once and applied to
parametrized cases), and the first argument of :func:`ackspec.conformance.strategies.drawn` /
``enumerated`` / ``requirement_strategies``: there the ID says whose catalogue domain a strategy draws from, it judges
nothing. Also checked here, before anything runs, the two mistakes a call raises
:class:`~ackspec.conformance.cited.CitationError` for: a ``req.NAME`` a test function names that its
decorator does not cite, and a check helper called without a requirement in a test citing several (the
call raises only when it runs; a branch only some targets take would hide it).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import ackspec.conformance
from ackspec.conformance.cited import CitationError, Citations, attribute_name, current, judged, req, running
from ackspec.conformance.verdicts import Checks, RequirementViolation, check, violation
from ackspec.spec import load_catalogue

CONFORMANCE = Path(ackspec.conformance.__file__).parent
SCANNED = ("suite", "client")
MARKER_NAMES = frozenset({"requirement"})
DOMAIN_SOURCES = frozenset({"drawn", "enumerated", "requirement_strategies"})


def _id_like() -> re.Pattern[str]:
    """A string that is a catalogue ID, or looks like one of a family the catalogue has (a typo is a literal too)."""
    prefixes = sorted({rid.split("-", 1)[0] for rid in load_catalogue().ids})
    return re.compile(rf"^(?:{'|'.join(prefixes)})-[A-Z0-9][A-Z0-9.\-]*[A-Z0-9]$")


def _called(node: ast.Call) -> str | None:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _allowed_nodes(tree: ast.AST) -> set[int]:
    """Nodes inside a ``requirement(...)`` marker's arguments or a domain source's first argument."""
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _called(node)
        if name in MARKER_NAMES:
            allowed.update(id(n) for arg in node.args for n in ast.walk(arg))
        elif name in DOMAIN_SOURCES and node.args:
            allowed.update(id(n) for n in ast.walk(node.args[0]))
    return allowed


def _files() -> Iterator[Path]:
    for folder in SCANNED:
        yield from sorted((CONFORMANCE / folder).rglob("*.py"))


def id_literals(path: Path, pattern: re.Pattern[str], root: Path = CONFORMANCE) -> list[str]:
    """``file:line: 'ID'`` for every requirement-ID literal outside a marker or a domain source."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    allowed = _allowed_nodes(tree)
    return [f"{path.relative_to(root)}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and pattern.match(node.value)
            and id(node) not in allowed]


def _decorator_ids(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str] | None:
    ids: list[str] | None = None
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Call) and _called(dec) in MARKER_NAMES:
            ids = (ids or []) + [a.value for a in dec.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return ids


def uncited_names(path: Path, root: Path = CONFORMANCE) -> list[str]:
    """``file:line: req.NAME`` where a test function (with a literal decorator) names what it does not cite."""
    found = []
    for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) or (ids := _decorator_ids(fn)) is None:
            continue
        names = {attribute_name(rid) for rid in ids}
        found += [f"{path.relative_to(root)}:{node.lineno}: req.{node.attr} (cites {', '.join(ids)})"
                  for node in ast.walk(fn) if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id == "req" and node.attr not in names]
    return found


CHECK_HELPERS = {"check": None, "violation": None, "expect_n": 3, "expect_n_after_loss": 3}
"""Check helpers and the position of their requirement argument when it may be positional."""


def _names_a_requirement(call: ast.Call, name: str) -> bool:
    position = CHECK_HELPERS[name]
    func = call.func
    if name == "check" and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
            and func.value.id == "harness":
        position = 3  # harness.check(condition, message, operations, requirement)
    return any(k.arg == "requirement" for k in call.keywords) or (position is not None and len(call.args) > position)


def unnamed_checks(path: Path, root: Path = CONFORMANCE) -> list[str]:
    """``file:line: helper`` where a test citing several requirements calls a check helper naming none."""
    found = []
    for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        markers = [dec for dec in fn.decorator_list if isinstance(dec, ast.Call) and _called(dec) in MARKER_NAMES]
        if sum(len(dec.args) for dec in markers) < 2:
            continue
        found += [f"{path.relative_to(root)}:{node.lineno}: {name}(...) in {fn.name}" for node in ast.walk(fn)
                  if isinstance(node, ast.Call) and (name := _called(node) or "") in CHECK_HELPERS
                  and not _names_a_requirement(node, name)]
    return found


def test_no_requirement_id_literal_outside_decorators() -> None:
    pattern = _id_like()
    found = [hit for path in _files() for hit in id_literals(path, pattern)]
    assert not found, ("requirement IDs belong in @requirement(...) only; name the one a check judges with "
                       "req.NAME, or nothing when the test cites one:\n  " + "\n  ".join(found))


def test_every_req_name_a_test_uses_is_cited() -> None:
    found = [hit for path in _files() for hit in uncited_names(path)]
    assert not found, "a test names a requirement it does not cite:\n  " + "\n  ".join(found)


def test_a_test_citing_several_names_the_requirement_of_each_check() -> None:
    found = [hit for path in _files() for hit in unnamed_checks(path)]
    assert not found, ("a test citing several requirements must name the one each check judges "
                       "(requirement=req.NAME):\n  " + "\n  ".join(found))


def test_the_scan_finds_a_literal_and_an_uncited_name(tmp_path: Path) -> None:
    """The scan is not vacuous: a check with an ID literal and a req.NAME the decorator lacks are both found."""
    probe = tmp_path / "probe.py"
    probe.write_text('@requirement("STOMP-ACK-AUTO")\n'
                     'def test_x(harness):\n'
                     '    check(True, "STOMP-ACK-AUTO", "m")\n'
                     '    check(True, "m", requirement=req.STOMP_ACK_CLIENT_CUMULATIVE)\n'
                     '    drawn("STOMP-ACK-AUTO", "ack")\n', encoding="utf-8")
    assert id_literals(probe, _id_like(), tmp_path) == ["probe.py:3: 'STOMP-ACK-AUTO'"]
    assert uncited_names(probe, tmp_path) == ["probe.py:4: req.STOMP_ACK_CLIENT_CUMULATIVE (cites STOMP-ACK-AUTO)"]
    several = tmp_path / "several.py"
    several.write_text('@requirement("STOMP-ACK-AUTO", "STOMP-ACK-CLIENT-CUMULATIVE")\n'
                       'def test_y(harness):\n'
                       '    check(True, "m")\n'
                       '    harness.expect_n(c, s, 1)\n'
                       '    harness.expect_n(c, s, 1, req.STOMP_ACK_AUTO)\n'
                       '    harness.check(True, "m", (), req.STOMP_ACK_AUTO)\n'
                       '    Checks().check(True, "m", requirement=req.STOMP_ACK_AUTO)\n', encoding="utf-8")
    assert unnamed_checks(several, tmp_path) == ["several.py:3: check(...) in test_y",
                                                 "several.py:4: expect_n(...) in test_y"]


# -- the helpers' resolution (what the scan cannot see: computed requirements, helpers) ----------------------


def test_a_test_citing_one_requirement_names_none() -> None:
    with running("t::one", ["STOMP-ACK-AUTO"]):
        with pytest.raises(RequirementViolation) as caught:
            check(False, "redelivered")
        assert caught.value.requirement == "STOMP-ACK-AUTO"
        assert violation("gone").requirement == "STOMP-ACK-AUTO"


def test_a_test_citing_several_must_name_the_one_judged() -> None:
    with running("t::two", ["STOMP-ACK-AUTO", "JMS-3.4.7-REDELIVERED-SET"]):
        with pytest.raises(CitationError, match="must name the one it judges"):
            check(True, "held")  # raised even when the check holds: the mistake shows on every run
        checks = Checks()
        checks.check(False, "unmarked", requirement=req.JMS_3_4_7_REDELIVERED_SET)
        with pytest.raises(CitationError, match="does not cite it"):
            checks.check(True, "held", requirement="STOMP-ACK-CLIENT-CUMULATIVE")
        assert [v.requirement for v in checks.violations] == ["JMS-3.4.7-REDELIVERED-SET"]


def test_req_names_only_what_the_running_test_cites() -> None:
    with running("t::one", ["STOMP-ACK-AUTO"]):
        assert req.STOMP_ACK_AUTO == "STOMP-ACK-AUTO"
        with pytest.raises(CitationError, match=r"req\.STOMP_ACK_CLIENT_CUMULATIVE but does not cite it"):
            _ = req.STOMP_ACK_CLIENT_CUMULATIVE
    assert current().ids == ()
    assert not hasattr(req, "_pytestfixturefunction")  # what pytest and other tools probe a module's names for
    with pytest.raises(CitationError, match="cites no requirement"):
        judged(None)


def test_a_citation_error_is_not_a_failure() -> None:
    """A wrong citation is the suite's bug: the test's verdict is error, never fail charged elsewhere."""
    assert not issubclass(CitationError, AssertionError)


def test_ids_whose_names_clash_are_refused() -> None:
    with pytest.raises(CitationError, match="same name"):
        Citations("t::clash", ("JMS-6.2-X", "JMS-6-2-X"))
