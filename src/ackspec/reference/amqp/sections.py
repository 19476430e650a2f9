"""The bare AMQP message sections, read and written by hand on the listener's hot path. Sans-IO.

proton's ``Message`` decodes and encodes every section through its ``pn_data_t`` tree and a
dozen Python wrapper calls: most of the listener's CPU per message before this module. The
broker needs far less than a whole message: from an incoming transfer the body, the durable
flag, the ``to`` address and a few properties as text (what :func:`.mapping.to_core` keeps); for
an outgoing delivery the same few fields written back. Both directions here do only that.

They are shortcuts, never a second opinion: whatever a core message's strings cannot hold
exactly (message annotations, a message id or any other typed property field, priority or ttl, a
non-string application property, an ``amqp-value`` other than binary, an ``amqp-sequence``) or
they do not handle exactly as proton would (sections out of order, anything malformed) raises
:class:`Unhandled`, and the caller falls back to proton's ``Message`` for that one message, which
keeps it with its types (:func:`.mapping.read_incoming`). Tests check both directions
against proton on generated messages (tests/amqp/test_sections.py).

AMQP 1.0 part 3 (message format) and part 1 (type encodings) are the references: a section is
a described value ``0x00 0x53 <code>`` followed by its value.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from ackspec.reference.broker.typed import Typed

HEADER = 0x70
DELIVERY_ANNOTATIONS = 0x71
MESSAGE_ANNOTATIONS = 0x72
PROPERTIES = 0x73
APPLICATION_PROPERTIES = 0x74
DATA = 0x75
AMQP_SEQUENCE = 0x76
AMQP_VALUE = 0x77
FOOTER = 0x78

# properties fields the broker maps (AMQP 1.0 3.2.4): index -> STOMP header name
_TO = 2
_PROPERTY_FIELDS = {3: "subject", 4: "reply-to", 5: "correlation-id", 6: "content-type"}

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")

# constructor -> width of a fixed-width value (AMQP 1.0 1.6)
_FIXED: dict[int, int] = {
    0x40: 0, 0x41: 0, 0x42: 0, 0x43: 0, 0x44: 0, 0x45: 0,
    0x50: 1, 0x51: 1, 0x52: 1, 0x53: 1, 0x54: 1, 0x55: 1, 0x56: 1,
    0x60: 2, 0x61: 2,
    0x70: 4, 0x71: 4, 0x72: 4, 0x73: 4, 0x74: 4,
    0x80: 8, 0x81: 8, 0x82: 8, 0x83: 8, 0x84: 8,
    0x94: 16, 0x98: 16,
}


class Unhandled(Exception):  # a signal to fall back, not an error of the peer
    """The shortcut does not cover this message: use proton's ``Message`` for it."""


class Incoming:
    """What the broker keeps of an incoming message (see :func:`.mapping.to_core`)."""

    __slots__ = ("body", "durable", "headers", "to", "typed")

    def __init__(self, body: bytes, headers: tuple[tuple[str, str], ...], durable: bool, to: str | None,
                 typed: Typed | None = None) -> None:
        self.body = body
        self.headers = headers
        self.durable = durable
        self.to = to
        self.typed = typed


# -- reading ---------------------------------------------------------------------------------------

def _skip(b: bytes, pos: int, end: int, depth: int = 0) -> int:
    """Position after the value at ``pos``; raises :class:`Unhandled` for anything malformed or unusual."""
    if pos >= end or depth > 16:
        raise Unhandled("truncated or too deep")
    code = b[pos]
    pos += 1
    width = _FIXED.get(code)
    if width is not None:
        pos += width
    elif code in (0xA0, 0xA1, 0xA3):
        if pos >= end:
            raise Unhandled("truncated")
        start = pos + 1
        pos = start + b[pos]
        if code != 0xA0 and pos <= end:
            _text_bytes(b[start:pos], code)
    elif code in (0xB0, 0xB1, 0xB3):
        if pos + 4 > end:
            raise Unhandled("truncated")
        start = pos + 4
        pos = start + _U32.unpack_from(b, pos)[0]
        if code != 0xB0 and pos <= end:
            _text_bytes(b[start:pos], code)
    elif code in (0xC0, 0xC1, 0xD0, 0xD1):
        pos, count, stop = _compound(b, pos, end, code)
        for _ in range(count):
            pos = _skip(b, pos, stop, depth + 1)
        if pos != stop:
            raise Unhandled("compound size mismatch")
    elif code == 0x00:
        pos = _skip(b, pos, end, depth + 1)  # descriptor
        pos = _skip(b, pos, end, depth + 1)
    else:  # arrays, unknown constructors: proton decides
        raise Unhandled(f"constructor 0x{code:02x}")
    if pos > end:
        raise Unhandled("truncated")
    return pos


