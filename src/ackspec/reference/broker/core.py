"""The sans-IO broker core: the one object a host (a STOMP session, an AMQP connection) talks to.

No sockets, no threads, no clock reads on the hot path: every public method takes an event
and returns the list of :mod:`effects <ackspec.reference.broker.effects>` the host must
carry out. Caller mistakes (unknown delivery id, unknown transaction, duplicate
subscription) raise :class:`CoreError` *before* any state changes, so the host can turn them
into a protocol error (STOMP ERROR, AMQP detach) and the broker stays consistent.

:class:`BrokerCore` owns the connections and their consumers, and composes one part per concept, each
owning its own state: :class:`~.store.Store` (queues by name, what the journal holds),
:class:`~.dispatch.Dispatcher` (deliveries), :class:`~.settlement.Settler` (acknowledgements, redelivery,
dead letters), :class:`~.topics.Topics` (topic, durable and shared subscriptions),
:class:`~.publishing.Publisher` (new messages), :class:`~.transactions.Transactions`, and
:mod:`~.replay` (the journal's records in and out). A variant of the broker is a subclass naming another
class for one part (the ``*_part`` class attributes), built from outside (:mod:`ackspec.reference.parts`).
"""

from __future__ import annotations

import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, ClassVar

from ackspec.reference.broker import replay
from ackspec.reference.broker.dispatch import Dispatcher
from ackspec.reference.broker.effects import Close, Drained, Effect
from ackspec.reference.broker.model import (
    ACCEPT,
    AckMode,
    ConnId,
    CoreConfig,
    DestinationKind,
    Headers,
    Message,
    Settlement,
    destination_kind,
)
from ackspec.reference.broker.publishing import Publisher
from ackspec.reference.broker.records import Record
from ackspec.reference.broker.selector import Selector
from ackspec.reference.broker.settlement import Settler
from ackspec.reference.broker.state import Conn, CoreError, DurableKey, Queue, Sub, Tx, transaction
from ackspec.reference.broker.store import Store
from ackspec.reference.broker.topics import Topics
from ackspec.reference.broker.trace import NULL_TRACER, Tracer
from ackspec.reference.broker.transactions import Transactions
from ackspec.reference.broker.typed import Typed

if TYPE_CHECKING:
    from ackspec.reference.faults import FaultInjector


