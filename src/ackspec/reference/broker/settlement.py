"""Settling deliveries: acknowledgement (ACK, accepted), NACK and the AMQP outcomes, redelivery, dead letters.

Why a part of its own: what becomes of a settled message (removed, given back marked redelivered, dead-lettered
after too many failed deliveries) is decided here for every way in: a settlement, a transaction's commit, a
consumer that went away with unsettled deliveries.
"""

from __future__ import annotations

from collections.abc import Sequence

from ackspec.reference.broker.dispatch import Dispatcher
from ackspec.reference.broker.effects import Confirm, Effect, JournalAppend
from ackspec.reference.broker.model import ACCEPT, AckMode, CoreConfig, Headers, Outcome, Settlement
from ackspec.reference.broker.records import DeadLettered, Stored
from ackspec.reference.broker.state import Conn, CoreError, Entry, Queue, Sub, dead_letter_of, transaction
from ackspec.reference.broker.store import Store
from ackspec.reference.broker.trace import Tracer


def unsettled(c: Conn, delivery_id: int) -> Sub:
    """The consumer whose delivery ``delivery_id`` (of connection ``c``) awaits its settlement; raises
    :class:`CoreError` when there is none."""
    s = c.deliveries.get(delivery_id)
    if s is None or delivery_id not in s.unacked:
        raise CoreError(f"unknown delivery id {delivery_id} (not delivered, or already settled)",
                        "STOMP-ACK-UNKNOWN-ID-ERROR")
    return s


def not_in_transaction(s: Sub, delivery_id: int) -> None:
    """Raises :class:`CoreError` when delivery ``delivery_id`` of ``s`` is settled in an open transaction."""
    if delivery_id in s.in_tx:
        raise CoreError(f"delivery {delivery_id} already settled in an open transaction")


def _runs(c: Conn, delivery_ids: list[int]) -> list[tuple[Sub, int, int]]:
    """The runs of ``delivery_ids`` that belong to one consumer, as (consumer, start, end) slices, in order;
    raises :class:`CoreError` (before anything changes) when an id is unknown, already settled, or settled in
    an open transaction."""
    deliveries = c.deliveries
    runs: list[tuple[Sub, int, int]] = []
    last: Sub | None = None
    start = i = 0
    for d in delivery_ids:
        s = deliveries.get(d)
        if s is None or d not in s.unacked or d in s.in_tx:  # the usual case (not) without a call per id
            s = unsettled(c, d)
            not_in_transaction(s, d)
        if s is not last:
            if last is not None:
                runs.append((last, start, i))
            last, start = s, i
        i += 1
    if last is not None:
        runs.append((last, start, i))
    return runs


def _count_individual(individual: dict[str, int], s: Sub | None, run: int) -> None:
    """Add ``run`` acceptances of consumer ``s`` to ``individual`` (per destination) if it acknowledges
    CLIENT_INDIVIDUAL (traced once per batch, not per message)."""
    if s is not None and run and s.ack_mode is AckMode.CLIENT_INDIVIDUAL:
        individual[s.destination] = individual.get(s.destination, 0) + run


