"""The sans-IO broker core: queues, topics, subscriptions, settlement, transactions, DLQ.

No sockets, no threads, no clock reads on the hot path: every public method takes an event
and returns the list of :mod:`effects <ackspec.reference.broker.effects>` the host must
carry out. Caller mistakes (unknown delivery id, unknown transaction, duplicate
subscription) raise :class:`CoreError` *before* any state changes, so the host can turn them
into a protocol error (STOMP ERROR, AMQP detach) and the broker stays consistent.
"""

from __future__ import annotations

import heapq
import itertools
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ackspec.reference.broker.effects import Close, Confirm, Deliver, Drained, Effect, JournalAppend, Reject
from ackspec.reference.broker.model import (
    ACCEPT,
    TOPIC_PREFIX,
    AckMode,
    ConnId,
    CoreConfig,
    DestinationKind,
    Headers,
    Message,
    Outcome,
    Settlement,
    destination_kind,
)
from ackspec.reference.broker.records import (
    Committed,
    DeadLettered,
    DurableRemoved,
    DurableSubscribed,
    Record,
    Removed,
    Stored,
    StoredCopy,
)
from ackspec.reference.broker.selector import Selector, parse_selector
from ackspec.reference.broker.trace import NULL_TRACER, Tracer
from ackspec.reference.broker.typed import Typed

if TYPE_CHECKING:
    from ackspec.reference.faults import FaultInjector


DurableKey = tuple[str, str]
"""A durable subscription's identity: (client id, subscription name), as JMS 6.11.1 names it."""


