"""The broker core's queues by name, and which of their messages the journal holds.

Why a part of its own: every way a message leaves (acknowledged, expired, dead-lettered, its queue deleted)
ends in :meth:`Store.remove`, which alone decides whether the journal must hear of it; and a queue that
holds nothing and serves no one is forgotten in one place (:meth:`Store.free_if_unused`).
"""

from __future__ import annotations

import itertools

from ackspec.reference.broker.effects import Effect, JournalAppend
from ackspec.reference.broker.model import Message
from ackspec.reference.broker.records import Removed, Stored
from ackspec.reference.broker.state import Entry, Queue


class Store:
    """The named queues, the ids of the journalled messages, and the counters that order messages."""

    def __init__(self) -> None:
        self.queues: dict[str, Queue] = {}
        self.journaled: set[str] = set()
        """Ids of the persistent messages (and durable copies) present in the journal."""
        self.seq = itertools.count(1)
        """Publication numbers: a message's id and its place in the journal's order."""
        self.pos = itertools.count(1)
        """Positions of entries: redelivered messages go back by it, ahead of newer ones."""

    def queue(self, name: str) -> Queue:
        """The queue named ``name``, made on first use."""
        q = self.queues.get(name)
        if q is None:
            q = self.queues[name] = Queue(name)
        return q

    def entry(self, msg: Message, delivery_count: int = 0, redelivered: bool = False) -> Entry:
        """A new entry for ``msg``, behind every entry made before it."""
        return Entry(msg, next(self.pos), delivery_count, redelivered)

    def free_if_unused(self, q: Queue) -> None:
        """Forget a queue that holds nothing and has no consumer (issue 20: 100,000 one-off queue names
        were kept for good, +120 MB). Safe because nothing else keeps a queue object beyond its consumers:
        a transaction's sends name their queue and commit looks it up again."""
        if not q.consumers and not len(q) and q.durable is None and self.queues.get(q.name) is q:
            del self.queues[q.name]

    def journal(self, msg: Message, out: list[Effect]) -> None:
        """Keep persistent ``msg`` in the journal."""
        out.append(JournalAppend(Stored(msg)))
        self.journaled.add(msg.message_id)

    def remove(self, entry: Entry, out: list[Effect], removed: list[str] | None) -> bool:
        """``entry`` leaves for good: a journalled message gets a removal record, or, with ``removed`` (a
        commit collecting its removals into one record), its id there. Returns whether a record was emitted."""
        mid = entry.msg.message_id
        if mid in self.journaled:
            self.journaled.discard(mid)
            if removed is not None:
                removed.append(mid)
                return False
            out.append(JournalAppend(Removed(mid)))
            return True
        return False
