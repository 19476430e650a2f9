"""The hand-written message sections (reference/amqp/sections.py) say exactly what proton says.

Reading: for generated messages encoded by proton, :func:`read_message` yields what
``to_core(Message.decode(...))`` yields, or declines (``Unhandled``); for damaged bytes it never
accepts what proton rejects. Writing: :func:`write_bare` is byte-identical to proton's encoding of
the message ``from_core`` builds.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import (
    Message,
    byte,
    char,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)

from ackspec.reference.amqp import mapping
from ackspec.reference.amqp.sections import Unhandled, read_message
from ackspec.reference.broker.model import Message as CoreMessage

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

text = st.text(max_size=40) | st.text(min_size=250, max_size=300)
ascii_text = st.text(st.characters(max_codepoint=127), max_size=40)  # symbols are ASCII
names = st.sampled_from(["a", "colour", "content-type", "correlation-id", "reply-to", "subject", "message-id",
                         "persistent", "x" * 260, "é"])
values = st.one_of(
    text, st.booleans(), st.none(), st.binary(max_size=20),
    st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**64 - 1).map(ulong),
    st.integers(0, 255).map(ubyte), st.integers(-128, 127).map(byte), st.integers(0, 65535).map(ushort),
    st.integers(-32768, 32767).map(short), st.integers(0, 2**32 - 1).map(uint),
    st.integers(-(2**31), 2**31 - 1).map(int32), st.integers(0, 2**40).map(timestamp),
    st.floats(width=32, allow_nan=False).map(float32), st.floats(allow_nan=False),
    st.uuids(), ascii_text.map(symbol), st.just(char("c")), st.just([1, "two"]),
)


def _proton_view(encoded: bytes) -> tuple[bytes, tuple[tuple[str, str], ...], bool, str | None]:
    msg = Message()
    msg.decode(encoded)
    body, headers, persistent = mapping.to_core(msg)
    return body, headers, persistent, msg.address


def _fast_view(encoded: bytes) -> tuple[bytes, tuple[tuple[str, str], ...], bool, str | None]:
    got = read_message(encoded)
    return got.body, got.headers, got.durable, got.to


@st.composite
def proton_messages(draw: st.DrawFn) -> bytes:
    msg = Message()
    kind = draw(st.sampled_from(["data", "value-bytes", "value-str", "none", "value-list"]))
    body: Any = {"data": draw(st.binary(max_size=300)), "value-bytes": draw(st.binary(max_size=10)),
                 "value-str": draw(text), "none": None, "value-list": [1, 2]}[kind]
    msg.body = body
    msg.inferred = kind == "data"
    msg.durable = draw(st.booleans())
    if draw(st.booleans()):
        msg.priority = draw(st.integers(0, 9))
        msg.ttl = draw(st.integers(0, 10_000)) / 1000
        msg.first_acquirer = draw(st.booleans())
        msg.delivery_count = draw(st.integers(0, 300))
    for attr in ("address", "subject", "reply_to", "content_type", "content_encoding", "group_id"):
        if draw(st.booleans()):
            setattr(msg, attr, draw(ascii_text if attr.startswith("content") else text))
    if draw(st.booleans()):
        msg.correlation_id = draw(st.one_of(text, st.integers(0, 2**64 - 1).map(ulong), st.uuids()))
    if draw(st.booleans()):
        msg.id = draw(st.one_of(text, st.integers(0, 2**64 - 1).map(ulong), st.uuids()))
    if draw(st.booleans()):
        msg.user_id = draw(st.binary(max_size=8))
    if draw(st.booleans()):
        msg.properties = draw(st.dictionaries(names, values, max_size=6))  # type: ignore[assignment]
    if draw(st.booleans()):
        msg.annotations = {symbol("x-opt-" + k): v for k, v in draw(st.dictionaries(ascii_text, values,
                                                                                    max_size=3)).items()}
    return bytes(msg.encode())


@SETTINGS
@given(proton_messages())
def test_reading_agrees_with_proton(encoded: bytes) -> None:
    expected = _proton_view(encoded)
    try:
        got = _fast_view(encoded)
    except Unhandled:
        return  # proton decodes it (read_incoming falls back)
    assert got == expected
    incoming = mapping.read_incoming(encoded)
    assert (incoming.body, incoming.headers, incoming.durable, incoming.to) == expected


@SETTINGS
@given(proton_messages(), st.data())
def test_damaged_bytes_are_never_read_differently(encoded: bytes, data: st.DataObject) -> None:
    damage = data.draw(st.sampled_from(["cut", "flip"]))
    if damage == "cut":
        damaged = encoded[:data.draw(st.integers(0, max(len(encoded) - 1, 0)))]
    else:
        at = data.draw(st.integers(0, len(encoded) - 1))
        damaged = encoded[:at] + bytes([encoded[at] ^ data.draw(st.integers(1, 255))]) + encoded[at + 1:]
    try:
        expected = _proton_view(damaged)
    except Exception:
        with pytest.raises(Unhandled):
            read_message(damaged)
        with pytest.raises(Exception):  # noqa: B017 - whatever proton raises, read_incoming raises too
            mapping.read_incoming(damaged)
        return
    try:
        got = _fast_view(damaged)
    except Unhandled:
        return
    assert got == expected


def test_common_messages_take_the_short_path() -> None:
    msg = Message(body=b"x" * 100, inferred=True, durable=True, address="/queue/a", subject="s",
                  reply_to="/queue/r", correlation_id="c-1", content_type="text/plain",
                  properties={"colour": "blue", "size": "5"})
    got = read_message(bytes(msg.encode()))
    assert got.body == b"x" * 100 and got.durable and got.to == "/queue/a" and got.typed is None
    assert got.headers == (("content-type", "text/plain"), ("correlation-id", "c-1"), ("reply-to", "/queue/r"),
                           ("subject", "s"), ("colour", "blue"), ("size", "5"))


@pytest.mark.parametrize("extra", [
    {"properties": {"n": int32(5)}}, {"properties": {"ok": True}}, {"properties": {"b": b"bytes"}},
    {"id": "ID:1"}, {"priority": 7}, {"ttl": 5.0}, {"creation_time": 1.5},
    {"annotations": {symbol("x-opt-jms-msg-type"): byte(5)}}, {"body": "text", "inferred": False},
    {"body": {"k": "v"}, "inferred": False}, {"body": [1, 2], "inferred": True},
])
def test_what_strings_cannot_hold_is_kept_typed(extra: dict[str, Any]) -> None:
    """The short path declines whatever a core message's strings would lose; the fallback keeps it typed,
    with its sections as sent."""
    fields: dict[str, Any] = {"body": b"x", "inferred": True, "address": "/queue/a", **extra}
    encoded = bytes(Message(**fields).encode())
    with pytest.raises(Unhandled):
        read_message(encoded)
    incoming = mapping.read_incoming(encoded)
    assert incoming.typed is not None
    again = Message()
    again.decode(incoming.typed.amqp)
    sent = Message()
    sent.decode(encoded)
    assert (again.body, again.properties, again.id, again.annotations, again.creation_time) == (
        sent.body, sent.properties, sent.id, sent.annotations, sent.creation_time)


def test_binary_property_reads_as_its_text() -> None:
    """proton decodes a binary property as a memoryview: STOMP gets its UTF-8 text, not the view's repr."""
    encoded = bytes(Message(body=b"x", properties={"b": b"bytes\xff"}).encode())
    assert _proton_view(encoded)[1] == (("b", "bytes\ufffd"),)
    assert mapping.read_incoming(encoded).headers == (("b", "bytes\ufffd"),)


