"""The package's layers point one way: a module imports its own part or a lower layer, never a higher one.

spec -> history/results -> reference/adapters -> conformance -> pipeline/bench -> cli (README,
"Architecture"). Read with ``ast`` from the source, so an import inside a function counts as much as one
at the top of a module. Inside one layer the only allowed direction is adapters -> reference (the
drivers of the embedded broker start it); the reference implementation knows nothing of its drivers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "ackspec"

LAYERS: dict[str, int] = {
    "errors": 0,  # the one error type every part reports with
    "net": 1, "brokers": 1, "__init__": 1,  # shared leaves: sockets, where brokers/ is, the version
    "spec": 2,
    "history": 3, "results": 3,
    "reference": 4, "adapters": 4,
    "conformance": 5,
    "pipeline": 6, "bench": 6,
    "cli": 7,
    "__main__": 8,
}
SIDEWAYS: frozenset[tuple[str, str]] = frozenset({("adapters", "reference")})
"""Imports allowed between two parts of the same layer: (importer, imported)."""


def part_of(path: Path) -> str:
    """The top-level part a module belongs to: its subpackage, or its own name for a top-level module."""
    first = path.relative_to(PACKAGE).parts[0]
    return first.removesuffix(".py")


def imported_parts(tree: ast.AST) -> Iterator[tuple[int, str, str]]:
    """``(line, module, part)`` of every absolute import of another ackspec module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] if node.module != "ackspec" else [f"ackspec.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "ackspec" and len(parts) > 1:
                yield node.lineno, name, parts[1]


def upward_imports(path: Path) -> list[str]:
    """One line per import in ``path`` that points at a higher layer (or sideways, unless allowed)."""
    here = part_of(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for line, module, there in imported_parts(tree):
        if there == here or there not in LAYERS:
            continue
        if LAYERS[there] > LAYERS[here] or (LAYERS[there] == LAYERS[here] and (here, there) not in SIDEWAYS):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {here} (layer {LAYERS[here]}) imports "
                         f"{module} ({there}, layer {LAYERS[there]})")
    return found


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_part_of_the_package_has_a_layer() -> None:
    assert {part_of(path) for path in modules()} <= set(LAYERS)


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_a_higher_layer(path: Path) -> None:
    found = upward_imports(path)
    assert not found, "\n".join(found)


def test_the_check_names_an_upward_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec module importing a driver is caught, with file, line, and both parts named."""
    fake = tmp_path / "ackspec"
    (fake / "spec").mkdir(parents=True)
    bad = fake / "spec" / "loader.py"
    bad.write_text("import json\n\ndef load():\n    from ackspec.adapters.base import Adapter\n    return Adapter\n",
                   encoding="utf-8")
    monkeypatch.setitem(globals(), "PACKAGE", fake)
    assert upward_imports(bad) == [
        "ackspec/spec/loader.py:4: spec (layer 2) imports ackspec.adapters.base (adapters, layer 4)"]
    sideways = fake / "reference" / "core.py"
    sideways.parent.mkdir()
    sideways.write_text("from ackspec.adapters import base\nfrom ackspec.spec import load_catalogue\n",
                        encoding="utf-8")
    assert upward_imports(sideways) == [
        "ackspec/reference/core.py:1: reference (layer 4) imports ackspec.adapters (adapters, layer 4)"]
