"""A deliberately small raw-socket STOMP client for tests that need to misbehave (over TCP, or a
WebSocket: :class:`RawStompWs`).

Client libraries refuse to send malformed frames and hide heart-beats, so the
ERROR-semantics and heart-beat tests speak bytes. This parser is independent of
the reference broker's codec on purpose: the oracle must not share the code it
judges. It understands exactly what those tests need: frames with 1.2 header
escaping and ``content-length``, heart-beat EOLs, and end of stream.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
from dataclasses import dataclass, field

import websocket

from ackspec.conformance.rawsocket import recv_before

_ESCAPES = {"\\n": "\n", "\\r": "\r", "\\c": ":", "\\\\": "\\"}


@dataclass(frozen=True, slots=True)
class RawFrame:
    command: str
    headers: dict[str, str]
    body: bytes


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n").replace(":", "\\c")


def unescape(value: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(value):
        pair = value[i:i + 2]
        if value[i] == "\\" and pair in _ESCAPES:
            out.append(_ESCAPES[pair])
            i += 2
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def frame(command: str, headers: dict[str, str] | None = None, body: bytes = b"", *,
          escape_headers: bool = True) -> bytes:
    """Encode one frame. CONNECT headers are never escaped (STOMP 1.2)."""
    lines = [command]
    plain = not escape_headers or command in ("CONNECT", "STOMP")
    for key, value in (headers or {}).items():
        lines.append(f"{key}:{value}" if plain else f"{escape(key)}:{escape(value)}")
    return ("\n".join(lines) + "\n\n").encode("utf-8") + body + b"\x00"


@dataclass
class RawStomp:
    """One TCP connection; every read takes a deadline."""

    host: str
    port: int
    timeout: float = 5.0
    sock: socket.socket = field(init=False)
    buffer: bytes = b""
    eof: bool = False
    heartbeats: int = 0  # EOLs received between frames
    tls: ssl.SSLContext | None = None  # a stomp+ssl:// target: the socket speaks TLS

    def __post_init__(self) -> None:
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = self.tls.wrap_socket(sock, server_hostname=self.host) if self.tls is not None else sock

    def connect(self, login: str | None = None, passcode: str | None = None, vhost: str | None = None,
                heart_beat: str = "0,0", extra: dict[str, str] | None = None) -> RawFrame | None:
        headers = {"accept-version": "1.2", "host": vhost or self.host, "heart-beat": heart_beat}
        if login is not None:
            headers["login"] = login
        if passcode is not None:
            headers["passcode"] = passcode
        headers.update(extra or {})
        self.send(frame("CONNECT", headers))
        return self.read_frame()

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError:
            self.eof = True

    def _fill(self, deadline: float) -> bool:
        """Read more bytes; False on timeout or end of stream."""
        if self.eof:
            return False
        chunk = recv_before(self.sock, deadline)
        if chunk is None:
            return False
        if not chunk:
            self.eof = True
            return False
        self.buffer += chunk
        return True

    def _parse(self) -> RawFrame | None:
        while self.buffer[:1] in (b"\n", b"\r"):
            if self.buffer.startswith(b"\r\n"):
                self.buffer = self.buffer[2:]
            elif self.buffer.startswith(b"\n"):
                self.buffer = self.buffer[1:]
            elif len(self.buffer) == 1:
                return None  # a lone CR: wait for its LF
            else:
                self.buffer = self.buffer[1:]
            self.heartbeats += 1
        end = self.buffer.find(b"\n\n")
        end_crlf = self.buffer.find(b"\r\n\r\n")
        if end < 0 and end_crlf < 0:
            return None
        if end_crlf >= 0 and (end < 0 or end_crlf < end):
            head, body_start = self.buffer[:end_crlf], end_crlf + 4
        else:
            head, body_start = self.buffer[:end], end + 2
        lines = head.decode("utf-8", "replace").replace("\r\n", "\n").split("\n")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            key, _, value = line.partition(":")
            key, value = unescape(key), unescape(value)
            headers.setdefault(key, value)
        length = headers.get("content-length")
        if length is not None and length.strip().isdigit():
            stop = body_start + int(length)
            if len(self.buffer) < stop + 1:
                return None
            body = self.buffer[body_start:stop]
            self.buffer = self.buffer[stop + 1:]
        else:
            nul = self.buffer.find(b"\x00", body_start)
            if nul < 0:
                return None
            body = self.buffer[body_start:nul]
            self.buffer = self.buffer[nul + 1:]
        return RawFrame(lines[0], headers, body)

    def read_frame(self, timeout: float | None = None) -> RawFrame | None:
        """The next frame, or None when the stream ended or the timeout passed."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            parsed = self._parse()
            if parsed is not None:
                return parsed
            if not self._fill(deadline):
                return None

    def read_until(self, command: str, timeout: float | None = None) -> RawFrame | None:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            got = self.read_frame(max(0.0, deadline - time.monotonic()))
            if got is None or got.command == command:
                return got

    def wait_closed(self, timeout: float | None = None) -> bool:
        """True once the peer closed the connection (frames read meanwhile are dropped)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not self.eof:
            self.buffer = b""
            if not self._fill(deadline) and not self.eof:
                return False
        return True

    def wait_heartbeats(self, count: int, timeout: float) -> int:
        """Read until ``count`` heart-beat EOLs arrived or the timeout passed; returns how many came."""
        deadline = time.monotonic() + timeout
        while self.heartbeats < count:
            parsed = self._parse()
            if parsed is not None:
                continue
            if not self._fill(deadline):
                break
        return self.heartbeats

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@dataclass
class RawStompWs(RawStomp):
    """The same raw client over a WebSocket (``ws://``, ``wss://``): each :meth:`send` is one binary
    WebSocket message (a test chooses where message boundaries fall), and the bytes of every message
    received are read as one stream. The handshake offers the STOMP subprotocols (v12.stomp first);
    :attr:`subprotocol` is the one the server selected (None: none)."""

    path: str = "/"
    subprotocols: tuple[str, ...] = ("v12.stomp", "v11.stomp", "v10.stomp")
    text: bool = False  # bytes that are UTF-8 go in a text message (``?frames=text``), the rest stay binary
    subprotocol: str | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        scheme = "wss" if self.tls is not None else "ws"
        self.ws = websocket.create_connection(
            f"{scheme}://{self.host}:{self.port}{self.path}", timeout=self.timeout,
            subprotocols=list(self.subprotocols), sslopt={"context": self.tls} if self.tls is not None else None)
        self.subprotocol = self.ws.getsubprotocol()

    def send(self, data: bytes) -> None:
        try:
            if self.text and _is_utf8(data):
                self.ws.send(data.decode("utf-8"))
            else:
                self.ws.send_binary(data)
        except (OSError, websocket.WebSocketException):
            self.eof = True

    def _fill(self, deadline: float) -> bool:
        if self.eof:
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self.ws.settimeout(remaining)
        try:
            message = self.ws.recv()
        except websocket.WebSocketTimeoutException:
            return False
        except (OSError, websocket.WebSocketException):
            self.eof = True
            return False
        self.buffer += message.encode("utf-8") if isinstance(message, str) else message
        return True

    def close(self) -> None:
        with contextlib.suppress(OSError, websocket.WebSocketException):
            self.ws.close()
