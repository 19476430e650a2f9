"""The history checks in one process, in plain Python: the reference semantics.

A straightforward implementation of the rules in :mod:`ackspec.pipeline.anomalies`,
importable without Spark. Conformance tests call :func:`check_history` on the
small history of one test so verdicts can rely on it; the Spark job
(:mod:`ackspec.pipeline.checks_spark`) shuffles the histories by ``(run, test)`` and
applies :func:`check_one` to each in its Python workers, so the rules are stated once.
"""

from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ackspec.history.record import Op, Record, RecordType
from ackspec.pipeline.anomalies import (
    CUMULATIVE_MODES,
    DUPLICATES_ALLOWED,
    EXPECT_DELIVERED,
    REJECT_OUTCOMES,
    RESET_OPS,
    SETTLED_ON_DELIVERY,
    VALUE_DEAD_LETTER,
    VALUE_EXPECT,
    VALUE_MAX_REDELIVERIES,
    VALUE_PRIORITY,
    Anomaly,
    AnomalyKind,
    CheckResult,
    SendCounts,
    intent_covers,
    is_topic,
    value_dict,
)

INF = float("inf")
INF_INDEX = 2**62
MessageKey = tuple[str | None, str, int]  # destination, producer ("" when none), seq
Consumer = tuple[str, str]  # process, subscription ("" when none)
_RESET = frozenset(Op(op) for op in RESET_OPS)
_NO_VALUE: dict[str, Any] = {}


class HistoryRecord(Protocol):
    """The fields of a record the rules read: a :class:`Record`, or a lighter row built straight from
    Arrow columns (:mod:`ackspec.pipeline.columnar`, what the Spark job and the benchmark feed in)."""

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
class _Delivery:
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


_NOT_FAILED = frozenset({RecordType.INVOKE, RecordType.OK, RecordType.INFO})
RULE_RECORDS: dict[Op, frozenset[RecordType] | None] = {
    Op.SEND: None, Op.CONFIRM: None, Op.CRASH: None, Op.DISCONNECT: None,
    Op.RECEIVE: frozenset({RecordType.OK}), Op.ACK: frozenset({RecordType.OK}), Op.NACK: frozenset({RecordType.OK}),
    Op.COMMIT: frozenset({RecordType.OK, RecordType.FAIL}), Op.ABORT: frozenset({RecordType.OK}),
    Op.RECOVER: frozenset({RecordType.OK}), Op.UNSUBSCRIBE: frozenset({RecordType.OK}),
    Op.SUBSCRIBE: _NOT_FAILED, Op.FLOW: _NOT_FAILED, Op.EXPECT: frozenset({RecordType.OK}),
}
"""The records :func:`check_one` reads, by operation: the record types that matter (``None``: all).
Any record with a ``value`` matters too (it may configure ``max_redeliveries``). The rest
(connect, begin, the invocations of receives and acks: about a third of a history) cannot
change a verdict, so the Spark job drops them before its shuffle; tests/pipeline check that
dropping them changes nothing."""


def is_rule_record(record: HistoryRecord) -> bool:
    """Whether :func:`check_one` reads ``record`` (see :data:`RULE_RECORDS`)."""
    if record.value is not None:
        return True
    if record.op not in RULE_RECORDS:
        return False
    types = RULE_RECORDS[record.op]
    return types is None or record.type in types


def check_history(records: Iterable[Record]) -> list[Anomaly]:
    """All anomalies of one or more histories, sorted. See :func:`check_histories` for send counts."""
    return list(check_histories(records).anomalies)


def check_histories(records: Iterable[Record]) -> CheckResult:
    """Check every history ``(run, test)`` in ``records``; return anomalies and send counts."""
    groups: dict[tuple[str, str], list[Record]] = defaultdict(list)
    total = 0
    for record in records:
        groups[(record.run, record.test or "")].append(record)
        total += 1
    anomalies: list[Anomaly] = []
    sends = SendCounts()
    for (run, test), history in groups.items():
        history.sort(key=lambda r: r.index)
        found, counts = check_one(run, test, history)
        anomalies.extend(found)
        sends = sends + counts
    anomalies.sort()
    return CheckResult(tuple(anomalies), sends, total)


