"""The machine-readable requirement catalogue and target profiles.

    from ackspec.spec import load_catalogue, load_profile
    catalogue = load_catalogue()
    catalogue.get("JMS-7.3.8-CALLBACK-ORDER").level      # Level.MUST
    load_profile("rabbitmq-3.10").deviations              # {requirement ID: (Deviation, ...)}

The data lives in the repository's ``spec/`` folder (:mod:`ackspec.spec.data`): ``catalogue/*.yaml``
(one file per requirement family), ``targets/*.yaml`` (one file per broker), ``clients/*.yaml`` (one
file per client library and version) and ``schema/*.schema.json``.
"""

from __future__ import annotations

from ackspec.spec.catalogue import clear_cache, load_catalogue
from ackspec.spec.data import CATALOGUE_DIR, CLIENTS_DIR, SCHEMA_DIR, SPEC_DIR, TARGETS_DIR
from ackspec.spec.errors import SpecError, UnknownFamily, UnknownRequirement
from ackspec.spec.model import (
    Catalogue,
    Deviation,
    Family,
    Level,
    Parameter,
    Requirement,
    Role,
    Source,
    TargetProfile,
    Technique,
)
from ackspec.spec.profiles import available_profiles, load_profile

__all__ = [
    "CATALOGUE_DIR",
    "CLIENTS_DIR",
    "SCHEMA_DIR",
    "SPEC_DIR",
    "TARGETS_DIR",
    "Catalogue",
    "Deviation",
    "Family",
    "Level",
    "Parameter",
    "Requirement",
    "Role",
    "Source",
    "SpecError",
    "TargetProfile",
    "Technique",
    "UnknownFamily",
    "UnknownRequirement",
    "available_profiles",
    "clear_cache",
    "load_catalogue",
    "load_profile",
]
