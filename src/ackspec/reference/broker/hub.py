"""Routes core effects to connection handlers and tracks journal durability.

The :class:`Hub` sits between :class:`~.core.BrokerCore` and the protocol hosts: a STOMP
session or an AMQP connection registers a :class:`ConnectionHandler`; every effect list a
core call returns goes through :meth:`Hub.apply`, which

* queues :class:`~.effects.JournalAppend` records for the I/O layer (:meth:`take_journal`),
  numbering them: record *n* is durable once :meth:`mark_synced` reached *n*;
* owns the rule "confirm only what the journal made durable", for every protocol at once: a
  durable :class:`~.effects.Confirm` is held until :meth:`mark_synced` covers the records queued
  before it, then handed to the connection's handler; a handler whose confirms must keep their
  order (:attr:`ConnectionHandler.ordered_confirms`: STOMP receipts) also gets its later confirms
  only after the held ones;
* hands every other effect to the handler of the connection it names.

Group commit falls out of this: the I/O layer writes all queued records, fsyncs once, then
calls ``mark_synced(last)`` which releases the confirms of every connection at once.
:attr:`Hub.awaiting` (connections with a durable confirm not yet released) and
:attr:`Hub.released` (those the last ``mark_synced`` released) let the I/O layer gather the
next group: a connection just released usually sends again at once, so the next fsync is
worth a short wait until it did (see ``BrokerServer``).
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

from ackspec.reference.broker.core import BrokerCore
from ackspec.reference.broker.effects import Confirm, Deliver, Effect, JournalAppend
from ackspec.reference.broker.model import ConnId
from ackspec.reference.broker.records import Record


class ConnectionHandler(Protocol):
    ordered_confirms: bool
    """Confirms reach the peer in the order the core made them (a STOMP receipt acknowledges the frames
    before it): a confirm waits behind a held durable one. False: only the durable ones wait."""

    def on_effect(self, effect: Effect) -> None:
        """A Deliver, Reject, Drained or Close for this connection."""

    def on_confirm(self, effect: Confirm) -> None:
        """A Confirm, to answer now: when durable, the journal holds what it confirms."""


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
        self._held: dict[ConnId, deque[tuple[int, Confirm]]] = {}
        """Per connection, the confirms held back in order, each with the record it needs (0: none)."""
        self.released: frozenset[ConnId] = frozenset()
        """Connections whose durable confirms the last :meth:`mark_synced` released."""

    def attach(self, conn: ConnId, handler: ConnectionHandler) -> None:
        self.handlers[conn] = handler

    def detach(self, conn: ConnId) -> None:
        self.handlers.pop(conn, None)
        self.awaiting.pop(conn, None)
        self._held.pop(conn, None)

    def holds(self, conn: ConnId) -> bool:
        """Confirms of ``conn`` are held back, waiting for the journal."""
        return conn in self._held

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
                    if needs > self.synced or (h.ordered_confirms and e.conn in self._held):
                        self._hold(e, needs)
                    else:
                        h.on_confirm(e)
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

    def _hold(self, e: Confirm, needs: int) -> None:
        self._held.setdefault(e.conn, deque()).append((needs, e))
        if needs:
            self.awaiting[e.conn] = needs

    def all_wait_once_for(self, seq: int) -> bool:
        """Every connection holds exactly one confirm, a durable one that the journal up to ``seq`` covers:
        each is waiting for that fsync. A client that awaits its receipt before sending again (the case this
        serves) is neither stalled by it nor able to add a record to it; one that sends meanwhile has its
        frames read at most one fsync later."""
        awaiting, held = self.awaiting, self._held
        for conn in self.handlers:
            needs = awaiting.get(conn)
            if needs is None or needs > seq or len(held[conn]) != 1:
                return False
        return True

    def mark_synced(self, seq: int) -> None:
        """The journal is durable up to record ``seq``: hand over the confirms it covers, in order."""
        if seq <= self.synced:
            return
        self.synced = seq
        awaiting = self.awaiting
        released = [conn for conn, needs in awaiting.items() if needs <= seq]
        for conn in released:
            del awaiting[conn]
        self.released = frozenset(released)
        for conn in list(self._held):
            self._release(conn, seq)

    def _release(self, conn: ConnId, seq: int) -> None:
        """The held confirms of ``conn`` that ``seq`` covers (for an ordered handler: up to the first it does not).

        An ordered handler sees itself holding nothing only when its last confirm is handed over (a STOMP
        session ends a DISCONNECT when nothing is held: its receipt comes last)."""
        held = self._held.get(conn)
        if held is None:  # detached by a handler that was just answered
            return
        h = self.handlers.get(conn)
        if h is not None and h.ordered_confirms:
            while held and held[0][0] <= seq:
                e = held.popleft()[1]
                if not held:
                    del self._held[conn]
                h.on_confirm(e)
            return
        ready = [e for needs, e in held if needs <= seq]
        waiting = deque(item for item in held if item[0] > seq)
        if waiting:
            self._held[conn] = waiting
        else:
            del self._held[conn]
        if h is not None:
            for e in ready:
                h.on_confirm(e)
