"""Binary encoding of journal records (no pickle: a journal must never execute code).

Record payload = one type byte (``S`` stored, ``R`` removed, ``D`` dead-lettered,
``C`` committed, ``M`` committed with durable-subscription copies, ``U`` durable subscription made,
``V`` durable subscription made with a message selector or noLocal (``U``'s fields + the selector + a
noLocal byte),
``X`` durable subscription deleted, ``K`` a copy a durable subscription keeps) followed by fields:
strings and byte strings as u32 length + bytes, a message as id, destination, body, header count
(u32) + name/value pairs, persistent (u8), producer, seq (u64); a copy as client id, name, message.
A commit without copies keeps the ``C`` layout of older journals.

A message with a typed side (:class:`~ackspec.reference.broker.typed.Typed`, an AMQP message) sets bit
``0x02`` of its persistent byte and is followed, after its seq, by: the AMQP sections (bytes), priority
(u8), ttl, expiry and creation time (u64 each), the sender's message id, the typed properties (u32 count,
then name and a tagged value: ``N`` null, ``T``/``F`` boolean, ``I`` i64, ``D`` f64, ``S`` string) and
the headers added since it arrived (u32 count + name/value pairs). Older journals never set the bit.
"""

from __future__ import annotations

import struct

from ackspec.reference.broker.model import Message
from ackspec.reference.broker.records import (
    Committed,
    DeadLettered,
    DurableRemoved,
    DurableSubscribed,
    Record,
    Removed,
    Stored,
    StoredCopy,
)
from ackspec.reference.broker.typed import PropertyValue, Typed

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")
_TYPED = 0x02
"""Bit of a message's persistent byte: a typed side follows the seq."""


def _put_bytes(out: list[bytes], b: bytes) -> None:
    out.append(_U32.pack(len(b)))
    out.append(b)


def _put_str(out: list[bytes], s: str) -> None:
    _put_bytes(out, s.encode("utf-8"))


def _put_message(out: list[bytes], m: Message) -> None:
    _put_str(out, m.message_id)
    _put_str(out, m.destination)
    _put_bytes(out, m.body)
    out.append(_U32.pack(len(m.headers)))
    for name, value in m.headers:
        _put_str(out, name)
        _put_str(out, value)
    out.append(bytes(((1 if m.persistent else 0) | (_TYPED if m.typed is not None else 0),)))
    _put_str(out, m.producer)
    out.append(_U64.pack(m.seq))
    if m.typed is not None:
        _put_typed(out, m.typed)


def _put_typed(out: list[bytes], t: Typed) -> None:
    _put_bytes(out, t.amqp)
    out.append(bytes((t.priority & 0xFF,)))
    out.append(_U64.pack(t.ttl))
    out.append(_U64.pack(t.expiry))
    out.append(_U64.pack(t.created))
    _put_str(out, t.sender_id)
    out.append(_U32.pack(len(t.properties)))
    for name, value in t.properties:
        _put_str(out, name)
        _put_value(out, value)
    out.append(_U32.pack(len(t.added)))
    for name, text in t.added:
        _put_str(out, name)
        _put_str(out, text)


def _put_value(out: list[bytes], value: PropertyValue) -> None:
    if value is None:
        out.append(b"N")
    elif isinstance(value, bool):
        out.append(b"T" if value else b"F")
    elif isinstance(value, int):
        out.append(b"I" + _I64.pack(value))
    elif isinstance(value, float):
        out.append(b"D" + _F64.pack(value))
    else:
        out.append(b"S")
        _put_str(out, value)


def _put_copy(out: list[bytes], copy: StoredCopy) -> None:
    _put_str(out, copy.client_id)
    _put_str(out, copy.name)
    _put_message(out, copy.message)


