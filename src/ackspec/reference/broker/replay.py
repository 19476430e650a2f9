"""The journal and the broker core's state: rebuilding the state from records on start, and the records that
reproduce the current state (compaction).

Why a module of its own: the two directions must agree record for record (what :func:`live_records` writes,
:func:`restore` reads back), so they sit side by side.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from ackspec.reference.broker.model import Message
from ackspec.reference.broker.records import (
    DeadLettered,
    DurableRemoved,
    DurableSubscribed,
    Record,
    Removed,
    Stored,
    StoredCopy,
)
from ackspec.reference.broker.selector import parse_selector
from ackspec.reference.broker.state import Conn, DurableKey, Entry, Queue, dead_letter_of
from ackspec.reference.broker.store import Store
from ackspec.reference.broker.topics import Topics


def restore(store: Store, topics: Topics, records: Iterable[Record]) -> None:
    """Rebuild queues from journal records (on start, before any connection).

    Surviving messages come back marked redelivered: they may have been delivered
    before the restart ("likely, not guaranteed", JMSRedelivered), with one failed delivery
    counted (delivery-count 2 on the wire): a message marked redelivered has a count of at least
    2 (JMS 3.5.11), and the journal does not keep exact counts (which 3.5.11 allows).
    """
    live, owner, durables = _replay(records)
    for key, made in durables.items():
        topics.add_durable(key, made.destination, parse_selector(made.selector), made.no_local)
    max_seq = 0
    for mid, m in live.items():  # dict order = journal order = enqueue order
        kept_by = owner.get(mid)
        q = store.queue(m.destination) if kept_by is None else topics.durables.get(kept_by)
        if q is None:
            continue  # kept by a subscription that is gone (cannot happen with a whole journal)
        q.enqueue((store.entry(m, 1, True),))
        store.journaled.add(m.message_id)
        max_seq = max(max_seq, m.seq)
    store.seq = itertools.count(max_seq + 1)


def _replay(records: Iterable[Record]) -> tuple[dict[str, Message], dict[str, DurableKey],
                                                dict[DurableKey, DurableSubscribed]]:
    """What the records leave: the live messages (journal order), the durable subscription keeping
    each copy, and how each durable subscription was made."""
    live: dict[str, Message] = {}
    owner: dict[str, DurableKey] = {}  # copy id -> the durable subscription keeping it
    durables: dict[DurableKey, DurableSubscribed] = {}  # durable subscription -> how it was made
    for r in records:
        if isinstance(r, Stored):
            live[r.message.message_id] = r.message
        elif isinstance(r, StoredCopy):
            _restore_copy(r, live, owner)
        elif isinstance(r, Removed):
            live.pop(r.message_id, None)
            owner.pop(r.message_id, None)
        elif isinstance(r, DeadLettered):
            m = live.pop(r.message_id, None)
            owner.pop(r.message_id, None)  # a dead letter is an ordinary message of the DLQ
            if m is not None:
                live[m.message_id] = dead_letter_of(m, r.dead_letter_queue, r.reason)
        elif isinstance(r, DurableSubscribed):
            durables[(r.client_id, r.name)] = r
        elif isinstance(r, DurableRemoved):
            key = (r.client_id, r.name)
            durables.pop(key, None)
            for mid in [mid for mid, k in owner.items() if k == key]:
                del owner[mid]
                live.pop(mid, None)
        else:
            for m in r.stored:
                live[m.message_id] = m
            for copy in r.copies:
                _restore_copy(copy, live, owner)
            for mid in r.removed:
                live.pop(mid, None)
                owner.pop(mid, None)
    return live, owner, durables


def _restore_copy(record: StoredCopy, live: dict[str, Message], owner: dict[str, DurableKey]) -> None:
    live[record.message.message_id] = record.message
    owner[record.message.message_id] = (record.client_id, record.name)


def live_records(store: Store, topics: Topics, conns: Iterable[Conn]) -> list[Record]:
    """The journal content that reproduces the current durable state (for compaction): the durable
    subscriptions first, then every journalled message, queued or delivered and unsettled, in
    publication order."""
    subscriptions: list[Record] = [
        DurableSubscribed(key[0], key[1], q.name, q.selector.text if q.selector else "",
                          q.no_local_client is not None)
        for key, q in topics.durables.items()]
    out: list[Record] = []

    def kept(q: Queue, entries: Iterable[Entry]) -> None:
        for e in entries:
            if e.msg.message_id in store.journaled:
                out.append(Stored(e.msg) if q.durable is None else StoredCopy(q.durable[0], q.durable[1], e.msg))

    for q in (*store.queues.values(), *topics.durables.values()):
        kept(q, q.messages())
    for c in conns:
        for s in c.subs.values():
            kept(s.queue, s.unacked.values())
    out.sort(key=lambda r: r.message.seq if isinstance(r, Stored | StoredCopy) else 0)
    return subscriptions + out
