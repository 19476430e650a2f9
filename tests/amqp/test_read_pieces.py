"""A large read is processed in pieces, with output handed over between them; credit stays exact.

Sans-IO: a proton client engine and :class:`AmqpConnection` exchange bytes in memory.
"""

from __future__ import annotations

from proton import Described, Endpoint, Link, Message, uint, ulong
from tests.amqp.inmemory import InMemoryPair

from ackspec.reference.amqp.connection import AmqpConnection
from ackspec.reference.amqp.framing import performative_frame
from ackspec.reference.amqp.pump import EnginePump, client_engine
from ackspec.reference.broker import BrokerCore
from ackspec.reference.broker.hub import Hub

Q = "/queue/pieces"


def _transfer(delivery_id: int, body: bytes) -> bytes:
    return performative_frame(Described(ulong(0x14), [uint(0), uint(delivery_id), f"t{delivery_id}".encode(), uint(0),
                                                     True]), bytes(Message(body=body).encode()))


def test_credit_granted_during_a_read_does_not_cover_transfers_of_that_read() -> None:
    pair = InMemoryPair(receive_window=4, flush_now=True)
    session = pair.session
    sender = session.sender("raw-sender")
    sender.target.address = Q
    sender.snd_settle_mode = Link.SND_SETTLED
    sender.open()
    pair.pump()
    assert sender.credit == 4
    # six pre-settled 3 kB transfers in one read against credit 4: proton takes 8 kB at a time, so the broker
    # handles the first ones, tops the credit up (and hands that flow over) before it reads the fifth
    pair.broker.receive_data(b"".join(_transfer(i, bytes([65 + i]) * 3000) for i in range(6)))
    assert pair.flushes >= 1  # output handed over between pieces, before the read was done
    pair.client.feed(pair.broker.data_to_send())
    pair.client.dispatch()
    assert sender.state & Endpoint.REMOTE_CLOSED
    assert sender.remote_condition is not None
    assert sender.remote_condition.name == "amqp:link:transfer-limit-exceeded"
    assert [m.body[:1] for m in pair.core.queue_messages(Q)] == [b"A", b"B", b"C", b"D"]


def test_flush_now_is_optional() -> None:
    """Hosts that only write after each read (no flush_now) get the same engine, credit and link."""
    core = BrokerCore()
    hub = Hub(core)
    hub.journaling = False
    broker = AmqpConnection("amqp-1", hub)
    assert broker.flush_now is None
    hub.attach("amqp-1", broker)
    conn, transport, collector = client_engine("client", "localhost", None, None)
    client = EnginePump(transport, collector, lambda _event: None)
    conn.open()
    session = conn.session()
    session.open()
    sender = session.sender("s")
    sender.target.address = Q
    sender.open()
    for _ in range(5):
        out = client.take_output()
        if out:
            broker.receive_data(out)
        client.feed(broker.data_to_send())
        client.dispatch()
    assert sender.credit == 1000 and sender.state & Endpoint.REMOTE_ACTIVE