def encode_record(record: Record) -> bytes:
    out: list[bytes] = []
    if isinstance(record, StoredCopy):
        out.append(b"K")
        _put_copy(out, record)
    elif isinstance(record, DurableSubscribed):
        plain = not record.selector and not record.no_local
        out.append(b"U" if plain else b"V")  # U: neither (the format before selectors and noLocal)
        _put_str(out, record.client_id)
        _put_str(out, record.name)
        _put_str(out, record.destination)
        if not plain:
            _put_str(out, record.selector)
            out.append(b"\x01" if record.no_local else b"\x00")
    elif isinstance(record, DurableRemoved):
        out.append(b"X")
        _put_str(out, record.client_id)
        _put_str(out, record.name)
    elif isinstance(record, Stored):
        out.append(b"S")
        _put_message(out, record.message)
    elif isinstance(record, Removed):
        out.append(b"R")
        _put_str(out, record.message_id)
    elif isinstance(record, DeadLettered):
        out.append(b"D")
        _put_str(out, record.message_id)
        _put_str(out, record.dead_letter_queue)
        _put_str(out, record.reason)
    else:
        out.append(b"M" if record.copies else b"C")
        out.append(_U32.pack(len(record.stored)))
        for m in record.stored:
            _put_message(out, m)
        out.append(_U32.pack(len(record.removed)))
        for mid in record.removed:
            _put_str(out, mid)
        if record.copies:
            out.append(_U32.pack(len(record.copies)))
            for copy in record.copies:
                _put_copy(out, copy)
    return b"".join(out)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def u32(self) -> int:
        (v,) = _U32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(v)

    def u64(self) -> int:
        (v,) = _U64.unpack_from(self.data, self.pos)
        self.pos += 8
        return int(v)

    def raw(self) -> bytes:
        n = self.u32()
        if self.pos + n > len(self.data):
            raise ValueError("truncated field")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def str(self) -> str:
        return self.raw().decode("utf-8")

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise ValueError("truncated field")
        v = self.data[self.pos]
        self.pos += 1
        return v

    def message(self) -> Message:
        mid = self.str()
        dest = self.str()
        body = self.raw()
        n = self.u32()
        headers = tuple((self.str(), self.str()) for _ in range(n))
        flags = self.byte()
        producer = self.str()
        seq = self.u64()
        typed = self.typed() if flags & _TYPED else None
        return Message(mid, dest, body, headers, bool(flags & 1), producer, seq, typed)

    def typed(self) -> Typed:
        amqp = self.raw()
        priority = self.byte()
        ttl, expiry, created = self.u64(), self.u64(), self.u64()
        sender_id = self.str()
        properties = tuple((self.str(), self.value()) for _ in range(self.u32()))
        added = tuple((self.str(), self.str()) for _ in range(self.u32()))
        return Typed(amqp, properties, priority, ttl, expiry, created, sender_id, added)

    def value(self) -> PropertyValue:
        tag = self.byte()
        if tag == ord("N"):
            return None
        if tag in (ord("T"), ord("F")):
            return tag == ord("T")
        if tag == ord("I"):
            (n,) = _I64.unpack_from(self.data, self.pos)
            self.pos += 8
            return int(n)
        if tag == ord("D"):
            (x,) = _F64.unpack_from(self.data, self.pos)
            self.pos += 8
            return float(x)
        if tag == ord("S"):
            return self.str()
        raise ValueError(f"unknown property tag {tag}")


def decode_record(payload: bytes) -> Record:
    """Decode one payload; raises ``ValueError`` (or ``struct.error``) when malformed."""
    r = _Reader(payload)
    kind = r.byte()
    record: Record
    if kind == ord("S"):
        record = Stored(r.message())
    elif kind == ord("R"):
        record = Removed(r.str())
    elif kind == ord("D"):
        record = DeadLettered(r.str(), r.str(), r.str())
    elif kind in (ord("C"), ord("M")):
        stored = tuple(r.message() for _ in range(r.u32()))
        removed = tuple(r.str() for _ in range(r.u32()))
        copies = tuple(StoredCopy(r.str(), r.str(), r.message()) for _ in range(r.u32())) if kind == ord("M") else ()
        record = Committed(stored, removed, copies)
    elif kind == ord("K"):
        record = StoredCopy(r.str(), r.str(), r.message())
    elif kind == ord("U"):
        record = DurableSubscribed(r.str(), r.str(), r.str())
    elif kind == ord("V"):
        record = DurableSubscribed(r.str(), r.str(), r.str(), r.str(), bool(r.byte()))
    elif kind == ord("X"):
        record = DurableRemoved(r.str(), r.str())
    else:
        raise ValueError(f"unknown record type {kind}")
    if r.pos != len(payload):
        raise ValueError("trailing bytes in record")
    return record
