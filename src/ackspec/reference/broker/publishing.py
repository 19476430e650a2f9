"""Publishing: a new message numbered, held by its transaction or routed to its queue or topic subscriptions.

Why a part of its own: messages published outside a transaction are routed by one definition, a run at a time
(:meth:`Publisher.route`), whether one comes alone (:meth:`Publisher.publish`, a run of one) or hundreds in a
batch of one AMQP read (:meth:`Publisher.publish_many`).
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
        if t is None:
            self.route(conn, q, destination, ((body, headers, persistent, confirm),), typed, out)
            return out
        if q is not None and self._full(conn, q, confirm, out):
            return out
        if len(t.sends) + len(t.settles) >= self.config.max_transaction_size:
            raise CoreError("transaction too large")
        t.sends.append((q, self._message(conn, destination, body, headers, persistent, typed)))
        self.tracer.trace("STOMP-TX-SEND-INVISIBLE", destination)
        if confirm is not None:
            out.append(Confirm(conn, confirm))
        return out

    def publish_many(self, conn: ConnId, destination: str,
                     messages: Iterable[tuple[bytes, Headers, bool, object]]) -> list[Effect]:
        """:meth:`BrokerCore.publish_many <ackspec.reference.broker.core.BrokerCore.publish_many>` by open
        connection ``conn``: one :meth:`route` of the run."""
        out: list[Effect] = []
        q = None if destination.startswith(TOPIC_PREFIX) else self.store.queue(destination)
        self.route(conn, q, destination, messages, None, out)
        return out

    def route(self, conn: ConnId, q: Queue | None, destination: str,
              messages: Iterable[tuple[bytes, Headers, bool, object]], typed: Typed | None,
              out: list[Effect]) -> None:
        """Publish a run of ``(body, headers, persistent, confirm)`` messages by ``conn`` to ``destination``
        outside any transaction, in order: each numbered, kept in queue ``q`` (None: copied to the
        subscriptions of topic ``destination``, :meth:`_to_topic`), journalled if persistent, dispatched, and
        confirmed (a ``Confirm`` after the message's other effects). One message is a run of one.

        Why a run: an AMQP read hands over hundreds of transfers at once (``publish_many``), and what is
        the same for all of them is then looked up once. This is the one place a message outside a
        transaction becomes visible, and the hook a variant of the broker overrides to change that.

        In a queue, each message is refused if the queue is full (:meth:`_full`). The queue's depth is
        counted once per run and kept as an upper bound (only this loop adds to ``q``; a dispatch only
        takes from it), so :meth:`_full` recounts only when it may be reached. While ``q`` has no
        consumer, the run's new entries enter it together (:meth:`.Queue.enqueue` takes a run)."""
        if q is None:
            self._to_topic(conn, destination, messages, typed, out)
            return
        sync = self.config.sync_non_transactional
        limit = self.config.max_queue_depth
        message = self._message
        pos = self.store.pos
        name = q.name
        depth = len(q)
        run: list[Entry] = []  # entries not yet in q
        for body, headers, persistent, confirm in messages:
            if depth >= limit:
                q.enqueue(run)
                run = []
                if self._full(conn, q, confirm, out):
                    continue
                depth = len(q)
            msg = message(conn, name, body, headers, persistent, typed)
            if persistent:
                self.store.journal(msg, out)
            entry = Entry(msg, next(pos))
            depth += 1
            if q.consumers:
                q.enqueue((entry,))
                self.dispatcher.dispatch(q, out)
            else:
                run.append(entry)
            if confirm is not None:
                out.append(_new(Confirm, (conn, confirm, persistent and sync)))
        if run:
            q.enqueue(run)

    def _to_topic(self, conn: ConnId, destination: str, messages: Iterable[tuple[bytes, Headers, bool, object]],
                  typed: Typed | None, out: list[Effect]) -> None:
        """What :meth:`route` does for topic ``destination``: each message numbered and copied to every subscription
        queue it goes to (:meth:`.Topics.copies`), a durable subscription's copy journalled, each queue
        dispatched, and the message confirmed."""
        store = self.store
        for body, headers, persistent, confirm in messages:
            journaled = False
            for sq, copy, record in self.topics.copies(self._message(conn, destination, body, headers, persistent,
                                                                     typed)):
                if record is not None:
                    out.append(JournalAppend(record))
                    store.journaled.add(copy.message_id)
                    journaled = True
                sq.enqueue((store.entry(copy),))
                self.dispatcher.dispatch(sq, out)
            if confirm is not None:
                out.append(Confirm(conn, confirm, durable=journaled and self.config.sync_non_transactional))

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
