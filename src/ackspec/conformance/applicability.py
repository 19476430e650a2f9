"""Which cited requirements a target can be tested for: the catalogue's ``capabilities``, not the test.

Every requirement of the catalogue lists the capabilities a test of it needs (``capabilities:`` in
the YAML, :class:`ackspec.adapters.base.Capability` values). The plugin compares them with what the
driver offers against the target, before the test runs:

* if no cited requirement can be tested, the test does not run: it is not-applicable, naming the
  first requirement and the capability it lacks;
* otherwise it runs, and each requirement that lacks a capability is not-applicable (naming it)
  unless the test found it violated anyway (a failure is never hidden by a capability claim).

So a test states what it checks (``@requirement(...)``) and nothing about what it needs: a
capability the rule needs is written once, in the catalogue. A test still calls
``harness.require`` only for what its own mechanics need beyond the rules it checks (a restart
command, fault injection on the embedded broker), or what only some of its requirements need;
``tests/conformance/test_no_restated_capabilities.py`` fails on a required capability that every
requirement the test cites already lists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType

from ackspec.adapters.base import NotSupported
from ackspec.results import Verdict
from ackspec.spec import load_catalogue


def missing_capabilities(requirements: Sequence[str], available: Iterable[str]) -> Mapping[str, str]:
    """``{requirement: first capability it needs and the target lacks}`` for the untestable ones."""
    have = {str(c) for c in available}
    catalogue = load_catalogue()
    missing: dict[str, str] = {}
    for rid in requirements:
        if rid not in catalogue:
            continue
        lacking = [c for c in catalogue.get(rid).capabilities if c not in have]
        if lacking:
            missing[rid] = lacking[0]
    return MappingProxyType(missing)


def gate(requirements: Sequence[str], available: Iterable[str], target: str) -> Mapping[str, str]:
    """The untestable cited requirements; :class:`NotSupported` when that is all of them."""
    missing = missing_capabilities(requirements, available)
    if requirements and len(missing) == len(requirements):
        first = requirements[0]
        raise NotSupported(missing[first], f"{first} needs it (catalogue), {target} lacks it")
    return missing


UNCHECKED = frozenset({Verdict.PASS, Verdict.STALE, Verdict.INDETERMINATE})
"""Verdicts a requirement without its capabilities cannot have earned: the test did not exercise it."""


def not_applicable_message(requirement: str, capability: str, target: str) -> str:
    return f"needs capability {capability}: {requirement} needs it (catalogue), {target} lacks it"
