"""Binary encoding of journal records (no pickle: a journal must never execute code).

Record payload = one type byte (``S`` stored, ``R`` removed, ``D`` dead-lettered,
``C`` committed) followed by fields: strings and byte strings as u32 length + bytes, a
message as id, destination, body, header count (u32) + name/value pairs, persistent (u8),
producer, seq (u64).
"""

from __future__ import annotations

import struct

from ackspec.reference.broker.model import Message
from ackspec.reference.broker.records import Committed, DeadLettered, Record, Removed, Stored

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


def encode_record(record: Record) -> bytes:
    out: list[bytes] = []
    if isinstance(record, Stored):
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
        out.append(b"C")
        out.append(_U32.pack(len(record.stored)))
        for m in record.stored:
            _put_message(out, m)
        out.append(_U32.pack(len(record.removed)))
        for mid in record.removed:
            _put_str(out, mid)
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
    elif kind == ord("C"):
        stored = tuple(r.message() for _ in range(r.u32()))
        removed = tuple(r.str() for _ in range(r.u32()))
        record = Committed(stored, removed)
    else:
        raise ValueError(f"unknown record type {kind}")
    if r.pos != len(payload):
        raise ValueError("trailing bytes in record")
    return record
