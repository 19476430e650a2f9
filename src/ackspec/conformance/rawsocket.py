"""A bounded read for the suite's raw peers (:mod:`~ackspec.conformance.rawstomp`,
:mod:`~ackspec.conformance.rawamqp`), so what a deadline and a dead socket mean is decided in one place."""

from __future__ import annotations

import socket
import time

READ_SIZE = 65536


def recv_before(sock: socket.socket, deadline: float) -> bytes | None:
    """The next bytes ``sock`` has, waiting at most until ``deadline`` (on :func:`time.monotonic`'s clock).

    None when the deadline passed first; ``b""`` when the peer ended the stream or the socket failed (a reset
    or a TLS error is the end of what this peer will say, not a reason to wait longer)."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return None
    sock.settimeout(remaining)
    try:
        return sock.recv(READ_SIZE)
    except TimeoutError:
        return None
    except OSError:
        return b""