def check_one(run: str, test: str, history: Sequence[HistoryRecord]) -> tuple[list[Anomaly], SendCounts]:
    """The anomalies and send counts of one history ``(run, test)``, its records sorted by index."""
    anomalies: list[Anomaly] = []

    def report(kind: AnomalyKind, key: MessageKey, ops: Iterable[int], *, decisive: bool = False) -> None:
        destination, producer, seq = key
        anomalies.append(Anomaly.make(kind, run, test, destination, producer or None, seq, list(ops),
                                      decisive=decisive))

    # --- transactions, sends, deliveries, acks, resets, limits -------------------------
    committed: dict[str, int] = {}
    rolled_back: set[str] = set()
    max_redeliveries: int | None = None
    send_records: dict[MessageKey, list[HistoryRecord]] = defaultdict(list)
    deliveries: list[_Delivery] = []
    by_consumer: dict[Consumer, list[_Delivery]] = defaultdict(list)
    settlements: list[HistoryRecord] = []
    resets: dict[str, list[int]] = defaultdict(list)
    limits: dict[Consumer, list[tuple[int, int]]] = defaultdict(list)
    rejected: set[MessageKey] = set()
    intents: list[tuple[int, bool, tuple[str | None, str | None, int | None]]] = []  # index, delivered?, scope

    for r in history:  # one dispatch on the operation per record (the hot loop of the Spark workers too)
        op, typ = r.op, r.type
        if max_redeliveries is None and r.value is not None:
            configured = value_dict(r.value).get(VALUE_MAX_REDELIVERIES)
            if isinstance(configured, int) and not isinstance(configured, bool):
                max_redeliveries = configured
        if op is Op.RECEIVE:
            if typ is RecordType.OK and r.seq is not None:
                value = value_dict(r.value) if r.value is not None else _NO_VALUE
                d = _Delivery(r, r.index, (r.process, r.subscription or ""), (r.destination, r.producer or "", r.seq),
                              is_topic(r.destination), value.get(VALUE_DEAD_LETTER) is True, value.get(VALUE_PRIORITY))
                deliveries.append(d)
                by_consumer[d.consumer].append(d)
        elif op is Op.SEND or op is Op.CONFIRM:
            if r.seq is not None:
                send_records[(r.destination, r.producer or "", r.seq)].append(r)
        elif op is Op.ACK or op is Op.NACK:
            if typ is RecordType.OK and r.seq is not None:
                settlements.append(r)
                if op is Op.NACK and r.outcome in REJECT_OUTCOMES:
                    rejected.add((r.destination, r.producer or "", r.seq))
        elif op is Op.COMMIT:
            if r.transaction is not None:
                if typ is RecordType.OK:
                    committed.setdefault(r.transaction, r.index)
                elif typ is RecordType.FAIL:
                    rolled_back.add(r.transaction)
        elif op is Op.ABORT:
            if r.transaction is not None and typ is RecordType.OK:
                rolled_back.add(r.transaction)
        elif op is Op.SUBSCRIBE or op is Op.FLOW:
            if r.limit is not None and typ is not RecordType.FAIL:
                limits[(r.process, r.subscription or "")].append((r.index, r.limit))
        elif op is Op.EXPECT and typ is RecordType.OK:
            declared = value_dict(r.value).get(VALUE_EXPECT)
            intents.append((r.index, isinstance(declared, str) and declared == EXPECT_DELIVERED,
                            (r.destination or None, r.producer or None, r.seq)))
        if op in _RESET and (typ is RecordType.OK or op is Op.CRASH or op is Op.DISCONNECT):
            resets[r.process].append(r.index)

    # --- send status ---------------------------------------------------------------------
    status: dict[MessageKey, str] = {}
    for key, recs in send_records.items():
        status[key] = _send_status(recs, committed, rolled_back)
    counts = SendCounts(
        confirmed=sum(1 for s in status.values() if s == "confirmed"),
        failed=sum(1 for s in status.values() if s == "failed"),
        indeterminate=sum(1 for s in status.values() if s == "indeterminate"),
    )

    # --- resets: after a crash, recover, abort ... a delivery is no longer outstanding --------
    for d in deliveries:
        process_resets = resets.get(d.consumer[0], [])
        at = bisect.bisect_right(process_resets, d.index)
        if at < len(process_resets):
            d.reset_at = process_resets[at]

    # --- acknowledgements and settlements: only of deliveries not reset before them -----------
    positions: dict[tuple[Consumer, str, int], list[_Delivery]] = defaultdict(list)
    for d in deliveries:
        positions[(d.consumer, d.key[1], d.key[2])].append(d)
    cumulative: dict[Consumer, list[tuple[int, int, float, bool]]] = defaultdict(list)
    for s in settlements:
        effective: float = s.index
        if s.transaction is not None:
            effective = committed.get(s.transaction, INF)
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
    for consumer, entries in cumulative.items():
        # each delivery takes the earliest ack (and the earliest ack or nack) covering it, by record index
        entries.sort(key=lambda e: -e[0])
        ds = by_consumer[consumer]
        first_ack: tuple[int, float] = (INF_INDEX, INF)
        first_settle: tuple[int, float] = (INF_INDEX, INF)
        pos = 0
        for d in reversed(ds):
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
    for d in deliveries:  # a delivery received in a transaction is acknowledged by its commit
        tx = d.record.transaction
        if tx is not None and tx in committed and d.index < committed[tx] < d.reset_at:
            d.ack_at = min(d.ack_at, committed[tx])
            d.settle_at = min(d.settle_at, committed[tx])

    # --- in-flight bound, per consumer --------------------------------------------------
    for consumer, ds in by_consumer.items():
        for d in ds:
            if d.record.ack_mode in SETTLED_ON_DELIVERY:
                d.settle_at = d.index
            else:
                d.settle_at = min(d.settle_at, d.reset_at)
        bounds = limits.get(consumer)
        if not bounds:
            continue
        outstanding: list[float] = []
        for d in ds:
            while outstanding and outstanding[0] <= d.index:
                heapq.heappop(outstanding)
            if d.settle_at > d.index:
                heapq.heappush(outstanding, d.settle_at)
            bound = None
            for index, limit in bounds:
                if index < d.index:
                    bound = (index, limit)
                else:
                    break
            if bound is not None and bound[1] > 0 and len(outstanding) > bound[1]:
                report(AnomalyKind.IN_FLIGHT, d.key, [bound[0], d.index])

    # --- duplicates, delivery count (per scope) ---------------------------------------
    scopes: dict[tuple[str, MessageKey], list[_Delivery]] = defaultdict(list)
    for d in deliveries:
        if not d.dead_letter:
            scope = "/".join(d.consumer) if d.topic else ""
            scopes[(scope, d.key)].append(d)
    for (_, key), ds in scopes.items():
        acked = min(ds, key=lambda d: (d.ack_at, d.index))
        previous_count: tuple[int, int] | None = None  # (delivery index, count)
        for k, d in enumerate(ds):
            if k > 0 and d.record.ack_mode not in DUPLICATES_ALLOWED:
                if acked.ack_at < d.index:
                    report(AnomalyKind.DUPLICATE_AFTER_ACK, key, [acked.index, int(acked.ack_at), d.index])
                elif d.unmarked:
                    report(AnomalyKind.DUPLICATE, key, [ds[k - 1].index, d.index])
            count = d.record.delivery_count
            if count is not None:
                if count < 1 or (k == 0 and count > 1 and d.record.redelivered is False):
                    report(AnomalyKind.DELIVERY_COUNT_START, key, [d.index])
                elif previous_count is not None and count < previous_count[1]:
                    report(AnomalyKind.DELIVERY_COUNT_DECREASE, key, [previous_count[0], d.index])
                previous_count = (d.index, count)

    # --- order per consumer, destination, producer, priority ------------------------------
    streams: dict[tuple[Consumer, str | None, str, object], list[_Delivery]] = defaultdict(list)
    seen: set[tuple[Consumer, MessageKey]] = set()
    for d in deliveries:
        if d.dead_letter or (d.consumer, d.key) in seen:
            continue
        seen.add((d.consumer, d.key))
        if d.first_time:
            streams[(d.consumer, d.key[0], d.key[1], d.priority)].append(d)
    for ds in streams.values():
        highest: _Delivery | None = None
        for d in ds:
            if highest is not None and d.key[2] < highest.key[2]:
                report(AnomalyKind.ORDER, d.key, [highest.index, d.index])
            if highest is None or d.key[2] > highest.key[2]:
                highest = d

    # --- dead-lettering (queues) --------------------------------------------------------
    per_message: dict[MessageKey, list[_Delivery]] = defaultdict(list)
    for d in deliveries:
        if not d.topic:
            per_message[d.key].append(d)
    for key, ds in per_message.items():
        normal = [d for d in ds if not d.dead_letter]
        dead = [d for d in ds if d.dead_letter]
        redeliveries: int | None = max_redeliveries
        if redeliveries is None:
            dead_redeliveriess = [d.record.limit for d in dead if d.record.limit is not None]
            redeliveries = min(dead_redeliveriess) if dead_redeliveriess else None
        if redeliveries is None:
            continue
        if len(normal) > redeliveries + 1:
            report(AnomalyKind.DEAD_LETTER, key, [normal[redeliveries + 1].index])
        elif dead and len(normal) < redeliveries + 1 and key not in rejected:
            report(AnomalyKind.DEAD_LETTER, key, [dead[0].index])

    # --- lost: decisive when the test declared it expects the message, silent when left on purpose ----
    delivered = {d.key for d in deliveries}
    for key, state in status.items():
        if state == "confirmed" and key not in delivered:
            covering = [(index, expects) for index, expects, scope in intents if intent_covers(scope, key)]
            if any(not expects for _, expects in covering):
                continue  # declared left on the broker or dropped on purpose
            expected_by = [index for index, expects in covering if expects]
            report(AnomalyKind.LOST, key, [r.index for r in send_records[key]] + expected_by[:1],
                   decisive=bool(expected_by))

    return anomalies, counts


def _send_status(records: list[HistoryRecord], committed: dict[str, int], rolled_back: set[str]) -> str:
    confirms = [r for r in records if r.op is Op.CONFIRM and r.type is not RecordType.INVOKE]
    if confirms:
        types = {r.type for r in confirms}
        if RecordType.OK in types:
            return "confirmed"
        return "indeterminate" if RecordType.INFO in types else "failed"
    outcomes: set[str] = set()
    for r in records:
        if r.op is not Op.SEND or r.type is RecordType.INVOKE:
            continue
        if r.type is RecordType.OK:
            if r.transaction is None or r.transaction in committed:
                outcomes.add("confirmed")
            elif r.transaction in rolled_back:
                outcomes.add("failed")
            else:
                outcomes.add("indeterminate")
        elif r.type is RecordType.FAIL:
            outcomes.add("failed")
        else:
            outcomes.add("indeterminate")
    for state in ("confirmed", "indeterminate", "failed"):
        if state in outcomes:
            return state
    return "indeterminate"
