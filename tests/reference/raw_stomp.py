"""A raw-socket STOMP client for tests against a running broker (no library between us and the broker)."""

from __future__ import annotations

import socket
import time

from ackspec.reference.server import EmbeddedBroker
from ackspec.reference.stomp.codec import FrameParser, encode
from ackspec.reference.stomp.frames import Frame


class Raw:
    """Frames out as given (``_`` in a header name keyword becomes ``-``), frames in one at a time."""

    def __init__(self, b: EmbeddedBroker) -> None:
        self.sock = socket.create_connection(b.stomp_address, timeout=5)
        self.parser = FrameParser()
        self.pending: list[Frame] = []

    def send(self, command: str, body: bytes = b"", **headers: str) -> None:
        self.sock.sendall(encode(Frame(command, tuple((k.replace("_", "-"), v) for k, v in headers.items()), body)))

    def recv(self, timeout: float = 5.0) -> Frame:
        deadline = time.monotonic() + timeout
        while not self.pending:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("connection closed")
            self.pending += [f for f in self.parser.feed(data) if isinstance(f, Frame)]
        return self.pending.pop(0)

    def connect(self) -> Raw:
        self.send("CONNECT", b"", **{"accept-version": "1.2", "host": "/"})
        assert self.recv().command == "CONNECTED"
        return self

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except (TimeoutError, ConnectionResetError):
            return False
