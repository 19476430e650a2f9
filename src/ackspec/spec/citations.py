"""Finding which tests cite which requirements, statically (no import, no pytest run).

``ackspec spec coverage`` parses every ``*.py`` file under the scanned folders (by default the
installed suite, the ``ackspec.conformance`` package: what users run; the source checkout's
``tests/`` only with ``--include-project-tests``) and collects the string
arguments of calls to ``requirement(...)`` or of any attribute call ending in ``.requirement(...)``
(``pytest.mark.requirement``, ``markers.requirement``), as decorators or in ``pytestmark``, following
names bound once at module level to literals (``COMMIT = "JMS-6.2.7-COMMIT-ATOMIC"``, a tuple of
them). IDs built at run time (f-strings, computed lists) are not seen: cite IDs as literals.

A citation also says whether the test it marks is a hypothesis test: the decorated function or class
calls ``given(...)`` or ``run_state_machine_as_test(...)`` (a suite property draws its examples inside
the test, which owns the broker session) or subclasses ``RuleBasedStateMachine``. That is how
``ackspec spec coverage`` finds a ``technique: property|stateful`` requirement that no property or
state machine tests. A module's ``pytestmark`` citation is never counted as one.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

MARKER_NAME = "requirement"
HYPOTHESIS_CALLS = frozenset({"given", "run_state_machine_as_test"})
"""Calls that make the test around them a hypothesis test (a property, or a state machine run)."""
STATE_MACHINE_BASE = "RuleBasedStateMachine"


@dataclass(frozen=True, slots=True)
class Citation:
    """One requirement ID written in a ``requirement(...)`` call."""

    requirement: str
    path: Path
    line: int
    hypothesis: bool = False
    """The cited test is a hypothesis property or state machine (see the module's docstring)."""

    def where(self, base: Path | None = None) -> str:
        path = self.path
        if base is not None:
            with contextlib.suppress(ValueError):
                path = path.resolve().relative_to(base.resolve())
        return f"{path}:{self.line}"


def _is_marker_call(node: ast.Call) -> bool:
    func = node.func
    return (isinstance(func, ast.Name) and func.id == MARKER_NAME) or (
        isinstance(func, ast.Attribute) and func.attr == MARKER_NAME)


def _strings(node: ast.expr, names: dict[str, ast.expr] | None = None) -> Iterator[str]:
    """The literal IDs of a marker argument; a name bound once at module level to literals is followed."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.List | ast.Tuple | ast.Set):
        for element in node.elts:
            yield from _strings(element, names)
    elif isinstance(node, ast.Starred):
        yield from _strings(node.value, names)
    elif isinstance(node, ast.Name) and names and node.id in names:
        yield from _strings(names[node.id], {k: v for k, v in names.items() if k != node.id})


def _module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    """``NAME = <literal or tuple of literals>`` at module level, for names assigned exactly once."""
    found: dict[str, ast.expr] = {}
    seen: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in seen:
                found.pop(name, None)
            else:
                found[name] = node.value
            seen.add(name)
    return found


def _called_name(node: ast.Call) -> str | None:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _uses_hypothesis(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
    """The definition runs hypothesis: calls ``given``/``run_state_machine_as_test`` or is a state machine."""
    if isinstance(node, ast.ClassDef) and any(
            (isinstance(base, ast.Name) and base.id == STATE_MACHINE_BASE)
            or (isinstance(base, ast.Attribute) and base.attr == STATE_MACHINE_BASE) for base in node.bases):
        return True
    return any(isinstance(inner, ast.Call) and _called_name(inner) in HYPOTHESIS_CALLS for inner in ast.walk(node))


def _hypothesis_markers(tree: ast.Module) -> set[int]:
    """``id()`` of the marker calls that decorate a hypothesis test."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and _uses_hypothesis(node):
            found.update(id(inner) for decorator in node.decorator_list for inner in ast.walk(decorator)
                         if isinstance(inner, ast.Call) and _is_marker_call(inner))
    return found


def citations_in_source(source: str, path: Path) -> list[Citation]:
    """Citations in one module's source; a file that does not parse cites nothing."""
    try:
        tree = ast.parse(source, filename=str(path))
    except (SyntaxError, ValueError):
        return []
    found: list[Citation] = []
    names = _module_constants(tree)
    hypothesis = _hypothesis_markers(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_marker_call(node):
            for arg in node.args:
                found.extend(Citation(rid, path, arg.lineno, id(node) in hypothesis) for rid in _strings(arg, names))
    return sorted(found, key=lambda c: c.line)  # stable: same-line citations keep argument order


def scan(paths: Iterable[Path]) -> list[Citation]:
    """Citations in every ``*.py`` under the given files and folders, in path order."""
    found: list[Citation] = []
    for root in paths:
        files = [root] if root.is_file() else sorted(root.rglob("*.py")) if root.is_dir() else []
        for file in files:
            if "__pycache__" in file.parts:
                continue
            try:
                source = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            found.extend(citations_in_source(source, file))
    return found


def suite_paths() -> list[Path]:
    """The installed suite: the ``ackspec.conformance`` package (broker suite and client-side suite),
    wherever ackspec is installed, whatever the current directory."""
    return [Path(__file__).resolve().parent.parent / "conformance"]


def project_test_paths() -> list[Path]:
    """The project's own tests (``tests/`` of the source checkout ackspec runs from), if there is one.

    They run against the reference implementation only, never against a user's broker, so they are
    counted only on request (``ackspec spec coverage --include-project-tests``)."""
    repo = Path(__file__).resolve().parent.parent.parent.parent
    tests = repo / "tests"
    return [tests] if (repo / "pyproject.toml").is_file() and tests.is_dir() else []


def default_scan_paths(*, include_project_tests: bool = False) -> list[Path]:
    """What coverage counts: the installed suite, and the project's tests when asked."""
    return suite_paths() + (project_test_paths() if include_project_tests else [])
