"""How records sit in the journal file: the file header and each record's frame (sans-IO).

Two formats, told apart by the 8-byte magic at the start of the file:

* ``ACKJRNL1`` (journals written before record numbers): ``u32 length | u32 crc32(payload) | payload``.
  Still read, and appended to in the same format, so an old data directory keeps working.
* ``ACKJRNL2`` (new files): ``u32 length | u32 crc | u64 number | payload``, the CRC covering the length,
  the number and the payload. Numbers start at 1 in each file and grow by one per record, so when damage
  in the middle of the file is skipped the gap between the numbers either side of it says exactly how many
  records were lost, and a resynchronisation candidate must carry a number above the last good one.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from ackspec.reference.broker.records import Record
from ackspec.reference.journal.codec import decode_record

MAGIC_V1 = b"ACKJRNL1"
MAGIC_V2 = b"ACKJRNL2"
MAGICS = {MAGIC_V1: 1, MAGIC_V2: 2}
HEADER_SIZE = 8
MAX_RECORD = 256 * 1024 * 1024
RECORD_TYPES = b"SRDCMKUVX"
"""First payload byte of every record type the codec knows (resynchronisation only tries these)."""

_V1 = struct.Struct(">II")
_V2 = struct.Struct(">IIQ")
_V2_COVERED = struct.Struct(">IQ")


def frame_size(version: int) -> int:
    """Bytes before a record's payload."""
    return _V1.size if version == 1 else _V2.size


def frame(payload: bytes, version: int, number: int) -> bytes:
    """One record as written to the file (``number`` is ignored by version 1)."""
    if version == 1:
        return _V1.pack(len(payload), zlib.crc32(payload)) + payload
    crc = zlib.crc32(payload, zlib.crc32(_V2_COVERED.pack(len(payload), number)))
    return _V2.pack(len(payload), crc, number) + payload


@dataclass(frozen=True)
class Framed:
    """One record read back: where its frame starts and ends, its number (0 in version 1) and content."""

    offset: int
    end: int
    number: int
    record: Record


@dataclass(frozen=True)
class Unreadable:
    """Why no record could be read at an offset."""

    offset: int
    reason: str
    torn: bool
    """The frame runs past the end of the file (what a crash during a write leaves)."""


def read_at(data: bytes, pos: int, version: int) -> Framed | Unreadable:
    """Read the record whose frame starts at ``pos``."""
    head = frame_size(version)
    n = len(data)
    if pos + head > n:
        return Unreadable(pos, "torn record header", True)
    if version == 1:
        length, crc = _V1.unpack_from(data, pos)
        number = 0
    else:
        length, crc, number = _V2.unpack_from(data, pos)
    start = pos + head
    if length > MAX_RECORD:
        return Unreadable(pos, "record length out of range", False)
    if start + length > n:
        return Unreadable(pos, "torn record (shorter than its length)", True)
    payload = data[start : start + length]
    covered = zlib.crc32(data[pos : pos + 4] + data[pos + 8 : start]) if version == 2 else 0
    actual = zlib.crc32(payload, covered)
    if actual != crc:
        return Unreadable(pos, "CRC mismatch", False)
    try:
        record = decode_record(payload)
    except (ValueError, struct.error, UnicodeDecodeError) as exc:
        return Unreadable(pos, f"undecodable record ({exc})", False)
    return Framed(pos, start + length, number, record)
