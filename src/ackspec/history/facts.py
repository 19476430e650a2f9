"""What one history says, indexed once, for every rule to read: sends, deliveries, settlements.

The rules (:mod:`ackspec.history.rules`) each ask a different question of the same
history: per consumer (in-flight), per message (duplicates, counts, dead-lettering), per
producer stream (order), per send (loss). :func:`history_facts` walks the records once,
in index order, and builds the tables they share, then works out for every delivery when
it was acknowledged, settled or reset (:func:`settle`), which every rule but the loss
rule depends on. Both engines call it: the single-process checker per history, the Spark
job in its Python workers per ``(run, test)`` group. The semantics are those of
:mod:`ackspec.history.anomalies`.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ackspec.history.anomalies import (
    CUMULATIVE_MODES,
    EXPECT_DELIVERED,
    REJECT_OUTCOMES,
    RESET_OPS,
    SETTLED_ON_DELIVERY,
    VALUE_DEAD_LETTER,
    VALUE_EXPECT,
    VALUE_MAX_REDELIVERIES,
    VALUE_PRIORITY,
    SendCounts,
    is_topic,
    value_dict,
)
from ackspec.history.record import Op, RecordType

INF = float("inf")
INF_INDEX = 2**62
MessageKey = tuple[str | None, str, int]  # destination, producer ("" when none), seq
Consumer = tuple[str, str]  # process, subscription ("" when none)
Scope = tuple[str | None, str | None, int | None]  # an intent's destination, producer, seq (None: any)
_RESET = frozenset(Op(op) for op in RESET_OPS)
_NO_VALUE: dict[str, Any] = {}


class HistoryRecord(Protocol):
    """The fields of a record the rules read: a :class:`~ackspec.history.record.Record`, or a lighter
    row built straight from Arrow columns (:mod:`ackspec.pipeline.columnar`)."""

    @property
    def index(self) -> int: ...
    @property
    def type(self) -> RecordType: ...
    @property
    def op(self) -> Op: ...
    @property
    def process(self) -> str: ...
    @property
    def destination(self) -> str | None: ...
    @property
    def subscription(self) -> str | None: ...
    @property
    def producer(self) -> str | None: ...
    @property
    def seq(self) -> int | None: ...
    @property
    def ack_mode(self) -> str | None: ...
    @property
    def transaction(self) -> str | None: ...
    @property
    def redelivered(self) -> bool | None: ...
    @property
    def delivery_count(self) -> int | None: ...
    @property
    def outcome(self) -> str | None: ...
    @property
    def limit(self) -> int | None: ...
    @property
    def value(self) -> Any: ...


@dataclass(slots=True)
class Delivery:
    """One delivery (a ``receive`` ``ok`` with a ``seq``) and what later happened to it."""

    record: HistoryRecord
    index: int  # the record's (read often: a field, not a property)
    consumer: Consumer
    key: MessageKey
    topic: bool  # the destination is a topic: duplicates are per consumer, no dead-lettering check
    dead_letter: bool
    priority: object
    ack_at: float = INF  # effective index of the first acknowledgement covering it
    reset_at: float = INF  # index of the first reset (crash, recover, abort ...) of its process after it
    settle_at: float = INF  # ... of the first ack or nack covering it, or a reset of its process

    @property
    def unmarked(self) -> bool:
        r = self.record
        return r.redelivered is False and (r.delivery_count is None or r.delivery_count <= 1)

    @property
    def first_time(self) -> bool:
        r = self.record
        return r.redelivered is not True and (r.delivery_count is None or r.delivery_count <= 1)


@dataclass(slots=True)
class HistoryFacts:
    """The tables one history's rules share (built by :func:`history_facts`)."""

    committed: dict[str, int] = field(default_factory=dict)  # transaction -> index of its first commit ok
    rolled_back: set[str] = field(default_factory=set)
    max_redeliveries: int | None = None  # configured in some record's value
    send_records: dict[MessageKey, list[HistoryRecord]] = field(default_factory=lambda: defaultdict(list))
    deliveries: list[Delivery] = field(default_factory=list)
    by_consumer: dict[Consumer, list[Delivery]] = field(default_factory=lambda: defaultdict(list))
    settlements: list[HistoryRecord] = field(default_factory=list)  # ack/nack ok naming a message
    resets: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))  # process -> indexes
    limits: dict[Consumer, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    rejected: set[MessageKey] = field(default_factory=set)  # nacked to the dead-letter queue at once
    intents: list[tuple[int, bool, Scope]] = field(default_factory=list)  # index, expects delivered?, scope
    status: dict[MessageKey, str] = field(default_factory=dict)  # confirmed / failed / indeterminate
    scopes: dict[tuple[str, MessageKey], list[Delivery]] | None = None  # by duplicate scope (rules.scopes)


# --- one pass over the records ------------------------------------------------------------------


def _receive(facts: HistoryFacts, r: HistoryRecord) -> None:
    if r.type is RecordType.OK and r.seq is not None:
        value = value_dict(r.value) if r.value is not None else _NO_VALUE
        d = Delivery(r, r.index, (r.process, r.subscription or ""), (r.destination, r.producer or "", r.seq),
                     is_topic(r.destination), value.get(VALUE_DEAD_LETTER) is True, value.get(VALUE_PRIORITY))
        facts.deliveries.append(d)
        facts.by_consumer[d.consumer].append(d)


def _send(facts: HistoryFacts, r: HistoryRecord) -> None:
    if r.seq is not None:
        facts.send_records[(r.destination, r.producer or "", r.seq)].append(r)


def _settlement(facts: HistoryFacts, r: HistoryRecord) -> None:
    if r.type is RecordType.OK and r.seq is not None:
        facts.settlements.append(r)
        if r.op is Op.NACK and r.outcome in REJECT_OUTCOMES:
            facts.rejected.add((r.destination, r.producer or "", r.seq))


def _commit(facts: HistoryFacts, r: HistoryRecord) -> None:
    if r.transaction is not None:
        if r.type is RecordType.OK:
            facts.committed.setdefault(r.transaction, r.index)
        elif r.type is RecordType.FAIL:
            facts.rolled_back.add(r.transaction)


def _abort(facts: HistoryFacts, r: HistoryRecord) -> None:
    if r.transaction is not None and r.type is RecordType.OK:
        facts.rolled_back.add(r.transaction)


def _limit(facts: HistoryFacts, r: HistoryRecord) -> None:
    if r.limit is not None and r.type is not RecordType.FAIL:
        facts.limits[(r.process, r.subscription or "")].append((r.index, r.limit))


def _expect(facts: HistoryFacts, r: HistoryRecord) -> None:
    if r.type is RecordType.OK:
        declared = value_dict(r.value).get(VALUE_EXPECT)
        facts.intents.append((r.index, isinstance(declared, str) and declared == EXPECT_DELIVERED,
                              (r.destination or None, r.producer or None, r.seq)))


_GATHER: dict[Op, Callable[[HistoryFacts, HistoryRecord], None]] = {
    Op.RECEIVE: _receive, Op.SEND: _send, Op.CONFIRM: _send, Op.ACK: _settlement, Op.NACK: _settlement,
    Op.COMMIT: _commit, Op.ABORT: _abort, Op.SUBSCRIBE: _limit, Op.FLOW: _limit, Op.EXPECT: _expect,
}


def gather(history: Iterable[HistoryRecord]) -> HistoryFacts:
    """The tables of one history, its records in index order (one dispatch per record: the hot loop)."""
    facts = HistoryFacts()
    handlers, resets, ok = _GATHER, _RESET, RecordType.OK
    for r in history:
        op = r.op
        if r.value is not None and facts.max_redeliveries is None:
            configured = value_dict(r.value).get(VALUE_MAX_REDELIVERIES)
            if isinstance(configured, int) and not isinstance(configured, bool):
                facts.max_redeliveries = configured
        handler = handlers.get(op)
        if handler is not None:
            handler(facts, r)
        if op in resets and (r.type is ok or op is Op.CRASH or op is Op.DISCONNECT):
            facts.resets[r.process].append(r.index)
    return facts


# --- send status ----------------------------------------------------------------------------------


def send_status(records: list[HistoryRecord], committed: dict[str, int], rolled_back: set[str]) -> str:
    """``confirmed``, ``failed`` or ``indeterminate``: confirmations decide, else the send completions.

    One pass over the message's records (a status per message key: the hottest call after
    :func:`gather`)."""
    confirms: set[RecordType] = set()
    outcomes: set[str] = set()
    for r in records:
        if r.type is RecordType.INVOKE:
            continue
        if r.op is Op.CONFIRM:
            confirms.add(r.type)
        elif r.op is Op.SEND:
            outcomes.add(_send_outcome(r, committed, rolled_back))
    if confirms:
        if RecordType.OK in confirms:
            return "confirmed"
        return "indeterminate" if RecordType.INFO in confirms else "failed"
    if "confirmed" in outcomes:
        return "confirmed"
    return "failed" if outcomes == {"failed"} else "indeterminate"


def _send_outcome(r: HistoryRecord, committed: dict[str, int], rolled_back: set[str]) -> str:
    if r.type is RecordType.OK:
        if r.transaction is None or r.transaction in committed:
            return "confirmed"
        return "failed" if r.transaction in rolled_back else "indeterminate"
    return "failed" if r.type is RecordType.FAIL else "indeterminate"


def send_counts(facts: HistoryFacts) -> SendCounts:
    values = list(facts.status.values())
    return SendCounts(values.count("confirmed"), values.count("failed"), values.count("indeterminate"))


# --- when each delivery was acknowledged, settled, reset --------------------------------------------


def _mark_resets(facts: HistoryFacts) -> None:
    """After a crash, recover, abort ... of its process a delivery is no longer outstanding."""
    for d in facts.deliveries:
        process_resets = facts.resets.get(d.consumer[0], [])
        at = bisect.bisect_right(process_resets, d.index)
        if at < len(process_resets):
            d.reset_at = process_resets[at]


def _apply_settlements(facts: HistoryFacts) -> dict[Consumer, list[tuple[int, int, float, bool]]]:
    """Acks and nacks of single deliveries; returns the cumulative ones (client mode) by consumer."""
    positions: dict[tuple[Consumer, str, int], list[Delivery]] = defaultdict(list)
    for d in facts.deliveries:
        positions[(d.consumer, d.key[1], d.key[2])].append(d)
    cumulative: dict[Consumer, list[tuple[int, int, float, bool]]] = defaultdict(list)
    for s in facts.settlements:
        effective: float = s.index
        if s.transaction is not None:
            effective = facts.committed.get(s.transaction, INF)
            if effective == INF:
                continue  # never committed: settled nothing (an abort resets the consumer instead)
        consumer = (s.process, s.subscription or "")
        candidates = positions.get((consumer, s.producer or "", s.seq if s.seq is not None else -1), [])
        at = bisect.bisect_left([d.index for d in candidates], s.index)
        if at == 0:
            continue  # names no earlier delivery to this consumer
        target = candidates[at - 1]
        is_ack = s.op is Op.ACK
        if target.record.ack_mode in CUMULATIVE_MODES:
            cumulative[consumer].append((target.index, s.index, effective, is_ack))
        elif s.index < target.reset_at:
            if is_ack:
                target.ack_at = min(target.ack_at, effective)
            target.settle_at = min(target.settle_at, effective)
    return cumulative


def _apply_cumulative(facts: HistoryFacts, cumulative: dict[Consumer, list[tuple[int, int, float, bool]]]) -> None:
    """Each delivery takes the earliest cumulative ack (and ack or nack) covering it, by record index."""
    for consumer, entries in cumulative.items():
        entries.sort(key=lambda e: -e[0])
        first_ack: tuple[int, float] = (INF_INDEX, INF)
        first_settle: tuple[int, float] = (INF_INDEX, INF)
        pos = 0
        for d in reversed(facts.by_consumer[consumer]):
            while pos < len(entries) and entries[pos][0] >= d.index:
                _, index, effective, is_ack = entries[pos]
                first_settle = min(first_settle, (index, effective))
                if is_ack:
                    first_ack = min(first_ack, (index, effective))
                pos += 1
            if first_ack[0] < d.reset_at:
                d.ack_at = min(d.ack_at, first_ack[1])
            if first_settle[0] < d.reset_at:
                d.settle_at = min(d.settle_at, first_settle[1])


def _apply_transactions(facts: HistoryFacts) -> None:
    """A delivery received in a transaction is acknowledged by its commit."""
    committed = facts.committed
    for d in facts.deliveries:
        tx = d.record.transaction
        if tx is not None and tx in committed and d.index < committed[tx] < d.reset_at:
            d.ack_at = min(d.ack_at, committed[tx])
            d.settle_at = min(d.settle_at, committed[tx])


def _settle_on_delivery_or_reset(facts: HistoryFacts) -> None:
    """Auto-like modes settle on delivery; any delivery stops being outstanding at its reset."""
    for d in facts.deliveries:
        if d.record.ack_mode in SETTLED_ON_DELIVERY:
            d.settle_at = d.index
        else:
            d.settle_at = min(d.settle_at, d.reset_at)


def settle(facts: HistoryFacts) -> HistoryFacts:
    """Work out the send status of every message and when each delivery was acked, settled, reset."""
    facts.status = {key: send_status(recs, facts.committed, facts.rolled_back)
                    for key, recs in facts.send_records.items()}
    _mark_resets(facts)
    _apply_cumulative(facts, _apply_settlements(facts))
    _apply_transactions(facts)
    _settle_on_delivery_or_reset(facts)
    return facts


def history_facts(history: Iterable[HistoryRecord]) -> HistoryFacts:
    """Everything the rules read about one history, its records sorted by index."""
    return settle(gather(history))
