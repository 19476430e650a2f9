"""The history checks in one process, in plain Python: the reference semantics.

Importable without Spark. Conformance tests call :func:`check_history` on the small
history of one test so verdicts can rely on it. :func:`check_one` is the whole check of
one history: its facts (:mod:`ackspec.history.facts`), then every rule of
:data:`ackspec.history.rules.RULES`; the Spark job (:mod:`ackspec.pipeline.checks_spark`)
calls the same function on each ``(run, test)`` group in its Python workers, so the
rules are stated once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from ackspec.history.anomalies import Anomaly, CheckResult, SendCounts
from ackspec.history.facts import HistoryRecord, history_facts, send_counts
from ackspec.history.record import Op, Record, RecordType
from ackspec.history.rules import check_facts

__all__ = ["RULE_RECORDS", "HistoryRecord", "check_histories", "check_history", "check_one", "is_rule_record"]

_NOT_FAILED = frozenset({RecordType.INVOKE, RecordType.OK, RecordType.INFO})
RULE_RECORDS: dict[Op, frozenset[RecordType] | None] = {
    Op.SEND: None, Op.CONFIRM: None, Op.CRASH: None, Op.DISCONNECT: None,
    Op.RECEIVE: frozenset({RecordType.OK}), Op.ACK: frozenset({RecordType.OK}), Op.NACK: frozenset({RecordType.OK}),
    Op.COMMIT: frozenset({RecordType.OK, RecordType.FAIL}), Op.ABORT: frozenset({RecordType.OK}),
    Op.RECOVER: frozenset({RecordType.OK}), Op.UNSUBSCRIBE: frozenset({RecordType.OK}),
    Op.SUBSCRIBE: _NOT_FAILED, Op.FLOW: _NOT_FAILED, Op.EXPECT: frozenset({RecordType.OK}),
}
"""The records the rules read, by operation: the record types that matter (``None``: all).
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
    facts = history_facts(history)
    anomalies = [Anomaly.make(f.kind, run, test, f.key[0], f.key[1] or None, f.key[2], f.operations,
                              decisive=f.decisive) for f in check_facts(facts)]
    return anomalies, send_counts(facts)
