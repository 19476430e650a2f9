"""The broker core's state: messages in queues, subscriptions, connections, open transactions.

Why a module of its own: every part of the core (:mod:`.store`, :mod:`.dispatch`, :mod:`.settlement`,
:mod:`.topics`, :mod:`.transactions`, :mod:`.replay`) reads and changes these records, and none of them owns
them; they are plain records with no behaviour beyond their own invariants.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from ackspec.reference.broker.model import AckMode, ConnId, Message, Settlement
from ackspec.reference.broker.selector import Selector

DurableKey = tuple[str, str]
"""A durable subscription's identity: (client id, subscription name), as JMS 6.11.1 names it."""


class CoreError(Exception):
    """A caller mistake the protocol must report (the core state is unchanged)."""

    def __init__(self, message: str, requirement: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.requirement = requirement


ENTRY_OVERHEAD = 400
"""Bytes a stored message costs besides its body (entry, message tuple, ids, headers): an estimate."""


class _LiveBytes:
    """The running total behind :func:`stored_bytes`.

    Why not a class attribute of :class:`Entry`: assigning one changes the class, and every change of a class
    discards the interpreter's cached look-ups of its attributes, so each new entry made every ``Entry`` attribute
    access and ``Entry(...)`` call afterwards a slow look-up."""

    __slots__ = ("total",)

    def __init__(self) -> None:
        self.total = 0


_LIVE = _LiveBytes()


class Entry:
    """One message in one queue, with its per-queue delivery state.

    :func:`stored_bytes` counts the bodies (plus :data:`ENTRY_OVERHEAD`) of every entry alive in this
    process, however it leaves (acknowledged, dead-lettered, its queue deleted): the producer flow control
    of the hosts reads it (:func:`stored_bytes`) without the core tracking every way out.

    ``rank`` orders the heap of messages that go first (:attr:`Queue.returned`): an expedited message
    (JMS priority 5-9) has minus its priority, any other 0; then the original position."""

    __slots__ = ("delivery_count", "excluded", "msg", "pos", "rank", "redelivered", "size")

    def __init__(self, msg: Message, pos: int, delivery_count: int = 0, redelivered: bool = False) -> None:
        self.msg = msg
        self.pos = pos
        self.delivery_count = delivery_count
        self.redelivered = redelivered
        self.excluded: set[tuple[ConnId, str]] | None = None
        typed = msg.typed
        self.rank = -typed.priority if typed is not None and typed.expedited else 0
        try:
            self.size = len(msg.body) + ENTRY_OVERHEAD
        except TypeError:  # a body without a length: count the overhead only
            self.size = ENTRY_OVERHEAD
        _LIVE.total += self.size

    def __del__(self) -> None:
        _LIVE.total -= self.size

    def __lt__(self, other: Entry) -> bool:
        if self.rank != other.rank:
            return self.rank < other.rank
        return self.pos < other.pos


class Queue:
    """Messages of a queue (or of one topic subscription) and its consumers.

    A topic subscription's queue (``topic_copy``) gets a copy of every message published to the
    topic while it is routed to (:attr:`.topics.Topics.routes`). A nondurable one lives as long as its
    consumer; a durable one (``durable`` is its ``(client id, subscription name)``) outlives its
    consumers and keeps collecting messages until it is removed (JMS-4.2.11-DURABLE-SUBSCRIPTION-RETAINS).
    """

    __slots__ = ("consumers", "durable", "name", "no_local", "no_local_client", "parked", "ready", "returned",
                 "rr", "selector", "shared", "topic_copy")

    def __init__(self, name: str, topic_copy: bool = False, durable: DurableKey | None = None,
                 selector: Selector | None = None) -> None:
        self.name = name
        self.ready: deque[Entry] = deque()
        self.returned: list[Entry] = []  # heap by original position: redeliveries go first, in order
        self.parked: list[Entry] = []  # undeliverable to every current consumer
        self.consumers: list[Sub] = []
        self.rr = 0
        self.topic_copy = topic_copy
        self.durable = durable
        self.selector = selector
        """A topic subscription's message selector: the topic's messages it does not match never enter
        this queue (for a durable subscription: ActiveMQ's UNMATCHED acknowledgement)."""
        self.no_local: ConnId | None = None
        """A nondurable topic subscription made with noLocal: its connection, whose messages never enter."""
        self.no_local_client: str | None = None
        """A durable subscription made with noLocal: its client id; the messages of every connection with
        that client id never enter (JMS createDurableConsumer)."""
        self.shared: DurableKey | None = None
        """A JMS 2.0 shared subscription (durable or not): its (client id, name); its consumers share it."""

    def __len__(self) -> int:
        return len(self.ready) + len(self.returned) + len(self.parked)

    def peek(self) -> Entry | None:
        if self.returned:
            return self.returned[0]
        return self.ready[0] if self.ready else None

    def pop(self) -> Entry:
        if self.returned:
            return heapq.heappop(self.returned)
        return self.ready.popleft()

    def give_back(self, entry: Entry) -> None:
        heapq.heappush(self.returned, entry)

    def enqueue(self, entries: Iterable[Entry]) -> None:
        """New messages, in order: each at the tail, or, expedited (JMS 3.4.10), among those that go first
        by priority. A run at a time (a publisher's run of one read: :meth:`.Publisher.route`); one message
        is a run of one."""
        ready = self.ready
        for entry in entries:
            if entry.rank:
                heapq.heappush(self.returned, entry)
            else:
                ready.append(entry)

    def messages(self) -> list[Entry]:
        return sorted([*self.returned, *self.ready, *self.parked])


def stored_bytes() -> int:
    """Estimated memory of the messages held by every broker core in this process (see :class:`Entry`)."""
    return _LIVE.total


@dataclass(eq=False)
class Sub:
    conn: Conn
    sub_id: str
    destination: str
    queue: Queue
    ack_mode: AckMode
    prefetch: int | None
    credit: int | None  # None: prefetch flow control; int: AMQP credit
    unacked: dict[int, Entry] = field(default_factory=dict)  # insertion order = delivery order
    in_tx: set[int] = field(default_factory=set)  # deliveries settled inside an open transaction
    selector: Selector | None = None  # on a queue: the messages it does not match are left for others
    browsing: deque[Entry] | None = None  # a browser: the copies still to show (see BrokerCore.browse)

    @property
    def key(self) -> tuple[ConnId, str]:
        return (self.conn.conn_id, self.sub_id)


@dataclass(eq=False)
class Tx:
    tx_id: str
    sends: list[tuple[Queue | None, Message]] = field(default_factory=list)
    settles: list[tuple[int, Settlement]] = field(default_factory=list)


@dataclass(eq=False)
class Conn:
    conn_id: ConnId
    user: str | None
    client_id: str | None = None  # the JMS client identifier (STOMP client-id, AMQP container id)
    exclusive: bool = False  # it asked to be the only connection with that client id (JMS 6.1.2)
    subs: dict[str, Sub] = field(default_factory=dict)
    deliveries: dict[int, Sub] = field(default_factory=dict)
    txs: dict[str, Tx] = field(default_factory=dict)
    writable: bool = True  # not paused and room left: what dispatch reads
    paused: bool = False  # the host's transport is above its write high-water mark
    room: int | None = None  # bytes of deliveries it may still be handed (None: no bound)


DEAD_LETTER_HEADERS: Final = ("original-destination", "dead-letter-reason")
"""The headers a dead letter gets: where it was, and why it was dead-lettered."""


def dead_letter_of(msg: Message, dlq: str, reason: str) -> Message:
    """``msg`` moved to ``dlq`` with :data:`DEAD_LETTER_HEADERS` in front of its own headers."""
    extra = ((DEAD_LETTER_HEADERS[0], msg.destination), (DEAD_LETTER_HEADERS[1], reason))
    typed = msg.typed.with_added(extra) if msg.typed is not None else None
    return msg._replace(destination=dlq, headers=(*extra, *msg.headers), typed=typed)



def transaction(c: Conn, tx: str) -> Tx:
    """Open transaction ``tx`` of connection ``c``; raises :class:`CoreError` when it has none by that name."""
    t = c.txs.get(tx)
    if t is None:
        raise CoreError(f"unknown transaction {tx!r}", "STOMP-TX-UNKNOWN-ERROR")
    return t