# proton sets message-id, to, subject... through C strings, which end at a NUL: the hand-written
# encoder keeps such characters, so they are left out of this comparison
no_nul = st.characters(exclude_categories=["Cs"], exclude_characters="\x00")
core_headers = st.lists(st.tuples(names | st.text(no_nul, min_size=1, max_size=10),
                                  st.text(no_nul, max_size=40) | st.text(no_nul, min_size=250, max_size=300)),
                        max_size=6)


@SETTINGS
@given(st.binary(max_size=400), core_headers, st.text(no_nul, min_size=1, max_size=30))
def test_writing_is_what_proton_writes(body: bytes, headers: list[tuple[str, str]], destination: str) -> None:
    message = CoreMessage(f"id-{uuid.uuid4()}", destination, body, tuple(headers), False, "c1", 1)
    slow = mapping.from_core(message, delivery_count=0, redelivered=True)
    slow.durable = False
    expected = bytes(slow.encode())
    assert expected.startswith(mapping._EMPTY_HEADER)
    assert mapping._bare(message) == expected[len(mapping._EMPTY_HEADER):]


def test_annotation_headers_travel_as_message_annotations() -> None:
    message = CoreMessage("id-ann", "/queue/a", b"b", (("colour", "red"), ("amqp-annotation.x-opt-note", "again")),
                          True, "c1", 1)
    msg = Message()
    msg.decode(mapping.encode_delivery(message, delivery_count=1, redelivered=True))
    assert msg.annotations == {symbol("x-opt-note"): "again"}
    assert msg.properties == {"colour": "red"}
    assert mapping.annotation_headers({symbol("x-opt-note"): "again", symbol("x-opt-n"): ulong(3)}) == (
        ("amqp-annotation.x-opt-note", "again"), ("amqp-annotation.x-opt-n", "3"))


