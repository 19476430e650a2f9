"""What a history check can find: the anomaly kinds, their requirements, and the rules' vocabulary.

Both checkers (:mod:`ackspec.history.checks`, single process, and
:mod:`ackspec.pipeline.checks_spark`, Spark DataFrame jobs) import everything
that defines *what* counts as an anomaly from here: the kinds, the requirement
each kind breaks, which ack modes settle on delivery or acknowledge
cumulatively, which operations reset a consumer. They differ only in *how* they
compute it, and a test asserts they agree on generated histories.

The semantics, in one place (docs/history-format.md explains them at length):

message
    ``(destination, producer, seq)`` within one history ``(run, test)``.
send status
    CONFIRM completions decide when present (ok: confirmed, info: indeterminate,
    fail: failed); otherwise SEND completions: ``ok`` is confirmed unless sent in
    a transaction, which then must have a ``commit`` ok (abort ok or commit fail:
    failed, no decision: indeterminate); ``fail`` is failed; ``info`` or no
    completion is indeterminate. Any confirmed attempt wins, then indeterminate.
delivery
    a ``receive`` ``ok`` record with a ``seq``. A delivery whose ``value`` has
    ``"dead_letter": true`` is the message read back from a dead-letter queue.
consumer
    ``(process, subscription)``. Scope of duplicates: the whole destination for a
    queue, the consumer for a topic (each subscriber gets its own copy).
acknowledgement
    an ``ack`` ``ok`` record naming ``(producer, seq)`` acknowledges the latest
    earlier delivery of that message to the same consumer; when that delivery's
    ack mode is cumulative (``client``) it also acknowledges every earlier
    delivery to the consumer. In a transaction it takes effect at the commit.
    ``nack`` settles the same deliveries without acknowledging them. A delivery
    received in a transaction (its ``transaction`` field) is acknowledged by the
    commit of that transaction.
intent
    ``expect`` ``ok`` records (:class:`ackspec.history.record.Intent`), wherever they
    stand in the history. A record covers the messages matching its ``destination``,
    ``producer`` and ``seq`` (each absent or empty: any). A confirmed send never
    delivered is *lost*; it is not reported at all when an intent other than
    ``delivered`` covers it (left or dropped on purpose: these win), and it is
    *decisive* when a ``delivered`` intent covers it. Without any covering intent
    (every history written before intents existed) it is reported as before, not
    decisive: evidence to review, because the test may have left it on purpose.
    Indeterminate sends are never lost, whatever the intent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ackspec.history.record import INTENT_KEY, Intent, Op


class AnomalyKind(StrEnum):
    LOST = "lost"  # a confirmed send never consumed by anyone
    DUPLICATE = "duplicate"  # delivered again without a redelivery marker
    DUPLICATE_AFTER_ACK = "duplicate-after-ack"  # delivered again after it was acknowledged
    ORDER = "order"  # first deliveries of one producer out of send order on one consumer
    DELIVERY_COUNT_START = "delivery-count-start"  # JMSXDeliveryCount below 1, or above 1 on a first delivery
    DELIVERY_COUNT_DECREASE = "delivery-count-decrease"  # JMSXDeliveryCount lower than on an earlier delivery
    DEAD_LETTER = "dead-letter"  # dead-lettered before the limit, or redelivered beyond it
    IN_FLIGHT = "in-flight"  # more unsettled deliveries outstanding than prefetch/credit allow


REQUIREMENTS: dict[AnomalyKind, str] = {
    AnomalyKind.LOST: "JMS-7.7-PERSISTENT-ONCE-AND-ONLY-ONCE",
    AnomalyKind.DUPLICATE: "JMS-3.4.7-REDELIVERED-SET",
    AnomalyKind.DUPLICATE_AFTER_ACK: "JMS-6.2.11-NO-DUPLICATE-AFTER-ACK",
    AnomalyKind.ORDER: "JMS-6.2.9.1-PER-PRODUCER-ORDER",
    AnomalyKind.DELIVERY_COUNT_START: "JMS-3.5.11-DELIVERY-COUNT-FIRST-ONE",
    AnomalyKind.DELIVERY_COUNT_DECREASE: "JMS-3.5.11-DELIVERY-COUNT-INCREMENTS",
    AnomalyKind.DEAD_LETTER: "AMQ-REDELIVERY-MAX",
    AnomalyKind.IN_FLIGHT: "AMQ-PREFETCH-PUSH-BOUND",
}
"""The requirement of the catalogue (spec/catalogue/) each kind breaks."""

DESCRIPTIONS: dict[AnomalyKind, str] = {
    AnomalyKind.LOST: "confirmed send never consumed",
    AnomalyKind.DUPLICATE: "delivered again without a redelivery marker",
    AnomalyKind.DUPLICATE_AFTER_ACK: "delivered again after it was acknowledged",
    AnomalyKind.ORDER: "delivered before an earlier message of the same producer",
    AnomalyKind.DELIVERY_COUNT_START: "delivery count below 1, or above 1 on a delivery not marked redelivered",
    AnomalyKind.DELIVERY_COUNT_DECREASE: "delivery count lower than on an earlier delivery",
    AnomalyKind.DEAD_LETTER: "dead-lettered before the redelivery limit, or redelivered beyond it",
    AnomalyKind.IN_FLIGHT: "more unacknowledged deliveries outstanding than the prefetch/credit bound",
}

DECISIVE_DESCRIPTIONS: dict[AnomalyKind, str] = {
    AnomalyKind.LOST: "confirmed send never consumed, though the test declared it expects it delivered",
}

# --- the rules' vocabulary, shared by both checkers ---------------------------------------

SETTLED_ON_DELIVERY = frozenset({"auto", "dups-ok", "settled"})
"""Ack modes in which a delivery needs no acknowledgement: never outstanding for the in-flight bound."""

CUMULATIVE_MODES = frozenset({"client"})
"""Ack modes in which acknowledging one delivery acknowledges every earlier one of the consumer."""

DUPLICATES_ALLOWED = frozenset({"dups-ok"})
"""Ack modes that allow duplicates (JMS DUPS_OK_ACKNOWLEDGE)."""

RESET_OPS = frozenset({"crash", "disconnect", "recover", "abort", "unsubscribe"})
"""Operations after which a process's unacknowledged deliveries are no longer outstanding
(they will be redelivered). ``crash`` and ``disconnect`` count whatever their completion;
the others only when ``ok``."""

REJECT_OUTCOMES = frozenset({"rejected", "poison"})
"""NACK outcomes that send a message to the dead-letter queue at once, whatever the limit."""

TOPIC_PREFIXES = ("/topic/", "topic://", "topic:", "/exchange/amq.topic", "amq.topic")

VALUE_DEAD_LETTER = "dead_letter"
VALUE_MAX_REDELIVERIES = "max_redeliveries"
VALUE_PRIORITY = "priority"
VALUE_EXPECT = INTENT_KEY
INTENT_OP = str(Op.EXPECT)
EXPECT_DELIVERED = str(Intent.DELIVERED)
"""The one intent that makes a loss decisive; every other value (left, dropped, or one a newer
writer invents) exempts the messages it covers, so an unknown intent never causes a false fail."""


def is_topic(destination: str | None) -> bool:
    return destination is not None and destination.startswith(TOPIC_PREFIXES)


def intent_covers(scope: tuple[str | None, str | None, int | None], key: tuple[str | None, str, int]) -> bool:
    """Whether an intent record's ``(destination, producer, seq)`` scope (``None``: any) covers a message."""
    destination, producer, seq = scope
    return ((destination is None or destination == key[0]) and (producer is None or producer == key[1])
            and (seq is None or seq == key[2]))


