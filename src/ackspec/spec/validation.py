"""Reading YAML and checking it against the JSON Schemas of ``schema/``, with one-line errors.

A YAML syntax error names the file, line and column; a schema violation names the file, the line of
the offending node and its JSON path (``requirements[3].level``) with the requirement's ID when
there is one. The line numbers come from composing the YAML a second time (only on error).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from ackspec.spec.data import SCHEMA_DIR
from ackspec.spec.errors import SpecError

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available: 10x faster


def display(path: Path) -> str:
    """A short name for messages: relative to the working directory when possible."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def read_yaml(path: Path) -> tuple[Any, str]:
    """The parsed document and its text; :class:`SpecError` with file:line:column on bad YAML."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{display(path)}: cannot read ({exc.strerror or exc})") from exc
    try:
        return yaml.load(text, Loader=_Loader), text
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{display(path)}:{mark.line + 1}:{mark.column + 1}" if mark is not None else display(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(f"{where}: bad YAML: {problem}") from exc


@functools.cache
def schema(name: str) -> dict[str, Any]:
    """A JSON Schema of ``schema/`` by file name (``requirement``, ``target``)."""
    loaded: dict[str, Any] = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))
    return loaded


def json_path(parts: Sequence[Any]) -> str:
    """``['requirements', 3, 'level']`` -> ``requirements[3].level``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def line_of(text: str, parts: Sequence[Any]) -> int | None:
    """1-based line of the YAML node at ``parts``, or of its nearest existing ancestor."""
    try:
        node: Any = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError:  # pragma: no cover - text already parsed once
        return None
    line = None
    for part in parts:
        if node is None:
            break
        line = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            node = None
    if node is not None:
        line = node.start_mark.line + 1
    return line


def where(path: Path, text: str, parts: Sequence[Any]) -> str:
    line = line_of(text, parts)
    return f"{display(path)}:{line}" if line else display(path)


def _label(data: Any, parts: Sequence[Any]) -> str:
    """``requirements[3] (JMS-7.3.8-CALLBACK-ORDER).level``: the ID helps find the entry."""
    label = json_path(parts)
    if len(parts) >= 2 and parts[0] in ("requirements", "deviations") and isinstance(parts[1], int):
        try:
            entry = data[parts[0]][parts[1]]
        except (LookupError, TypeError):
            return label
        ident = entry.get("id") or entry.get("requirement") if isinstance(entry, dict) else None
        if isinstance(ident, str):
            head = json_path(parts[:2])
            return f"{head} ({ident})" + label[len(head):]
    return label


def check(data: Any, schema_name: str, path: Path, text: str) -> None:
    """Raise :class:`SpecError` for the most relevant schema violation, in one line."""
    validator = jsonschema.Draft202012Validator(schema(schema_name))
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is None:
        return
    parts = list(error.absolute_path)
    message = error.message
    if len(message) > 200:
        message = message[:197] + "..."
    raise SpecError(f"{where(path, text, parts)}: {_label(data, parts)}: {message}")
