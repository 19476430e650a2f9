"""Publishing: a new message numbered, held by its transaction or routed to its queue or topic subscriptions.

Why a part of its own: one message is routed by one definition (:meth:`Publisher.route`), whether it comes
alone (:meth:`Publisher.publish`) or in a batch of one AMQP read (:meth:`Publisher.publish_many`).
"""

from __future__ import annotations

from collections.abc import Iterable

from ackspec.reference.broker.dispatch import Dispatcher
from ackspec.reference.broker.effects import Confirm, Effect, JournalAppend, Reject
from ackspec.reference.broker.model import TOPIC_PREFIX, ConnId, CoreConfig, Headers, Message
from ackspec.reference.broker.state import CoreError, Entry, Queue, Tx
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
            self._to_queue(conn, q, ((body, headers, persistent, confirm),), typed, out)
            return out
        if q is not None and self._full(conn, q, confirm, out):
            return out
        msg = self._message(conn, destination, body, headers, persistent, typed)
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
        self._to_queue(conn, self.store.queue(destination), messages, None, out)
        return out

    def _to_queue(self, conn: ConnId, q: Queue, messages: Iterable[tuple[bytes, Headers, bool, object]],
                  typed: Typed | None, out: list[Effect]) -> None:
        """Publish ``messages`` to queue ``q`` outside any transaction, in order, each refused if the queue is
        full (:meth:`_full`), else numbered, routed and confirmed. One message is a run of one.

        Why a run: an AMQP read hands over hundreds of transfers at once (``publish_many``); the queue's
        depth is then counted once, not per message, and kept as an upper bound (only this loop adds to
        ``q``; a dispatch only takes from it), so :meth:`_full` recounts only when it may be reached."""
        sync = self.config.sync_non_transactional
        limit = self.config.max_queue_depth
        message = self._message
        route = self.route
        name = q.name
        depth = len(q.ready) + len(q.returned) + len(q.parked)  # len(q) without a Python call per run
        for body, headers, persistent, confirm in messages:
            if depth >= limit:
                if self._full(conn, q, confirm, out):
                    continue
                depth = len(q)
            journaled = route(q, message(conn, name, body, headers, persistent, typed), out)
            depth += 1
            if confirm is not None:
                out.append(_new(Confirm, (conn, confirm, journaled and sync)))

    def _full(self, conn: ConnId, q: Queue, confirm: object, out: list[Effect]) -> bool:
        """Whether queue ``q`` is full (``config.max_queue_depth``): the message is then refused."""
        if len(q) < self.config.max_queue_depth:
            return False
        if confirm is not None:
            out.append(Reject(conn, confirm, f"queue {q.name} is full"))
        return True

    def _message(self, conn: ConnId, destination: str, body: bytes, headers: Headers, persistent: bool,
                 typed: Typed | None) -> Message:
        """The next message, numbered (its id: this broker's boot id and its publication number)."""
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
            q.enqueue(Entry(msg, next(store.pos)))  # store.entry, without a call per message
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
