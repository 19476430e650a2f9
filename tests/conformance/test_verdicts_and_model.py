"""Unit tests of the verdict rules and the queue model (no broker needed)."""

from __future__ import annotations

import pytest

from ackspec.adapters.base import AckMode, AdapterError, Indeterminate, NotSupported, TargetUnreachable
from ackspec.conformance.cited import running
from ackspec.conformance.model import QueueModel
from ackspec.conformance.verdicts import Checks, RequirementViolation, RequirementViolations, classify, decide
from ackspec.results import Verdict


def verdicts(reqs: list[str], exc: BaseException | None,
             deviations: dict[str, str] | None = None) -> dict[str, Verdict]:
    return {v.requirement: v.verdict for v in decide(reqs, classify(exc), deviations or {})}


def test_pass_and_stale() -> None:
    assert verdicts(["A", "B"], None, {"B": "known"}) == {"A": Verdict.PASS, "B": Verdict.STALE}


def test_intermittent_deviation_that_did_not_show_passes() -> None:
    got = decide(["A", "B"], classify(None), {"A": "known", "B": "sometimes"}, frozenset({"B"}))
    assert {v.requirement: v.verdict for v in got} == {"A": Verdict.STALE, "B": Verdict.PASS}
    assert "intermittent" in got[1].message
    checks = Checks()
    with running("t::intermittent", ["B", "C"]):
        checks.check(True, "held", requirement="B")
        checks.check(False, "broken", requirement="C")
    with pytest.raises(RequirementViolations) as info:
        checks.done()
    held = decide(["B", "C"], classify(info.value), {"B": "sometimes", "C": "known"}, frozenset({"B"}))
    assert {v.requirement: v.verdict for v in held} == {"B": Verdict.PASS, "C": Verdict.DEVIATION}


def test_violation_inside_a_hypothesis_flaky_group_is_a_fail() -> None:
    from hypothesis.errors import FlakyFailure  # noqa: PLC0415

    group = FlakyFailure("not reproducible", [RequirementViolation("A", "lost")])
    assert verdicts(["A"], group) == {"A": Verdict.FAIL}


def test_violation_charges_the_named_requirement() -> None:
    got = verdicts(["A", "B"], RequirementViolation("B", "broken"), {})
    assert got == {"A": Verdict.INDETERMINATE, "B": Verdict.FAIL}


def test_soft_checks_pass_what_held_and_deviate_where_documented() -> None:
    checks = Checks()
    with running("t::soft", ["A", "B"]):
        checks.check(True, "ok", requirement="A")
        checks.check(False, "broken", requirement="B")
    with pytest.raises(RequirementViolations) as info:
        checks.done()
    assert verdicts(["A", "B"], info.value, {"B": "known"}) == {"A": Verdict.PASS, "B": Verdict.DEVIATION}


def test_a_scoped_deviation_excuses_only_the_failure_it_describes() -> None:
    """A profile entry documents one observed behaviour: another failure of the same requirement fails."""
    from ackspec.conformance.target import Target, deviations_of  # noqa: PLC0415

    profile = {"deviations": [{"requirement": "A", "reason": "keeps the connection open", "test": "*test_one*",
                               "check": "*still open*"}]}
    target = Target("stomp://x", "p", profile, None, deviations_of(profile))  # type: ignore[arg-type]

    def judge(nodeid: str, exc: BaseException | None) -> Verdict:
        found = decide(["A"], classify(exc), target.deviations_for(nodeid), excuse=target.excuse_for(nodeid))
        return found[0].verdict

    assert judge("t.py::test_one", RequirementViolation("A", "connection still open after ERROR")) is Verdict.DEVIATION
    assert judge("t.py::test_one", RequirementViolation("A", "no ERROR frame at all")) is Verdict.FAIL
    assert judge("t.py::test_two", RequirementViolation("A", "connection still open after ERROR")) is Verdict.FAIL
    assert judge("t.py::test_one", None) is Verdict.STALE
    assert judge("t.py::test_two", None) is Verdict.PASS
    failed = decide(["A"], classify(RequirementViolation("A", "no ERROR")), target.deviations_for("test_one"),
                    excuse=target.excuse_for("test_one"))
    assert "not the behaviour its documented deviation describes" in failed[0].message


def test_not_applicable_indeterminate_error() -> None:
    assert verdicts(["A"], NotSupported("prefetch")) == {"A": Verdict.NOT_APPLICABLE}
    assert verdicts(["A"], Indeterminate("timeout")) == {"A": Verdict.INDETERMINATE}
    assert verdicts(["A"], KeyError("bug")) == {"A": Verdict.ERROR}
    assert verdicts(["A"], AssertionError("x")) == {"A": Verdict.FAIL}


def test_an_unreachable_target_is_an_error_not_a_failure() -> None:
    """A broker that is down says nothing about the requirement: error, unlike a refused operation."""
    assert verdicts(["A"], TargetUnreachable("cannot connect")) == {"A": Verdict.ERROR}
    assert verdicts(["A"], AdapterError("ERROR frame")) == {"A": Verdict.FAIL}


def test_model_accepts_a_correct_run_and_catches_loss_order_and_duplicates() -> None:
    m = QueueModel()
    m.sent([0, 1, 2])
    m.subscribed("s", AckMode.CLIENT)
    m.delivered("s", 0, b"m0", False, 1)
    m.delivered("s", 1, b"m1", False, 1)
    m.acked("s", 1)  # cumulative: 0 and 1
    with pytest.raises(RequirementViolation, match="STOMP-ACK-CLIENT-CUMULATIVE"):
        m.delivered("s", 0, b"m0", True, 2)
    m2 = QueueModel()
    m2.sent([0, 1])
    m2.subscribed("s", AckMode.CLIENT_INDIVIDUAL)
    with pytest.raises(RequirementViolation, match="PER-PRODUCER-ORDER"):
        m2.delivered("s", 1, b"m1", False, 1)
        m2.delivered("s", 0, b"m0", False, 1)
    m3 = QueueModel()
    m3.sent([0])
    m3.subscribed("s", AckMode.CLIENT_INDIVIDUAL)
    m3.delivered("s", 0, b"m0", False, 1)
    m3.closed("s")
    with pytest.raises(RequirementViolation, match="STOMP-ACK-UNACKED-NOT-CONSUMED"):
        m3.final()
