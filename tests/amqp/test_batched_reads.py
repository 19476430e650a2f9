"""Transfers and acceptances of one read are handed to the core in batches; the outcome is per message.

Sans-IO: a proton client engine and :class:`AmqpConnection` exchange bytes in memory. One read
carries many transfers (some unusual: undecodable, without an address) or many dispositions;
every transfer gets its own outcome, the queue keeps the client's order, and an acceptance batch
with a delivery the core does not know ends that link as a single one would.
"""

from __future__ import annotations

from typing import Any

import pytest
from proton import Delivery, Endpoint, Link, Message
from tests.amqp.inmemory import InMemoryPair

Q = "/queue/batched"


def _send(link: Link, payload: bytes, tag: int, *, settled: bool = False) -> Delivery:
    dlv = link.delivery(f"t{tag}")
    link.send(payload)
    link.advance()
    if settled:
        dlv.settle()
    return dlv


def _encoded(body: bytes, address: str | None = None) -> bytes:
    return bytes(Message(body=body, address=address).encode())


@pytest.mark.parametrize("walked", [True, False])
def test_each_transfer_of_a_read_gets_its_own_outcome_in_order(walked: bool) -> None:
    """``walked``: the link's transfers are read by walking it (one link the client sends on), else
    one delivery event at a time (a second sending link, idle, makes the connection read events)."""
    pair = InMemoryPair()
    sender = pair.session.sender("s")  # no target address: each message's 'to' decides
    sender.open()
    if not walked:
        idle = pair.session.sender("idle")
        idle.target.address = Q
        idle.open()
    pair.pump()
    assert (pair.broker.links.walked is not None) is walked
    plan: list[tuple[bytes, bool]] = [
        (_encoded(b"g0", Q), False), (_encoded(b"g1", Q), True), (b"\x00\x53\x77\xff", False),  # undecodable
        (_encoded(b"g2", Q), False), (_encoded(b"no address"), False), (_encoded(b"g3", Q), True),
        (_encoded(b"g4", Q), False),
    ]
    deliveries = [_send(sender, payload, i, settled=settled) for i, (payload, settled) in enumerate(plan)]
    pair.pump()
    outcomes = [d.remote_state for d, (_p, settled) in zip(deliveries, plan, strict=True) if not settled]
    assert outcomes == [Delivery.ACCEPTED, Delivery.REJECTED, Delivery.ACCEPTED, Delivery.REJECTED,
                        Delivery.ACCEPTED]
    assert [m.body for m in pair.core.queue_messages(Q)] == [b"g0", b"g1", b"g2", b"g3", b"g4"]


def test_a_read_of_acceptances_settles_each_and_refills_credit() -> None:
    pair = InMemoryPair()
    _sender, receiver = pair.filled_queue_consumer(Q, 20)
    receiver.flow(10)
    pair.pump()
    got: list[Any] = []
    while (current := receiver.current) is not None:
        receiver.recv(current.pending)
        receiver.advance()
        got.append(current)
    assert len(got) == 10
    sub = pair.core.delivery_subscription("amqp-1", 1)
    assert sub is not None
    for dlv in got:  # all ten dispositions leave in one write: one read for the broker
        dlv.update(Delivery.ACCEPTED)
        dlv.settle()
    receiver.flow(10)
    pair.pump()
    assert pair.core.queue_depth(Q) == 0
    assert pair.core.unacked("amqp-1", sub) == list(range(11, 21))  # the first ten settled, ten more sent


def test_an_acceptance_the_core_does_not_know_ends_the_link() -> None:
    pair = InMemoryPair()
    _sender, receiver = pair.filled_queue_consumer(Q, 3)
    receiver.flow(3)
    pair.pump()
    sub = pair.core.delivery_subscription("amqp-1", 1)
    assert sub is not None and pair.core.unacked("amqp-1", sub) == [1, 2, 3]
    # the core forgets delivery 2 behind the listener's back (as if settled elsewhere): the batch of
    # three acceptances then fails in the core and is replayed one by one, ending the link at the second
    pair.hub.apply(pair.core.settle("amqp-1", 2))
    while (current := receiver.current) is not None:
        receiver.recv(current.pending)
        receiver.advance()
        current.update(Delivery.ACCEPTED)
        current.settle()
    pair.pump()
    assert receiver.state & Endpoint.REMOTE_CLOSED
    assert receiver.remote_condition is not None and receiver.remote_condition.name == "amqp:not-allowed"
    # the link's subscription ended with it: the third message, never settled, is back in the queue
    assert not pair.core.has_subscription("amqp-1", sub)
    assert [m.body for m in pair.core.queue_messages(Q)] == [b"m2"]

