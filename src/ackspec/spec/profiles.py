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
from ackspec.spec.errors import SpecError
from ackspec.spec.model import Deviation, TargetProfile
from ackspec.spec.profile_files import available, check_name, check_requirement, profile_file
from ackspec.spec.validation import check, read_yaml, where


def _scope(deviation: Deviation) -> tuple[str, str | None, tuple[str, ...]]:
    return deviation.test, deviation.check, deviation.protocols


def available_profiles(root: Path | None = None) -> list[str]:
    return available(Path(root) if root is not None else TARGETS_DIR)


def profile_path(name_or_path: str | Path, root: Path | None = None) -> Path:
    """A bundled profile's file by name, or the given file; :class:`SpecError` when there is none."""
    return profile_file(name_or_path, Path(root) if root is not None else TARGETS_DIR, "profile")


def load_profile(name_or_path: str | Path, *, catalogue_root: Path | None = None) -> TargetProfile:
    """The validated profile; its deviations are checked against the catalogue of ``catalogue_root``."""
    path = profile_path(name_or_path)
    data, text = read_yaml(path)
    check(data, "target", path, text)
    check_name(data, path, text)
    for index, feature in enumerate(data["features"]):
        if feature not in CAPABILITIES:
            raise SpecError(f"{where(path, text, ['features', index])}: features[{index}]: unknown capability "
                            f"{feature!r} (see ackspec.spec.capabilities.Capability)")
    catalogue = load_catalogue(catalogue_root)
    deviations: dict[str, list[Deviation]] = {}
    for index, raw in enumerate(data["deviations"]):
        here = f"{where(path, text, ['deviations', index])}: deviations[{index}]"
        rid = raw["requirement"]
        check_requirement(rid, catalogue, here)
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
