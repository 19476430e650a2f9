"""Closing a session of the reference client over AMQP 1.0 returns only once the broker has taken back what
the session's consumers held: a detach answered, not merely written. A test that reads the queue right after
``close()`` must find every unacknowledged message there, not on its way back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ackspec.reference.client import CLIENT_ACKNOWLEDGE, ConnectionFactory, Message
from ackspec.reference.server import EmbeddedBroker

QUEUE = "/queue/close.held"
COUNT = 5
ROUNDS = 10  # before close waited for the detach, every round of 10 failed (idle machine, 2026-11-27)


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(persistent=False, amqp=True) as b:
        yield b


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_a_closed_session_s_unacknowledged_messages_are_back_in_the_queue_when_close_returns(
        broker: EmbeddedBroker, round_: int) -> None:
    assert broker.amqp_url is not None
    conn = ConnectionFactory(broker.amqp_url).create_connection()
    try:
        session = conn.create_session(False, CLIENT_ACKNOWLEDGE)
        producer = session.create_producer(QUEUE)
        for i in range(COUNT):
            producer.send(Message(b"%d" % i))
        consumer = session.create_consumer(QUEUE)
        conn.start()
        assert consumer.receive(5.0) is not None  # delivered, not acknowledged; the others prefetched
        session.close()
        assert broker.call(lambda core: core.queue_depth(QUEUE)) == COUNT
    finally:
        conn.close()
    drained = ConnectionFactory(broker.amqp_url).create_connection()  # leave the queue empty for the next round
    try:
        session = drained.create_session(False, CLIENT_ACKNOWLEDGE)
        consumer = session.create_consumer(QUEUE)
        drained.start()
        got = [consumer.receive(5.0) for _ in range(COUNT)]
        assert all(m is not None for m in got)
        got[-1].acknowledge()  # type: ignore[union-attr]
    finally:
        drained.close()
