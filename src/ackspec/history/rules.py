"""The history rules: one small named function per rule, shared by both engines.

Each rule reads the facts of one history (:func:`ackspec.history.facts.history_facts`)
and yields :class:`Finding` s: the anomaly kind, the message and the operations that
show it. :data:`RULES` lists them in the order they are applied; the single-process
checker (:mod:`ackspec.history.checks`) and the Spark job's Python workers
(:mod:`ackspec.pipeline.checks_spark`) both run exactly this list through
:func:`check_facts`, so the rules are stated once. ``tests/pipeline/test_rules.py``
tests each rule alone on small hand-written histories.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import NamedTuple

from ackspec.history.anomalies import DUPLICATES_ALLOWED, AnomalyKind, intent_covers
from ackspec.history.facts import Consumer, Delivery, HistoryFacts, MessageKey


class Finding(NamedTuple):
    """One anomaly of a history, before it is named by run and test."""

    kind: AnomalyKind
    key: MessageKey
    operations: tuple[int, ...]
    decisive: bool = False


Rule = Callable[[HistoryFacts], Iterator[Finding]]


def in_flight(facts: HistoryFacts) -> Iterator[Finding]:
    """More unsettled deliveries outstanding on a consumer than its latest prefetch/credit bound."""
    for consumer, ds in facts.by_consumer.items():
        bounds = facts.limits.get(consumer)
        if not bounds:
            continue
        outstanding: list[float] = []  # a heap of the settle_at of the deliveries still outstanding
        for d in ds:
            while outstanding and outstanding[0] <= d.index:
                heapq.heappop(outstanding)
            if d.settle_at > d.index:
                heapq.heappush(outstanding, d.settle_at)
            bound = _bound_before(bounds, d.index)
            if bound is not None and bound[1] > 0 and len(outstanding) > bound[1]:
                yield Finding(AnomalyKind.IN_FLIGHT, d.key, (bound[0], d.index))


def _bound_before(bounds: list[tuple[int, int]], index: int) -> tuple[int, int] | None:
    """The last ``(record index, limit)`` set before ``index`` (``bounds`` in index order)."""
    bound = None
    for at, limit in bounds:
        if at >= index:
            break
        bound = (at, limit)
    return bound


def _scopes(facts: HistoryFacts) -> dict[tuple[str, MessageKey], list[Delivery]]:
    """Deliveries (not from a dead-letter queue) by duplicate scope: the queue, or the topic's consumer.

    Two rules read them: worked out once per history and kept in ``facts.scopes``."""
    if facts.scopes is not None:
        return facts.scopes
    scopes: dict[tuple[str, MessageKey], list[Delivery]] = defaultdict(list)
    for d in facts.deliveries:
        if not d.dead_letter:
            scopes[("/".join(d.consumer) if d.topic else "", d.key)].append(d)
    facts.scopes = scopes
    return scopes


def duplicates(facts: HistoryFacts) -> Iterator[Finding]:
    """A message delivered again after it was acknowledged, or again without a redelivery marker."""
    for (_, key), ds in _scopes(facts).items():
        if len(ds) < 2:
            continue  # delivered once in its scope (most messages): no duplicate
        acked = min(ds, key=lambda d: (d.ack_at, d.index))
        for k in range(1, len(ds)):
            d = ds[k]
            if d.record.ack_mode in DUPLICATES_ALLOWED:
                continue
            if acked.ack_at < d.index:
                yield Finding(AnomalyKind.DUPLICATE_AFTER_ACK, key, (acked.index, int(acked.ack_at), d.index))
            elif d.unmarked:
                yield Finding(AnomalyKind.DUPLICATE, key, (ds[k - 1].index, d.index))


def delivery_counts(facts: HistoryFacts) -> Iterator[Finding]:
    """A delivery count below 1, above 1 on an unmarked first delivery, or lower than an earlier one."""
    for (_, key), ds in _scopes(facts).items():
        previous: tuple[int, int] | None = None  # (delivery index, count)
        for k, d in enumerate(ds):
            count = d.record.delivery_count
            if count is None:
                continue
            if count < 1 or (k == 0 and count > 1 and d.record.redelivered is False):
                yield Finding(AnomalyKind.DELIVERY_COUNT_START, key, (d.index,))
            elif previous is not None and count < previous[1]:
                yield Finding(AnomalyKind.DELIVERY_COUNT_DECREASE, key, (previous[0], d.index))
            previous = (d.index, count)


def order(facts: HistoryFacts) -> Iterator[Finding]:
    """First deliveries of one producer's messages to one consumer out of send order (per priority)."""
    streams: dict[tuple[Consumer, str | None, str, object], list[Delivery]] = defaultdict(list)
    seen: set[tuple[Consumer, MessageKey]] = set()
    for d in facts.deliveries:
        if d.dead_letter or (d.consumer, d.key) in seen:
            continue
        seen.add((d.consumer, d.key))
        if d.first_time:
            streams[(d.consumer, d.key[0], d.key[1], d.priority)].append(d)
    for ds in streams.values():
        highest: Delivery | None = None
        for d in ds:
            if highest is not None and d.key[2] < highest.key[2]:
                yield Finding(AnomalyKind.ORDER, d.key, (highest.index, d.index))
            if highest is None or d.key[2] > highest.key[2]:
                highest = d


def dead_letter(facts: HistoryFacts) -> Iterator[Finding]:
    """A queue message redelivered beyond the limit, or dead-lettered before reaching it (not rejected)."""
    per_message: dict[MessageKey, list[Delivery]] = defaultdict(list)
    for d in facts.deliveries:
        if not d.topic:
            per_message[d.key].append(d)
    for key, ds in per_message.items():
        normal = [d for d in ds if not d.dead_letter]
        if len(normal) == len(ds) and facts.max_redeliveries is None:
            continue  # no limit configured, none from a dead-letter queue to infer it from
        dead = [d for d in ds if d.dead_letter]
        limit = facts.max_redeliveries
        if limit is None:
            limit = min((d.record.limit for d in dead if d.record.limit is not None), default=None)
        if limit is None:
            continue
        if len(normal) > limit + 1:
            yield Finding(AnomalyKind.DEAD_LETTER, key, (normal[limit + 1].index,))
        elif dead and len(normal) < limit + 1 and key not in facts.rejected:
            yield Finding(AnomalyKind.DEAD_LETTER, key, (dead[0].index,))


def lost(facts: HistoryFacts) -> Iterator[Finding]:
    """A confirmed send never delivered: decisive when an intent expects it, silent when one exempts it."""
    delivered = {d.key for d in facts.deliveries}
    for key, state in facts.status.items():
        if state != "confirmed" or key in delivered:
            continue
        covering = [(index, expects) for index, expects, scope in facts.intents if intent_covers(scope, key)]
        if any(not expects for _, expects in covering):
            continue  # declared left on the broker or dropped on purpose
        expected_by = [index for index, expects in covering if expects]
        operations = tuple(r.index for r in facts.send_records[key]) + tuple(expected_by[:1])
        yield Finding(AnomalyKind.LOST, key, operations, bool(expected_by))


RULES: tuple[Rule, ...] = (in_flight, duplicates, delivery_counts, order, dead_letter, lost)
"""Every rule, in the order both engines apply them."""


def check_facts(facts: HistoryFacts) -> Iterator[Finding]:
    """Every finding of every rule on one history."""
    for rule in RULES:
        yield from rule(facts)