def _compound(b: bytes, pos: int, end: int, code: int) -> tuple[int, int, int]:
    """(first element, element count, end of the compound) of a list or map whose size follows ``pos``."""
    if code in (0xC0, 0xC1):
        if pos + 2 > end:
            raise Unhandled("truncated")
        size, count = b[pos], b[pos + 1]
        first, stop = pos + 2, pos + 1 + size
    else:
        if pos + 8 > end:
            raise Unhandled("truncated")
        size, count = _U32.unpack_from(b, pos)[0], _U32.unpack_from(b, pos + 4)[0]
        first, stop = pos + 8, pos + 4 + size
    if stop > end or stop < first or (code in (0xC1, 0xD1) and count % 2):
        raise Unhandled("bad compound")
    return first, count, stop


def _text_bytes(raw: bytes, code: int) -> str:
    try:
        return raw.decode("ascii" if code in (0xA3, 0xB3) else "utf-8")
    except UnicodeDecodeError as exc:
        raise Unhandled("undecodable text") from exc


def _string(b: bytes, pos: int, end: int, *, symbols: bool) -> tuple[str | None, int]:
    """A string (or symbol) or null at ``pos``; anything else is :class:`Unhandled`."""
    code = b[pos] if pos < end else -1
    if code == 0x40:
        return None, pos + 1
    if code == 0xA1 or (symbols and code == 0xA3):
        start = pos + 2
        stop = start + (b[pos + 1] if pos + 1 < end else end)
    elif code == 0xB1 or (symbols and code == 0xB3):
        if pos + 5 > end:
            raise Unhandled("truncated")
        start = pos + 5
        stop = start + _U32.unpack_from(b, pos + 1)[0]
    else:
        raise Unhandled("not a string")
    if stop > end:
        raise Unhandled("truncated")
    return _text_bytes(b[start:stop], code), stop


def _header_durable(b: bytes, pos: int, end: int) -> tuple[bool, int]:
    code = b[pos] if pos < end else -1
    if code == 0x45:
        return False, pos + 1
    if code not in (0xC0, 0xD0):
        raise Unhandled("header is not a list")
    first, count, stop = _compound(b, pos + 1, end, code)
    durable = False
    if count:
        flag = b[first] if first < stop else -1
        if flag == 0x41:
            durable = True
        elif flag == 0x56 and first + 1 < stop:
            durable = bool(b[first + 1])
        elif flag not in (0x40, 0x42):
            raise Unhandled("durable is not a boolean")
    at = first
    for index in range(count):
        if index in (1, 2) and at < stop and b[at] != 0x40:
            raise Unhandled("header with priority or ttl")
        at = _skip(b, at, stop)
    if at != stop:
        raise Unhandled("header size mismatch")
    return durable, stop


_PLAIN_PREFIXES: dict[bytes, bool] = {
    b"\x00\x53\x70\x45\x00\x53\x73\x45": False,  # empty header, empty properties (proton's default)
    b"\x00\x53\x70\xc0\x02\x01\x41\x00\x53\x73\x45": True,  # header{durable}, empty properties
    b"\x00\x53\x70\xc0\x02\x01\x42\x00\x53\x73\x45": False,  # header{durable=false}, empty properties
}
"""Section prefixes of the plainest messages (what a load generator sends), and their durable flag."""
_SMALL_BINARY_BODIES = (b"\x00\x53\x75\xa0", b"\x00\x53\x77\xa0")
"""A data or amqp-value section holding a binary of at most 255 bytes (vbin8)."""


def _plain(b: bytes) -> Incoming | None:
    """The shortcut of the shortcut: a plain prefix (:data:`_PLAIN_PREFIXES`) and one small binary
    body ending the payload, read with two slices instead of a walk over the sections."""
    for size in (8, 11):
        durable = _PLAIN_PREFIXES.get(b[:size])
        if durable is not None:
            if (len(b) > size + 4 and b[size:size + 4] in _SMALL_BINARY_BODIES
                    and size + 5 + b[size + 4] == len(b)):
                return Incoming(b[size + 5:], (), durable, None)
            return None
    return None


