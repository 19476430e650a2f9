"""Publishing: a new message numbered, held by its transaction or routed to its queue or topic subscriptions.

Why a part of its own: one message is routed by one definition (:meth:`Publisher.route`), whether it comes
alone (:meth:`Publisher.publish`) or in a batch of one AMQP read (:meth:`Publisher.publish_many`).
"""

from __future__ import annotations

from collections.abc import Iterable

from ackspec.reference.broker.dispatch import Dispatcher
from ackspec.reference.broker.effects import Confirm, Effect, JournalAppend, Reject
from ackspec.reference.broker.model import TOPIC_PREFIX, ConnId, CoreConfig, Headers, Message
from ackspec.reference.broker.state import CoreError, Queue, Tx
from ackspec.reference.broker.store import Store
from ackspec.reference.broker.topics import Topics
from ackspec.reference.broker.trace import Tracer
from ackspec.reference.broker.typed import Typed

_new = tuple.__new__
"""Builds a named tuple (a ``Message``, a ``Confirm``) without its Python-level ``__new__`` (once per message)."""


class Publisher:
    """Takes in published messages."""

    def __init__(self, config: CoreConfig, tracer: Tracer, store: Store, dispatcher: Dispatcher, topics: Topics,
                 boot_id: str) -> None:
        self.config = config
        self.tracer = tracer
        self.store = store
        self.dispatcher = dispatcher
        self.topics = topics
        self.boot_id = boot_id

    def publish(self, conn: ConnId, destination: str, body: bytes, headers: Headers, persistent: bool,
                t: Tx | None, confirm: object, typed: Typed | None) -> list[Effect]:
        """:meth:`BrokerCore.publish <ackspec.reference.broker.core.BrokerCore.publish>` by open connection
        ``conn`` (``t``: its open transaction, if the message is sent in one)."""
        out: list[Effect] = []
        q = None if destination.startswith(TOPIC_PREFIX) else self.store.queue(destination)
        if t is None and q is not None:
            self._to_queue(conn, q, body, headers, persistent, confirm, typed, out)
            return out
        msg = self._admit(conn, q, destination, body, headers, persistent, typed, confirm, out)
        if msg is None:
            return out
        if t is not None:
            if len(t.sends) + len(t.settles) >= self.config.max_transaction_size:
                raise CoreError("transaction too large")
            t.sends.append((q, msg))
            self.tracer.trace("STOMP-TX-SEND-INVISIBLE", destination)
            if confirm is not None:
                out.append(Confirm(conn, confirm))
            return out
        journaled = self.route(None, msg, out)
        if confirm is not None:
            out.append(Confirm(conn, confirm, durable=journaled and self.config.sync_non_transactional))
        return out

    def publish_many(self, conn: ConnId, destination: str,
                     messages: Iterable[tuple[bytes, Headers, bool, object]]) -> list[Effect]:
        """:meth:`BrokerCore.publish_many <ackspec.reference.broker.core.BrokerCore.publish_many>` by open
        connection ``conn``: what :meth:`publish` does per message, with the queue looked up once."""
        out: list[Effect] = []
        if destination.startswith(TOPIC_PREFIX):
            for body, headers, persistent, confirm in messages:
                out += self.publish(conn, destination, body, headers, persistent, None, confirm, None)
            return out
        q = self.store.queue(destination)
        to_queue = self._to_queue
        for body, headers, persistent, confirm in messages:
            to_queue(conn, q, body, headers, persistent, confirm, None, out)
        return out

    def _to_queue(self, conn: ConnId, q: Queue, body: bytes, headers: Headers, persistent: bool,
                  confirm: object, typed: Typed | None, out: list[Effect]) -> None:
        """Publish one message to queue ``q`` outside any transaction."""
        msg = self._admit(conn, q, q.name, body, headers, persistent, typed, confirm, out)
        if msg is None:
            return
        journaled = self.route(q, msg, out)
        if confirm is not None:
            out.append(_new(Confirm, (conn, confirm, journaled and self.config.sync_non_transactional)))

    def _admit(self, conn: ConnId, q: Queue | None, destination: str, body: bytes, headers: Headers,
               persistent: bool, typed: Typed | None, confirm: object, out: list[Effect]) -> Message | None:
        """The next message, numbered (its id: this broker's boot id and its publication number); None when
        queue ``q`` is full (``config.max_queue_depth``: the message is refused)."""
        if q is not None and len(q.ready) + len(q.returned) + len(q.parked) >= self.config.max_queue_depth:
            if confirm is not None:
                out.append(Reject(conn, confirm, f"queue {q.name} is full"))
            return None
        seq = next(self.store.seq)
        return _new(Message, (f"{self.boot_id}-{seq}", destination, body, headers, persistent, conn, seq, typed))

    def route(self, q: Queue | None, msg: Message, out: list[Effect]) -> bool:
        """Enqueue ``msg`` in queue ``q`` (None: in the subscriptions of its topic), journalled if persistent,
        and dispatch; returns whether a journal record was emitted."""
        store = self.store
        if q is not None:
            journaled = False
            if msg.persistent:
                store.journal(msg, out)
                journaled = True
            q.enqueue(store.entry(msg))
            if q.consumers:
                self.dispatcher.dispatch(q, out)
            return journaled
        journaled = False
        for sq, copy, record in self.topics.copies(msg):
            if record is not None:
                out.append(JournalAppend(record))
                store.journaled.add(copy.message_id)
                journaled = True
            sq.enqueue(store.entry(copy))
            self.dispatcher.dispatch(sq, out)
        return journaled
