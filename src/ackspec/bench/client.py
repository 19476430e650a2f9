"""A lean STOMP 1.2 load client: one blocking socket, TCP_NODELAY, no threads.

Why not stomp.py: its receiver thread and per-frame callbacks made windowed sends 2-4x slower
than a raw socket on this machine (shared/reference/brokers.md), so the client, not the broker,
was measured. Frames are parsed with the reference codec (:mod:`ackspec.reference.stomp.codec`);
SEND frames are pre-formatted bytes so that writing costs next to nothing.
"""

from __future__ import annotations

import socket
from collections import deque
from dataclasses import dataclass

from ackspec.errors import AckspecError
from ackspec.reference.stomp.codec import FrameParser, StompProtocolError
from ackspec.reference.stomp.frames import Frame

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
RECV_BYTES = 256 * 1024
"""One read takes what is there (the codec's cost per frame does not depend on the size fed)."""


@dataclass(frozen=True)
class Endpoint:
    """Where and how to connect: loopback only, by design of the benchmark."""

    host: str
    port: int
    login: str = "admin"
    passcode: str = "admin"
    vhost: str = "127.0.0.1"

    def __post_init__(self) -> None:
        if self.host not in LOOPBACK_HOSTS:
            raise AckspecError(f"bench: {self.host} is not loopback; the benchmark only talks to 127.0.0.1")


class BrokerError(AckspecError):
    """The broker answered with ERROR or closed the connection during a scenario."""


class LeanStompClient:
    """Blocking, single-threaded STOMP client for load generation."""

    def __init__(self, endpoint: Endpoint, *, timeout: float = 30.0) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        try:
            self.sock = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout)
        except OSError as exc:
            raise AckspecError(f"bench: cannot connect to {endpoint.host}:{endpoint.port}: {exc}") from exc
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.parser = FrameParser(max_frame=64 * 1024 * 1024, max_headers=1000)
        self.pending: deque[Frame] = deque()
        self.send_raw(
            f"CONNECT\naccept-version:1.2\nhost:{endpoint.vhost}\nlogin:{endpoint.login}\n"
            f"passcode:{endpoint.passcode}\nheart-beat:0,0\n\n\x00".encode()
        )
        connected = self.next_frame()
        if connected.command != "CONNECTED":
            raise BrokerError(f"bench: CONNECT to port {endpoint.port} answered {connected.command} "
                              f"{connected.get('message', '')}")

    def fileno(self) -> int:
        return self.sock.fileno()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def feed_available(self) -> bool:
        """Reads once from the socket (blocking) and queues the frames; False on EOF."""
        data = self.sock.recv(RECV_BYTES)
        if not data:
            return False
        try:
            for item in self.parser.feed(data):
                if isinstance(item, Frame):
                    self.pending.append(item)
        except StompProtocolError as exc:
            raise BrokerError(f"bench: malformed frame from port {self.endpoint.port}: {exc.message}") from exc
        return True

    def next_frame(self) -> Frame:
        """The next frame (MESSAGE, RECEIPT, ...). An ERROR frame raises BrokerError."""
        while not self.pending:
            try:
                alive = self.feed_available()
            except TimeoutError as exc:
                raise BrokerError(f"bench: no frame from port {self.endpoint.port} within {self.timeout} s") from exc
            if not alive:
                raise BrokerError(f"bench: port {self.endpoint.port} closed the connection")
        frame = self.pending.popleft()
        if frame.command == "ERROR":
            raise BrokerError(f"bench: ERROR from port {self.endpoint.port}: {frame.get('message', '')} "
                              f"{frame.body[:200]!r}")
        return frame

    def wait_receipt(self, receipt_id: str) -> None:
        while True:
            frame = self.next_frame()
            if frame.command == "RECEIPT" and frame.get("receipt-id") == receipt_id:
                return

    def close(self) -> None:
        try:
            self.send_raw(b"DISCONNECT\nreceipt:bye\n\n\x00")
            self.sock.settimeout(5.0)
            self.wait_receipt("bye")
        except (OSError, AckspecError):
            pass
        finally:
            self.sock.close()


def send_frame(destination: str, body: bytes, *, receipt: str | None = None, persistent: bool = False) -> bytes:
    """A SEND frame as bytes. No ``persistent`` header at all when not persistent: on RabbitMQ an
    explicit ``persistent:false`` on the first SEND makes the queue itself auto-delete."""
    head = f"SEND\ndestination:{destination}\ncontent-length:{len(body)}\n"
    if persistent:
        head += "persistent:true\n"
    if receipt is not None:
        head += f"receipt:{receipt}\n"
    return head.encode() + b"\n" + body + b"\x00"


def ack_id(frame: Frame) -> str:
    """The id to ACK a MESSAGE with: ``ack`` (STOMP 1.2), else ``message-id``."""
    value = frame.get("ack") or frame.get("message-id")
    if value is None:
        raise BrokerError("bench: MESSAGE without ack or message-id header")
    return value


def escape_header(value: str) -> str:
    """STOMP 1.2 header escaping (ack ids of ActiveMQ contain ':')."""
    return value.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n").replace(":", "\\c")
