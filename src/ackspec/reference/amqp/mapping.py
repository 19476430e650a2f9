"""How messages and addresses cross between AMQP 1.0 and the protocol-neutral core.

The core stores a message as body bytes, a flat tuple of string headers and a
``persistent`` flag: exactly what a STOMP frame carries. This module is the one
place that converts AMQP messages to and from that shape, so a message sent over
STOMP reads the same over AMQP and back (docs/amqp-mapping.md is the prose
version of these functions).
"""

from __future__ import annotations

from typing import Any

from proton import Message, symbol

from ackspec.reference.amqp.sections import _TO_TAILS, Incoming, Unhandled, read_message, write_bare
from ackspec.reference.broker import Message as CoreMessage

QUEUE = "/queue/"
TOPIC = "/topic/"

# AMQP properties section fields that have a STOMP header of the same meaning
PROPERTY_HEADERS: tuple[tuple[str, str], ...] = (
    ("content_type", "content-type"),
    ("correlation_id", "correlation-id"),
    ("reply_to", "reply-to"),
    ("subject", "subject"),
)
RESERVED_HEADERS = frozenset({"message-id", "destination", "persistent", "redelivered", "delivery-count",
                              "subscription", "ack", "content-length", "receipt", "transaction"})
ANNOTATION_PREFIX = "amqp-annotation."
"""A core header ``amqp-annotation.<key>`` travels over AMQP as message-annotation ``<key>`` (a text value).

The message-annotations a ``modified`` outcome adds (3.4.5) are stored this way, so the core keeps
and journals them with the message like any header; a STOMP consumer sees them as headers."""


def core_destination(address: str | None, capabilities: frozenset[str] = frozenset()) -> str | None:
    """Map an AMQP address to a core destination, or ``None`` if it names none.

    ``/queue/x`` and ``/topic/x`` pass through (as over STOMP); ``queue://x`` and
    ``topic://x`` (ActiveMQ style) map onto them; a bare ``x`` is a queue unless
    the terminus asks for the ``topic`` capability (Artemis style).
    """
    if not address:
        return None
    for prefix in (QUEUE, TOPIC):
        if address.startswith(prefix):
            return address if len(address) > len(prefix) else None
    for scheme, prefix in (("queue://", QUEUE), ("topic://", TOPIC)):
        if address.startswith(scheme):
            name = address[len(scheme):]
            return prefix + name if name else None
    if "topic" in capabilities:
        return TOPIC + address
    return QUEUE + address


def to_core(msg: Message) -> tuple[bytes, tuple[tuple[str, str], ...], bool]:
    """An AMQP message as (body, headers, persistent) for :meth:`BrokerCore.publish`."""
    headers: list[tuple[str, str]] = []
    for attr, name in PROPERTY_HEADERS:
        value = getattr(msg, attr)
        if value is not None and not (attr == "content_type" and str(value) in ("", "None")):
            # proton reports an absent content-type as the symbol 'None'
            headers.append((name, str(value)))
    props: dict[Any, Any] = dict(msg.properties or {})
    for key, value in props.items():
        name = str(key)
        if name in RESERVED_HEADERS:
            continue
        headers.append((name, _text(value)))
    return body_bytes(msg.body), tuple(headers), bool(msg.durable)


def read_incoming(payload: bytes) -> Incoming:
    """An incoming transfer's message as the core needs it: the hand-written reader of :mod:`.sections`,
    or proton's ``Message`` + :func:`to_core` for what that reader leaves to proton.

    Raises whatever proton raises for an undecodable message."""
    try:
        return read_message(payload)
    except Unhandled:
        pass
    msg = Message()
    msg.decode(payload)
    body, headers, persistent = to_core(msg)
    return Incoming(body, headers, persistent, msg.address)


def annotation_headers(annotations: dict[Any, Any] | None) -> tuple[tuple[str, str], ...]:
    """message-annotations (of a ``modified`` outcome) as core headers (:data:`ANNOTATION_PREFIX`)."""
    return tuple((f"{ANNOTATION_PREFIX}{key}", _text(value)) for key, value in (annotations or {}).items())


def body_bytes(body: Any) -> bytes:
    """Data sections are the bytes; an amqp-value string is its UTF-8; anything else its text."""
    if body is None:
        return b""
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    return str(body).encode("utf-8")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes | bytearray | memoryview):  # proton decodes binary as a memoryview
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, int):  # proton's int32/uint/ulong... print as 'int32(5)': keep the number only
        return str(int(value))
    if isinstance(value, float):  # float32 likewise
        return str(float(value))
    return str(value)


