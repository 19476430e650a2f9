"""From a test's outcome to one verdict per requirement it cites.

A test cites one or more requirements. How it ended decides their verdicts:

==============================  =====================================================
outcome                         verdict of each cited requirement
==============================  =====================================================
passed                          pass; *stale* if the profile lists it as a deviation
:class:`RequirementViolation`   the named requirement fails (or is a *deviation* when
                                the profile lists it); the others are indeterminate
                                (not decided: the test stopped before checking them)
AssertionError, AdapterError    fail, or deviation where the profile lists it
:class:`TargetUnreachable`      error: nothing answered a connection attempt
:class:`NotSupported`           not-applicable, naming the capability
:class:`Indeterminate`          indeterminate (a connection died before its receipt)
anything else                   error: the suite itself broke or the target is down
==============================  =====================================================

Tests should raise :class:`RequirementViolation` (through :func:`check`, :class:`Checks` or
:func:`violation`) when they cite several requirements, so a failure is charged to the right one.
These helpers take the requirement from the running test's decorator, never as a literal: a test
citing one requirement names none, a test citing several names it as ``requirement=req.NAME``
(:mod:`ackspec.conformance.cited`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ackspec.adapters.base import AdapterError, Indeterminate, NotSupported, TargetUnreachable
from ackspec.conformance.cited import judged
from ackspec.results import Verdict


class RequirementViolation(AssertionError):
    """A check of one named requirement failed; ``operations`` are history indexes showing it."""

    def __init__(self, requirement: str, message: str, operations: Iterable[int] = ()) -> None:
        self.requirement = requirement
        self.operations = tuple(operations)
        super().__init__(f"{requirement}: {message}")


class TargetUnavailable(Exception):
    """The target could not be reached at all (nothing listening, refused): an error, not a failure."""


def check(condition: object, message: str, operations: Iterable[int] = (), *, requirement: str | None = None) -> None:
    """Assert ``condition`` on behalf of ``requirement`` (``req.NAME``; default: the test's only cited one)."""
    charged = judged(requirement)  # before the condition: a wrong citation shows even when the check holds
    if not condition:
        raise RequirementViolation(charged, message, operations)


def violation(message: str, operations: Iterable[int] = (), *, requirement: str | None = None) -> RequirementViolation:
    """A violation of ``requirement`` (``req.NAME``; default: the test's only cited one), to ``raise``."""
    return RequirementViolation(judged(requirement), message, operations)


class RequirementViolations(AssertionError):
    """Several requirements checked by one test failed (soft checks, see :class:`Checks`)."""

    def __init__(self, violations: list[RequirementViolation], checked: Iterable[str] = ()) -> None:
        self.violations = violations
        self.held = frozenset(checked) - {v.requirement for v in violations}
        super().__init__("; ".join(str(v) for v in violations))


class Checks:
    """Soft checks: test every cited requirement, then fail once naming each violated one.

    The requirements checked and not violated pass, so one broker bug does not
    hide the verdicts of the test's other requirements.
    """

    def __init__(self) -> None:
        self.violations: list[RequirementViolation] = []
        self.checked: set[str] = set()

    def check(self, condition: object, message: str, operations: Iterable[int] = (), *,
              requirement: str | None = None) -> bool:
        """Note whether ``condition`` held for ``requirement`` (``req.NAME``; default: the test's only one)."""
        charged = judged(requirement)
        self.checked.add(charged)
        if not condition:
            self.violations.append(RequirementViolation(charged, message, operations))
        return bool(condition)

    def done(self) -> None:
        if self.violations:
            raise RequirementViolations(self.violations, self.checked)


class OutcomeKind(StrEnum):
    PASSED = "passed"
    VIOLATION = "violation"
    FAILED = "failed"
    NOT_APPLICABLE = "not-applicable"
    INDETERMINATE = "indeterminate"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Outcome:
    kind: OutcomeKind
    message: str = ""
    requirement: str | None = None
    capability: str | None = None
    operations: tuple[int, ...] = ()
    violations: tuple[RequirementViolation, ...] = ()
    held: frozenset[str] = frozenset()  # requirements checked and not violated (soft checks)


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside exception groups (hypothesis reports several that way)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def classify(exc: BaseException | None) -> Outcome:
    """What kind of ending an exception (or its absence) is."""
    if exc is None:
        return Outcome(OutcomeKind.PASSED)
    exc = _leaf(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, RequirementViolation):
        return Outcome(OutcomeKind.VIOLATION, text, exc.requirement, operations=exc.operations, violations=(exc,))
    if isinstance(exc, RequirementViolations):
        return Outcome(OutcomeKind.VIOLATION, text, exc.violations[0].requirement,
                       operations=exc.violations[0].operations, violations=tuple(exc.violations),
                       held=exc.held)
    if isinstance(exc, NotSupported):
        return Outcome(OutcomeKind.NOT_APPLICABLE, text, capability=exc.capability)
    if isinstance(exc, Indeterminate):
        return Outcome(OutcomeKind.INDETERMINATE, text)
    if isinstance(exc, TargetUnavailable | TargetUnreachable):
        return Outcome(OutcomeKind.ERROR, text)
    if isinstance(exc, AssertionError | AdapterError):
        return Outcome(OutcomeKind.FAILED, text)
    return Outcome(OutcomeKind.ERROR, f"{type(exc).__name__}: {text}")


@dataclass(frozen=True, slots=True)
class RequirementVerdict:
    requirement: str
    verdict: Verdict
    message: str = ""
    capability: str | None = None
    operations: tuple[int, ...] = ()


def decide(requirements: Sequence[str], outcome: Outcome,
           deviations: Mapping[str, str], intermittent: frozenset[str] = frozenset(),
           excuse: Callable[[str, str], str | None] | None = None) -> list[RequirementVerdict]:
    """Verdicts of the cited ``requirements`` given how the test ended and the profile's deviations.

    ``deviations`` maps each requirement with a deviation scoped to this test to its reason. A failure
    is a deviation only when ``excuse(requirement, message)`` names the deviation that documents it
    (its ``check`` matches what was observed); any other failure of that requirement stays a failure.
    Without ``excuse`` every failure of a listed requirement is excused. A deviation in
    ``intermittent`` shows in some runs only: when it held this time the verdict is pass (with a
    note), not stale.
    """

    judge = _Judge(outcome, deviations, intermittent, excuse)
    out = [judge.verdict(req) for req in requirements]
    if outcome.kind is OutcomeKind.VIOLATION:
        extra: dict[str, RequirementViolation] = {}
        for v in outcome.violations:
            if v.requirement not in requirements:
                extra.setdefault(v.requirement, v)
        for req, v in extra.items():  # an oracle (model, history check) named a requirement the test did not cite
            out.append(judge.failed(req, str(v), v.operations))
    return out


@dataclass(frozen=True, slots=True)
class _Judge:
    """One test's ending and the profile's deviations, asked for the verdict of one requirement at a time."""

    outcome: Outcome
    deviations: Mapping[str, str]
    intermittent: frozenset[str]
    excuse: Callable[[str, str], str | None] | None

    def held(self, req: str, how: str) -> RequirementVerdict:
        if req not in self.deviations:
            return RequirementVerdict(req, Verdict.PASS, "" if how == "passed" else "checked and held")
        if req in self.intermittent:
            return RequirementVerdict(req, Verdict.PASS, f"intermittent deviation ({self.deviations[req]}) "
                                                         "did not show this run")
        return RequirementVerdict(req, Verdict.STALE, f"listed as a deviation in the profile "
                                                      f"({self.deviations[req]}) but the test {how}: update the "
                                                      "profile")

    def failed(self, req: str, message: str, ops: tuple[int, ...] = ()) -> RequirementVerdict:
        if req in self.deviations:
            reason = self.deviations[req] if self.excuse is None else self.excuse(req, message)
            if reason is not None:
                return RequirementVerdict(req, Verdict.DEVIATION, f"documented deviation: {reason} "
                                                                  f"(observed: {message})", operations=ops)
            message += f" (not the behaviour its documented deviation describes: {self.deviations[req]})"
        return RequirementVerdict(req, Verdict.FAIL, message, operations=ops)

    def violated(self, req: str) -> RequirementVerdict:
        """A test stopped by a violation: of this requirement, or held before it, or never reached."""
        outcome = self.outcome
        hit = [v for v in outcome.violations if v.requirement == req]
        if hit:
            return self.failed(req, str(hit[0]), hit[0].operations)
        if req in outcome.held:
            return self.held(req, "held")
        return RequirementVerdict(req, Verdict.INDETERMINATE, f"not decided: the test stopped at {outcome.requirement}")

    def verdict(self, req: str) -> RequirementVerdict:
        outcome = self.outcome
        match outcome.kind:
            case OutcomeKind.PASSED:
                return self.held(req, "passed")
            case OutcomeKind.VIOLATION:
                return self.violated(req)
            case OutcomeKind.FAILED:
                return self.failed(req, outcome.message, outcome.operations)
            case OutcomeKind.NOT_APPLICABLE:
                return RequirementVerdict(req, Verdict.NOT_APPLICABLE, outcome.message, capability=outcome.capability)
            case OutcomeKind.INDETERMINATE:
                return RequirementVerdict(req, Verdict.INDETERMINATE, outcome.message)
            case _:
                return RequirementVerdict(req, Verdict.ERROR, outcome.message)
