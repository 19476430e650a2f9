"""Finding and checking a profile's file: what broker (target) profiles and client profiles share.

Both kinds are one YAML file per profile in a folder of ``spec/`` (``targets/``, ``clients/``), named
by file name or given as a path; both must carry their file's name and cite only requirements of the
catalogue. Written once here so the two loaders cannot drift apart.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ackspec.spec.errors import SpecError, UnknownRequirement
from ackspec.spec.model import Catalogue
from ackspec.spec.validation import display, where


def available(folder: Path) -> list[str]:
    """The names of the profiles in ``folder`` (none when it does not exist)."""
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def profile_file(name_or_path: str | Path, folder: Path, kind: str) -> Path:
    """A profile's file: a path given as such, or ``folder/NAME.yaml``; :class:`SpecError` when there is none.

    ``kind`` names the profile in the message (``profile``, ``client profile``)."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or len(candidate.parts) > 1:
        if not candidate.is_file():
            raise SpecError(f"{display(candidate)}: {kind} file not found")
        return candidate
    path = folder / f"{name_or_path}.yaml"
    if not path.is_file():
        known = ", ".join(available(folder)) or "none"
        raise SpecError(f"unknown {kind} {str(name_or_path)!r} (known: {known})")
    return path


def check_name(data: dict[str, Any], path: Path, text: str) -> None:
    """A profile's ``name`` is its file's name, so the name a user types finds it."""
    if data["name"] != path.stem:
        raise SpecError(f"{where(path, text, ['name'])}: name: {data['name']!r} does not match the file name "
                        f"(expected {path.stem!r})")


def check_requirement(rid: str, catalogue: Catalogue, here: str) -> None:
    """A deviation cites a requirement of the catalogue (``here``: where the deviation is, for the message)."""
    if rid not in catalogue:
        raise SpecError(str(UnknownRequirement(rid, catalogue.ids, where=f"{here}.requirement")))


def observed_in(check: str | None, message: str) -> bool:
    """Whether a failure's message shows what a deviation's ``check`` says was observed: ``check`` found
    anywhere in it, ``*`` standing for any text and every other character (brackets too) literal; no
    ``check`` matches any failure. The same rule for target and client profiles."""
    if check is None:
        return True
    pattern = ".*".join(re.escape(part) for part in check.strip("*").split("*"))
    return re.search(pattern, message, re.DOTALL) is not None
