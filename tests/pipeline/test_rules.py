"""Each rule alone: a small history that breaks it, and one that comes close without breaking it.

The cases call one rule function of :data:`ackspec.history.rules.RULES` on the facts of a
hand-written history; every breaking case must also be silent for every other rule, so a
rule that fires on another rule's business is caught here rather than only in aggregate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ackspec.history import rules
from ackspec.history.anomalies import AnomalyKind
from ackspec.history.facts import history_facts
from ackspec.history.record import INTENT_KEY, Intent, Op, RecordType

from .conftest import HistoryBuilder

Q = "/queue/q"
T = "/topic/t"


class H(HistoryBuilder):
    """A hand-written history of one test."""

    def send(self, seq: int, destination: str = Q) -> int:
        self.add(RecordType.INVOKE, Op.SEND, "p1", destination=destination, producer="p", seq=seq)
        return self.add(RecordType.OK, Op.SEND, "p1", destination=destination, producer="p", seq=seq)

    def deliver(self, seq: int, process: str = "c1", *, mode: str = "client-individual", destination: str = Q,
                redelivered: bool = False, count: int | None = None, **fields: Any) -> int:
        return self.add(RecordType.OK, Op.RECEIVE, process, destination=destination, producer="p", seq=seq,
                        subscription="s", ack_mode=mode, redelivered=redelivered,
                        delivery_count=count if count is not None else (2 if redelivered else 1), **fields)

    def ack(self, seq: int, process: str = "c1", op: Op = Op.ACK, **fields: Any) -> int:
        return self.add(RecordType.OK, op, process, destination=Q, producer="p", seq=seq, subscription="s",
                        **fields)

    def findings(self, rule: rules.Rule) -> list[tuple[AnomalyKind, tuple[int, ...]]]:
        return [(f.kind, f.operations) for f in rule(history_facts(self.records))]


def _in_flight_broken() -> tuple[H, list[tuple[AnomalyKind, tuple[int, ...]]]]:
    h = H()
    for seq in (1, 2, 3):
        h.send(seq)
    bound = h.add(RecordType.OK, Op.SUBSCRIBE, destination=Q, subscription="s", limit=2)
    h.deliver(1)
    h.deliver(2)
    third = h.deliver(3)  # two still unacknowledged: the third breaks the bound of 2
    for seq in (1, 2, 3):
        h.ack(seq)
    return h, [(AnomalyKind.IN_FLIGHT, (bound, third))]


def _in_flight_kept() -> H:
    h = H()
    for seq in (1, 2, 3):
        h.send(seq)
    h.add(RecordType.OK, Op.SUBSCRIBE, destination=Q, subscription="s", limit=2)
    h.deliver(1)
    h.deliver(2)
    h.ack(1)  # one settled before the third arrives
    h.deliver(3)
    h.ack(2)
    h.ack(3)
    return h


def _duplicate_broken() -> tuple[H, list[tuple[AnomalyKind, tuple[int, ...]]]]:
    h = H()
    h.send(1)
    first = h.deliver(1)
    again = h.deliver(1, "c2")  # not acknowledged, not marked redelivered
    h.ack(1, "c2")
    return h, [(AnomalyKind.DUPLICATE, (first, again))]


def _duplicate_after_ack_broken() -> tuple[H, list[tuple[AnomalyKind, tuple[int, ...]]]]:
    h = H()
    h.send(1)
    first = h.deliver(1)
    acked = h.ack(1)
    again = h.deliver(1, "c2", redelivered=True)  # marked, but the ack had already consumed it
    h.ack(1, "c2")
    return h, [(AnomalyKind.DUPLICATE_AFTER_ACK, (first, acked, again))]


def _duplicate_kept() -> H:
    h = H()
    h.send(1)
    h.deliver(1)
    h.add(RecordType.OK, Op.RECOVER, "c1")  # the broker may deliver it again, marked
    h.deliver(1, redelivered=True)
    h.ack(1)
    h.send(2, T)  # on a topic, each subscriber gets its own copy
    h.deliver(2, "c1", destination=T, mode="auto")
    h.deliver(2, "c2", destination=T, mode="auto")
    return h


def _count_start_broken() -> tuple[H, list[tuple[AnomalyKind, tuple[int, ...]]]]:
    h = H()
    h.send(1)
    d = h.deliver(1, count=2)  # first delivery, not marked redelivered, count 2
    h.ack(1)
    return h, [(AnomalyKind.DELIVERY_COUNT_START, (d,))]


def _count_decrease_broken() -> tuple[H, list[tuple[AnomalyKind, tuple[int, ...]]]]:
    h = H()
    h.send(1)
    h.deliver(1)
    h.add(RecordType.OK, Op.RECOVER, "c1")
    second = h.deliver(1, redelivered=True, count=3)
    h.add(RecordType.OK, Op.RECOVER, "c1")
    third = h.deliver(1, redelivered=True, count=2)
    h.ack(1)
    return h, [(AnomalyKind.DELIVERY_COUNT_DECREASE, (second, third))]


def _count_kept() -> H:
    h = H()
    h.send(1)
    h.deliver(1)
    h.add(RecordType.OK, Op.RECOVER, "c1")
    h.deliver(1, redelivered=True, count=2)
    h.ack(1)
    return h


def _order_broken() -> tuple[H, list[tuple[AnomalyKind, tuple[int, ...]]]]:
    h = H()
    h.send(1)
    h.send(2)
    two = h.deliver(2)
    one = h.deliver(1)
    h.ack(1)
    h.ack(2)
    return h, [(AnomalyKind.ORDER, (two, one))]


def _order_kept() -> H:
    h = H()
    h.send(1)
    h.send(2)
    h.deliver(1)
    h.add(RecordType.OK, Op.RECOVER, "c1")
    h.deliver(2)
    h.deliver(1, redelivered=True)  # a redelivery may come after later messages
    h.ack(1)
    h.ack(2)
    return h


def _dead_letter_broken() -> tuple[H, list[tuple[AnomalyKind, tuple[int, ...]]]]:
    h = H()
    h.add(RecordType.OK, Op.CONNECT, "c1", value={"max_redeliveries": 2})
    h.send(1)
    h.deliver(1)
    h.add(RecordType.OK, Op.RECOVER, "c1")
    dead = h.deliver(1, "dlq", mode="auto", redelivered=True, value={"dead_letter": True})  # after 1 of 3
    h.ack(1, "dlq")
    return h, [(AnomalyKind.DEAD_LETTER, (dead,))]


def _dead_letter_kept() -> H:
    h = H()
    h.add(RecordType.OK, Op.CONNECT, "c1", value={"max_redeliveries": 1})
    h.send(1)
    h.deliver(1)
    h.add(RecordType.OK, Op.RECOVER, "c1")
    h.deliver(1, redelivered=True)
    h.add(RecordType.OK, Op.RECOVER, "c1")  # the limit is reached: dead-lettered on time
    h.deliver(1, "dlq", mode="auto", redelivered=True, value={"dead_letter": True})
    return h


def _lost_broken() -> tuple[H, list[tuple[AnomalyKind, tuple[int, ...]]]]:
    h = H()
    expects = h.add(RecordType.OK, Op.EXPECT, "harness", value={INTENT_KEY: str(Intent.DELIVERED)})
    sent = h.send(1)
    return h, [(AnomalyKind.LOST, (sent - 1, sent, expects))]


def _lost_kept() -> H:
    h = H()
    h.add(RecordType.OK, Op.EXPECT, "harness", value={INTENT_KEY: str(Intent.LEFT)}, seq=1)
    h.send(1)  # left on the broker on purpose
    h.add(RecordType.INVOKE, Op.SEND, "p1", destination=Q, producer="p", seq=2)
    h.add(RecordType.INFO, Op.SEND, "p1", destination=Q, producer="p", seq=2)  # indeterminate: never lost
    return h


Case = Callable[[], tuple[H, list[tuple[AnomalyKind, tuple[int, ...]]]]]
BROKEN: list[tuple[rules.Rule, Case]] = [
    (rules.in_flight, _in_flight_broken), (rules.duplicates, _duplicate_broken),
    (rules.duplicates, _duplicate_after_ack_broken), (rules.delivery_counts, _count_start_broken),
    (rules.delivery_counts, _count_decrease_broken), (rules.order, _order_broken),
    (rules.dead_letter, _dead_letter_broken), (rules.lost, _lost_broken),
]
KEPT: list[tuple[rules.Rule, Callable[[], H]]] = [
    (rules.in_flight, _in_flight_kept), (rules.duplicates, _duplicate_kept), (rules.delivery_counts, _count_kept),
    (rules.order, _order_kept), (rules.dead_letter, _dead_letter_kept), (rules.lost, _lost_kept),
]


@pytest.mark.parametrize(("rule", "case"), BROKEN, ids=[c.__name__.strip("_") for _, c in BROKEN])
def test_each_rule_finds_its_violation_and_no_other_rule_does(rule: rules.Rule, case: Case) -> None:
    history, expected = case()
    assert history.findings(rule) == expected
    for other in rules.RULES:
        if other is not rule:
            assert history.findings(other) == [], other.__name__


@pytest.mark.parametrize(("rule", "case"), KEPT, ids=[c.__name__.strip("_") for _, c in KEPT])
def test_each_rule_stays_silent_just_short_of_a_violation(rule: rules.Rule, case: Callable[[], H]) -> None:
    history = case()
    for each in rules.RULES:
        assert history.findings(each) == [], each.__name__


def test_every_rule_has_a_breaking_and_a_kept_case() -> None:
    assert {rule for rule, _ in BROKEN} == set(rules.RULES) == {rule for rule, _ in KEPT}
    kinds = {kind for _, case in BROKEN for kind, _ in case()[1]}
    assert kinds == set(AnomalyKind)
