"""Loading target profiles: ``targets/NAME.yaml`` -> :class:`~ackspec.spec.model.TargetProfile`.

A profile is validated against ``schema/target.schema.json``; its name must equal the file name,
its features must be :class:`ackspec.spec.capabilities.Capability` values, and every deviation must
name a requirement of the catalogue and be scoped to the behaviour it documents: ``test`` (required,
a pytest node-id glob), optionally ``check`` (text the failure's message must contain, ``*`` for any
text: what was observed) and ``protocols`` (``stomp`` covers STOMP over TCP and over WebSocket, ``stomp-ws``
only a ``ws://`` target). A requirement may be listed more than once, with different scopes.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from ackspec.spec.catalogue import CAPABILITIES, load_catalogue
from ackspec.spec.data import TARGETS_DIR
from ackspec.spec.errors import SpecError, UnknownRequirement
from ackspec.spec.model import Deviation, TargetProfile
from ackspec.spec.validation import check, display, read_yaml, where


def _scope(deviation: Deviation) -> tuple[str, str | None, tuple[str, ...]]:
    return deviation.test, deviation.check, deviation.protocols


def available_profiles(root: Path | None = None) -> list[str]:
    folder = Path(root) if root is not None else TARGETS_DIR
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def profile_path(name_or_path: str | Path, root: Path | None = None) -> Path:
    """A bundled profile's file by name, or the given file; :class:`SpecError` when there is none."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or len(candidate.parts) > 1:
        if not candidate.is_file():
            raise SpecError(f"{display(candidate)}: profile file not found")
        return candidate
    folder = Path(root) if root is not None else TARGETS_DIR
    path = folder / f"{name_or_path}.yaml"
    if not path.is_file():
        known = ", ".join(available_profiles(folder)) or "none"
        raise SpecError(f"unknown profile {str(name_or_path)!r} (known: {known})")
    return path


def load_profile(name_or_path: str | Path, *, catalogue_root: Path | None = None) -> TargetProfile:
    """The validated profile; its deviations are checked against the catalogue of ``catalogue_root``."""
    path = profile_path(name_or_path)
    data, text = read_yaml(path)
    check(data, "target", path, text)
    if data["name"] != path.stem:
        raise SpecError(f"{where(path, text, ['name'])}: name: {data['name']!r} does not match the file name "
                        f"(expected {path.stem!r})")
    for index, feature in enumerate(data["features"]):
        if feature not in CAPABILITIES:
            raise SpecError(f"{where(path, text, ['features', index])}: features[{index}]: unknown capability "
                            f"{feature!r} (see ackspec.spec.capabilities.Capability)")
    catalogue = load_catalogue(catalogue_root)
    deviations: dict[str, list[Deviation]] = {}
    for index, raw in enumerate(data["deviations"]):
        here = f"{where(path, text, ['deviations', index])}: deviations[{index}]"
        rid = raw["requirement"]
        if rid not in catalogue:
            raise SpecError(str(UnknownRequirement(rid, catalogue.ids, where=f"{here}.requirement")))
        deviation = Deviation(requirement=rid, reason=" ".join(raw["reason"].split()),
                              observed=" ".join(raw["observed"].split()), test=raw["test"],
                              status=raw.get("status", "seeded"), check=raw.get("check"),
                              protocols=tuple(raw.get("protocols") or ()),
                              intermittent=bool(raw.get("intermittent", False)), link=raw.get("link"))
        same = [d for d in deviations.get(rid, []) if _scope(d) == _scope(deviation)]
        if same:
            raise SpecError(f"{here}: {rid} is listed twice with the same scope (test, check, protocols); "
                            "merge the two entries")
        deviations.setdefault(rid, []).append(deviation)
    return TargetProfile(
        name=data["name"],
        title=data["title"],
        description=" ".join(data["description"].split()),
        path=path,
        urls=MappingProxyType({proto: entry["url"] for proto, entry in data["protocols"].items()}),
        connection=MappingProxyType(dict(data.get("connection") or {})),
        settings=MappingProxyType(dict(data.get("settings") or {})),
        features=frozenset(data["features"]),
        knobs=MappingProxyType(dict(data.get("knobs") or {})),
        deviations=MappingProxyType({rid: tuple(found) for rid, found in deviations.items()}),
        raw=MappingProxyType(data),
    )
