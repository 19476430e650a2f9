"""Not-applicable is decided from the catalogue's capabilities of the cited requirements."""

from __future__ import annotations

import pytest

from ackspec.adapters.base import NotSupported
from ackspec.conformance.applicability import gate, missing_capabilities
from ackspec.conformance.session import _ItemState, _without_capabilities
from ackspec.conformance.verdicts import RequirementVerdict
from ackspec.results import Verdict
from ackspec.spec import load_catalogue

TX = "STOMP-TX-SEND-INVISIBLE"  # needs transactions
AUTO = "STOMP-ACK-AUTO"  # needs ack.auto


def test_catalogue_capabilities_are_what_is_compared() -> None:
    assert "transactions" in load_catalogue().get(TX).capabilities
    assert missing_capabilities([TX, AUTO], {"ack.auto"}) == {TX: "transactions"}
    assert missing_capabilities([TX, AUTO], {"ack.auto", "transactions", "queues"}) == {}


def test_a_test_none_of_whose_requirements_apply_does_not_run() -> None:
    with pytest.raises(NotSupported) as caught:
        gate([TX], {"ack.auto"}, "driver against url")
    assert caught.value.capability == "transactions"
    assert TX in str(caught.value)


def test_a_test_with_some_applicable_requirement_runs() -> None:
    assert gate([TX, AUTO], {"ack.auto"}, "driver") == {TX: "transactions"}


def test_an_unexercised_requirement_is_not_applicable_but_a_violation_stays_a_failure() -> None:
    state = _ItemState([TX, AUTO], inapplicable={TX: "transactions"}, target="driver")
    passed = _without_capabilities([RequirementVerdict(TX, Verdict.PASS), RequirementVerdict(AUTO, Verdict.PASS)],
                                   state)
    assert [(v.verdict, v.capability) for v in passed] == [(Verdict.NOT_APPLICABLE, "transactions"),
                                                           (Verdict.PASS, None)]
    failed = _without_capabilities([RequirementVerdict(TX, Verdict.FAIL, "lost")], state)
    assert failed[0].verdict is Verdict.FAIL
