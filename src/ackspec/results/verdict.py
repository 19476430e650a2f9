"""The verdict lattice: what a requirement can be found to be on a target.

Per test, then per requirement (the worst verdict of its tests wins, in the
order of :data:`SEVERITY`). ``stale`` is a listed deviation that did not happen:
the profile is out of date, and that fails the run so profiles stay true.
``indeterminate`` is neither pass nor fail: something needed for a decision was
not observed (a connection died before its receipt).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    DEVIATION = "deviation"  # failed, and the target's profile documents this deviation
    STALE = "stale"  # the profile lists a deviation, but the requirement passed
    NOT_APPLICABLE = "not-applicable"  # the target or driver lacks a needed capability
    INDETERMINATE = "indeterminate"
    ERROR = "error"  # the suite could not run the check (a bug, a connection refused)


SEVERITY: tuple[Verdict, ...] = (
    Verdict.FAIL,
    Verdict.STALE,
    Verdict.ERROR,
    Verdict.DEVIATION,
    Verdict.INDETERMINATE,
    Verdict.PASS,
    Verdict.NOT_APPLICABLE,
)
"""Worst first: combining verdicts picks the earliest one present."""


def combine(verdicts: Iterable[Verdict]) -> Verdict:
    """The verdict of a requirement from the verdicts of its tests."""
    present = set(verdicts)
    for verdict in SEVERITY:
        if verdict in present:
            return verdict
    return Verdict.NOT_APPLICABLE


def is_failure(verdict: Verdict, *, strict: bool = False) -> bool:
    """Does this verdict make the run non-conformant? ``--strict`` also counts deviations."""
    if verdict in (Verdict.FAIL, Verdict.STALE, Verdict.ERROR):
        return True
    return strict and verdict is Verdict.DEVIATION
