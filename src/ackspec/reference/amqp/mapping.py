"""How messages and addresses cross between AMQP 1.0 and the protocol-neutral core.

The core stores a message as body bytes, a flat tuple of string headers and a
``persistent`` flag: exactly what a STOMP frame carries. This module is the one
place that converts AMQP messages to and from that shape, so a message sent over
STOMP reads the same over AMQP and back (docs/amqp-mapping.md is the prose
version of these functions).

An AMQP message that carries more than that shape holds (typed properties, an amqp-value or
amqp-sequence body, message annotations, a message id, priority, ttl, times: anything the plain reader
of :mod:`.sections` declines) also keeps its typed side (:class:`~ackspec.reference.broker.typed.Typed`):
its sections as sent, delivered unchanged to AMQP receivers, and the fields the core decides on.
"""

from __future__ import annotations

import json
import time
from typing import Any

from proton import Message, symbol

from ackspec.reference.amqp.sections import _TO_TAILS, Incoming, Unhandled, read_message, write_bare
from ackspec.reference.broker import Message as CoreMessage
from ackspec.reference.broker.typed import PropertyValue, Typed

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
    """An AMQP message as (body, headers, persistent) for :meth:`BrokerCore.publish`: what a STOMP
    consumer gets of it (typed values as text)."""
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
    typed = typed_of(msg, now_ms=int(time.time() * 1000))
    return Incoming(body, (*headers, *_jms_headers(typed)), persistent, msg.address, typed)


def typed_of(msg: Message, *, now_ms: int) -> Typed:
    """The typed side of a decoded message; a ttl without an absolute expiry expires ``ttl`` after
    ``now_ms`` (its arrival). Leaves ``msg`` with its header fields cleared."""
    ttl = round((msg.ttl or 0) * 1000)
    expiry = round((msg.expiry_time or 0) * 1000) or (now_ms + ttl if ttl else 0)
    sent: dict[Any, Any] = dict(msg.properties or {})
    properties = tuple((str(k), _typed_value(v)) for k, v in sent.items())
    priority = int(msg.priority) if msg.priority is not None else 4
    created = round((msg.creation_time or 0) * 1000)
    sender_id = "" if msg.id is None else str(msg.id)
    msg.durable = False
    msg.priority = 4
    msg.ttl = 0
    msg.first_acquirer = False
    msg.delivery_count = 0
    msg.instructions = None  # delivery-annotations are for one hop only (3.2.2)
    encoded = bytes(msg.encode())
    bare = encoded[len(_EMPTY_HEADER):] if encoded.startswith(_EMPTY_HEADER) else encoded
    return Typed(bare, properties, priority, ttl, expiry, created, sender_id)


def _typed_value(value: Any) -> PropertyValue:
    """A property value as a JMS selector types it (every integer a long, floats doubles); NULL for
    what a JMS property cannot be (binary, lists, maps, uuids...)."""
    if isinstance(value, bool | str):
        return str(value) if isinstance(value, str) else value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return None


def _jms_headers(typed: Typed) -> tuple[tuple[str, str], ...]:
    """The JMS header fields a typed message carries, as the STOMP headers ActiveMQ gives them."""
    out: list[tuple[str, str]] = []
    if typed.priority != 4:
        out.append(("priority", str(typed.priority)))
    if typed.expiry:
        out.append(("expires", str(typed.expiry)))
    if typed.created:
        out.append(("timestamp", str(typed.created)))
    return tuple(out)


def annotation_headers(annotations: dict[Any, Any] | None) -> tuple[tuple[str, str], ...]:
    """message-annotations (of a ``modified`` outcome) as core headers (:data:`ANNOTATION_PREFIX`)."""
    return tuple((f"{ANNOTATION_PREFIX}{key}", _text(value)) for key, value in (annotations or {}).items())