def read_message(b: bytes) -> Incoming:
    """The broker's view of an encoded message (the payload of a transfer).

    Raises :class:`Unhandled` when proton must decode it instead (unusual or malformed).
    """
    if len(b) > 12 and (plain := _plain(b)) is not None:
        return plain
    end = len(b)
    pos = 0
    last = 0
    durable = False
    to: str | None = None
    mapped: dict[str, str] = {}
    props: dict[str, str] = {}
    body: bytes | None = None
    while pos < end:
        if b[pos:pos + 2] != b"\x00\x53" or pos + 3 > end:
            raise Unhandled("section descriptor")
        code = b[pos + 2]
        if code <= last or code > FOOTER:
            raise Unhandled("sections out of order")
        last = code
        pos += 3
        kind = b[pos] if pos < end else -1
        if code == DATA:
            body, pos = _data_section(b, pos, end, kind)
            last = AMQP_VALUE  # one body section only
        elif kind == 0x45 and code in (HEADER, PROPERTIES):  # an empty list: nothing set
            pos += 1
        elif code == HEADER:
            durable, pos = _header_durable(b, pos, end)
        elif code == PROPERTIES:
            to, pos = _properties(b, pos, end, mapped)
        elif code == APPLICATION_PROPERTIES:
            pos = _application_properties(b, pos, end, props)
        elif code == AMQP_VALUE:
            body, pos = _binary_value(b, pos, end, kind)
        elif code == MESSAGE_ANNOTATIONS:
            raise Unhandled("message annotations")  # the JMS message type among them: typed
        elif code in (DELIVERY_ANNOTATIONS, FOOTER):
            pos = _skip(b, pos, end)
        else:
            raise Unhandled(f"section 0x{code:02x}")
    if pos != end:
        raise Unhandled("trailing bytes")
    if not mapped and not props:
        return Incoming(body or b"", (), durable, to)
    headers: list[tuple[str, str]] = [(name, mapped[name]) for name in _MAPPED_ORDER if name in mapped]
    headers += [(k, v) for k, v in props.items() if k not in _RESERVED]
    return Incoming(body or b"", tuple(headers), durable, to)


def _data_section(b: bytes, pos: int, end: int, kind: int) -> tuple[bytes, int]:
    """A data section's binary (``kind`` its constructor at ``pos``) and the position after it."""
    if kind == 0xA0 and pos + 1 < end:  # vbin8: the usual body
        stop = pos + 2 + b[pos + 1]
        body = b[pos + 2:stop]
    elif kind == 0xB0:
        stop = _skip(b, pos, end)
        body = b[pos + 5:stop]
    else:
        raise Unhandled("data section is not binary")
    if stop > end:
        raise Unhandled("truncated")
    return body, stop


def _binary_value(b: bytes, pos: int, end: int, kind: int) -> tuple[bytes, int]:
    """An amqp-value section holding a binary, and the position after it (any other value is typed)."""
    if kind not in (0xA0, 0xB0):
        raise Unhandled("amqp-value is not binary")  # a JMS TextMessage, MapMessage...: typed
    stop = _skip(b, pos, end)
    return b[pos + (2 if kind < 0xB0 else 5):stop], stop


def _properties(b: bytes, pos: int, end: int, mapped: dict[str, str]) -> tuple[str | None, int]:
    code = b[pos] if pos < end else -1
    if code == 0x45:
        return None, pos + 1
    if code not in (0xC0, 0xD0):
        raise Unhandled("properties is not a list")
    at, count, stop = _compound(b, pos + 1, end, code)
    to: str | None = None
    for index in range(count):
        if index == _TO:
            to, at = _string(b, at, stop, symbols=False)
        elif index in _PROPERTY_FIELDS:
            value, at = _string(b, at, stop, symbols=index == 6)
            if value is not None and not (index == 6 and value in ("", "None")):
                mapped[_PROPERTY_FIELDS[index]] = value
        elif at < stop and b[at] != 0x40:
            raise Unhandled("a typed property field (message-id, user-id, times, group)")
        else:
            at += 1
    if at != stop:
        raise Unhandled("properties size mismatch")
    return to, stop