class CoreError(Exception):
    """A caller mistake the protocol must report (the core state is unchanged)."""

    def __init__(self, message: str, requirement: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.requirement = requirement


PASS_OVER_LIMIT = 200
"""Messages one dispatch passes over while they wait for a blocked consumer (see BrokerCore._dispatch);
ActiveMQ looks at most at a page of 200 messages (maxPageSize) the same way."""


ENTRY_OVERHEAD = 400
"""Bytes a stored message costs besides its body (entry, message tuple, ids, headers): an estimate."""


class _Entry:
    """One message in one queue, with its per-queue delivery state.

    ``_Entry.live_bytes`` counts the bodies (plus :data:`ENTRY_OVERHEAD`) of every entry alive in this
    process, however it leaves (acknowledged, dead-lettered, its queue deleted): the producer flow control
    of the hosts reads it (:func:`stored_bytes`) without the core tracking every way out.

    ``rank`` orders the heap of messages that go first (:attr:`_Queue.returned`): an expedited message
    (JMS priority 5-9) has minus its priority, any other 0; then the original position."""

    __slots__ = ("delivery_count", "excluded", "msg", "pos", "rank", "redelivered", "size")
    live_bytes = 0

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
        _Entry.live_bytes += self.size

    def __del__(self) -> None:
        _Entry.live_bytes -= self.size

    def __lt__(self, other: _Entry) -> bool:
        if self.rank != other.rank:
            return self.rank < other.rank
        return self.pos < other.pos


class _Queue:
    """Messages of a queue (or of one topic subscription) and its consumers.

    A topic subscription's queue (``topic_copy``) gets a copy of every message published to the
    topic while it is routed to (:attr:`BrokerCore._topics`). A nondurable one lives as long as its
    consumer; a durable one (``durable`` is its ``(client id, subscription name)``) outlives its
    consumers and keeps collecting messages until it is removed (JMS-4.2.11-DURABLE-SUBSCRIPTION-RETAINS).
    """

    __slots__ = ("consumers", "durable", "name", "no_local", "no_local_client", "parked", "ready", "returned",
                 "rr", "selector", "shared", "topic_copy")

    def __init__(self, name: str, topic_copy: bool = False, durable: DurableKey | None = None,
                 selector: Selector | None = None) -> None:
        self.name = name
        self.ready: deque[_Entry] = deque()
        self.returned: list[_Entry] = []  # heap by original position: redeliveries go first, in order
        self.parked: list[_Entry] = []  # undeliverable to every current consumer
        self.consumers: list[_Sub] = []
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

    def peek(self) -> _Entry | None:
        if self.returned:
            return self.returned[0]
        return self.ready[0] if self.ready else None

    def pop(self) -> _Entry:
        if self.returned:
            return heapq.heappop(self.returned)
        return self.ready.popleft()

    def give_back(self, entry: _Entry) -> None:
        heapq.heappush(self.returned, entry)

    def enqueue(self, entry: _Entry) -> None:
        """A new message: at the tail, or, expedited (JMS 3.4.10), among those that go first by priority."""
        if entry.rank:
            heapq.heappush(self.returned, entry)
        else:
            self.ready.append(entry)

    def messages(self) -> list[_Entry]:
        return sorted([*self.returned, *self.ready, *self.parked])


def stored_bytes() -> int:
    """Estimated memory of the messages held by every broker core in this process (see :class:`_Entry`)."""
    return _Entry.live_bytes


@dataclass(eq=False)
class _Sub:
    conn: _Conn
    sub_id: str
    destination: str
    queue: _Queue
    ack_mode: AckMode
    prefetch: int | None
    credit: int | None  # None: prefetch flow control; int: AMQP credit
    unacked: dict[int, _Entry] = field(default_factory=dict)  # insertion order = delivery order
    in_tx: set[int] = field(default_factory=set)  # deliveries settled inside an open transaction
    selector: Selector | None = None  # on a queue: the messages it does not match are left for others
    browsing: deque[_Entry] | None = None  # a browser: the copies still to show (see BrokerCore.browse)

    @property
    def key(self) -> tuple[ConnId, str]:
        return (self.conn.conn_id, self.sub_id)


@dataclass(eq=False)
class _Tx:
    tx_id: str
    sends: list[tuple[_Queue | None, Message]] = field(default_factory=list)
    settles: list[tuple[int, Settlement]] = field(default_factory=list)


@dataclass(eq=False)
class _Conn:
    conn_id: ConnId
    user: str | None
    client_id: str | None = None  # the JMS client identifier (STOMP client-id, AMQP container id)
    exclusive: bool = False  # it asked to be the only connection with that client id (JMS 6.1.2)
    subs: dict[str, _Sub] = field(default_factory=dict)
    deliveries: dict[int, _Sub] = field(default_factory=dict)
    txs: dict[str, _Tx] = field(default_factory=dict)
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


class BrokerCore:
    """Protocol-neutral broker state machine. See the package docstring for the API."""

    def __init__(
        self,
        config: CoreConfig | None = None,
        *,
        tracer: Tracer | None = None,
        faults: FaultInjector | None = None,
        boot_id: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``clock``: the time in seconds since the epoch, read only to tell whether a message with an
        expiry time has expired (a message without one never reads it)."""
        self.config = config or CoreConfig()
        self.clock = clock
        self.tracer = tracer or NULL_TRACER
        self.faults = faults
        self.boot_id = boot_id or secrets.token_hex(4)
        self._conns: dict[ConnId, _Conn] = {}
        self._queues: dict[str, _Queue] = {}
        self._topics: dict[str, list[_Queue]] = {}  # topic -> the subscription queues it copies to
        self._durables: dict[DurableKey, _Queue] = {}
        self._shared: dict[DurableKey, _Queue] = {}  # nondurable shared subscriptions with a consumer
        self._seq = itertools.count(1)
        self._pos = itertools.count(1)
        self._delivery_ids = itertools.count(1)
        self._journaled: set[str] = set()  # ids of persistent messages present in the journal
        self.out_of_room: set[ConnId] = set()
        """Connections whose output room is spent (:meth:`set_output_room`): their hosts give more once written."""

    # ------------------------------------------------------------------ connections
    def open(self, conn: ConnId, *, user: str | None = None, client_id: str | None = None,
             exclusive: bool = False) -> list[Effect]:
        """A connection was established and authenticated; ``client_id``: its JMS client identifier, if it
        gave one (a durable noLocal subscription skips the messages of every connection with its own).

        ``exclusive``: the connection set its client id as a JMS client does (STOMP ``client-id``, AMQP's
        ``sole-connection-for-container``), so no other open connection may have it (JMS 6.1.2: a client
        identifier is in use by one client at a time); raises :class:`CoreError` when one has."""
        if conn in self._conns:
            raise CoreError(f"connection {conn!r} already open")
        if client_id is not None:
            for other in self._conns.values():
                if other.client_id == client_id and (exclusive or other.exclusive):
                    raise CoreError(f"client id {client_id!r} is in use by another connection",
                                    "JMS-6.1.2-CLIENT-ID-IN-USE")
        self._conns[conn] = _Conn(conn, user, client_id, exclusive, room=self.config.output_room)
        return []

    def close(self, conn: ConnId, *, abrupt: bool = False) -> list[Effect]:
        """A connection ended (cleanly or not): roll back its transactions, return unacked messages.

        Returned messages keep their place ahead of newer ones, are marked redelivered and
        their delivery-count is incremented (a delivery that was not settled failed).
        """
        c = self._conns.pop(conn, None)
        self.out_of_room.discard(conn)
        if c is None:
            return []
        out: list[Effect] = []
        if c.txs:
            self.tracer.trace("STOMP-TX-DISCONNECT-ABORTS", conn)
        c.txs.clear()
        touched: list[_Queue] = []
        subs = list(c.subs.values())
        for sub in subs:
            self._drop_sub(sub, out, touched)
        for q in touched:
            self._dispatch(q, out)
        for sub in subs:
            self._free_if_unused(sub.queue)
        return out

    def _free_if_unused(self, q: _Queue) -> None:
        """Forget a queue that holds nothing and has no consumer (issue 20: 100,000 one-off queue names
        were kept for good, +120 MB). Safe because nothing else keeps a queue object beyond its consumers:
        a transaction's sends name their queue and commit looks it up again (see :meth:`commit`)."""
        if not q.consumers and not len(q) and q.durable is None and self._queues.get(q.name) is q:
            del self._queues[q.name]

    def set_writable(self, conn: ConnId, writable: bool) -> list[Effect]:
        """Transport back-pressure: deliveries to ``conn`` pause while it is not writable."""
        c = self._conn(conn)
        c.paused = not writable
        return self._update_writable(c)

    def set_output_room(self, conn: ConnId, room: int | None) -> list[Effect]:
        """Consumer back-pressure: ``conn`` may be handed ``room`` more bytes of deliveries (None: no bound).

        Transport pauses alone come too late: one dispatch would hand a whole backlog to an ``ack:auto``
        consumer before the transport's buffer could say it is full (1 GB in memory, issue 20). So each
        delivery spends its :data:`ENTRY_OVERHEAD`-inclusive size from the room; at 0 or less dispatch to
        ``conn`` holds (the messages stay queued, in order) and ``conn`` is in :attr:`out_of_room` until
        its host, having written what it got, gives room again. At most one message overshoots."""
        c = self._conn(conn)
        c.room = room
        if room is None or room > 0:
            self.out_of_room.discard(conn)
        return self._update_writable(c)

    def _update_writable(self, c: _Conn) -> list[Effect]:
        c.writable = not c.paused and (c.room is None or c.room > 0)
        out: list[Effect] = []
        if c.writable:
            for sub in c.subs.values():
                self._dispatch(sub.queue, out)
        return out

    def _spend_room(self, c: _Conn, room: int) -> None:
        """A delivery went to ``c`` (whose room is bounded): ``room`` is what is left."""
        c.room = room
        if room <= 0:
            c.writable = False
            self.out_of_room.add(c.conn_id)

    # ------------------------------------------------------------------ subscriptions
    def subscribe(
        self,
        conn: ConnId,
        sub: str,
        destination: str,
        *,
        ack: AckMode = AckMode.AUTO,
        prefetch: int | None = None,
        credit: int | None = None,
        durable: DurableKey | None = None,
        selector: Selector | None = None,
        no_local: bool = False,
        shared: DurableKey | None = None,
    ) -> list[Effect]:
        """Attach a consumer.

        ``prefetch``: at most this many unsettled deliveries (client modes; default
        ``config.default_prefetch``). ``credit``: AMQP-style credit instead of prefetch
        (starts at the given value, see :meth:`add_credit`). ``durable``: on a topic, the
        ``(client id, name)`` of a durable subscription to create or to resume (with what it
        kept while no consumer was attached); a durable subscription has at most one consumer, and
        resuming it on another topic or with another selector replaces it with a new, empty one
        (JMS 6.11.1). ``selector``: the consumer gets only the messages it matches (JMS 3.8); on a queue
        the others stay for other consumers, on a topic its subscription never gets them. ``no_local``:
        on a nondurable topic subscription, the messages published by its own connection never reach it
        (JMS noLocal; no effect on a queue); on a durable one, those of every connection with the same
        client id (which is the durable key's); resuming with another noLocal replaces it, as another
        selector does. ``shared``: on a topic, the ``(client id, name)`` of a JMS 2.0 shared subscription
        whose consumers share its messages (each goes to one of them); with ``durable`` (the same key) a
        shared durable one, else it lives as long as it has a consumer.
        """
        c = self._conn(conn)
        if sub in c.subs:
            raise CoreError(f"subscription id {sub!r} already in use on this connection", "STOMP-SUBSCRIBE-ID-UNIQUE")
        if prefetch is not None and prefetch < 0:
            raise CoreError("prefetch must be >= 0")
        topic = destination_kind(destination) is DestinationKind.TOPIC
        if durable is not None:
            if not topic:
                raise CoreError(f"a durable subscription needs a topic, not {destination!r}")
            kept = self._durables.get(durable)
            if kept is not None and kept.consumers and (shared is None or kept.shared is None):
                raise CoreError(f"durable subscription {durable[1]!r} of client {durable[0]!r} already has a consumer")
        if ack is not AckMode.AUTO and prefetch is None and credit is None:
            prefetch = self.config.default_prefetch
        if prefetch is not None:
            prefetch = min(prefetch, self.config.max_prefetch)
            if prefetch == 0 and credit is None:
                prefetch = None if ack is AckMode.AUTO else self.config.default_prefetch
        out: list[Effect] = []
        if durable is not None:
            q = self._durable_queue(durable, destination, selector, no_local, out)
            q.shared = shared
        elif topic and shared is not None:
            q = self._shared_queue(shared, destination, selector)
        elif topic:
            q = _Queue(destination, topic_copy=True, selector=selector)
            if no_local:
                q.no_local = conn
            self._topics.setdefault(destination, []).append(q)
        else:
            q = self._queue(destination)
        s = _Sub(c, sub, destination, q, ack, prefetch, credit, selector=None if topic else selector)
        c.subs[sub] = s
        q.consumers.append(s)
        if q.parked:
            for e in q.parked:
                q.give_back(e)
            q.parked.clear()
        self._dispatch(q, out)
        return out

    def _durable_queue(self, key: DurableKey, destination: str, selector: Selector | None, no_local: bool,
                       out: list[Effect]) -> _Queue:
        """The queue of durable subscription ``key`` on ``destination``: the kept one, or a new one (a
        subscription kept for another topic, selector or noLocal is replaced: its messages are dropped),
        journalled."""
        q = self._durables.get(key)
        text = selector.text if selector is not None else ""
        if (q is not None and q.name == destination and (q.selector.text if q.selector else "") == text
                and (q.no_local_client is not None) == no_local):
            if len(q):
                self.tracer.trace("JMS-4.2.11-DURABLE-SUBSCRIPTION-RETAINS", destination)
            return q
        if q is not None:
            self._remove_durable_queue(key, q, out)
        out.append(JournalAppend(DurableSubscribed(key[0], key[1], destination, text, no_local)))
        return self._add_durable(key, destination, selector, no_local)

    def _shared_queue(self, key: DurableKey, destination: str, selector: Selector | None) -> _Queue:
        """The queue of the nondurable shared subscription ``key``: the one its other consumers use, or a new one."""
        q = self._shared.get(key)
        if q is None or q.name != destination:
            q = self._shared[key] = _Queue(destination, topic_copy=True, selector=selector)
            q.shared = key
            self._topics.setdefault(destination, []).append(q)
        return q

    def _add_durable(self, key: DurableKey, destination: str, selector: Selector | None, no_local: bool) -> _Queue:
        q = _Queue(destination, topic_copy=True, durable=key, selector=selector)
        if no_local:
            q.no_local_client = key[0]
        self._durables[key] = q
        self._topics.setdefault(destination, []).append(q)
        return q

    def remove_durable(self, conn: ConnId, key: DurableKey) -> list[Effect]:
        """Delete durable subscription ``key`` and what it kept (JMS ``Session.unsubscribe``).

        Raises :class:`CoreError` when it does not exist or still has a consumer (JMS 6.11.1: deleting
        a subscription in use is an error)."""
        self._conn(conn)
        q = self._durables.get(key)
        if q is None:
            raise CoreError(f"no durable subscription {key[1]!r} of client {key[0]!r}")
        if q.consumers:
            raise CoreError(f"durable subscription {key[1]!r} of client {key[0]!r} still has a consumer")
        out: list[Effect] = []
        self._remove_durable_queue(key, q, out)
        return out

    def durable_subscription(self, key: DurableKey) -> tuple[str, str, bool] | None:
        """(topic, selector text, noLocal) of durable subscription ``key``, or None: what a client that
        reattaches to it by name only (the AMQP JMS mapping's unsubscribe) is told it is."""
        q = self._durables.get(key)
        if q is None:
            return None
        return q.name, q.selector.text if q.selector is not None else "", q.no_local_client is not None

    def delete_queue(self, destination: str) -> list[Effect]:
        """Delete a queue and the messages it holds (a temporary queue whose connection ended)."""
        q = self._queues.pop(destination, None)
        out: list[Effect] = []
        if q is None:
            return out
        for entry in q.messages():
            self._remove(entry, out, None)
        for s in list(q.consumers):
            self._drop_sub(s, out, [])
        return out

    def _remove_durable_queue(self, key: DurableKey, q: _Queue, out: list[Effect]) -> None:
        """Forget the subscription and its copies; one journal record drops them all on replay."""
        out.append(JournalAppend(DurableRemoved(key[0], key[1])))
        for entry in q.messages():
            self._journaled.discard(entry.msg.message_id)
        del self._durables[key]
        routed = self._topics.get(q.name)
        if routed is not None and q in routed:
            routed.remove(q)

    def unsubscribe(self, conn: ConnId, sub: str) -> list[Effect]:
        """Detach a consumer; its unsettled deliveries return to the queue (redelivered)."""
        c = self._conn(conn)
        s = c.subs.get(sub)
        if s is None:
            raise CoreError(f"no subscription with id {sub!r}", "STOMP-UNSUBSCRIBE-UNKNOWN-ID")
        out: list[Effect] = []
        touched: list[_Queue] = []
        self._drop_sub(s, out, touched)
        for q in touched:
            self._dispatch(q, out)
        self._free_if_unused(s.queue)
        return out

    def browse(self, conn: ConnId, sub: str, destination: str, *, ack: AckMode = AckMode.AUTO,
               selector: Selector | None = None) -> list[Effect]:
        """A queue browser (JMS QueueBrowser, AMQP ``distribution-mode copy``): the messages the queue holds
        now, in the order it would deliver them, handed out as AMQP credit allows (see :meth:`add_credit`)
        and left in the queue; settling a browsed copy (``ack`` not AUTO) changes nothing."""
        c = self._conn(conn)
        if sub in c.subs:
            raise CoreError(f"subscription id {sub!r} already in use on this connection", "STOMP-SUBSCRIBE-ID-UNIQUE")
        q = self._queue(destination)
        shown = deque(e for e in q.messages() if selector is None or selector.matches(e.msg))
        c.subs[sub] = _Sub(c, sub, destination, q, ack, None, 0, selector=selector, browsing=shown)
        return []

    def _show(self, s: _Sub, shown: deque[_Entry], out: list[Effect]) -> None:
        """Hand a browser copies of what it may still see, as far as its credit goes."""
        while shown and s.credit:
            entry = shown.popleft()
            if entry.msg.typed is not None and entry.msg.typed.expired(int(self.clock() * 1000)):
                continue
            did = next(self._delivery_ids)
            s.credit -= 1
            out.append(Deliver(s.conn.conn_id, s.sub_id, did, entry.msg, entry.redelivered, entry.delivery_count))
            if s.ack_mode is not AckMode.AUTO:
                s.conn.deliveries[did] = s  # settled by the client, to no effect

    def halt(self, conn: ConnId, sub: str) -> None:
        """The consumer is going away (its AMQP link or connection was closed by the client, and the rest of
        what the client sent is still being read): no more deliveries to it, whatever credit it had."""
        s = self._sub(conn, sub)
        if s.credit is not None:
            s.credit = 0

    def add_credit(self, conn: ConnId, sub: str, credit: int, *, drain: bool = False) -> list[Effect]:
        """AMQP flow: grant ``credit`` more deliveries; with ``drain`` use it up or give it back."""
        s = self._sub(conn, sub)
        s.credit = (s.credit or 0) + credit
        out: list[Effect] = []
        if s.browsing is not None:
            self._show(s, s.browsing, out)
        else:
            self._dispatch(s.queue, out)
        if drain and s.credit:
            out.append(Drained(conn, sub, s.credit))
            s.credit = 0
        return out

    # ------------------------------------------------------------------ publish
    def publish(
        self,
        conn: ConnId,
        destination: str,
        body: bytes,
        headers: Headers = (),
        *,
        persistent: bool = False,
        tx: str | None = None,
        confirm: object = None,
        typed: Typed | None = None,
    ) -> list[Effect]:
        """Publish a message. ``confirm`` (a receipt id, a delivery tag) is echoed in a
        :class:`Confirm` once the message is accepted (and durable, when persistent and
        ``sync_non_transactional``) or in a :class:`Reject`. ``typed``: what an AMQP message carries
        beyond body and string headers (:mod:`.typed`)."""
        c = self._conns.get(conn)
        if c is None:
            c = self._conn(conn)  # raises
        t = self._tx(c, tx) if tx is not None else None
        out: list[Effect] = []
        if destination.startswith(TOPIC_PREFIX):
            q = None
        else:
            q = self._queues.get(destination)
            if q is None:
                q = self._queue(destination)
            if len(q.ready) + len(q.returned) + len(q.parked) >= self.config.max_queue_depth:
                if confirm is not None:
                    out.append(Reject(conn, confirm, f"queue {destination} is full"))
                return out
        seq = next(self._seq)
        msg = Message(f"{self.boot_id}-{seq}", destination, body, headers, persistent, conn, seq, typed)
        if t is not None:
            if len(t.sends) + len(t.settles) >= self.config.max_transaction_size:
                raise CoreError("transaction too large")
            t.sends.append((q, msg))
            self.tracer.trace("STOMP-TX-SEND-INVISIBLE", destination)
            if confirm is not None:
                out.append(Confirm(conn, confirm))
            return out
        journaled = self._route(q, msg, out, journal=True)
        if confirm is not None:
            out.append(Confirm(conn, confirm, durable=journaled and self.config.sync_non_transactional))
        return out

    def publish_many(self, conn: ConnId, destination: str,
                     messages: Iterable[tuple[bytes, Headers, bool, object]]) -> list[Effect]:
        """Publish ``(body, headers, persistent, confirm)`` messages to one destination, outside any
        transaction: the same state and effects, in the same order, as one :meth:`publish` per message.

        Why: a host that reads many messages at once (an AMQP read carries hundreds of transfers of
        one link) pays the per-call work once: the connection and queue look-ups, the fault checks,
        the list of effects. Topics take the :meth:`publish` path per message (each subscription decides
        per message).
        """
        c = self._conns.get(conn)
        if c is None:
            c = self._conn(conn)  # raises
        if destination.startswith(TOPIC_PREFIX):
            out: list[Effect] = []
            for body, headers, persistent, confirm in messages:
                out += self.publish(conn, destination, body, headers, persistent=persistent, confirm=confirm)
            return out
        q = self._queues.get(destination)
        if q is None:
            q = self._queue(destination)
        out = []
        limit = self.config.max_queue_depth
        sync = self.config.sync_non_transactional
        boot = self.boot_id
        next_seq = self._seq.__next__
        next_pos = self._pos.__next__
        ready = q.ready
        depth = len(ready) + len(q.returned) + len(q.parked)  # kept up to date below, not recounted
        new = tuple.__new__  # Message and Confirm built without their named tuples' Python-level __new__
        for body, headers, persistent, confirm in messages:
            if depth >= limit:
                if q.consumers:  # deliveries made room
                    depth = len(ready) + len(q.returned) + len(q.parked)
                if depth >= limit:
                    if confirm is not None:
                        out.append(Reject(conn, confirm, f"queue {destination} is full"))
                    continue
            seq = next_seq()
            msg = new(Message, (f"{boot}-{seq}", destination, body, headers, persistent, conn, seq, None))
            journaled = False
            if persistent:
                out.append(JournalAppend(Stored(msg)))
                self._journaled.add(msg.message_id)
                journaled = sync
            ready.append(_Entry(msg, next_pos()))
            depth += 1
            if q.consumers:
                self._dispatch(q, out)
            if confirm is not None:
                out.append(new(Confirm, (conn, confirm, journaled)))
        return out

    def _route(self, q: _Queue | None, msg: Message, out: list[Effect], *, journal: bool) -> bool:
        """Enqueue ``msg``; returns whether a journal record was emitted."""
        if q is not None:
            journaled = False
            if msg.persistent and journal:
                out.append(JournalAppend(Stored(msg)))
                self._journaled.add(msg.message_id)
                journaled = True
            q.enqueue(_Entry(msg, next(self._pos)))
            self._dispatch(q, out)
            return journaled
        journaled = False
        for sq, copy, record in self._copies(msg):
            if record is not None and journal:
                out.append(JournalAppend(record))
                self._journaled.add(copy.message_id)
                journaled = True
            sq.enqueue(_Entry(copy, next(self._pos)))
            self._dispatch(sq, out)
        return journaled

    def _client_of(self, conn: ConnId) -> str | None:
        c = self._conns.get(conn)
        return c.client_id if c is not None else None

    def _copies(self, msg: Message) -> list[tuple[_Queue, Message, StoredCopy | None]]:
        """Each subscription queue a topic message goes to, with what it gets: the message itself, or,
        for a persistent message kept by a durable subscription, a copy under its own id (message id @
        client id / name) and the journal record that keeps it."""
        routed = self._topics.get(msg.destination)
        if not routed:
            return []
        self.tracer.trace("JMS-4.2-TOPIC-EVERY-SUBSCRIBER", msg.destination)
        copies: list[tuple[_Queue, Message, StoredCopy | None]] = []
        for sq in routed:
            if ((sq.no_local is not None and sq.no_local == msg.producer)
                 or (sq.no_local_client is not None and sq.no_local_client == self._client_of(msg.producer))):
                self.tracer.trace("JMS-NO-LOCAL-OWN-CONNECTION", msg.destination)
                continue
            if sq.selector is not None and not sq.selector.matches(msg):
                self.tracer.trace("AMQ-ACKTYPE-UNMATCHED" if sq.durable is not None
                                  else "JMS-3.8-SELECTOR-FILTERS", msg.destination)
                continue
            if sq.durable is not None and msg.persistent:
                client, name = sq.durable
                copy = msg._replace(message_id=f"{msg.message_id}@{client}/{name}")
                copies.append((sq, copy, StoredCopy(client, name, copy)))
            else:
                copies.append((sq, msg, None))
        return copies

    # ------------------------------------------------------------------ settlement
    def settle(
        self,
        conn: ConnId,
        delivery_id: int,
        settlement: Settlement = ACCEPT,
        *,
        cumulative: bool | None = None,
        tx: str | None = None,
        confirm: object = None,
    ) -> list[Effect]:
        """Settle a delivery: ACK (``ACCEPT``), NACK (``REQUEUE``), AMQP outcomes.

        ``cumulative`` defaults to the subscription's mode (True for ``AckMode.CLIENT``):
        then every earlier unsettled delivery of the same subscription is settled alike.
        With ``tx`` the settlement takes effect at :meth:`commit`.
        """
        c = self._conn(conn)
        s = c.deliveries.get(delivery_id)
        if s is not None and s.browsing is not None:  # a browsed copy: the message stays where it is
            del c.deliveries[delivery_id]
            self.tracer.trace("AMQP-JMS-BROWSE-LEAVES-MESSAGES", s.destination)
            return [Confirm(conn, confirm)] if confirm is not None else []
        if s is None or delivery_id not in s.unacked:
            raise CoreError(f"unknown delivery id {delivery_id} (not delivered, or already settled)",
                            "STOMP-ACK-UNKNOWN-ID-ERROR")
        t = self._tx(c, tx) if tx is not None else None
        out: list[Effect] = []
        if cumulative is None:
            cumulative = s.ack_mode is AckMode.CLIENT
        if cumulative:
            ids = []
            for d in s.unacked:
                if d not in s.in_tx:
                    ids.append(d)
                if d == delivery_id:
                    break
            self.tracer.trace("STOMP-ACK-CLIENT-CUMULATIVE" if settlement.outcome is Outcome.ACCEPTED
                              else "STOMP-NACK-CLIENT-CUMULATIVE", s.destination)
        else:
            if delivery_id in s.in_tx:
                raise CoreError(f"delivery {delivery_id} already settled in an open transaction")
            ids = [delivery_id]
            if s.ack_mode is AckMode.CLIENT_INDIVIDUAL:
                self.tracer.trace("STOMP-ACK-CLIENT-INDIVIDUAL", s.destination)
        if t is not None:
            for d in ids:
                s.in_tx.add(d)
                t.settles.append((d, settlement))
            self.tracer.trace("STOMP-ACK-IN-TRANSACTION", s.destination)
            if confirm is not None:
                out.append(Confirm(conn, confirm))
            return out
        journaled = False
        for d in ids:
            journaled |= self._apply_settlement(s, d, settlement, out, removed=None)
        self._dispatch(s.queue, out)
        if confirm is not None:
            out.append(Confirm(conn, confirm, durable=journaled and self.config.sync_non_transactional))
        return out

    def accept_many(self, conn: ConnId, delivery_ids: list[int]) -> list[Effect]:
        """Settle each delivery ``ACCEPT`` on its own (not cumulative, no transaction, nothing to
        confirm): the same state and the same effects as one :meth:`settle` per id, in one call,
        except for their order: every journal removal comes before the deliveries of the one dispatch
        at the end (harmless: a delivery never waits for the journal).

        Why: an AMQP read carries the dispositions of hundreds of deliveries; the queue is
        dispatched once per subscription at the end instead of after each settlement, which
        hands out the same deliveries in the same order (an acceptance frees room only in its
        own subscription, and after a dispatch every consumer of a non-empty queue is blocked).
        Raises :class:`CoreError` before changing anything if an id is unknown.
        """
        c = self._conn(conn)
        deliveries = c.deliveries
        for d in delivery_ids:
            s = deliveries.get(d)
            if s is None or d not in s.unacked:
                raise CoreError(f"unknown delivery id {d} (not delivered, or already settled)",
                                "STOMP-ACK-UNKNOWN-ID-ERROR")
            if d in s.in_tx:
                raise CoreError(f"delivery {d} already settled in an open transaction")
        if len(set(delivery_ids)) != len(delivery_ids):
            raise CoreError("a delivery id is settled twice", "STOMP-ACK-UNKNOWN-ID-ERROR")
        out: list[Effect] = []
        journaled = self._journaled
        touched: dict[int, _Queue] = {}
        individual: dict[str, int] = {}  # per destination: CLIENT_INDIVIDUAL acceptances, traced per batch
        last: _Sub | None = None
        run = 0  # acceptances of ``last`` not yet counted in ``individual``
        for d in delivery_ids:
            s = deliveries.pop(d)
            entry = s.unacked.pop(d)
            if s is not last:
                if run and last is not None:
                    individual[last.destination] = individual.get(last.destination, 0) + run
                last, run = s, 0
                touched[id(s.queue)] = s.queue
            if s.ack_mode is AckMode.CLIENT_INDIVIDUAL:
                run += 1
            if journaled and entry.msg.message_id in journaled:
                self._remove(entry, out, None)
        if run and last is not None:
            individual[last.destination] = individual.get(last.destination, 0) + run
        trace_many = self.tracer.trace_many
        for destination, hits in individual.items():
            trace_many("STOMP-ACK-CLIENT-INDIVIDUAL", hits, destination)
        for q in touched.values():
            self._dispatch(q, out)
        return out

    def _apply_settlement(self, s: _Sub, d: int, st: Settlement, out: list[Effect],
                          removed: list[str] | None) -> bool:
        """Apply one settlement. With ``removed`` (a commit), removals are collected, not journaled."""
        entry = s.unacked.pop(d)
        s.in_tx.discard(d)
        s.conn.deliveries.pop(d, None)
        outcome = st.outcome
        q = s.queue
        if outcome is Outcome.ACCEPTED:
            return self._remove(entry, out, removed)
        if outcome is Outcome.REJECTED:
            return self._dead_letter(entry, st.reason or "rejected by consumer", out)
        if outcome is Outcome.RELEASED:
            self.tracer.trace("AMQP-3.4.4-RELEASED-NO-COUNT", s.destination)
            entry.redelivered = True
        elif outcome is Outcome.MODIFIED:
            entry.redelivered = True
            if st.delivery_failed:
                entry.delivery_count += 1
            if st.undeliverable_here:
                if entry.excluded is None:
                    entry.excluded = set()
                entry.excluded.add(s.key)
            if st.headers:
                return self._merge_headers(entry, st.headers, out) | self._requeue(q, entry, out)
        else:  # REQUEUE
            entry.redelivered = True
            entry.delivery_count += 1
            self.tracer.trace("STOMP-NACK-NOT-CONSUMED", s.destination)
        return self._requeue(q, entry, out)

    def _merge_headers(self, entry: _Entry, headers: Headers, out: list[Effect]) -> bool:
        """Merge ``headers`` into the entry's message (same name: replaced); a journalled message is
        stored again under its id, which replay reads as an update in place. Returns whether it was."""
        names = {name for name, _ in headers}
        msg = entry.msg
        merged = (*((n, v) for n, v in msg.headers if n not in names), *headers)
        typed = msg.typed.with_added(headers) if msg.typed is not None else None
        entry.msg = msg._replace(headers=merged, typed=typed)
        if msg.message_id in self._journaled:
            out.append(JournalAppend(Stored(entry.msg)))
            return True
        return False

    def _requeue(self, q: _Queue, entry: _Entry, out: list[Effect]) -> bool:
        if entry.delivery_count > self.config.max_redeliveries:
            self.tracer.trace("AMQ-REDELIVERY-POISON-TO-DLQ", q.name)
            return self._dead_letter(entry, f"max redeliveries ({self.config.max_redeliveries}) exceeded", out)
        if q.topic_copy and q.durable is None and not q.consumers:
            return False  # a nondurable subscription ended: its copy goes with it
        q.give_back(entry)
        return False

    def _remove(self, entry: _Entry, out: list[Effect], removed: list[str] | None) -> bool:
        mid = entry.msg.message_id
        if mid in self._journaled:
            self._journaled.discard(mid)
            if removed is not None:
                removed.append(mid)
                return False
            out.append(JournalAppend(Removed(mid)))
            return True
        return False

    def _dead_letter(self, entry: _Entry, reason: str, out: list[Effect]) -> bool:
        msg = entry.msg
        dlq = self.config.dead_letter_queue
        if msg.destination == dlq:  # never loop: a rejected DLQ message is dropped
            return self._remove(entry, out, None)
        dead = dead_letter_of(msg, dlq, reason)
        journaled = False
        if msg.message_id in self._journaled:
            out.append(JournalAppend(DeadLettered(msg.message_id, dlq, reason)))
            journaled = True
        dq = self._queue(dlq)
        dq.enqueue(_Entry(dead, next(self._pos), entry.delivery_count, True))
        self._dispatch(dq, out)
        return journaled

    # ------------------------------------------------------------------ transactions
    def begin(self, conn: ConnId, tx: str) -> list[Effect]:
        c = self._conn(conn)
        if tx in c.txs:
            raise CoreError(f"transaction {tx!r} already open on this connection", "STOMP-TX-BEGIN-ID-REQUIRED")
        c.txs[tx] = _Tx(tx)
        return []

    def commit(self, conn: ConnId, tx: str, *, confirm: object = None) -> list[Effect]:
        """Make the transaction's sends visible and its settlements effective, atomically.

        One :class:`Committed` journal record carries all its persistent sends and removals;
        the :class:`Confirm` is durable when ``sync_transactional``.
        """
        c = self._conn(conn)
        t = self._tx(c, tx)
        del c.txs[tx]
        out: list[Effect] = []
        stored = tuple(m for q, m in t.sends if q is not None and m.persistent)
        topic_copies = {i: self._copies(m) for i, (q, m) in enumerate(t.sends) if q is None}
        copies = tuple(record for routed in topic_copies.values() for _, _, record in routed if record is not None)
        removed: list[str] = []
        pending: list[Effect] = []
        touched: dict[int, _Queue] = {}
        for d, st in t.settles:
            s = c.deliveries.get(d)
            if s is None or d not in s.unacked:
                continue
            s.in_tx.discard(d)
            self._apply_settlement(s, d, st, pending, removed)
            touched[id(s.queue)] = s.queue
        journaled = bool(stored or removed or copies)
        if journaled:
            out.append(JournalAppend(Committed(stored, tuple(removed), copies)))
            for m in stored:
                self._journaled.add(m.message_id)
            for record in copies:
                self._journaled.add(record.message.message_id)
        out += pending
        for i, (sent_to, m) in enumerate(t.sends):
            if sent_to is not None:
                q = self._queue(sent_to.name)  # the queue may have been freed meanwhile (_free_if_unused)
                q.enqueue(_Entry(m, next(self._pos)))
                touched[id(q)] = q
                continue
            for sq, copy, _record in topic_copies[i]:
                sq.enqueue(_Entry(copy, next(self._pos)))
                touched[id(sq)] = sq
        for q in touched.values():
            self._dispatch(q, out)
        self.tracer.trace("STOMP-TX-COMMIT-ATOMIC", tx)
        if confirm is not None:
            out.append(Confirm(conn, confirm, durable=journaled and self.config.sync_transactional))
        return out

    def abort(self, conn: ConnId, tx: str, *, redeliver_settled: bool = True, confirm: object = None) -> list[Effect]:
        """Roll back: discard the sends; settlements are not applied.

        With ``redeliver_settled`` (STOMP, JMS rollback) the deliveries settled in the
        transaction are returned to the queue and redelivered; without it (AMQP 4.4.2) they
        stay acquired by the consumer.
        """
        c = self._conn(conn)
        t = self._tx(c, tx)
        del c.txs[tx]
        out: list[Effect] = []
        touched: dict[int, _Queue] = {}
        for d, _st in t.settles:
            s = c.deliveries.get(d)
            if s is None or d not in s.unacked:
                continue
            s.in_tx.discard(d)
            if redeliver_settled:
                entry = s.unacked.pop(d)
                del c.deliveries[d]
                entry.redelivered = True
                entry.delivery_count += 1
                self._requeue(s.queue, entry, out)
                touched[id(s.queue)] = s.queue
        for q in touched.values():
            self._dispatch(q, out)
        self.tracer.trace("STOMP-TX-ABORT-DISCARDS-SENDS", tx)
        if confirm is not None:
            out.append(Confirm(conn, confirm))
        return out

    # ------------------------------------------------------------------ dispatch
    def _dispatch(self, q: _Queue, out: list[Effect]) -> None:
        """Hand out the queue's messages, round robin over consumers that have room, until it is
        empty or every consumer is blocked (not writable, no credit, prefetch full).

        The hottest loop of the core: the queue's heads are read inline (returned messages first,
        the heap by original position, then ready ones), and messages no current consumer may take
        are parked. A queue with one consumer takes :meth:`_dispatch_to` (no consumer to choose).

        A message that only a blocked consumer wants (the others with room do not match it: a
        selector, undeliverable-here) does not hold up the messages after it: up to
        :data:`PASS_OVER_LIMIT` such messages are passed over, and put back at the head, in order,
        when the dispatch ends. So a consumer with a selector is not starved by a message waiting
        for another consumer's room (as ActiveMQ dispatches from a page of messages)."""
        consumers = q.consumers
        if not consumers:
            return
        if len(consumers) == 1:
            self._dispatch_to(q, consumers[0], out)
            return
        self._dispatch_round_robin(q, out)

    def _dispatch_round_robin(self, q: _Queue, out: list[Effect]) -> None:
        """:meth:`_dispatch` choosing a consumer per message, round robin over those with room."""
        ready = q.ready
        returned = q.returned
        deliver = self._deliver
        choose = self._choose
        passed: list[_Entry] = []  # waiting for a blocked consumer, behind messages others may take
        while returned or ready:
            entry = returned[0] if returned else ready[0]
            chosen, blocked, unwanted = choose(q, entry)
            if chosen is None and blocked and (not unwanted or len(passed) >= PASS_OVER_LIMIT):
                break  # every consumer is blocked (or enough waiting messages were passed over)
            if returned:
                heapq.heappop(returned)
            else:
                ready.popleft()
            if entry.msg.typed is not None and self._expired(entry, out):
                continue
            if chosen is not None:
                deliver(chosen, entry, out)
            elif blocked:
                passed.append(entry)  # only a blocked consumer wants it: the ones after it may go on
            else:
                q.parked.append(entry)  # undeliverable to every current consumer
        for entry in passed:  # back at the head, in their original order
            heapq.heappush(returned, entry)

    @staticmethod
    def _choose(q: _Queue, entry: _Entry) -> tuple[_Sub | None, bool, bool]:
        """The next consumer in turn that may take ``entry`` (None: none), whether a consumer was blocked
        (not writable, no credit, prefetch full), and whether one with room did not want it (a selector,
        undeliverable-here)."""
        consumers = q.consumers
        n = len(consumers)
        blocked = unwanted = False
        rr = q.rr
        for i in range(n):
            s = consumers[(rr + i) % n]
            credit, prefetch = s.credit, s.prefetch
            if (not s.conn.writable or (credit is not None and credit <= 0)
                    or (prefetch is not None and len(s.unacked) >= prefetch)):
                blocked = True
            elif (entry.excluded is not None and s.key in entry.excluded) or (
                    s.selector is not None and not s.selector.matches(entry.msg)):
                unwanted = True  # left for a consumer it matches (JMS 3.8)
            else:
                q.rr = (rr + i + 1) % n
                return s, blocked, unwanted
        return None, blocked, unwanted

    def _dispatch_to(self, q: _Queue, s: _Sub, out: list[Effect]) -> None:
        """:meth:`_dispatch` for a queue with one consumer (the usual case): the same deliveries,
        without choosing a consumer per message."""
        ready = q.ready
        returned = q.returned
        c = s.conn
        unacked = s.unacked
        selector = s.selector
        prefetch = s.prefetch
        # what _deliver does, inline (a Python call less per delivery)
        next_id = self._delivery_ids.__next__
        conn_id, sub_id = c.conn_id, s.sub_id
        auto = s.ack_mode is AckMode.AUTO
        deliveries = c.deliveries
        journaled = self._journaled
        append = out.append
        new = tuple.__new__  # builds a Deliver without calling its named tuple's Python-level __new__ (hot path)
        while returned or ready:
            credit = s.credit
            if not c.writable or (credit is not None and credit <= 0) or (
                    prefetch is not None and len(unacked) >= prefetch):
                return
            entry = heapq.heappop(returned) if returned else ready.popleft()
            if entry.msg.typed is not None and self._expired(entry, out):
                continue
            if (entry.excluded is not None and s.key in entry.excluded) or (
                    selector is not None and not selector.matches(entry.msg)):
                q.parked.append(entry)  # undeliverable to the only consumer (or not matched by its selector)
                continue
            did = next_id()
            if credit is not None:
                s.credit = credit - 1
            msg = entry.msg
            append(new(Deliver, (conn_id, sub_id, did, msg, entry.redelivered, entry.delivery_count)))
            if c.room is not None:
                self._spend_room(c, c.room - entry.size)
            if entry.redelivered:
                self.tracer.trace("JMS-3.4.7-REDELIVERED-SET", msg.destination)
            if auto:
                if journaled:
                    self._remove(entry, out, None)
            else:
                unacked[did] = entry
                deliveries[did] = s

    def _expired(self, entry: _Entry, out: list[Effect]) -> bool:
        """Drop ``entry`` if its message has expired (never delivered after its expiry time: JMS 4.8,
        AMQP 3.2.1 absolute-expiry-time / ttl); a persistent one is removed from the journal."""
        typed = entry.msg.typed
        if typed is None or not typed.expiry or not typed.expired(int(self.clock() * 1000)):
            return False
        self.tracer.trace("AMQP-JMS-EXPIRED-NOT-DELIVERED", entry.msg.destination)
        self._remove(entry, out, None)
        return True

    def _deliver(self, s: _Sub, entry: _Entry, out: list[Effect]) -> None:
        did = next(self._delivery_ids)
        c = s.conn
        if s.credit is not None:
            s.credit -= 1
        msg = entry.msg
        out.append(Deliver(c.conn_id, s.sub_id, did, msg, entry.redelivered, entry.delivery_count))
        if entry.redelivered:
            self.tracer.trace("JMS-3.4.7-REDELIVERED-SET", msg.destination)
        if c.room is not None:
            self._spend_room(c, c.room - entry.size)
        if s.ack_mode is AckMode.AUTO:
            if self._journaled:
                self._remove(entry, out, None)
        else:
            s.unacked[did] = entry
            c.deliveries[did] = s

    def _drop_sub(self, s: _Sub, out: list[Effect], touched: list[_Queue]) -> None:
        c = s.conn
        c.subs.pop(s.sub_id, None)
        q = s.queue
        if s in q.consumers:
            q.consumers.remove(s)
            q.rr = 0
        # a queue, or a durable subscription's queue, outlives its consumer; a shared one its last but one
        kept = not q.topic_copy or q.durable is not None or (
            q.shared is not None and bool(q.consumers))
        if not kept:
            if q.shared is not None and self._shared.get(q.shared) is q:
                del self._shared[q.shared]
            if q.durable is not None:
                self._remove_durable_queue(q.durable, q, out)
            routed = self._topics.get(s.destination)
            if routed and q in routed:
                routed.remove(q)
        for d, entry in s.unacked.items():
            c.deliveries.pop(d, None)
            entry.redelivered = True
            entry.delivery_count += 1
            if kept:
                self._requeue(q, entry, out)
        if s.unacked and kept:
            self.tracer.trace("STOMP-ACK-UNACKED-NOT-CONSUMED", q.name)
            if q not in touched:
                touched.append(q)
        if s.browsing is not None:
            for d in [d for d, owner in c.deliveries.items() if owner is s]:
                del c.deliveries[d]
        s.unacked.clear()

    # ------------------------------------------------------------------ journal replay
    def restore(self, records: Iterable[Record]) -> None:
        """Rebuild queues from journal records (on start, before any connection).

        Surviving messages come back marked redelivered: they may have been delivered
        before the restart ("likely, not guaranteed", JMSRedelivered), with one failed delivery
        counted (delivery-count 2 on the wire): a message marked redelivered has a count of at least
        2 (JMS 3.5.11), and the journal does not keep exact counts (which 3.5.11 allows).
        """
        live, owner, durables = self._replay(records)
        for key, made in durables.items():
            self._add_durable(key, made.destination, parse_selector(made.selector), made.no_local)
        max_seq = 0
        for mid, m in live.items():  # dict order = journal order = enqueue order
            kept_by = owner.get(mid)
            q = self._queue(m.destination) if kept_by is None else self._durables.get(kept_by)
            if q is None:
                continue  # kept by a subscription that is gone (cannot happen with a whole journal)
            q.enqueue(_Entry(m, next(self._pos), 1, True))
            self._journaled.add(m.message_id)
            max_seq = max(max_seq, m.seq)
        self._seq = itertools.count(max_seq + 1)

    def _replay(self, records: Iterable[Record]) -> tuple[dict[str, Message], dict[str, DurableKey],
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
                self._restore_copy(r, live, owner)
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
                    self._restore_copy(copy, live, owner)
                for mid in r.removed:
                    live.pop(mid, None)
                    owner.pop(mid, None)
        return live, owner, durables

    @staticmethod
    def _restore_copy(record: StoredCopy, live: dict[str, Message], owner: dict[str, DurableKey]) -> None:
        live[record.message.message_id] = record.message
        owner[record.message.message_id] = (record.client_id, record.name)

    def live_records(self) -> list[Record]:
        """The journal content that reproduces the current durable state (for compaction): the durable
        subscriptions first, then every journalled message, queued or delivered and unsettled, in
        publication order."""
        subscriptions: list[Record] = [
            DurableSubscribed(key[0], key[1], q.name, q.selector.text if q.selector else "",
                              q.no_local_client is not None)
            for key, q in self._durables.items()]
        out: list[Record] = []

        def kept(q: _Queue, entries: Iterable[_Entry]) -> None:
            for e in entries:
                if e.msg.message_id in self._journaled:
                    out.append(Stored(e.msg) if q.durable is None else StoredCopy(q.durable[0], q.durable[1], e.msg))

        for q in (*self._queues.values(), *self._durables.values()):
            kept(q, q.messages())
        for c in self._conns.values():
            for s in c.subs.values():
                kept(s.queue, s.unacked.values())
        out.sort(key=lambda r: r.message.seq if isinstance(r, Stored | StoredCopy) else 0)
        return subscriptions + out

    # ------------------------------------------------------------------ introspection
    def queue_depth(self, destination: str) -> int:
        """Messages waiting in a queue (not counting unsettled deliveries)."""
        q = self._queues.get(destination)
        return len(q) if q is not None else 0

    def durable_depth(self, key: DurableKey) -> int | None:
        """Messages a durable subscription keeps (not counting unsettled deliveries); None if none exists."""
        q = self._durables.get(key)
        return len(q) if q is not None else None

    def queue_messages(self, destination: str) -> list[Message]:
        q = self._queues.get(destination)
        return [e.msg for e in q.messages()] if q is not None else []

    def unacked(self, conn: ConnId, sub: str) -> list[int]:
        """Delivery ids of ``sub`` not yet settled, in delivery order."""
        return list(self._sub(conn, sub).unacked)

    def connections(self) -> list[ConnId]:
        return list(self._conns)

    def has_connection(self, conn: ConnId) -> bool:
        return conn in self._conns

    def has_transaction(self, conn: ConnId, tx: str) -> bool:
        c = self._conns.get(conn)
        return c is not None and tx in c.txs

    def has_subscription(self, conn: ConnId, sub: str) -> bool:
        c = self._conns.get(conn)
        return c is not None and sub in c.subs

    def delivery_subscription(self, conn: ConnId, delivery_id: int) -> str | None:
        c = self._conns.get(conn)
        s = c.deliveries.get(delivery_id) if c is not None else None
        return s.sub_id if s is not None else None

    # ------------------------------------------------------------------ helpers
    def _conn(self, conn: ConnId) -> _Conn:
        c = self._conns.get(conn)
        if c is None:
            raise CoreError(f"connection {conn!r} is not open")
        return c

    def _sub(self, conn: ConnId, sub: str) -> _Sub:
        s = self._conn(conn).subs.get(sub)
        if s is None:
            raise CoreError(f"no subscription with id {sub!r}")
        return s

    def _tx(self, c: _Conn, tx: str) -> _Tx:
        t = c.txs.get(tx)
        if t is None:
            raise CoreError(f"unknown transaction {tx!r}", "STOMP-TX-UNKNOWN-ERROR")
        return t

    def _queue(self, name: str) -> _Queue:
        q = self._queues.get(name)
        if q is None:
            q = self._queues[name] = _Queue(name)
        return q


__all__ = ["BrokerCore", "Close", "CoreError"]
