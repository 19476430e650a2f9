"""The catalogue as typed, immutable values: families, requirements, parameters, target profiles.

These are what the rest of ackspec reads (the suite's markers, reports, the pipeline); the YAML under
``catalogue/`` and ``targets/`` is their only source, read by :mod:`ackspec.spec.catalogue` and
:mod:`ackspec.spec.profiles`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ackspec.spec.domains import Domain
from ackspec.spec.errors import UnknownFamily, UnknownRequirement


class Level(StrEnum):
    """How binding a requirement is. UNDEF: the source leaves the outcome open; checkers accept either."""

    MUST = "MUST"
    MUST_NOT = "MUST-NOT"
    SHOULD = "SHOULD"
    SHOULD_NOT = "SHOULD-NOT"
    MAY = "MAY"
    UNDEF = "UNDEF"


class Role(StrEnum):
    """Who a requirement binds."""

    BROKER = "broker"
    CLIENT = "client"
    BOTH = "both"
    APPLICATION = "application"


class Technique(StrEnum):
    """How a test checks it: one example, a property, a stateful model, a recorded history, or timing."""

    EXAMPLE = "example"
    PROPERTY = "property"
    STATEFUL = "stateful"
    HISTORY = "history"
    TIMING = "timing"


PROTOCOLS: tuple[str, ...] = ("stomp", "amqp", "jms", "any")


def _frozen(mapping: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True, slots=True)
class Parameter:
    """A named value a requirement depends on (an ack mode number, a factor, a flag's default).

    ``domain`` is as written in the YAML; ``values`` is it parsed (:mod:`ackspec.spec.domains`), what
    the suite draws test values from (:mod:`ackspec.conformance.strategies`).
    """

    name: str
    type: str
    description: str
    default: Any = None
    domain: str | tuple[Any, ...] | None = None
    unit: str | None = None
    aliases: tuple[str, ...] = ()
    values: Domain | None = None


@dataclass(frozen=True, slots=True)
class Source:
    """Where a requirement comes from: document and section (seeds: file and heading)."""

    document: str
    section: str
    url: str | None = None
    seed: str | None = None

    def __str__(self) -> str:
        seed = f" [seed {self.seed}]" if self.seed else ""
        return f"{self.document}, {self.section}{seed}"


@dataclass(frozen=True, slots=True)
class Family:
    """A group of related requirements: one YAML file of the catalogue."""

    id: str
    title: str
    description: str
    path: Path
    prefixes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Requirement:
    """One checkable rule with a stable ID."""

    id: str
    title: str
    rule: str
    level: Level
    source: Source
    role: Role
    protocols: tuple[str, ...]
    testable: bool
    technique: Technique
    family: str
    capabilities: tuple[str, ...] = ()
    parameters: Mapping[str, Parameter] = field(default_factory=_frozen)
    untestable_reason: str | None = None
    tck: str | None = None
    notes: str | None = None

    @property
    def normative(self) -> bool:
        """MUST and MUST-NOT: a failure makes a target non-conformant."""
        return self.level in (Level.MUST, Level.MUST_NOT)


@dataclass(frozen=True, slots=True)
class Catalogue:
    """All requirements, in file order, with their families."""

    requirements: Mapping[str, Requirement]
    families: Mapping[str, Family]
    root: Path

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(self.requirements)

    def get(self, requirement_id: str) -> Requirement:
        """The requirement, or :class:`UnknownRequirement` with a clear message (and a close match)."""
        try:
            return self.requirements[requirement_id]
        except KeyError:
            raise UnknownRequirement(requirement_id, self.requirements) from None

    def family(self, family_id: str) -> Family:
        try:
            return self.families[family_id]
        except KeyError:
            raise UnknownFamily(family_id, self.families) from None

    def in_family(self, family_id: str) -> tuple[Requirement, ...]:
        self.family(family_id)
        return tuple(r for r in self.requirements.values() if r.family == family_id)

    def select(self, *, family: str | None = None, level: str | None = None, role: str | None = None,
               protocol: str | None = None) -> tuple[Requirement, ...]:
        """Requirements matching every given filter (``protocol`` also matches ``any``)."""
        if family is not None:
            self.family(family)
        out = []
        for req in self.requirements.values():
            if family is not None and req.family != family:
                continue
            if level is not None and req.level != level:
                continue
            if role is not None and req.role != role:
                continue
            if protocol is not None and protocol not in req.protocols and "any" not in req.protocols:
                continue
            out.append(req)
        return tuple(out)

    def __contains__(self, requirement_id: object) -> bool:
        return requirement_id in self.requirements

    def __iter__(self) -> Iterator[Requirement]:
        return iter(self.requirements.values())

    def __len__(self) -> int:
        return len(self.requirements)


@dataclass(frozen=True, slots=True)
class Deviation:
    """A known, explained way a target breaks a requirement, scoped to the behaviour it documents.

    It excuses a failure of ``requirement`` only in the tests ``test`` matches (a pytest node-id glob),
    over ``protocols`` (empty: all), and, when ``check`` is given, only a failure whose message matches
    that glob (what was observed); any other failure of the requirement stays a failure.
    """

    requirement: str
    reason: str
    observed: str
    test: str
    status: str = "seeded"  # seeded (from observation notes, not yet confirmed by a run) | verified
    check: str | None = None
    protocols: tuple[str, ...] = ()
    intermittent: bool = False
    link: str | None = None


@dataclass(frozen=True, slots=True)
class TargetProfile:
    """A real or reference target as data: URLs, driver settings, features, knobs and deviations."""

    name: str
    title: str
    description: str
    path: Path
    urls: Mapping[str, str]
    connection: Mapping[str, Any]
    settings: Mapping[str, Any]
    features: frozenset[str]
    knobs: Mapping[str, Any]
    deviations: Mapping[str, tuple[Deviation, ...]]
    """Per requirement, its deviations (several when it deviates in several documented ways)."""
    raw: Mapping[str, Any]
    """The profile exactly as read (what :class:`ackspec.adapters.settings.TargetSettings` digests)."""

    def deviation(self, requirement_id: str) -> tuple[Deviation, ...]:
        return self.deviations.get(requirement_id, ())

    def has(self, feature: str) -> bool:
        return str(feature) in self.features