def from_core(message: CoreMessage, *, delivery_count: int, redelivered: bool) -> Message:
    """A core message as the AMQP message a receiver gets.

    ``delivery_count`` is the core's count of earlier failed deliveries, which is
    exactly AMQP's header ``delivery-count``; ``first-acquirer`` is false on any
    redelivery. The body always travels as one Data section.
    """
    msg = Message()
    msg.inferred = True
    msg.body = message.body
    msg.durable = message.persistent
    msg.delivery_count = delivery_count
    msg.first_acquirer = not redelivered
    msg.id = message.message_id
    msg.address = message.destination
    props: dict[str, Any] = {}
    annotations: dict[str | int, Any] = {}
    for name, value in message.headers:
        attr = _BY_HEADER.get(name)
        if attr is not None:
            setattr(msg, attr, value)
        elif name.startswith(ANNOTATION_PREFIX):
            annotations[symbol(name[len(ANNOTATION_PREFIX):])] = value
        else:
            props[name] = value
    msg.properties = props  # type: ignore[assignment]  # proton's stub says None
    if annotations:
        msg.annotations = annotations
    return msg


_BY_HEADER = {name: attr for attr, name in PROPERTY_HEADERS}


_EMPTY_HEADER = b"\x00\x53\x70\x45"  # described header section, empty list


def _bare(message: CoreMessage) -> bytes:
    """The message's sections after the header: written by hand (:func:`.sections.write_bare`, under a
    microsecond for a small message, so not cached), or by proton when it carries message-annotations."""
    mapped: dict[str, str] = {}
    props: dict[str, str] = {}
    for name, value in message.headers:
        if name in _BY_HEADER:
            mapped[name] = value
        elif name.startswith(ANNOTATION_PREFIX):
            break
        else:
            props[name] = value
    else:
        return write_bare(message.message_id, message.destination, message.body, mapped, props.items())
    msg = from_core(message, delivery_count=0, redelivered=True)
    msg.durable = False
    encoded = bytes(msg.encode())
    return encoded[len(_EMPTY_HEADER):] if encoded.startswith(_EMPTY_HEADER) else encoded


def _uint(value: int) -> bytes:
    if value == 0:
        return b"\x43"
    if value < 256:
        return b"\x52" + bytes([value])
    return b"\x70" + value.to_bytes(4, "big")


def encode_delivery(message: CoreMessage, *, delivery_count: int, redelivered: bool) -> bytes:
    """Exactly what ``from_core(...).encode()`` carries, without building a proton Message per delivery:
    a header section (durable, first-acquirer, delivery-count) + the rest, all written by hand."""
    if not delivery_count and not redelivered:  # a first delivery: one of two headers
        header = _FIRST_DURABLE if message.persistent else _FIRST
        if not message.headers:  # the usual message: no property to sort out
            tail = _TO_TAILS.get(message.destination)
            data = message.body
            if tail is not None and len(data) < 256:  # write_bare's usual case, inline (one call less)
                mid = message.message_id.encode("utf-8")
                size = len(mid) + tail[0]
                if size < 256:
                    return b"%b\x00\x53\x73\xc0%c\x03\xa1%c%b%b\x00\x53\x75\xa0%c%b" % (
                        header, size, len(mid), mid, tail[1], len(data), data)
            return header + write_bare(message.message_id, message.destination, data, _NO_MAPPED, ())
        return header + _bare(message)
    key = (message.persistent, redelivered, delivery_count)
    cached = _HEADERS.get(key)
    if cached is not None:
        header = cached
    else:
        fields = (b"\x41" if message.persistent else b"\x42") + b"\x40\x40" + (b"\x42" if redelivered else b"\x41") \
            + _uint(delivery_count)
        header = b"\x00\x53\x70\xc0" + bytes([len(fields) + 1, 5]) + fields
        if delivery_count < 16:  # the usual counts; a few dozen entries at most
            _HEADERS[key] = header
    if not message.headers:  # the usual message: no property to sort out (one call less per delivery)
        return header + write_bare(message.message_id, message.destination, message.body, _NO_MAPPED, ())
    return header + _bare(message)


_NO_MAPPED: dict[str, str] = {}
_FIRST = b"\x00\x53\x70\xc0\x06\x05\x42\x40\x40\x41\x43"
"""The header section of a first delivery of a non-durable message (first-acquirer, delivery-count 0)."""
_FIRST_DURABLE = b"\x00\x53\x70\xc0\x06\x05\x41\x40\x40\x41\x43"


_HEADERS: dict[tuple[bool, bool, int], bytes] = {}
"""Header sections by (durable, redelivered, delivery-count)."""
