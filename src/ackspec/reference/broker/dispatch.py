"""Handing a queue's messages to its consumers: round robin, flow control, expiry, browsing.

Why a part of its own: every change that may let a message go (a publish, a settlement, credit, room on
the transport) ends in :meth:`Dispatcher.dispatch`; what one delivery does is written once,
:meth:`Dispatcher.deliver`, and is what a variant of the broker overrides to change every delivery.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable

from ackspec.reference.broker.effects import Deliver, Effect
from ackspec.reference.broker.model import AckMode, ConnId
from ackspec.reference.broker.state import Conn, Entry, Queue, Sub
from ackspec.reference.broker.store import Store
from ackspec.reference.broker.trace import Tracer

PASS_OVER_LIMIT = 200
"""Messages one dispatch passes over while they wait for a blocked consumer (see Dispatcher.dispatch);
ActiveMQ looks at most at a page of 200 messages (maxPageSize) the same way."""

_new = tuple.__new__
"""Builds a ``Deliver`` without its named tuple's Python-level ``__new__`` (the hottest line of the core)."""
_AUTO = AckMode.AUTO


class Dispatcher:
    """Delivers queued messages to consumers with room, and numbers the deliveries."""

    def __init__(self, store: Store, tracer: Tracer, clock: Callable[[], float]) -> None:
        self.store = store
        self.tracer = tracer
        self.clock = clock
        self.delivery_ids = itertools.count(1)
        self.out_of_room: set[ConnId] = set()
        """Connections whose output room is spent (:meth:`spend_room`): their hosts give more once written."""

    def dispatch(self, q: Queue, out: list[Effect]) -> None:
        """Hand out the queue's messages, round robin over consumers that have room, until it is
        empty or every consumer is blocked (not writable, no credit, prefetch full).

        The hottest loop of the core: the queue's heads are read inline (returned messages first,
        the heap by original position, then ready ones), and messages no current consumer may take
        are parked. A queue with one consumer takes :meth:`dispatch_to` (no consumer to choose).

        A message that only a blocked consumer wants (the others with room do not match it: a
        selector, undeliverable-here) does not hold up the messages after it: up to
        :data:`PASS_OVER_LIMIT` such messages are passed over, and put back at the head, in order,
        when the dispatch ends. So a consumer with a selector is not starved by a message waiting
        for another consumer's room (as ActiveMQ dispatches from a page of messages)."""
        consumers = q.consumers
        if not consumers:
            return
        if len(consumers) == 1:
            self.dispatch_to(q, consumers[0], out)
            return
        self.dispatch_round_robin(q, out)

    def dispatch_round_robin(self, q: Queue, out: list[Effect]) -> None:
        """:meth:`dispatch` choosing a consumer per message, round robin over those with room."""
        ready = q.ready
        returned = q.returned
        deliver = self.deliver
        choose = self.choose
        passed: list[Entry] = []  # waiting for a blocked consumer, behind messages others may take
        while returned or ready:
            entry = returned[0] if returned else ready[0]
            chosen, blocked, unwanted = choose(q, entry)
            if chosen is None and blocked and (not unwanted or len(passed) >= PASS_OVER_LIMIT):
                break  # every consumer is blocked (or enough waiting messages were passed over)
            if returned:
                heapq.heappop(returned)
            else:
                ready.popleft()
            if entry.msg.typed is not None and self.expired(entry, out):
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
    def choose(q: Queue, entry: Entry) -> tuple[Sub | None, bool, bool]:
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

    def dispatch_to(self, q: Queue, s: Sub, out: list[Effect]) -> None:
        """:meth:`dispatch` for a queue with one consumer (the usual case): the same deliveries as
        :meth:`dispatch_round_robin` would make, without choosing a consumer per message (the tests of
        :meth:`choose` for one consumer, read once per message)."""
        ready = q.ready
        returned = q.returned
        c = s.conn
        unacked = s.unacked
        selector = s.selector
        prefetch = s.prefetch
        deliver = self.deliver
        while returned or ready:
            credit = s.credit
            if not c.writable or (credit is not None and credit <= 0) or (
                    prefetch is not None and len(unacked) >= prefetch):
                return
            entry = heapq.heappop(returned) if returned else ready.popleft()
            if entry.msg.typed is not None and self.expired(entry, out):
                continue
            if (entry.excluded is not None and s.key in entry.excluded) or (
                    selector is not None and not selector.matches(entry.msg)):
                q.parked.append(entry)  # undeliverable to the only consumer (or not matched by its selector)
                continue
            deliver(s, entry, out)

    def expired(self, entry: Entry, out: list[Effect]) -> bool:
        """Drop ``entry`` if its message has expired (never delivered after its expiry time: JMS 4.8,
        AMQP 3.2.1 absolute-expiry-time / ttl); a persistent one is removed from the journal."""
        typed = entry.msg.typed
        if typed is None or not typed.expiry or not typed.expired(int(self.clock() * 1000)):
            return False
        self.tracer.trace("AMQP-JMS-EXPIRED-NOT-DELIVERED", entry.msg.destination)
        self.store.remove(entry, out, None)
        return True

    def deliver(self, s: Sub, entry: Entry, out: list[Effect]) -> None:
        """Hand ``entry`` to consumer ``s`` (which has room): an ``ack:auto`` delivery is settled at once,
        any other waits in ``s.unacked`` for its settlement."""
        did = next(self.delivery_ids)
        c = s.conn
        credit = s.credit
        if credit is not None:
            s.credit = credit - 1
        msg = entry.msg
        out.append(_new(Deliver, (c.conn_id, s.sub_id, did, msg, entry.redelivered, entry.delivery_count)))
        if entry.redelivered:
            self.tracer.trace("JMS-3.4.7-REDELIVERED-SET", msg.destination)
        if c.room is not None:
            self.spend_room(c, c.room - entry.size)
        if s.ack_mode is _AUTO:
            if self.store.journaled:
                self.store.remove(entry, out, None)
        else:
            s.unacked[did] = entry
            c.deliveries[did] = s

    def spend_room(self, c: Conn, room: int) -> None:
        """A delivery went to ``c`` (whose room is bounded): ``room`` is what is left."""
        c.room = room
        if room <= 0:
            c.writable = False
            self.out_of_room.add(c.conn_id)

    def show(self, s: Sub, shown: deque[Entry], out: list[Effect]) -> None:
        """Hand a browser copies of what it may still see, as far as its credit goes."""
        while shown and s.credit:
            entry = shown.popleft()
            if entry.msg.typed is not None and entry.msg.typed.expired(int(self.clock() * 1000)):
                continue
            did = next(self.delivery_ids)
            s.credit -= 1
            out.append(Deliver(s.conn.conn_id, s.sub_id, did, entry.msg, entry.redelivered, entry.delivery_count))
            if s.ack_mode is not AckMode.AUTO:
                s.conn.deliveries[did] = s  # settled by the client, to no effect
