"""After an ERROR the broker shuts down its side and drains what the client still sends, so the client reads
the ERROR and a clean end of stream, never a connection reset that may destroy the ERROR (issue 20)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from ackspec.reference.server import EmbeddedBroker
from ackspec.reference.stomp.codec import FrameParser
from ackspec.reference.stomp.frames import Frame


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(persistent=False) as b:
        yield b


@pytest.mark.parametrize("trailing", [64 * 1024, 1024 * 1024])
def test_error_then_a_clean_end_of_stream_although_input_was_left_unread(broker: EmbeddedBroker,
                                                                          trailing: int) -> None:
    with socket.create_connection(broker.stomp_address, timeout=10) as sock:
        parser = FrameParser()
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
        frames: list[Frame] = []
        while not frames:
            frames += [f for f in parser.feed(sock.recv(65536)) if isinstance(f, Frame)]
        sock.sendall(b"BOGUS\n\n\x00" + b"SEND\n" * (trailing // 5))
        while True:
            data = sock.recv(65536)  # a reset would raise ConnectionResetError here
            if not data:
                break
            frames += [f for f in parser.feed(data) if isinstance(f, Frame)]
    assert [f.command for f in frames] == ["CONNECTED", "ERROR"]
    assert "unknown command" in (frames[1].get("message") or "")
