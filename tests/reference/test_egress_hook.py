"""The server's opt-in ``egress`` hook (used by benchmarks/rtt_bench.py's delay line): when given, every byte
of a STOMP connection's output and its close go through it, in order; by default nothing changes."""

from __future__ import annotations

import asyncio
import importlib.util
import socket
import threading

import pytest

from ackspec.reference.server import Egress, EmbeddedBroker
from ackspec.reference.stomp.codec import FrameParser, encode
from ackspec.reference.stomp.frames import Frame


class Recording:
    """An egress that records what it is given and passes it on to the transport."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = threading.Event()
        self.lost = threading.Event()

    def __call__(self, transport: asyncio.Transport) -> Egress:
        outer = self

        class _Egress:
            def write(self, data: bytes) -> None:
                outer.writes.append(data)
                transport.write(data)

            def close(self) -> None:
                outer.closed.set()
                transport.close()

            def connection_lost(self) -> None:
                outer.lost.set()

        return _Egress()


def _frames(sock: socket.socket) -> list[Frame]:
    parser, frames = FrameParser(), []
    while True:
        data = sock.recv(65536)
        if not data:
            return frames
        frames += [f for f in parser.feed(data) if isinstance(f, Frame)]


LOOPS = ["asyncio", pytest.param("uvloop", marks=pytest.mark.skipif(importlib.util.find_spec("uvloop") is None,
                                                                   reason="uvloop is not installed"))]


@pytest.mark.parametrize("event_loop", LOOPS)
def test_output_and_close_go_through_the_egress(event_loop: str) -> None:
    """Also the STOMP server's smoke test on uvloop (``EmbeddedBroker(event_loop="uvloop")``)."""
    egress = Recording()
    with EmbeddedBroker(persistent=False, egress=egress, event_loop=event_loop) as b:
        assert b.call(lambda core: type(asyncio.get_running_loop()).__module__).startswith(event_loop)
        sock = socket.create_connection(b.stomp_address, timeout=5)
        frames = [Frame("CONNECT", (("accept-version", "1.2"), ("host", "/"))),
                  Frame("SEND", (("destination", "/queue/egress"), ("receipt", "r1")), b"x"),
                  Frame("DISCONNECT", (("receipt", "bye"),))]
        sock.sendall(b"".join(encode(f) for f in frames))
        got = _frames(sock)  # until the broker closes the connection
        assert [f.command for f in got] == ["CONNECTED", "RECEIPT", "RECEIPT"]
        assert [f.get("receipt-id") for f in got[1:]] == ["r1", "bye"]
        assert b"".join(egress.writes) == b"".join(encode(f) for f in got)
        assert egress.closed.wait(5)
        assert egress.lost.wait(5)