class BrokerCore:
    """Protocol-neutral broker state machine. See the package docstring for the API."""

    dispatcher_part: ClassVar[type[Dispatcher]] = Dispatcher
    settler_part: ClassVar[type[Settler]] = Settler
    topics_part: ClassVar[type[Topics]] = Topics
    publisher_part: ClassVar[type[Publisher]] = Publisher
    transactions_part: ClassVar[type[Transactions]] = Transactions

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
        self._conns: dict[ConnId, Conn] = {}
        self.store = Store()
        self.dispatcher = self.dispatcher_part(self.store, self.tracer, clock)
        self.settler = self.settler_part(self.config, self.tracer, self.store, self.dispatcher)
        self.topics = self.topics_part(self.tracer, self.store, self._client_of)
        self.publisher = self.publisher_part(self.config, self.tracer, self.store, self.dispatcher, self.topics,
                                             self.boot_id)
        self.transactions = self.transactions_part(self.config, self.tracer, self.store, self.dispatcher,
                                                   self.settler, self.topics)
        self.out_of_room = self.dispatcher.out_of_room
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
        self._conns[conn] = Conn(conn, user, client_id, exclusive, room=self.config.output_room)
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
        touched: list[Queue] = []
        subs = list(c.subs.values())
        for sub in subs:
            self._drop_sub(sub, out, touched)
        for q in touched:
            self.dispatcher.dispatch(q, out)
        for sub in subs:
            self.store.free_if_unused(sub.queue)
        return out

    def set_writable(self, conn: ConnId, writable: bool) -> list[Effect]:
        """Transport back-pressure: deliveries to ``conn`` pause while it is not writable."""
        c = self._conn(conn)
        c.paused = not writable
        return self._update_writable(c)

    def set_output_room(self, conn: ConnId, room: int | None) -> list[Effect]:
        """Consumer back-pressure: ``conn`` may be handed ``room`` more bytes of deliveries (None: no bound).

        Transport pauses alone come too late: one dispatch would hand a whole backlog to an ``ack:auto``
        consumer before the transport's buffer could say it is full (1 GB in memory, issue 20). So each
        delivery spends its :data:`~.state.ENTRY_OVERHEAD`-inclusive size from the room; at 0 or less dispatch
        to ``conn`` holds (the messages stay queued, in order) and ``conn`` is in :attr:`out_of_room` until
        its host, having written what it got, gives room again. At most one message overshoots."""
        c = self._conn(conn)
        c.room = room
        if room is None or room > 0:
            self.out_of_room.discard(conn)
        return self._update_writable(c)

    def _update_writable(self, c: Conn) -> list[Effect]:
        c.writable = not c.paused and (c.room is None or c.room > 0)
        out: list[Effect] = []
        if c.writable:
            for sub in c.subs.values():
                self.dispatcher.dispatch(sub.queue, out)
        return out

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
        c = self._new_subscription(conn, sub)
        if prefetch is not None and prefetch < 0:
            raise CoreError("prefetch must be >= 0")
        topic = destination_kind(destination) is DestinationKind.TOPIC
        if durable is not None:
            if not topic:
                raise CoreError(f"a durable subscription needs a topic, not {destination!r}")
            kept = self.topics.durables.get(durable)
            if kept is not None and kept.consumers and (shared is None or kept.shared is None):
                raise CoreError(f"durable subscription {durable[1]!r} of client {durable[0]!r} already has a consumer")
        prefetch = self._prefetch(ack, prefetch, credit)
        out: list[Effect] = []
        if durable is not None:
            q = self.topics.durable_queue(durable, destination, selector, no_local, out)
            q.shared = shared
        elif topic and shared is not None:
            q = self.topics.shared_queue(shared, destination, selector)
        elif topic:
            q = self.topics.nondurable(destination, selector, conn if no_local else None)
        else:
            q = self.store.queue(destination)
        s = Sub(c, sub, destination, q, ack, prefetch, credit, selector=None if topic else selector)
        c.subs[sub] = s
        q.consumers.append(s)
        if q.parked:
            for e in q.parked:
                q.give_back(e)
            q.parked.clear()
        self.dispatcher.dispatch(q, out)
        return out

    def _prefetch(self, ack: AckMode, prefetch: int | None, credit: int | None) -> int | None:
        """The prefetch bound a consumer gets (``config``'s default and maximum applied)."""
        if ack is not AckMode.AUTO and prefetch is None and credit is None:
            prefetch = self.config.default_prefetch
        if prefetch is not None:
            prefetch = min(prefetch, self.config.max_prefetch)
            if prefetch == 0 and credit is None:
                prefetch = None if ack is AckMode.AUTO else self.config.default_prefetch
        return prefetch

    def remove_durable(self, conn: ConnId, key: DurableKey) -> list[Effect]:
        """Delete durable subscription ``key`` and what it kept (JMS ``Session.unsubscribe``).

        Raises :class:`CoreError` when it does not exist or still has a consumer (JMS 6.11.1: deleting
        a subscription in use is an error)."""
        self._conn(conn)
        q = self.topics.durables.get(key)
        if q is None:
            raise CoreError(f"no durable subscription {key[1]!r} of client {key[0]!r}")
        if q.consumers:
            raise CoreError(f"durable subscription {key[1]!r} of client {key[0]!r} still has a consumer")
        out: list[Effect] = []
        self.topics.remove_durable(key, q, out)
        return out

    def durable_subscription(self, key: DurableKey) -> tuple[str, str, bool] | None:
        """(topic, selector text, noLocal) of durable subscription ``key``, or None: what a client that
        reattaches to it by name only (the AMQP JMS mapping's unsubscribe) is told it is."""
        q = self.topics.durables.get(key)
        if q is None:
            return None
        return q.name, q.selector.text if q.selector is not None else "", q.no_local_client is not None

    def delete_queue(self, destination: str) -> list[Effect]:
        """Delete a queue and the messages it holds (a temporary queue whose connection ended)."""
        q = self.store.queues.pop(destination, None)
        out: list[Effect] = []
        if q is None:
            return out
        for entry in q.messages():
            self.store.remove(entry, out, None)
        for s in list(q.consumers):
            self._drop_sub(s, out, [])
        return out

    def unsubscribe(self, conn: ConnId, sub: str) -> list[Effect]:
        """Detach a consumer; its unsettled deliveries return to the queue (redelivered)."""
        c = self._conn(conn)
        s = c.subs.get(sub)
        if s is None:
            raise CoreError(f"no subscription with id {sub!r}", "STOMP-UNSUBSCRIBE-UNKNOWN-ID")
        out: list[Effect] = []
        touched: list[Queue] = []
        self._drop_sub(s, out, touched)
        for q in touched:
            self.dispatcher.dispatch(q, out)
        self.store.free_if_unused(s.queue)
        return out

    def _drop_sub(self, s: Sub, out: list[Effect], touched: list[Queue]) -> None:
        """Consumer ``s`` goes: its unsettled deliveries failed (given back to a queue that is kept, and
        ``touched`` names it for a dispatch)."""
        c = s.conn
        c.subs.pop(s.sub_id, None)
        q = s.queue
        if s in q.consumers:
            q.consumers.remove(s)
            q.rr = 0
        kept = self.topics.consumer_gone(q, out)
        for d, entry in s.unacked.items():
            c.deliveries.pop(d, None)
            if kept:
                self.settler.failed(q, entry, out)
            else:
                entry.redelivered = True
                entry.delivery_count += 1
        if s.unacked and kept:
            self.tracer.trace("STOMP-ACK-UNACKED-NOT-CONSUMED", q.name)
            if q not in touched:
                touched.append(q)
        if s.browsing is not None:
            for d in [d for d, owner in c.deliveries.items() if owner is s]:
                del c.deliveries[d]
        s.unacked.clear()

    def browse(self, conn: ConnId, sub: str, destination: str, *, ack: AckMode = AckMode.AUTO,
               selector: Selector | None = None) -> list[Effect]:
        """A queue browser (JMS QueueBrowser, AMQP ``distribution-mode copy``): the messages the queue holds
        now, in the order it would deliver them, handed out as AMQP credit allows (see :meth:`add_credit`)
        and left in the queue; settling a browsed copy (``ack`` not AUTO) changes nothing."""
        c = self._new_subscription(conn, sub)
        q = self.store.queue(destination)
        shown = deque(e for e in q.messages() if selector is None or selector.matches(e.msg))
        c.subs[sub] = Sub(c, sub, destination, q, ack, None, 0, selector=selector, browsing=shown)
        return []

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
            self.dispatcher.show(s, s.browsing, out)
        else:
            self.dispatcher.dispatch(s.queue, out)
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
            c = self._conn(conn)  # raises: the connection is not open
        t = transaction(c, tx) if tx is not None else None
        return self.publisher.publish(conn, destination, body, headers, persistent, t, confirm, typed)

    def publish_many(self, conn: ConnId, destination: str,
                     messages: Iterable[tuple[bytes, Headers, bool, object]]) -> list[Effect]:
        """Publish ``(body, headers, persistent, confirm)`` messages to one destination, outside any
        transaction: the same state and effects, in the same order, as one :meth:`publish` per message.

        Why: a host that reads many messages at once (an AMQP read carries hundreds of transfers of
        one link) pays the per-call work once: the connection and queue look-ups, the list of effects.
        """
        self._conn(conn)
        return self.publisher.publish_many(conn, destination, messages)

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
        return self.settler.settle(self._conn(conn), delivery_id, settlement, cumulative, tx, confirm)

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
        return self.settler.accept_many(self._conn(conn), delivery_ids)

    # ------------------------------------------------------------------ transactions
    def begin(self, conn: ConnId, tx: str) -> list[Effect]:
        """Open transaction ``tx`` on ``conn``."""
        return self.transactions.begin(self._conn(conn), tx)

    def commit(self, conn: ConnId, tx: str, *, confirm: object = None) -> list[Effect]:
        """Make the transaction's sends visible and its settlements effective, atomically.

        One :class:`Committed` journal record carries all its persistent sends and removals;
        the :class:`Confirm` is durable when ``sync_transactional``.
        """
        return self.transactions.commit(self._conn(conn), tx, confirm)

    def abort(self, conn: ConnId, tx: str, *, redeliver_settled: bool = True, confirm: object = None) -> list[Effect]:
        """Roll back: discard the sends; settlements are not applied.

        With ``redeliver_settled`` (STOMP, JMS rollback) the deliveries settled in the
        transaction are returned to the queue and redelivered; without it (AMQP 4.4.2) they
        stay acquired by the consumer.
        """
        return self.transactions.abort(self._conn(conn), tx, redeliver_settled, confirm)

    # ------------------------------------------------------------------ journal replay
    def restore(self, records: Iterable[Record]) -> None:
        """Rebuild queues from journal records (on start, before any connection): :func:`.replay.restore`."""
        replay.restore(self.store, self.topics, records)

    def live_records(self) -> list[Record]:
        """The journal content that reproduces the current durable state: :func:`.replay.live_records`."""
        return replay.live_records(self.store, self.topics, self._conns.values())

    # ------------------------------------------------------------------ introspection
    def queue_depth(self, destination: str) -> int:
        """Messages waiting in a queue (not counting unsettled deliveries)."""
        q = self.store.queues.get(destination)
        return len(q) if q is not None else 0

    def durable_depth(self, key: DurableKey) -> int | None:
        """Messages a durable subscription keeps (not counting unsettled deliveries); None if none exists."""
        q = self.topics.durables.get(key)
        return len(q) if q is not None else None

    def queue_messages(self, destination: str) -> list[Message]:
        q = self.store.queues.get(destination)
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
    def _conn(self, conn: ConnId) -> Conn:
        c = self._conns.get(conn)
        if c is None:
            raise CoreError(f"connection {conn!r} is not open")
        return c

    def _sub(self, conn: ConnId, sub: str) -> Sub:
        s = self._conn(conn).subs.get(sub)
        if s is None:
            raise CoreError(f"no subscription with id {sub!r}")
        return s

    def _new_subscription(self, conn: ConnId, sub: str) -> Conn:
        """Open connection ``conn``, which has no subscription ``sub`` yet; raises :class:`CoreError` otherwise."""
        c = self._conn(conn)
        if sub in c.subs:
            raise CoreError(f"subscription id {sub!r} already in use on this connection", "STOMP-SUBSCRIBE-ID-UNIQUE")
        return c

    def _tx(self, c: Conn, tx: str) -> Tx:
        return transaction(c, tx)

    def _client_of(self, conn: ConnId) -> str | None:
        c = self._conns.get(conn)
        return c.client_id if c is not None else None


__all__ = ["BrokerCore", "Close", "CoreError"]