@pytest.mark.parametrize("durable", [None, False, True])
@pytest.mark.parametrize("size", [0, 1, 100, 255, 256])
@pytest.mark.parametrize("inferred", [True, False])
def test_plain_message_shortcut_reads_what_proton_reads(durable: bool | None, size: int, inferred: bool) -> None:
    """The plainest messages (empty or durable-only header, no properties, a binary body as a data or
    an amqp-value section) take read_message's two-slice shortcut; it must agree with proton, and a
    byte more or less after the body must not be taken for a plain message."""
    msg = Message(body=bytes(range(256))[:size])
    msg.inferred = inferred
    if durable is not None:
        msg.durable = durable
    encoded = bytes(msg.encode())
    assert _fast_view(encoded) == _proton_view(encoded)
    for damaged in (encoded + b"\x40", encoded[:-1]):
        try:
            fast = _fast_view(damaged)
        except Unhandled:
            continue
        assert fast == _proton_view(damaged)


@pytest.mark.parametrize("address_size", [1, 40, 230, 245, 249, 250, 255, 256, 300])
@pytest.mark.parametrize("body_size", [0, 255, 256])
@pytest.mark.parametrize("persistent", [False, True])
def test_plain_first_delivery_is_what_proton_writes(address_size: int, body_size: int, persistent: bool) -> None:
    """A headerless message's first delivery takes the shortest path (cached header and ``to``); around
    the sizes where one-byte lengths stop fitting it must still be proton's encoding."""
    destination = "/queue/" + "q" * address_size
    message = CoreMessage("id-plain-1", destination, b"b" * body_size, (), persistent, "c1", 1)
    expected = bytes(mapping.from_core(message, delivery_count=0, redelivered=False).encode())
    for _ in range(2):  # the second time with the cached `to`
        ours = mapping.encode_delivery(message, delivery_count=0, redelivered=False)
        # the sections after the header are proton's bytes (proton leaves a zero delivery-count out of
        # the header, we write it: both decode alike)
        assert ours[ours.index(b"\x00\x53\x73"):] == expected[expected.index(b"\x00\x53\x73"):]
        got = Message()
        got.decode(ours)
        assert (got.durable, got.first_acquirer, got.delivery_count, got.id, got.address, got.body) == (
            persistent, True, 0, "id-plain-1", destination, b"b" * body_size)
