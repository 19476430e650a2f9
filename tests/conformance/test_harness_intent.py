"""The harness declares intent in every history: delivered by default, left or dropped on request."""

from __future__ import annotations

from typing import Any

import pytest

from ackspec.adapters.settings import TargetSettings
from ackspec.conformance.harness import Harness
from ackspec.conformance.verdicts import RequirementViolation
from ackspec.history import INTENT_KEY, Op, Recorder, RecordType
from ackspec.history.checks import check_history


class NoAdapter:
    """The harness only needs an adapter to open clients; these tests open none."""

    name = "none"
    protocol = "stomp"
    capabilities: frozenset[Any] = frozenset()


def make_harness() -> Harness:
    recorder = Recorder("run-1", target="reference")
    recorder.test = "t::intent"
    return Harness(NoAdapter(), recorder, run_tag="x", test_index=1, timeout=1.0,  # type: ignore[arg-type]
                   settings=TargetSettings())


def sent(h: Harness, destination: str, seq: int) -> None:
    h.recorder.invoke(Op.SEND, "c1", destination=destination, producer="p1", seq=seq).ok()


def test_every_history_starts_by_expecting_delivery() -> None:
    h = make_harness()
    first = h.recorder.records[0]
    assert (first.index, first.op, first.type, first.value[INTENT_KEY]) == (0, Op.EXPECT, RecordType.OK, "delivered")
    assert first.destination is None and first.seq is None  # the whole history


def test_expect_left_and_dropped_record_their_scope() -> None:
    h = make_harness()
    q = h.queue()
    h.expect_left(q, [3, 4], reason="beyond the credit")
    h.expect_dropped(q, producer="p2")
    declared = [(r.value[INTENT_KEY], r.destination, r.producer, r.seq) for r in h.recorder.records[1:]]
    assert declared == [("left", q, None, 3), ("left", q, None, 4), ("dropped", q, "p2", None)]
    assert h.recorder.records[1].value["reason"] == "beyond the credit"


def test_undeclared_loss_is_decisive_and_fails_check_history() -> None:
    h = make_harness()
    q = h.queue()
    sent(h, q, 1)
    (anomaly,) = check_history(h.recorder.records)
    assert anomaly.decisive
    with pytest.raises(RequirementViolation, match=r"JMS-7\.7-PERSISTENT-ONCE-AND-ONLY-ONCE"):
        h.check_history()


def test_declared_left_is_not_a_loss() -> None:
    h = make_harness()
    q = h.queue()
    sent(h, q, 1)
    h.expect_left(q)
    assert check_history(h.recorder.records) == []
    h.check_history()
