"""AMQP 1.0 frame headers (part 2.3.1), packed and unpacked here and nowhere else.

A frame is ``SIZE(4) DOFF(1) TYPE(1) CHANNEL(2)`` (type 0: AMQP, 1: SASL), extended header up to
``DOFF * 4`` bytes, then the body. proton's engine frames everything the listener sends; what it does
not (the SASL layer in front of it, the confirmation proxy and test tools that read or forge frames)
uses these helpers, so the layout is written once.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from proton import Data, Described

HEADER: Final = struct.Struct(">IBBH")
"""size, data offset (in 4-byte words), frame type, channel."""
AMQP_FRAME: Final = 0
SASL_FRAME: Final = 1
MIN_DOFF: Final = 2
"""The smallest data offset: the 8-byte header and no extended header."""
PROTOCOL_HEADER_SIZE: Final = 8
"""``AMQP`` + protocol id + version (2.2), which precedes the frames of each layer."""


class FrameHeader(NamedTuple):
    size: int
    doff: int
    type: int
    channel: int


def read_header(buf: bytes | bytearray | memoryview) -> FrameHeader:
    """The header at the start of ``buf`` (at least :data:`HEADER`.size bytes)."""
    return FrameHeader(*HEADER.unpack_from(buf))


def pack_frame(body: bytes, *, channel: int = 0, frame_type: int = AMQP_FRAME) -> bytes:
    """``body`` behind a header without an extended header."""
    return HEADER.pack(HEADER.size + len(body), MIN_DOFF, frame_type, channel) + body


def performative_frame(performative: Described, payload: bytes = b"", *, channel: int = 0,
                       frame_type: int = AMQP_FRAME) -> bytes:
    """One frame carrying ``performative`` (encoded by proton's codec) and ``payload`` after it."""
    data = Data()
    data.put_object(performative)
    return pack_frame(bytes(data.encode()) + payload, channel=channel, frame_type=frame_type)


def with_body(frame: bytes, body: bytes) -> bytes:
    """``frame`` (its header and extended header kept) with a new body: the size recomputed."""
    doff = read_header(frame).doff * 4
    return struct.pack(">I", doff + len(body)) + frame[4:doff] + body


class FrameSplitter:
    """Splits a byte stream into protocol headers (``AMQP...``) and whole frames, buffering the rest.

    Sans-IO: bytes in, complete units out. A size below the header's (not AMQP framing) hands the rest
    over untouched, for the reader to report."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        out: list[bytes] = []
        buf = self._buf
        while len(buf) >= PROTOCOL_HEADER_SIZE:
            if buf[:4] == b"AMQP":
                size = PROTOCOL_HEADER_SIZE
            else:
                size = read_header(buf).size
                if size < HEADER.size:
                    out.append(bytes(buf))
                    buf.clear()
                    break
                if len(buf) < size:
                    break
            out.append(bytes(buf[:size]))
            del buf[:size]
        return out
