"""Loading the requirement catalogue: ``catalogue/*.yaml`` -> :class:`~ackspec.spec.model.Catalogue`.

Each file is one family, validated against ``schema/requirement.schema.json``, then checked for
what a schema cannot say: the family id equals the file name, IDs carry one of the family's
prefixes and are unique across files, capabilities exist in
:class:`ackspec.spec.capabilities.Capability`, domains parse (:mod:`ackspec.spec.domains`) and parameter
defaults fit their type and domain. The first
problem found raises :class:`~ackspec.spec.errors.SpecError` naming file, line and field.

The result is cached per directory and file stamps: every pytest collection reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ackspec.spec.capabilities import Capability
from ackspec.spec.data import CATALOGUE_DIR
from ackspec.spec.domains import DomainError, Enumeration, contains, describe, parse_domain
from ackspec.spec.errors import SpecError
from ackspec.spec.model import Catalogue, Family, Level, Parameter, Requirement, Role, Source, Technique
from ackspec.spec.validation import check, display, read_yaml, where

CAPABILITIES: frozenset[str] = frozenset(c.value for c in Capability)

_cache: dict[tuple[str, tuple[tuple[str, int, int], ...]], Catalogue] = {}


def catalogue_files(root: Path | None = None) -> list[Path]:
    folder = Path(root) if root is not None else CATALOGUE_DIR
    if not folder.is_dir():
        raise SpecError(f"{display(folder)}: catalogue directory not found")
    files = sorted(folder.glob("*.yaml"))
    if not files:
        raise SpecError(f"{display(folder)}: no *.yaml requirement files")
    return files


def load_catalogue(root: Path | None = None) -> Catalogue:
    """The validated catalogue of ``root`` (default: the bundled one), cached until a file changes."""
    files = catalogue_files(root)
    stamps = tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in files)
    key = (str(files[0].parent.resolve()), stamps)
    cached = _cache.get(key)
    if cached is None:
        cached = _load(files)
        _cache.clear()  # only the newest state of any directory is worth keeping in a long session
        _cache[key] = cached
    return cached


def clear_cache() -> None:
    _cache.clear()


def _load(files: list[Path]) -> Catalogue:
    requirements: dict[str, Requirement] = {}
    origin: dict[str, _Locator] = {}
    families: dict[str, Family] = {}
    for path in files:
        data, text = read_yaml(path)
        check(data, "requirement", path, text)
        family = _family(data["family"], path, text)
        families[family.id] = family
        for index, raw in enumerate(data["requirements"]):
            locate = _Locator(path, text, index, raw["id"])
            req = _requirement(raw, family, locate)
            if req.id in requirements:
                raise SpecError(f"{locate}: duplicate requirement ID {req.id}, already defined at "
                                f"{origin[req.id].position()} ({origin[req.id].label()})")
            requirements[req.id] = req
            origin[req.id] = locate
    return Catalogue(requirements=MappingProxyType(requirements), families=MappingProxyType(families),
                     root=files[0].parent)


class _Locator:
    """Where a requirement is, computed only when an error needs it (finding lines re-parses the file)."""

    def __init__(self, path: Path, text: str, index: int, rid: str) -> None:
        self.path, self.text, self.index, self.rid = path, text, index, rid

    def position(self) -> str:
        return where(self.path, self.text, ["requirements", self.index])

    def label(self) -> str:
        return f"requirements[{self.index}]"

    def __str__(self) -> str:
        return f"{self.position()}: {self.label()} ({self.rid})"


def _family(raw: Mapping[str, Any], path: Path, text: str) -> Family:
    if raw["id"] != path.stem:
        raise SpecError(f"{where(path, text, ['family', 'id'])}: family.id: unknown family {raw['id']!r}: "
                        f"a family file declares its own id (expected {path.stem!r})")
    return Family(id=raw["id"], title=raw["title"], description=" ".join(raw["description"].split()), path=path,
                  prefixes=tuple(raw.get("prefixes", ())))


def _requirement(raw: Mapping[str, Any], family: Family, here: _Locator) -> Requirement:
    rid = raw["id"]
    if family.prefixes and rid.split("-", 1)[0] not in family.prefixes:
        raise SpecError(f"{here}.id: prefix of {rid} is not one of this family's prefixes "
                        f"({', '.join(family.prefixes)})")
    unknown = [c for c in raw["capabilities"] if c not in CAPABILITIES]
    if unknown:
        raise SpecError(f"{here}.capabilities: unknown capability {unknown[0]!r} "
                        f"(see ackspec.adapters.base.Capability)")
    if raw["testable"] and raw.get("untestable_reason"):
        raise SpecError(f"{here}.untestable_reason: given, but testable is true")
    params = {name: _parameter(name, spec, here) for name, spec in (raw.get("parameters") or {}).items()}
    src = raw["source"]
    return Requirement(
        id=rid,
        title=raw["title"],
        rule=" ".join(raw["rule"].split()),
        level=Level(raw["level"]),
        source=Source(document=src["document"], section=str(src["section"]), url=src.get("url"),
                      seed=src.get("seed")),
        role=Role(raw["role"]),
        protocols=tuple(raw["protocols"]),
        testable=bool(raw["testable"]),
        technique=Technique(raw["technique"]),
        family=family.id,
        capabilities=tuple(raw["capabilities"]),
        parameters=MappingProxyType(params),
        untestable_reason=raw.get("untestable_reason"),
        tck=raw.get("tck"),
        notes=" ".join(raw["notes"].split()) if raw.get("notes") else None,
    )


_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int,), "number": (int, float), "duration": (int, float), "boolean": (bool,), "string": (str,),
}


def _parameter(name: str, raw: Mapping[str, Any], here: _Locator) -> Parameter:
    kind = raw["type"]
    default = raw.get("default")
    domain = raw.get("domain")
    values = None
    if domain is not None:
        try:
            values = parse_domain(domain, kind, raw.get("unit"))
        except DomainError as exc:
            raise SpecError(f"{here}.parameters.{name}.domain: {exc}") from None
    elif kind == "boolean":
        values = Enumeration((True, False))
    if default is not None:
        allowed = _PYTHON_TYPES.get(kind)
        wrong_bool = isinstance(default, bool) and kind in ("integer", "number", "duration")
        if (allowed is not None and not isinstance(default, allowed)) or wrong_bool:
            raise SpecError(f"{here}.parameters.{name}.default: {default!r} is not of type {kind}")
        if values is not None and not contains(values, default):
            raise SpecError(f"{here}.parameters.{name}.default: {default!r} is not in its domain "
                            f"{describe(values)}")
    return Parameter(name=name, type=kind, description=raw["description"], default=default,
                     domain=tuple(domain) if isinstance(domain, list) else domain, unit=raw.get("unit"),
                     aliases=tuple(raw.get("aliases", ())), values=values)
