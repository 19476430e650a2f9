"""Client sockets as every ackspec driver opens them (reference client wires, proton driver, bench)."""

from __future__ import annotations

import socket


def connect(host: str, port: int, timeout: float, *, blocking: bool = True) -> socket.socket:
    """A TCP connection to ``host:port`` with TCP_NODELAY: a frame that waits for its answer (a
    receipt, a disposition) must not sit in Nagle's buffer. ``blocking=False`` for sockets pumped
    with ``select``; otherwise the socket keeps ``timeout``. Raises :class:`OSError` as
    :func:`socket.create_connection` does; each caller words its own error."""
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if not blocking:
        sock.setblocking(False)
    return sock
