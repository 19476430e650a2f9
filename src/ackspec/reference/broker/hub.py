"""Routes core effects to connection handlers and tracks journal durability.

The :class:`Hub` sits between :class:`~.core.BrokerCore` and the protocol hosts: a STOMP
session or an AMQP connection registers a :class:`ConnectionHandler`; every effect list a
core call returns goes through :meth:`Hub.apply`, which

* queues :class:`~.effects.JournalAppend` records for the I/O layer (:meth:`take_journal`),
  numbering them: record *n* is durable once :meth:`mark_synced` reached *n*;
* hands :class:`~.effects.Confirm` to the connection's handler together with the journal
  sequence number it must wait for (0 = nothing to wait for);
* hands every other effect to the handler of the connection it names.

Group commit falls out of this: the I/O layer writes all queued records, fsyncs once, then
calls ``mark_synced(last)`` which releases the confirms of every connection at once.
:attr:`Hub.awaiting` (connections with a durable confirm not yet released) and
:attr:`Hub.released` (those the last ``mark_synced`` released) let the I/O layer gather the
next group: a connection just released usually sends again at once, so the next fsync is
worth a short wait until it did (see ``BrokerServer``).
"""

from __future__ import annotations

from typing import Protocol

from ackspec.reference.broker.core import BrokerCore
from ackspec.reference.broker.effects import Confirm, Deliver, Effect, JournalAppend
from ackspec.reference.broker.model import ConnId
from ackspec.reference.broker.records import Record


class ConnectionHandler(Protocol):
    def on_effect(self, effect: Effect) -> None:
        """A Deliver, Reject, Drained or Close for this connection."""

    def on_confirm(self, effect: Confirm, needs_sync: int) -> None:
        """A Confirm; durable once the journal is synced up to ``needs_sync``."""

    def on_synced(self, synced: int) -> None:
        """The journal is durable up to record ``synced``."""


class Hub:
    def __init__(self, core: BrokerCore) -> None:
        self.core = core
        self.handlers: dict[ConnId, ConnectionHandler] = {}
        self._journal: list[Record] = []
        self.appended = 0
        """Sequence number of the last journal record queued."""
        self.synced = 0
        """Sequence number of the last journal record known durable."""
        self.journaling = True
        """False for an in-memory broker: records are dropped and everything counts as synced."""
        self.awaiting: dict[ConnId, int] = {}
        """Connections with a durable confirm waiting for the journal, and the record it needs."""
        self.released: frozenset[ConnId] = frozenset()
        """Connections whose durable confirms the last :meth:`mark_synced` released."""

    def attach(self, conn: ConnId, handler: ConnectionHandler) -> None:
        self.handlers[conn] = handler

    def detach(self, conn: ConnId) -> None:
        self.handlers.pop(conn, None)
        self.awaiting.pop(conn, None)

    def apply(self, effects: list[Effect]) -> None:
        handlers = self.handlers
        for e in effects:
            # the two effects of every message first, by exact class (effects are never subclassed)
            if type(e) is Deliver:
                h = handlers.get(e.conn)
                if h is not None:
                    h.on_effect(e)
            elif type(e) is Confirm:
                h = handlers.get(e.conn)
                if h is not None:
                    needs = self.appended if e.durable and self.journaling else 0
                    if needs > self.synced:
                        self.awaiting[e.conn] = needs
                    h.on_confirm(e, needs)
            elif isinstance(e, JournalAppend):
                if self.journaling:
                    self._journal.append(e.record)
                    self.appended += 1
            else:
                h = handlers.get(e.conn)
                if h is not None:
                    h.on_effect(e)

    def take_journal(self) -> tuple[list[Record], int]:
        """Records to write, and the sequence number of the last one."""
        records, self._journal = self._journal, []
        return records, self.appended

    def mark_synced(self, seq: int) -> None:
        if seq <= self.synced:
            return
        self.synced = seq
        awaiting = self.awaiting
        released = [conn for conn, needs in awaiting.items() if needs <= seq]
        for conn in released:
            del awaiting[conn]
        self.released = frozenset(released)
        for h in list(self.handlers.values()):
            h.on_synced(seq)
