"""Durable topic subscriptions over AMQP 1.0, as the AMQP JMS mapping makes them: a receiving link on a
topic with a durable source, named by the client's container id and the link's name. A bare detach
(closed=false) suspends it and it keeps collecting messages; a close (closed=true) deletes it; so do
neither an ended session nor an ended connection.

Sans-IO: a proton client engine and :class:`AmqpConnection` exchange bytes in memory (tests/amqp/inmemory.py).
"""

from __future__ import annotations

import pytest
from proton import Link, Message, Terminus
from tests.amqp.inmemory import InMemoryPair, accepted_bodies
from tests.reference._req import requirement

T = "/topic/durable-links"
CONTAINER = "client"  # the container id of InMemoryPair's client engine
NAME = "reader"


def _durable_receiver(pair: InMemoryPair, name: str = NAME, *, durable: bool = True) -> Link:
    receiver = pair.session.receiver(name)
    receiver.source.address = T
    if durable:
        receiver.source.durability = Terminus.DELIVERIES
        receiver.source.expiry_policy = Terminus.EXPIRE_NEVER
    receiver.open()
    receiver.flow(10)
    pair.pump()
    return receiver


def _publish(pair: InMemoryPair, *bodies: bytes) -> None:
    sender = pair.session.sender(f"p-{bodies[0]!r}")
    sender.target.address = T
    sender.open()
    pair.pump()
    for i, body in enumerate(bodies):
        dlv = sender.delivery(b"%d" % i)
        sender.send(bytes(Message(body=body).encode()))
        sender.advance()
        dlv.settle()
    sender.close()
    pair.pump()


@requirement("JMS-4.2.11-DURABLE-SUBSCRIPTION-RETAINS")
@pytest.mark.parametrize("ending", ["detach", "session-end"])
def test_suspended_durable_link_keeps_messages_until_closed(ending: str) -> None:
    pair = InMemoryPair()
    receiver = _durable_receiver(pair)
    assert receiver.remote_source.durability == Terminus.DELIVERIES  # the broker echoes the durable source
    if ending == "detach":
        receiver.detach()
        pair.pump()
        assert receiver.remote_condition is None
    else:
        pair.session.close()
        pair.pump()
        pair.session = pair.conn.session()
        pair.session.open()
    _publish(pair, b"1", b"2")
    assert pair.core.durable_depth((CONTAINER, NAME)) == 2
    resumed = _durable_receiver(pair)
    assert accepted_bodies(resumed) == [b"1", b"2"]
    resumed.close()  # closed=true: the subscription is deleted
    pair.pump()
    assert pair.core.durable_depth((CONTAINER, NAME)) is None
    _publish(pair, b"3")
    assert accepted_bodies(_durable_receiver(pair)) == []


def test_nondurable_topic_link_keeps_nothing_after_detach() -> None:
    pair = InMemoryPair()
    receiver = _durable_receiver(pair, durable=False)
    receiver.detach()
    pair.pump()
    _publish(pair, b"1")
    assert pair.core.durable_depth((CONTAINER, NAME)) is None
    assert accepted_bodies(_durable_receiver(pair, durable=False)) == []

