"""A capability a rule needs is written once, in the catalogue: tests do not restate it (static scan of the suite).

The plugin makes a test not-applicable, naming the capability, when none of its cited requirements can be
tested (:mod:`ackspec.conformance.applicability`). A ``harness.require(CAP)`` in a test whose every cited
requirement already lists ``CAP`` can never fire, and is a second copy that drifts from the YAML. What a
test's own mechanics need beyond its rules (a queue to hold messages, fault injection, a restart), or
what only some of its requirements need, stays in the test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import ackspec.conformance
from ackspec.adapters.base import Capability
from ackspec.spec import load_catalogue

SUITE = Path(ackspec.conformance.__file__).parent / "suite"


def _is_marker(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)) == "requirement"


def _cited(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    return [arg.value for dec in fn.decorator_list if isinstance(dec, ast.Call) and _is_marker(dec)
            for arg in dec.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]


def _required(call: ast.Call) -> list[str]:
    """The capabilities a ``harness.require(Capability.X, ...)`` call names (others are computed)."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "require" and isinstance(func.value, ast.Name)
            and func.value.id == "harness"):
        return []
    return [str(Capability[arg.attr]) for arg in call.args
            if isinstance(arg, ast.Attribute) and arg.attr in Capability.__members__]


def restated(path: Path, root: Path = SUITE) -> list[str]:
    """``file:line: capability (test)`` for each required capability every cited requirement lists."""
    catalogue = load_catalogue()
    found = []
    for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) or not (ids := _cited(fn)):
            continue
        needs = [set(catalogue.get(rid).capabilities) for rid in ids if rid in catalogue]
        found += [f"{path.relative_to(root)}:{node.lineno}: {cap} ({fn.name})" for node in ast.walk(fn)
                  if isinstance(node, ast.Call) for cap in _required(node) if needs and all(cap in n for n in needs)]
    return found


def test_no_test_restates_a_capability_its_requirements_list() -> None:
    found = [hit for path in sorted(SUITE.rglob("*.py")) for hit in restated(path)]
    assert not found, ("the catalogue already says these requirements need these capabilities (the plugin "
                       "decides not-applicable from it); drop them from harness.require:\n  " + "\n  ".join(found))


def test_the_scan_finds_a_restated_capability(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('@requirement("STOMP-ACK-CLIENT-INDIVIDUAL")\n'
                     'def test_x(harness):\n'
                     '    harness.require(Capability.ACK_CLIENT_INDIVIDUAL, Capability.FAULT_INJECTION)\n',
                     encoding="utf-8")
    assert "ack.client-individual" in load_catalogue().get("STOMP-ACK-CLIENT-INDIVIDUAL").capabilities
    assert restated(probe, tmp_path) == ["probe.py:3: ack.client-individual (test_x)"]
