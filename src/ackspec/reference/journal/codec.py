"""Binary encoding of journal records (no pickle: a journal must never execute code).

Record payload = one type byte (``S`` stored, ``R`` removed, ``D`` dead-lettered,
``C`` committed, ``M`` committed with durable-subscription copies, ``U`` durable subscription made,
``V`` durable subscription made with a message selector or noLocal (``U``'s fields + the selector + a
noLocal byte),
``X`` durable subscription deleted, ``K`` a copy a durable subscription keeps) followed by fields:
strings and byte strings as u32 length + bytes, a message as id, destination, body, header count
(u32) + name/value pairs, persistent (u8), producer, seq (u64); a copy as client id, name, message.
A commit without copies keeps the ``C`` layout of older journals.
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

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


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
    out.append(b"\x01" if m.persistent else b"\x00")
    _put_str(out, m.producer)
    out.append(_U64.pack(m.seq))


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
        persistent = self.byte() == 1
        producer = self.str()
        seq = self.u64()
        return Message(mid, dest, body, headers, persistent, producer, seq)


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
