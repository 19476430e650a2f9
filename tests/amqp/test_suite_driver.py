"""What the generic suite needs from the AMQP path: large multi-frame transfers, receive after
unsubscribe, CLIENT-mode NACK cumulative, and the drain verb."""

from __future__ import annotations

import pytest
from tests.amqp.conftest import RunningBroker

from ackspec.adapters.amqp_proton import ProtonAdapter, ProtonClient
from ackspec.adapters.base import AckMode, NackOutcome

Q = "/queue/amqp.suite"


@pytest.mark.parametrize("size", [20_000, 102_400, 300_000])
def test_large_transfers_round_trip(adapter: ProtonAdapter, size: int) -> None:
    """Bodies larger than proton's input buffer (regression: the listener pushed a whole read at once)."""
    c = adapter.client("c1")
    sub = c.subscribe(Q)
    body = bytes(range(256)) * (size // 256) + b"\x00" * (size % 256)
    assert c.send(Q, body, seq=1).confirmed
    d = c.receive(sub, 3)
    assert d is not None and d.body == body
    c.disconnect()


def test_receive_after_unsubscribe_returns_what_was_buffered(adapter: ProtonAdapter) -> None:
    c = adapter.client("c1")
    sub = c.subscribe(Q, ack=AckMode.AUTO)
    for i in range(3):
        c.send(Q, b"x", seq=i)
    first = c.receive(sub, 3)
    assert first is not None
    assert isinstance(c, ProtonClient)
    c.round_trip(Q)  # a barrier: the broker's transfers sent before its attach answer are buffered now
    c.unsubscribe(sub)
    rest = []
    while (d := c.receive(sub, 0)) is not None:
        rest.append(d.seq)
    assert [first.seq, *rest] == [0, 1, 2]


def test_client_mode_nack_is_cumulative(broker: RunningBroker, adapter: ProtonAdapter) -> None:
    c = adapter.client("c1")
    sub = c.subscribe(Q, ack=AckMode.CLIENT, prefetch=10)
    for i in range(3):
        c.send(Q, b"x", seq=i)
    got = [c.receive(sub, 3) for _ in range(3)]
    assert all(d is not None for d in got)
    c.nack(got[1], outcome=NackOutcome.RELEASED)  # seqs 0 and 1 go back; seq 2 stays ours
    again = sorted(d.seq for d in (c.receive(sub, 3), c.receive(sub, 3)) if d is not None and d.seq is not None)
    assert again == [0, 1]
    c.disconnect()


def test_drain_with_nothing_available_consumes_the_credit(adapter: ProtonAdapter) -> None:
    c = adapter.client("c1")
    assert isinstance(c, ProtonClient)
    sub = c.subscribe("/queue/amqp.suite.empty", ack=AckMode.CLIENT_INDIVIDUAL, prefetch=5)
    result = c.drain(sub, 3)
    assert result.delivered == []
    assert result.credit_before == 5 and result.credit_after == 0 and result.echoed
    c.disconnect()


def test_drain_delivers_what_is_there_then_stops(adapter: ProtonAdapter) -> None:
    c = adapter.client("c1")
    assert isinstance(c, ProtonClient)
    for i in range(2):
        c.send(Q + ".d", b"x", seq=i)
    sub = c.subscribe(Q + ".d", ack=AckMode.CLIENT_INDIVIDUAL, prefetch=0, headers={"amqp-credit": "manual"})
    result = c.drain(sub, 3, credit=5)
    assert [d.seq for d in result.delivered] == [0, 1]
    assert result.credit_after == 0 and result.echoed
    c.disconnect()