class Settler:
    """Applies settlements to the deliveries of a connection's consumers."""

    def __init__(self, config: CoreConfig, tracer: Tracer, store: Store, dispatcher: Dispatcher) -> None:
        self.config = config
        self.tracer = tracer
        self.store = store
        self.dispatcher = dispatcher

    def settle(self, c: Conn, delivery_id: int, settlement: Settlement, cumulative: bool | None,
               tx: str | None, confirm: object) -> list[Effect]:
        """:meth:`BrokerCore.settle <ackspec.reference.broker.core.BrokerCore.settle>` on open connection ``c``."""
        conn = c.conn_id
        s = c.deliveries.get(delivery_id)
        if s is not None and s.browsing is not None:  # a browsed copy: the message stays where it is
            del c.deliveries[delivery_id]
            self.tracer.trace("AMQP-JMS-BROWSE-LEAVES-MESSAGES", s.destination)
            return [Confirm(conn, confirm)] if confirm is not None else []
        s = unsettled(c, delivery_id)
        t = transaction(c, tx) if tx is not None else None
        ids = self._settled_ids(s, delivery_id, settlement, cumulative)
        out: list[Effect] = []
        if t is not None:
            for d in ids:
                s.in_tx.add(d)
                t.settles.append((d, settlement))
            self.tracer.trace("STOMP-ACK-IN-TRANSACTION", s.destination)
            if confirm is not None:
                out.append(Confirm(conn, confirm))
            return out
        journaled = self.apply(s, ids, settlement, out, None)
        self.dispatcher.dispatch(s.queue, out)
        if confirm is not None:
            out.append(Confirm(conn, confirm, durable=journaled and self.config.sync_non_transactional))
        return out

    def _settled_ids(self, s: Sub, delivery_id: int, settlement: Settlement, cumulative: bool | None) -> list[int]:
        """The deliveries one settlement of ``delivery_id`` settles: it alone, or (``cumulative``, by default
        in ``ack:client`` mode) every earlier one of ``s`` not already settled in an open transaction too."""
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
            return ids
        not_in_transaction(s, delivery_id)
        if s.ack_mode is AckMode.CLIENT_INDIVIDUAL:
            self.tracer.trace("STOMP-ACK-CLIENT-INDIVIDUAL", s.destination)
        return [delivery_id]

    def accept_many(self, c: Conn, delivery_ids: list[int]) -> list[Effect]:
        """:meth:`BrokerCore.accept_many <ackspec.reference.broker.core.BrokerCore.accept_many>` on open
        connection ``c``: each run of one consumer's acceptances is one :meth:`apply`, as :meth:`settle`
        makes it; the queues are dispatched once, at the end."""
        runs = _runs(c, delivery_ids)
        if len(set(delivery_ids)) != len(delivery_ids):
            raise CoreError("a delivery id is settled twice", "STOMP-ACK-UNKNOWN-ID-ERROR")
        out: list[Effect] = []
        touched: dict[int, Queue] = {}
        individual: dict[str, int] = {}  # per destination: CLIENT_INDIVIDUAL acceptances, traced per batch
        for s, start, end in runs:
            self.apply(s, delivery_ids[start:end], ACCEPT, out, None)
            _count_individual(individual, s, end - start)
            touched[id(s.queue)] = s.queue
        for destination, hits in individual.items():
            self.tracer.trace_many("STOMP-ACK-CLIENT-INDIVIDUAL", hits, destination)
        for q in touched.values():
            self.dispatcher.dispatch(q, out)
        return out

    def apply(self, s: Sub, ids: Sequence[int], st: Settlement, out: list[Effect],
              removed: list[str] | None) -> bool:
        """Apply one settlement to each of deliveries ``ids`` of ``s``, in order. With ``removed`` (a commit),
        removals are collected, not journaled. Returns whether a journal record was emitted.

        Why several ids: a cumulative ACK settles many, and an AMQP read accepts hundreds of one consumer's
        deliveries (:meth:`accept_many`); the call is then paid per run, not per message."""
        unacked, in_tx, deliveries = s.unacked, s.in_tx, s.conn.deliveries
        accepted = st.outcome is Outcome.ACCEPTED
        store = self.store
        journaled = False
        for d in ids:
            entry = unacked.pop(d)
            if in_tx:  # none settled in an open transaction: no call
                in_tx.discard(d)
            deliveries.pop(d, None)
            if not accepted:
                journaled |= self._not_accepted(s, entry, st, out)
            elif store.journaled:  # nothing journalled: no call
                journaled |= store.remove(entry, out, removed)
        return journaled

    def _not_accepted(self, s: Sub, entry: Entry, st: Settlement, out: list[Effect]) -> bool:
        """``entry``, taken off ``s``, settled other than accepted: dead-lettered (rejected) or given back
        marked redelivered. Returns whether a journal record was emitted."""
        outcome = st.outcome
        q = s.queue
        if outcome is Outcome.REJECTED:
            return self.dead_letter(entry, st.reason or "rejected by consumer", out)
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
                return self._merge_headers(entry, st.headers, out) | self.requeue(q, entry, out)
        else:  # REQUEUE
            entry.redelivered = True
            entry.delivery_count += 1
            self.tracer.trace("STOMP-NACK-NOT-CONSUMED", s.destination)
        return self.requeue(q, entry, out)

    def _merge_headers(self, entry: Entry, headers: Headers, out: list[Effect]) -> bool:
        """Merge ``headers`` into the entry's message (same name: replaced); a journalled message is
        stored again under its id, which replay reads as an update in place. Returns whether it was."""
        names = {name for name, _ in headers}
        msg = entry.msg
        merged = (*((n, v) for n, v in msg.headers if n not in names), *headers)
        typed = msg.typed.with_added(headers) if msg.typed is not None else None
        entry.msg = msg._replace(headers=merged, typed=typed)
        if msg.message_id in self.store.journaled:
            out.append(JournalAppend(Stored(entry.msg)))
            return True
        return False

    def failed(self, q: Queue, entry: Entry, out: list[Effect]) -> bool:
        """A delivery of ``entry`` failed (its consumer went, a rollback gave it back): marked redelivered,
        one more failed delivery counted, and :meth:`requeue`. Returns whether a journal record was emitted."""
        entry.redelivered = True
        entry.delivery_count += 1
        return self.requeue(q, entry, out)

    def requeue(self, q: Queue, entry: Entry, out: list[Effect]) -> bool:
        """Give ``entry`` back to ``q`` ahead of newer messages, or dead-letter it past the redelivery limit.
        Returns whether a journal record was emitted."""
        if entry.delivery_count > self.config.max_redeliveries:
            self.tracer.trace("AMQ-REDELIVERY-POISON-TO-DLQ", q.name)
            return self.dead_letter(entry, f"max redeliveries ({self.config.max_redeliveries}) exceeded", out)
        if q.topic_copy and q.durable is None and not q.consumers:
            return False  # a nondurable subscription ended: its copy goes with it
        q.give_back(entry)
        return False

    def dead_letter(self, entry: Entry, reason: str, out: list[Effect]) -> bool:
        """Move ``entry``'s message to the dead letter queue. Returns whether a journal record was emitted."""
        msg = entry.msg
        dlq = self.config.dead_letter_queue
        if msg.destination == dlq:  # never loop: a rejected DLQ message is dropped
            return self.store.remove(entry, out, None)
        dead = dead_letter_of(msg, dlq, reason)
        journaled = False
        if msg.message_id in self.store.journaled:
            out.append(JournalAppend(DeadLettered(msg.message_id, dlq, reason)))
            journaled = True
        dq = self.store.queue(dlq)
        dq.enqueue((self.store.entry(dead, entry.delivery_count, True),))
        self.dispatcher.dispatch(dq, out)
        return journaled
