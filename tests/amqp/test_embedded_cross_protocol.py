"""The AMQP listener inside the EmbeddedBroker: same core, journal and fsync as STOMP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ackspec.adapters.amqp_proton import ProtonAdapter
from ackspec.adapters.base import AckMode
from ackspec.adapters.stomp_py import StompPyAdapter
from ackspec.history import Recorder
from ackspec.reference.server import EmbeddedBroker


@pytest.fixture
def embedded() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(amqp=True) as broker:
        yield broker


def test_stomp_to_amqp_and_back(embedded: EmbeddedBroker) -> None:
    rec = Recorder("amqp-cross")
    assert embedded.amqp_url is not None
    amqp = ProtonAdapter(embedded.amqp_url, rec, timeout=3).client("amqp")
    stomp = StompPyAdapter(embedded.stomp_url, rec, timeout=3).client("stomp")
    a_sub = amqp.subscribe("/queue/cross.a", ack=AckMode.CLIENT_INDIVIDUAL)
    assert stomp.send("/queue/cross.a", b"from stomp", seq=1, producer="s", persistent=True,
                      headers={"colour": "red"}).confirmed
    d = amqp.receive(a_sub, 3)
    assert d is not None
    assert (d.body, d.seq, d.producer, d.headers["colour"], d.headers["amqp:durable"]) == (
        b"from stomp", 1, "s", "red", "true")
    amqp.unsubscribe(a_sub)  # detached unsettled: back to the queue, a failed delivery (count + 1)
    s_sub = stomp.subscribe("/queue/cross.a", ack=AckMode.CLIENT_INDIVIDUAL)
    back = stomp.receive(s_sub, 3)
    assert back is not None and back.seq == 1 and back.redelivered and back.delivery_count == 2
    stomp.ack(back)
    assert amqp.send("/queue/cross.b", b"from amqp", seq=2, producer="a", persistent=True).confirmed
    s_sub2 = stomp.subscribe("/queue/cross.b", ack=AckMode.CLIENT_INDIVIDUAL)
    got = stomp.receive(s_sub2, 3)
    assert got is not None and (got.body, got.seq, got.producer) == (b"from amqp", 2, "a")
    stomp.ack(got)
    stomp.disconnect()
    amqp.disconnect()


def test_durable_amqp_send_survives_restart(embedded: EmbeddedBroker) -> None:
    rec = Recorder("amqp-cross")
    assert embedded.amqp_url is not None
    c = ProtonAdapter(embedded.amqp_url, rec, timeout=3).client("c1")
    assert c.send("/queue/cross.durable", b"keep", seq=1, persistent=True).confirmed
    c.crash()
    embedded.restart()
    c2 = ProtonAdapter(embedded.amqp_url or "", rec, timeout=3).client("c2")
    sub = c2.subscribe("/queue/cross.durable", ack=AckMode.CLIENT_INDIVIDUAL)
    d = c2.receive(sub, 3)
    assert d is not None and d.body == b"keep"
    c2.ack(d)
