"""Walked transfers keep the client's order against the other frames of the same read.

On a connection whose only deliveries are one link's transfers, the listener reads them by walking the
link instead of one event each. Proton decodes a whole read before the listener looks at it, so the
transfers sent *after* an attach, a detach or a flow are already current on the link: a walk that ran to
the link's end would publish them before that frame's effect. Each case is run walked and per event (an
idle second sending link turns walking off) and must end the same, in the client's order. The client's
output is taken step by step (proton would otherwise write its attaches before its transfers) and handed
to the broker as one read.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from proton import Link, Message
from tests.amqp.inmemory import InMemoryPair

Q = "/queue/walked-order"
T = "/topic/walked-order"


def _pair(walked: bool, address: str) -> tuple[InMemoryPair, Link]:
    pair = InMemoryPair()
    sender = pair.session.sender("s")
    sender.target.address = address
    sender.open()
    if not walked:
        idle = pair.session.sender("idle")
        idle.target.address = "/queue/idle"
        idle.open()
    pair.pump()
    assert (pair.broker.links.walked is not None) is walked
    return pair, sender


def _presettled(sender: Link, body: bytes) -> None:
    dlv = sender.delivery(body.decode())
    sender.send(bytes(Message(body=body).encode()))
    sender.advance()
    dlv.settle()


def _settled_receiver(pair: InMemoryPair, address: str) -> Link:
    """A receiver link on ``address`` whose deliveries the broker sends settled; not open yet."""
    receiver = pair.session.receiver("r")
    receiver.source.address = address
    receiver.snd_settle_mode = Link.SND_SETTLED
    return receiver


def _subscribe(receiver: Link) -> None:
    receiver.open()
    receiver.flow(10)


def _one_read(pair: InMemoryPair, steps: list[Callable[[], object]]) -> None:
    """Each step's frames in the order of the steps, all of them one read of the broker."""
    read = b""
    for step in steps:
        step()
        read += pair.client.take_output()
    pair.broker.receive_data(read)
    pair.pump()


def _bodies(receiver: Link) -> list[bytes]:
    got = []
    while (current := receiver.current) is not None:
        message = Message()
        message.decode(receiver.recv(current.pending))
        receiver.advance()
        got.append(bytes(message.body))
    return got


@pytest.mark.parametrize("walked", [True, False])
def test_a_transfer_after_a_subscription_in_one_read_reaches_the_new_subscriber(walked: bool) -> None:
    pair, sender = _pair(walked, T)
    receiver = _settled_receiver(pair, T)
    # T1 before the subscription (nobody gets it), T2 after it, in the same read
    _one_read(pair, [lambda: _presettled(sender, b"T1"), lambda: _subscribe(receiver),
                     lambda: _presettled(sender, b"T2")])
    assert _bodies(receiver) == [b"T2"]


@pytest.mark.parametrize("walked", [True, False])
def test_a_transfer_after_a_consumer_closes_in_one_read_stays_in_the_queue(walked: bool) -> None:
    pair, sender = _pair(walked, Q)
    receiver = _settled_receiver(pair, Q)
    _subscribe(receiver)
    pair.pump()
    # T1 to the consumer (settled on delivery), T2 after the consumer is gone, in the same read: kept
    _one_read(pair, [lambda: _presettled(sender, b"T1"), receiver.close, lambda: _presettled(sender, b"T2")])
    assert [m.body for m in pair.core.queue_messages(Q)] == [b"T2"]