def _application_properties(b: bytes, pos: int, end: int, props: dict[str, str]) -> int:
    code = b[pos] if pos < end else -1
    if code not in (0xC1, 0xD1):
        raise Unhandled("application-properties is not a map")
    at, count, stop = _compound(b, pos + 1, end, code)
    for _ in range(count // 2):
        key, at = _string(b, at, stop, symbols=True)
        if key is None:
            raise Unhandled("null property key")
        value, at = _string(b, at, stop, symbols=False)
        if value is None:
            raise Unhandled("a null property")
        props[key] = value
    if at != stop:
        raise Unhandled("application-properties size mismatch")
    return stop


_MAPPED_ORDER = ("content-type", "correlation-id", "reply-to", "subject")
"""The order :func:`.mapping.to_core` lists the mapped properties in."""
_RESERVED = frozenset({"message-id", "destination", "persistent", "redelivered", "delivery-count",
                       "subscription", "ack", "content-length", "receipt", "transaction"})
"""Header names the core sets itself (mapping.RESERVED_HEADERS)."""


# -- writing ---------------------------------------------------------------------------------------

def _str(value: str, code8: int = 0xA1) -> bytes:
    raw = value.encode("utf-8")
    if len(raw) < 256:
        return bytes((code8, len(raw))) + raw
    return bytes((code8 + 0x10,)) + _U32.pack(len(raw)) + raw


def _list(fields: list[bytes]) -> bytes:
    body = b"".join(fields)
    if len(body) + 1 < 256 and len(fields) < 256:
        return bytes((0xC0, len(body) + 1, len(fields))) + body
    return b"\xd0" + _U32.pack(len(body) + 4) + _U32.pack(len(fields)) + body


def write_bare(message_id: str, address: str, body: bytes, mapped: dict[str, str],
               props: Iterable[tuple[str, str]]) -> bytes:
    """The sections after the header of a delivery, as proton encodes the message :func:`.mapping.from_core`
    builds: properties (message-id, to and the mapped fields), application-properties, one data section."""
    size = len(body)
    if not mapped and not props:  # the usual case: message-id and to only
        mid = message_id.encode("utf-8")
        tail = _TO_TAILS.get(address)
        if tail is None:
            tail = _to_tail(address)
        fields = len(mid) + tail[0]
        if fields < 256 and size < 256:
            return b"\x00\x53\x73\xc0%c\x03\xa1%c%b%b\x00\x53\x75\xa0%c%b" % (
                fields, len(mid), mid, tail[1], size, body)
    data = (b"\x00\x53\x75\xa0%c" % size) if size < 256 else (b"\x00\x53\x75\xb0" + _U32.pack(size))
    if not mapped and not props:
        mid = message_id.encode("utf-8")
        to = address.encode("utf-8")
        fields = len(mid) + len(to) + 6  # count, a1 n id, null, a1 n to
        if fields < 256:
            return b"\x00\x53\x73\xc0%c\x03\xa1%c%b\x40\xa1%c%b%b%b%b" % (
                fields, len(mid), mid, len(to), to, _EMPTY_APPLICATION_PROPERTIES, data, body)
    values = [_str(message_id), b"\x40", _str(address)]
    for index, name in _PROPERTY_FIELDS.items():
        value = mapped.get(name)
        values.append(b"\x40" if value is None else _str(value, 0xA3 if index == 6 else 0xA1))
    while values[-1] == b"\x40":
        values.pop()
    pairs = [_str(k) + _str(v) for k, v in props]
    app = b"".join(pairs)
    return b"".join((b"\x00\x53\x73", _list(values), b"\x00\x53\x74\xd1", _U32.pack(len(app) + 4),
                     _U32.pack(2 * len(pairs)), app, data, body))


_EMPTY_APPLICATION_PROPERTIES = b"\x00\x53\x74\xd1\x00\x00\x00\x04\x00\x00\x00\x00"
_TO_TAILS: dict[str, tuple[int, bytes]] = {}
"""Per destination: what follows the message-id in a plain delivery's properties (null user-id, ``to``,
the empty application-properties) and the list size it adds. Encoded once per destination rather than
per delivery (~0.2 us each); at most :data:`_TO_TAILS_MAX` kept, then started afresh."""
_TO_TAILS_MAX = 1024


def _to_tail(address: str) -> tuple[int, bytes]:
    to = address.encode("utf-8")
    if len(to) > 255:
        return 256, b""  # too long for the one-byte form: write_bare's general path
    if len(_TO_TAILS) >= _TO_TAILS_MAX:
        _TO_TAILS.clear()
    tail = _TO_TAILS[address] = (len(to) + 6, b"\x40\xa1%c%b%b" % (len(to), to, _EMPTY_APPLICATION_PROPERTIES))
    return tail


read_plain = _plain
"""The plainest messages' shortcut on its own (``None``: not one of them), for callers that try it
before :func:`read_message` (it needs more than 12 bytes)."""

__all__ = ["Incoming", "Unhandled", "read_message", "read_plain", "write_bare"]
