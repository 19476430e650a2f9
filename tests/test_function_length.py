"""No function of the package or its benchmarks is longer than 80 lines (issue 19).

ruff bounds a function's statements (PLR0915) and its McCabe complexity (C901); neither bounds its
length on screen, which is what a reader meets: a long f-string or literal is one statement. So the
lines are counted here, from the ``def`` to its last line, decorators and docstring included.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import ackspec

LIMIT = 80
ROOTS = (Path(ackspec.__file__).parent, Path(__file__).parents[1] / "benchmarks")


def _functions(path: Path) -> Iterator[tuple[str, int]]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            yield f"{path}:{node.lineno} {node.name}", (node.end_lineno or node.lineno) - first + 1


def test_no_function_is_longer_than_80_lines() -> None:
    long = [f"{where} ({lines} lines)" for root in ROOTS if root.is_dir()
            for path in sorted(root.rglob("*.py")) for where, lines in _functions(path) if lines > LIMIT]
    assert not long, f"functions over {LIMIT} lines (split them into named steps):\n" + "\n".join(long)


def test_the_scan_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "long.py").write_text(f"def long() -> None:\n{body}\n", encoding="utf-8")
    assert [lines for _, lines in _functions(tmp_path / "long.py")] == [LIMIT + 1]
