"""STOMP 1.0 has no header escaping: a value a 1.0 receiver cannot represent is dropped for it, so a 1.2 (or
AMQP) producer cannot forge headers or whole frames in a 1.0 consumer's stream (issue 20)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ackspec.adapters.amqp_proton import ProtonAdapter
from ackspec.history import Recorder
from ackspec.reference.server import EmbeddedBroker
from ackspec.reference.stomp.codec import FrameParser, encode
from ackspec.reference.stomp.frames import Frame

from .raw_stomp import Raw


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(persistent=False, amqp=True) as b:
        yield b


def _consumer_10(broker: EmbeddedBroker, destination: str) -> Raw:
    c = Raw(broker)
    c.parser = FrameParser(version="1.0")
    c.send("CONNECT", b"", **{"accept-version": "1.0"})
    assert c.recv().command == "CONNECTED"
    c.send("SUBSCRIBE", destination=destination, id="s", receipt="sub")
    assert c.recv().get("receipt-id") == "sub"
    return c


FORGED = "x\n\nMESSAGE\ndestination:/queue/forged\nmessage-id:forged\n\nforged body\x00"


def test_a_12_producer_cannot_forge_a_frame_for_a_10_consumer(broker: EmbeddedBroker) -> None:
    c = _consumer_10(broker, "/queue/inj10")
    p = Raw(broker).connect()
    p.send("SEND", b"real", destination="/queue/inj10", receipt="r", **{"x-evil": FORGED, "x-fine": "a:b"})
    assert p.recv().get("receipt-id") == "r"
    p.send("SEND", b"after", destination="/queue/inj10", receipt="r2")
    assert p.recv().get("receipt-id") == "r2"
    first, second = c.recv(), c.recv()
    assert (first.command, first.body, first.get("destination")) == ("MESSAGE", b"real", "/queue/inj10")
    assert first.get("x-evil") is None and first.get("x-fine") == "a:b"
    assert (second.command, second.body) == ("MESSAGE", b"after")  # nothing forged came between them


header_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(header_text, header_text), min_size=1, max_size=4))
def test_10_consumer_sees_exactly_one_message_per_send_whatever_the_headers(
        broker: EmbeddedBroker, headers: list[tuple[str, str]]) -> None:
    c = _consumer_10(broker, "/queue/inj10p")
    p = Raw(broker).connect()
    named = [(n, v) for n, v in headers if n.lower() not in {"content-length", "destination", "receipt",
                                                              "transaction", "content-type"}]
    p.sock.sendall(_send_12("/queue/inj10p", named))
    assert p.recv().get("receipt-id") == "r"
    got = c.recv()
    assert got.command == "MESSAGE" and got.body == b"body" and got.get("destination") == "/queue/inj10p"
    for name, value in got.headers:
        assert "\n" not in name + value
    c.send("SEND", b"sentinel", destination="/queue/inj10p")
    assert c.recv().body == b"sentinel"
    c.sock.close()
    p.sock.close()


def _send_12(destination: str, headers: list[tuple[str, str]]) -> bytes:
    return encode(Frame("SEND", (("destination", destination), ("receipt", "r"), *headers), b"body"), "1.2")


@pytest.mark.parametrize("version", ["1.0", "1.2"])
def test_amqp_properties_stomp_cannot_carry_are_dropped(broker: EmbeddedBroker, version: str) -> None:
    """An AMQP application property with an empty name (or, for 1.0, a newline) reaches STOMP consumers
    without it, and their parser keeps working."""
    destination = f"/queue/amqp-props-{version}"
    if version == "1.0":
        c = _consumer_10(broker, destination)
    else:
        c = Raw(broker).connect()
        c.send("SUBSCRIBE", destination=destination, id="s", receipt="sub")
        assert c.recv().get("receipt-id") == "sub"
    assert broker.amqp_url is not None
    amqp = ProtonAdapter(broker.amqp_url, Recorder("props"), timeout=3).client("amqp")
    try:
        assert amqp.send(destination, b"from amqp", seq=1, producer="a",
                         headers={"": "empty", "x-evil": FORGED, "kept": "yes"}).confirmed
    finally:
        amqp.disconnect()
    got = c.recv()
    assert got.command == "MESSAGE" and got.body == b"from amqp" and got.get("kept") == "yes"
    assert all(name for name, _ in got.headers)
    assert got.get("x-evil") == (None if version == "1.0" else FORGED)
    c.send("SEND", b"sentinel", destination=destination)
    assert c.recv().body == b"sentinel"
