"""Where the catalogue's data lives: the repository's ``spec/`` folder, or the copy packed in the wheel.

The requirement YAML, its JSON Schemas and the broker and client profiles are language-neutral data
that the Java shim, other-language client maintainers and auditors read too, so they sit at the
top of the repository (``spec/catalogue``, ``spec/schema``, ``spec/targets``, ``spec/clients``), not
inside the Python package. In a checkout (an editable install, or ``PYTHONPATH=src``) the package
reads them there, so an edit is seen at once; a built wheel carries a copy as ``ackspec/spec/data/``
(``setup.py`` packs it), which an installed package reads instead.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent
_CHECKOUT = _HERE.parents[2] / "spec"  # src/ackspec/spec/data.py -> <repository>/spec
_BUNDLED = _HERE / "data"


def _spec_dir() -> Path:
    if (_CHECKOUT / "catalogue").is_dir() and (_CHECKOUT / "schema").is_dir():
        return _CHECKOUT
    return _BUNDLED


SPEC_DIR = _spec_dir()
"""The root of the catalogue's data: ``<checkout>/spec`` or, installed from a wheel, ``ackspec/spec/data``."""

CATALOGUE_DIR = SPEC_DIR / "catalogue"
"""The requirement families, one YAML file each."""

SCHEMA_DIR = SPEC_DIR / "schema"
"""The JSON Schemas of the requirement, target-profile and client-profile files."""

TARGETS_DIR = SPEC_DIR / "targets"
"""The broker (target) profiles."""

CLIENTS_DIR = SPEC_DIR / "clients"
"""The client-library profiles."""
