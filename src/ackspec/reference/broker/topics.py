"""Topic subscriptions: which subscription queues a topic's messages are copied to, and the durable and
shared subscriptions that outlive one consumer.

Why a part of its own: a topic message is routed by its subscriptions' filters (noLocal, a selector) and
a durable subscription keeps its own journalled copy; that routing, and the lifetime of each kind of
subscription (JMS 6.11), is decided here alone.
"""

from __future__ import annotations

from collections.abc import Callable

from ackspec.reference.broker.effects import Effect, JournalAppend
from ackspec.reference.broker.model import ConnId, Message
from ackspec.reference.broker.records import DurableRemoved, DurableSubscribed, StoredCopy
from ackspec.reference.broker.selector import Selector
from ackspec.reference.broker.state import DurableKey, Queue
from ackspec.reference.broker.store import Store
from ackspec.reference.broker.trace import Tracer

Copy = tuple[Queue, Message, StoredCopy | None]
"""Where one topic message goes: a subscription queue, what it gets, the journal record that keeps it (if any)."""


class Topics:
    """The subscription queues of each topic, and the durable and shared subscriptions by key."""

    def __init__(self, tracer: Tracer, store: Store, client_of: Callable[[ConnId], str | None]) -> None:
        """``client_of``: the client id of an open connection (None: none, or not open)."""
        self.tracer = tracer
        self.store = store
        self.client_of = client_of
        self.routes: dict[str, list[Queue]] = {}  # topic -> the subscription queues it copies to
        self.durables: dict[DurableKey, Queue] = {}
        self.shared: dict[DurableKey, Queue] = {}  # nondurable shared subscriptions with a consumer

    def copies(self, msg: Message) -> list[Copy]:
        """Each subscription queue a topic message goes to, with what it gets: the message itself, or,
        for a persistent message kept by a durable subscription, a copy under its own id (message id @
        client id / name) and the journal record that keeps it."""
        routed = self.routes.get(msg.destination)
        if not routed:
            return []
        self.tracer.trace("JMS-4.2-TOPIC-EVERY-SUBSCRIBER", msg.destination)
        copies: list[Copy] = []
        for sq in routed:
            if ((sq.no_local is not None and sq.no_local == msg.producer)
                    or (sq.no_local_client is not None and sq.no_local_client == self.client_of(msg.producer))):
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

    def nondurable(self, destination: str, selector: Selector | None, no_local: ConnId | None) -> Queue:
        """A new subscription queue for one consumer of ``destination`` (``no_local``: its connection, if
        its own messages must not enter)."""
        q = Queue(destination, topic_copy=True, selector=selector)
        q.no_local = no_local
        self.routes.setdefault(destination, []).append(q)
        return q

    def shared_queue(self, key: DurableKey, destination: str, selector: Selector | None) -> Queue:
        """The queue of the nondurable shared subscription ``key``: the one its other consumers use, or a new one."""
        q = self.shared.get(key)
        if q is None or q.name != destination:
            q = self.shared[key] = Queue(destination, topic_copy=True, selector=selector)
            q.shared = key
            self.routes.setdefault(destination, []).append(q)
        return q

    def durable_queue(self, key: DurableKey, destination: str, selector: Selector | None, no_local: bool,
                      out: list[Effect]) -> Queue:
        """The queue of durable subscription ``key`` on ``destination``: the kept one, or a new one (a
        subscription kept for another topic, selector or noLocal is replaced: its messages are dropped),
        journalled."""
        q = self.durables.get(key)
        text = selector.text if selector is not None else ""
        if (q is not None and q.name == destination and (q.selector.text if q.selector else "") == text
                and (q.no_local_client is not None) == no_local):
            if len(q):
                self.tracer.trace("JMS-4.2.11-DURABLE-SUBSCRIPTION-RETAINS", destination)
            return q
        if q is not None:
            self.remove_durable(key, q, out)
        out.append(JournalAppend(DurableSubscribed(key[0], key[1], destination, text, no_local)))
        return self.add_durable(key, destination, selector, no_local)

    def add_durable(self, key: DurableKey, destination: str, selector: Selector | None, no_local: bool) -> Queue:
        """Make durable subscription ``key`` (not journalled: a new one is, a restored one already was)."""
        q = Queue(destination, topic_copy=True, durable=key, selector=selector)
        if no_local:
            q.no_local_client = key[0]
        self.durables[key] = q
        self.routes.setdefault(destination, []).append(q)
        return q

    def remove_durable(self, key: DurableKey, q: Queue, out: list[Effect]) -> None:
        """Forget durable subscription ``key`` and its copies; one journal record drops them all on replay."""
        out.append(JournalAppend(DurableRemoved(key[0], key[1])))
        for entry in q.messages():
            self.store.journaled.discard(entry.msg.message_id)
        del self.durables[key]
        self.unroute(q)

    def consumer_gone(self, q: Queue, out: list[Effect]) -> bool:
        """A consumer of subscription queue ``q`` went: whether ``q`` is kept (a queue, or a durable
        subscription's queue, outlives its consumer; a shared one its last but one); one not kept is
        forgotten."""
        if not q.topic_copy or q.durable is not None or (q.shared is not None and bool(q.consumers)):
            return True
        if q.shared is not None and self.shared.get(q.shared) is q:
            del self.shared[q.shared]
        self.unroute(q)
        return False

    def unroute(self, q: Queue) -> None:
        """Topic messages stop reaching subscription queue ``q``."""
        routed = self.routes.get(q.name)
        if routed and q in routed:
            routed.remove(q)
