"""stomp.py's WebSocket transport (``ws://``, ``wss://``) made to behave like its TCP transport where the
suite depends on it.

stomp.py hands its connect timeout to ``websocket.create_connection``, which keeps it as the timeout of
every later read, and its reader takes a failed read for the end of the stream. So a connection that
waited longer than the timeout for a frame (a consumer on an empty queue, a producer while the test
crashes another client) was closed by the client itself: over ``ws://`` the state-machine test ended with
"connection is closed". The TCP transport has no such read timeout; heart-beats are STOMP's way to find a
dead peer. :class:`IdleSafeWSTransport` bounds the handshake only, and shuts the socket down before
closing it, since closing a descriptor does not wake the reader blocked on it (a crash then waited for
the read timeout to end the reader thread).
"""

from __future__ import annotations

import contextlib
import socket
from typing import Any

from stomp.adapter.ws import WSStompConnection, WSTransport
from stomp.connect import BaseConnection
from stomp.protocol import Protocol12

SUBPROTOCOL = "v12.stomp"


class IdleSafeWSTransport(WSTransport):  # type: ignore[misc]  # stomp.py has no type hints
    """A WebSocket transport whose reads wait for frames however long the connection is idle."""

    def attempt_connection(self) -> None:
        super().attempt_connection()
        self.socket.settimeout(None)  # the reader thread starts after this: it never sees the connect timeout

    def disconnect_socket(self) -> None:
        raw = getattr(self.socket, "sock", None)
        if raw is not None:
            with contextlib.suppress(OSError):
                raw.shutdown(socket.SHUT_RDWR)  # wakes the reader with end of stream
        super().disconnect_socket()


class _WsConnection(WSStompConnection):  # type: ignore[misc]
    """stomp.py's WebSocket STOMP 1.2 connection on a transport of our choosing (its own builds one)."""

    def __init__(self, transport: IdleSafeWSTransport, heartbeats: tuple[int, int]) -> None:
        BaseConnection.__init__(self, transport)
        Protocol12.__init__(self, transport, heartbeats)


def ws_connection(host: str, port: int, path: str, *, heartbeats: tuple[int, int], text: bool = False,
                  **options: Any) -> Any:
    """A stomp.py STOMP 1.2 connection over WebSocket (subprotocol v12.stomp, each frame one binary
    message, since a body need not be UTF-8; ``text``: one text message, for a listener that ignores
    binary ones) on :class:`IdleSafeWSTransport`; ``options`` are the transport's (timeout, vhost,
    auto_decode, reconnect_attempts_max)."""
    transport = IdleSafeWSTransport([(host, port)], ws_path=path, header={"Sec-WebSocket-Protocol": SUBPROTOCOL},
                                    binary_mode=not text, **options)
    return _WsConnection(transport, heartbeats)
