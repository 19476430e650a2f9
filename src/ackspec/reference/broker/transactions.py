"""Transactions: sends held until commit, settlements applied at commit, both discarded by a rollback.

Why a part of its own: a commit is atomic (one journal record carries all its persistent sends, durable
copies and removals) and a rollback gives settled deliveries back (STOMP, JMS) or leaves them acquired
(AMQP 4.4.2); both are decided here alone.
"""

from __future__ import annotations

from collections.abc import Iterator

from ackspec.reference.broker.dispatch import Dispatcher
from ackspec.reference.broker.effects import Confirm, Effect, JournalAppend
from ackspec.reference.broker.model import CoreConfig, Settlement
from ackspec.reference.broker.records import Committed
from ackspec.reference.broker.settlement import Settler
from ackspec.reference.broker.state import Conn, CoreError, Queue, Sub, Tx, transaction
from ackspec.reference.broker.store import Store
from ackspec.reference.broker.topics import Copy, Topics
from ackspec.reference.broker.trace import Tracer


class Transactions:
    """Opens, commits and rolls back the transactions of a connection."""

    def __init__(self, config: CoreConfig, tracer: Tracer, store: Store, dispatcher: Dispatcher, settler: Settler,
                 topics: Topics) -> None:
        self.config = config
        self.tracer = tracer
        self.store = store
        self.dispatcher = dispatcher
        self.settler = settler
        self.topics = topics

    def begin(self, c: Conn, tx: str) -> list[Effect]:
        """Open transaction ``tx`` on connection ``c``."""
        if tx in c.txs:
            raise CoreError(f"transaction {tx!r} already open on this connection", "STOMP-TX-BEGIN-ID-REQUIRED")
        c.txs[tx] = Tx(tx)
        return []

    def commit(self, c: Conn, tx: str, confirm: object) -> list[Effect]:
        """:meth:`BrokerCore.commit <ackspec.reference.broker.core.BrokerCore.commit>` on connection ``c``."""
        t = transaction(c, tx)
        del c.txs[tx]
        out: list[Effect] = []
        stored = tuple(m for q, m in t.sends if q is not None and m.persistent)
        topic_copies = {i: self.topics.copies(m) for i, (q, m) in enumerate(t.sends) if q is None}
        copies = tuple(record for routed in topic_copies.values() for _, _, record in routed if record is not None)
        removed: list[str] = []
        pending: list[Effect] = []
        touched: dict[int, Queue] = {}
        for s, d, st in _open_settles(c, t):
            self.settler.apply(s, (d,), st, pending, removed)
            touched[id(s.queue)] = s.queue
        journaled = bool(stored or removed or copies)
        if journaled:
            out.append(JournalAppend(Committed(stored, tuple(removed), copies)))
            self.store.journaled.update(m.message_id for m in stored)
            self.store.journaled.update(record.message.message_id for record in copies)
        out += pending
        self._enqueue_sends(t, topic_copies, touched)
        for q in touched.values():
            self.dispatcher.dispatch(q, out)
        self.tracer.trace("STOMP-TX-COMMIT-ATOMIC", tx)
        if confirm is not None:
            out.append(Confirm(c.conn_id, confirm, durable=journaled and self.config.sync_transactional))
        return out

    def _enqueue_sends(self, t: Tx, topic_copies: dict[int, list[Copy]], touched: dict[int, Queue]) -> None:
        """The committed sends of ``t`` enter their queues (and a topic's, its subscriptions), in order."""
        store = self.store
        for i, (sent_to, m) in enumerate(t.sends):
            if sent_to is not None:
                q = store.queue(sent_to.name)  # the queue may have been freed meanwhile (Store.free_if_unused)
                q.enqueue((store.entry(m),))
                touched[id(q)] = q
                continue
            for sq, copy, _record in topic_copies[i]:
                sq.enqueue((store.entry(copy),))
                touched[id(sq)] = sq

    def abort(self, c: Conn, tx: str, redeliver_settled: bool, confirm: object) -> list[Effect]:
        """:meth:`BrokerCore.abort <ackspec.reference.broker.core.BrokerCore.abort>` on connection ``c``."""
        t = transaction(c, tx)
        del c.txs[tx]
        out: list[Effect] = []
        touched: dict[int, Queue] = {}
        for s, d, _st in _open_settles(c, t):
            if redeliver_settled:
                entry = s.unacked.pop(d)
                del c.deliveries[d]
                self.settler.failed(s.queue, entry, out)
                touched[id(s.queue)] = s.queue
        for q in touched.values():
            self.dispatcher.dispatch(q, out)
        self.tracer.trace("STOMP-TX-ABORT-DISCARDS-SENDS", tx)
        if confirm is not None:
            out.append(Confirm(c.conn_id, confirm))
        return out


def _open_settles(c: Conn, t: Tx) -> Iterator[tuple[Sub, int, Settlement]]:
    """The settlements of ``t`` whose deliveries still await them (a consumer that went gave its deliveries
    back), each taken out of the transaction as it is yielded."""
    for d, st in t.settles:
        s = c.deliveries.get(d)
        if s is None or d not in s.unacked:
            continue
        s.in_tx.discard(d)
        yield s, d, st
