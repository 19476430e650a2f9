"""modified{message-annotations} (AMQP 3.4.5) are part of the message: journalled, and shown over STOMP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import pytest

from ackspec.adapters.amqp_proton import ProtonAdapter, ProtonClient
from ackspec.adapters.base import AckMode
from ackspec.adapters.stomp_py import StompPyAdapter
from ackspec.history import Recorder
from ackspec.reference.server import EmbeddedBroker

NOTE = "x-opt-ackspec-note"


@pytest.fixture
def embedded() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(amqp=True) as broker:
        yield broker


def _amqp(broker: EmbeddedBroker, name: str, process: str) -> ProtonClient:
    assert broker.amqp_url is not None
    return cast(ProtonClient, ProtonAdapter(broker.amqp_url, Recorder(name), timeout=3).client(process))


def test_annotations_of_a_durable_message_survive_a_crash_restart(embedded: EmbeddedBroker) -> None:
    q = "/queue/annotated.durable"
    c = _amqp(embedded, "annotations", "c1")
    assert c.send(q, b"keep", seq=1, persistent=True).confirmed
    sub = c.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=1)
    first = c.receive(sub, 3)
    assert first is not None and f"amqp:annotation:{NOTE}" not in first.headers
    c.modify(first, {NOTE: "retried-once"})
    # the broker handles a connection's frames in order and syncs its journal in order: once this later
    # durable send is accepted, the record the modified outcome wrote is on disk too
    assert c.send("/queue/annotated.barrier", b"barrier", seq=2, persistent=True).confirmed
    c.crash()
    embedded.restart(crash=True)  # a power loss: only what an fsync covered survives
    c2 = _amqp(embedded, "annotations", "c2")
    sub2 = c2.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL)
    again = c2.receive(sub2, 3)
    assert again is not None and again.body == b"keep" and again.headers["amqp:first-acquirer"] == "false"
    assert again.headers.get(f"amqp:annotation:{NOTE}") == "retried-once"
    c2.ack(again)
    assert c2.receive(sub2, 0.3) is None
    c2.disconnect()


def test_later_annotations_replace_earlier_ones_and_stomp_sees_them_as_headers(embedded: EmbeddedBroker) -> None:
    q = "/queue/annotated.cross"
    c = _amqp(embedded, "annotations", "c1")
    assert c.send(q, b"m", seq=1).confirmed
    sub = c.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=1)
    for note in ("one", "two"):
        d = c.receive(sub, 3)
        assert d is not None
        c.modify(d, {NOTE: note, f"x-opt-{note}": "set"})
    c.unsubscribe(sub)
    stomp = StompPyAdapter(embedded.stomp_url, Recorder("annotations"), timeout=3).client("s1")
    s_sub = stomp.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL)
    got = stomp.receive(s_sub, 3)
    assert got is not None and got.seq == 1
    assert got.headers.get(f"amqp-annotation.{NOTE}") == "two"
    assert got.headers.get("amqp-annotation.x-opt-one") == "set"
    assert got.headers.get("amqp-annotation.x-opt-two") == "set"
    stomp.ack(got)
    stomp.disconnect()
    c.disconnect()