def body_bytes(body: Any) -> bytes:
    """The body as STOMP carries it: data sections are the bytes; an amqp-value string is its UTF-8;
    a map or list (a JMS MapMessage or StreamMessage) its JSON text; anything else its text."""
    if body is None:
        return b""
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, dict | list | tuple):
        return json.dumps(_plain_json(body), separators=(",", ":")).encode("utf-8")
    return str(body).encode("utf-8")


def _plain_json(value: Any) -> Any:
    """A decoded AMQP value as JSON can hold it (proton's typed numbers as numbers, binary as text)."""
    if isinstance(value, dict):
        return {str(k): _plain_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_json(v) for v in value]
    if isinstance(value, bool | str) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


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
    redelivery. A message that arrived over AMQP is the one sent (its typed side) with the headers
    the broker added since; any other body travels as one Data section.
    """
    if message.typed is not None:
        return _typed_message(message, message.typed, delivery_count=delivery_count, redelivered=redelivered)
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
            props[JMS_NAMES.get(name, name)] = value
    msg.properties = props  # type: ignore[assignment]  # proton's stub says None
    if annotations:
        msg.annotations = annotations
    return msg


JMS_NAMES = {"original-destination": "originalDestination", "dead-letter-reason": "deadLetterReason"}
"""Core headers whose names are not JMS identifiers (JMS 3.5.1), as the application properties an AMQP
receiver gets: a JMS client cannot read a property named ``original-destination``."""


def _typed_message(message: CoreMessage, typed: Typed, *, delivery_count: int, redelivered: bool) -> Message:
    """The message as it was sent, with this delivery's header and what the broker added since (its
    id, when the sender gave none; a dead letter's headers; a ``modified`` outcome's annotations)."""
    msg = Message()
    msg.decode(typed.amqp)
    _set_header(msg, message, typed, delivery_count=delivery_count, redelivered=redelivered)
    if msg.id is None:
        msg.id = message.message_id
    if typed.added:
        props: dict[Any, Any] = dict(msg.properties or {})
        annotations: dict[Any, Any] = dict(msg.annotations or {})
        for name, value in typed.added:
            if name.startswith(ANNOTATION_PREFIX):
                annotations[symbol(name[len(ANNOTATION_PREFIX):])] = value
            else:
                props[JMS_NAMES.get(name, name)] = value
        msg.properties = props  # type: ignore[assignment]  # proton's stub says None
        if annotations:
            msg.annotations = annotations
    return msg


def _set_header(msg: Message, message: CoreMessage, typed: Typed, *, delivery_count: int,
                redelivered: bool) -> None:
    msg.durable = message.persistent
    msg.priority = typed.priority
    msg.ttl = min(typed.ttl, 0xFFFFFFFF) / 1000
    msg.first_acquirer = not redelivered
    msg.delivery_count = delivery_count


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
            props[JMS_NAMES.get(name, name)] = value
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


def _typed_delivery(message: CoreMessage, typed: Typed, *, delivery_count: int, redelivered: bool) -> bytes:
    """A message that arrived over AMQP: this delivery's header section + its sections as sent, or,
    when the broker added to it, what :func:`from_core` builds."""
    if typed.added or not typed.sender_id:
        return bytes(from_core(message, delivery_count=delivery_count, redelivered=redelivered).encode())
    ttl = b"\x40" if not typed.ttl else b"\x70" + min(typed.ttl, 0xFFFFFFFF).to_bytes(4, "big")
    fields = ((b"\x41" if message.persistent else b"\x42") + b"\x50" + bytes((typed.priority & 0xFF,)) + ttl
              + (b"\x42" if redelivered else b"\x41") + _uint(delivery_count))
    return b"\x00\x53\x70\xc0" + bytes([len(fields) + 1, 5]) + fields + typed.amqp


def encode_delivery(message: CoreMessage, *, delivery_count: int, redelivered: bool) -> bytes:
    """Exactly what ``from_core(...).encode()`` carries, without building a proton Message per delivery:
    a header section (durable, first-acquirer, delivery-count) + the rest, all written by hand."""
    if message.typed is not None:
        return _typed_delivery(message, message.typed, delivery_count=delivery_count, redelivered=redelivered)
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