def value_dict(value: Any) -> dict[str, Any]:
    """The ``value`` field as a dict: histories hold a dict, Parquet a JSON string."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.startswith("{"):
        try:
            decoded = json.loads(value)
        except ValueError:
            return {}
        return decoded if isinstance(decoded, dict) else {}
    return {}


@dataclass(frozen=True, slots=True, order=True)
class Anomaly:
    """One violation found in a history, with the operations (history indexes) that show it."""

    run: str
    test: str
    kind: AnomalyKind
    destination: str | None
    producer: str | None
    seq: int | None
    operations: tuple[int, ...]
    requirement: str = field(default="", compare=False)
    detail: str = field(default="", compare=False)
    decisive: bool = False
    """The history itself shows the violation (a loss of a message the test declared it expects
    delivered); otherwise the anomaly is evidence to review (the test may have meant it)."""

    @classmethod
    def make(cls, kind: AnomalyKind, run: str, test: str | None, destination: str | None, producer: str | None,
             seq: int | None, operations: tuple[int, ...] | list[int], detail: str = "", *,
             decisive: bool = False) -> Anomaly:
        ops = tuple(sorted({int(o) for o in operations}))
        kind = AnomalyKind(kind)
        if not detail:
            detail = DECISIVE_DESCRIPTIONS.get(kind, DESCRIPTIONS[kind]) if decisive else DESCRIPTIONS[kind]
        return cls(run=run, test=test or "", kind=kind, destination=destination, producer=producer or None,
                   seq=seq, operations=ops, requirement=REQUIREMENTS[kind], detail=detail, decisive=bool(decisive))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": str(self.kind), "requirement": self.requirement, "run": self.run, "test": self.test,
                "destination": self.destination, "producer": self.producer, "seq": self.seq,
                "operations": list(self.operations), "detail": self.detail, "decisive": self.decisive}


@dataclass(frozen=True, slots=True)
class SendCounts:
    """Sends of a history by outcome; indeterminate sends are neither lost nor ok."""

    confirmed: int = 0
    failed: int = 0
    indeterminate: int = 0

    def __add__(self, other: SendCounts) -> SendCounts:
        return SendCounts(self.confirmed + other.confirmed, self.failed + other.failed,
                          self.indeterminate + other.indeterminate)


@dataclass(frozen=True, slots=True, order=True)
class Problem:
    """History records of one run the reader could not use (malformed, unknown version, op or type).

    The Spark job counts them per run instead of failing; the report refuses to build over them,
    naming the file, as the single-process reader does."""

    run: str  # the run; the file, for a line too broken to name its run
    source: str  # the file (URI) of the first of them
    records: int
    detail: str  # what is wrong with the first of them

    def line(self) -> str:
        more = f" ({self.records} record(s) of run {self.run})" if self.records > 1 else ""
        return f"{self.source.removeprefix('file://')}: {self.detail}{more}"


@dataclass(frozen=True, slots=True)
class CheckResult:
    anomalies: tuple[Anomaly, ...]
    sends: SendCounts
    operations: int = 0
    problems: tuple[Problem, ...] = ()

    def by_kind(self) -> dict[AnomalyKind, int]:
        counts = dict.fromkeys(AnomalyKind, 0)
        for anomaly in self.anomalies:
            counts[anomaly.kind] += 1
        return counts
