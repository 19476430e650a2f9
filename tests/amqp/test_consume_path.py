"""The consume path in the shape of the bench's consume row: one connection with a link the client
sends on and one it receives on (dispositions told by the receiving link's own unsettled ids, the
common acceptance read inline), credit grants written by the listener's own delivery loop.

Sans-IO, as tests/amqp/test_batched_reads.py: a proton client engine and :class:`AmqpConnection`
exchange bytes in memory, every client write is one broker read. What is checked is what a client
sees and what the core keeps: each outcome applied, rejected messages in the dead-letter queue in the
order of the client's dispositions (also when that is not the order of delivery), released ones back
in the queue, and the link's credit as the core counts it after a large grant and a drain.
"""

from __future__ import annotations

from typing import Any, cast

import pytest
from proton import Delivery, Link, Message
from tests.amqp.inmemory import InMemoryPair

from ackspec.reference.amqp.credit import SEND_CHUNK

Q = "/queue/consume-path"
DLQ = "/queue/DLQ"


def _received(receiver: Link) -> list[tuple[Any, bytes]]:
    got: list[tuple[Any, bytes]] = []
    while (current := receiver.current) is not None:
        data = receiver.recv(current.pending)
        receiver.advance()
        msg = Message()
        msg.decode(data)
        got.append((current, bytes(cast(bytes, msg.body))))
    return got


@pytest.mark.parametrize("order", ["delivered", "reversed"])
def test_mixed_outcomes_of_one_read_are_applied_in_the_clients_order(order: str) -> None:
    pair = InMemoryPair()
    _sender, receiver = pair.filled_queue_consumer(Q, 8)
    assert pair.broker.links.single_out is not None and pair.broker.links.walked is None
    receiver.flow(8)
    pair.pump()
    got = _received(receiver)
    assert [body for _d, body in got] == [b"m%d" % i for i in range(8)]
    sub = pair.core.delivery_subscription("amqp-1", 1)
    assert sub is not None and len(pair.core.unacked("amqp-1", sub)) == 8
    outcomes = [Delivery.ACCEPTED, Delivery.REJECTED, Delivery.ACCEPTED, Delivery.RELEASED,
                Delivery.REJECTED, Delivery.ACCEPTED, Delivery.REJECTED, Delivery.ACCEPTED]
    plan = list(zip(got, outcomes, strict=True))
    if order == "reversed":
        plan.reverse()
    for (dlv, _body), outcome in plan:  # all dispositions leave in one write: one read for the broker
        dlv.update(outcome)
        dlv.settle()
    pair.pump()
    rejected = [body for (_d, body), outcome in plan if outcome == Delivery.REJECTED]
    assert [m.body for m in pair.core.queue_messages(DLQ)] == rejected
    assert [m.body for m in pair.core.queue_messages(Q)] == [b"m3"]  # the released one, back
    assert pair.core.unacked("amqp-1", sub) == []


def test_an_acceptance_ahead_of_an_older_delivery_applies_alone() -> None:
    pair = InMemoryPair()
    _sender, receiver = pair.filled_queue_consumer(Q, 2)
    receiver.flow(2)
    pair.pump()
    (first, _), (second, _) = _received(receiver)
    sub = pair.core.delivery_subscription("amqp-1", 1)
    assert sub is not None
    second.update(Delivery.ACCEPTED)  # the newer one first: the older stays unsettled
    second.settle()
    pair.pump()
    assert pair.core.unacked("amqp-1", sub) == [1]
    first.update(Delivery.REJECTED)
    first.settle()
    pair.pump()
    assert pair.core.unacked("amqp-1", sub) == []
    assert [m.body for m in pair.core.queue_messages(DLQ)] == [b"m0"]


def test_a_large_grant_is_written_in_chunks_and_a_drain_leaves_no_credit() -> None:
    total = 3 * SEND_CHUNK + 5
    pair = InMemoryPair(flush_now=True)
    _sender, receiver = pair.filled_queue_consumer(Q, total)
    receiver.flow(total + 10)
    pair.pump()
    assert pair.flushes >= 3  # each full chunk written before the next is made
    got = _received(receiver)
    assert [body for _d, body in got] == [b"m%d" % i for i in range(total)]
    out = pair.broker.links.single_out
    assert out is not None and out.core_credit == 10 and len(out.ids) == total
    for dlv, _body in got:
        dlv.update(Delivery.ACCEPTED)
        dlv.settle()
    receiver.drain(0)
    pair.pump()
    assert out.core_credit == 0 and not out.ids
    assert receiver.credit == 0
    assert pair.core.queue_depth(Q) == 0 and pair.core.queue_depth(DLQ) == 0
