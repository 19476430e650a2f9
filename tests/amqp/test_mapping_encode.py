"""The delivery encoder's shortcut (hand-written header + cached sections) says what from_core() says."""

from __future__ import annotations

import pytest
from proton import Message

from ackspec.reference.amqp.mapping import encode_delivery, from_core
from ackspec.reference.broker.model import Message as CoreMessage


def _decoded(data: bytes) -> Message:
    msg = Message()
    msg.decode(data)
    return msg


@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("redelivered", [False, True])
@pytest.mark.parametrize("count", [0, 1, 255, 256, 70000])
def test_encode_delivery_matches_from_core(persistent: bool, redelivered: bool, count: int) -> None:
    core = CoreMessage(message_id=f"m-{persistent}-{redelivered}-{count}", destination="/queue/x",
                       body=b"bo\x00dy", headers=(("ackspec-seq", "7"), ("content-type", "text/plain")),
                       persistent=persistent, producer="c1", seq=1)
    fast = _decoded(encode_delivery(core, delivery_count=count, redelivered=redelivered))
    slow = _decoded(bytes(from_core(core, delivery_count=count, redelivered=redelivered).encode()))
    for attr in ("durable", "first_acquirer", "delivery_count", "id", "address", "content_type", "body",
                 "properties"):
        assert getattr(fast, attr) == getattr(slow, attr), attr
    assert fast.delivery_count == count and fast.durable == persistent and fast.first_acquirer == (not redelivered)
    # a second delivery of the same core message gets its own header
    again = encode_delivery(core, delivery_count=count + 1, redelivered=True)
    assert _decoded(again).delivery_count == count + 1
