"""A proton client engine and the listener's :class:`AmqpConnection` exchanging bytes in memory.

The sans-IO tests of the listener's read paths (batched reads, read pieces, the consume path) need the
same pair: no socket, and every client write handed to the broker as **one read**, so a test controls
what arrives together. ``flush_now`` turns on the listener's mid-read flush, counted in ``flushes``.
"""

from __future__ import annotations

from typing import cast

from proton import Link, Message, symbol

from ackspec.reference.amqp.connection import RECEIVE_WINDOW, AmqpConnection
from ackspec.reference.amqp.pump import EnginePump, client_engine
from ackspec.reference.broker import BrokerCore
from ackspec.reference.broker.hub import Hub

FILL_BATCH = 1000
"""Transfers :meth:`InMemoryPair.filled_queue_consumer` writes between two pumps."""


class InMemoryPair:
    """A reference broker core with one AMQP connection, and a client with an open session."""

    def __init__(self, *, flush_now: bool = False, receive_window: int = RECEIVE_WINDOW, hub: Hub | None = None,
                 conn_id: str = "amqp-1", container: str = "client", sole_connection: bool = False) -> None:
        """``hub``: share another pair's broker (a second connection, ``conn_id``); ``sole_connection``: the
        client asks for the AMQP JMS mapping's ``sole-connection-for-container`` (a JMS client id)."""
        if hub is None:
            hub = Hub(BrokerCore())
            hub.journaling = False
        self.hub = hub
        self.core = hub.core
        self.flushes = 0
        self.broker = AmqpConnection(conn_id, self.hub, receive_window=receive_window,
                                     flush_now=self._flush_now if flush_now else None)
        self.hub.attach(conn_id, self.broker)
        self.conn, transport, collector = client_engine(container, "localhost", None, None)
        if sole_connection:
            self.conn.desired_capabilities = [symbol("sole-connection-for-container")]
        self.client = EnginePump(transport, collector, lambda _event: None)
        self.conn.open()
        self.session = self.conn.session()
        self.session.open()

    def _flush_now(self) -> None:
        self.flushes += 1
        self.client.feed(self.broker.data_to_send())

    def pump(self) -> None:
        """Up to ten exchanges: what the client wrote goes to the broker as one read, and back."""
        for _ in range(10):
            out = self.client.take_output()
            if out:  # b"" would mean the client closed its side
                self.broker.receive_data(out)
            self.client.feed(self.broker.data_to_send())
            self.client.dispatch()

    def filled_queue_consumer(self, queue: str, count: int) -> tuple[Link, Link]:
        """A sender link (kept open, as the bench keeps it) that filled ``queue`` with ``count``
        pre-settled messages ``m0``, ``m1``, ..., and a receiver link on ``queue``, unsettled, without
        credit yet."""
        sender = self.session.sender("s")
        sender.target.address = queue
        sender.open()
        self.pump()
        for i in range(count):
            dlv = sender.delivery(f"t{i}")
            sender.send(bytes(Message(body=b"m%d" % i).encode()))
            sender.advance()
            dlv.settle()
            if i % FILL_BATCH == FILL_BATCH - 1:  # one pump moves ten windows at most: a large fill goes in runs
                self.pump()
        receiver = self.session.receiver("r")
        receiver.source.address = queue
        receiver.snd_settle_mode = Link.SND_UNSETTLED
        receiver.open()
        self.pump()
        assert self.core.queue_depth(queue) == count
        return sender, receiver


def accepted_bodies(receiver: Link) -> list[bytes]:
    """The bodies of the receiver's complete deliveries so far, each accepted and settled."""
    got = []
    while (current := receiver.current) is not None:
        msg = Message()
        msg.decode(receiver.recv(current.pending))
        receiver.advance()
        current.update(current.ACCEPTED)
        current.settle()
        got.append(bytes(cast(bytes, msg.body)))
    return got
