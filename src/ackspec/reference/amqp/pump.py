"""The byte plumbing around proton's engine, shared by every AMQP 1.0 peer in ackspec. Sans-IO.

proton's ``Connection``/``Transport``/``Collector`` is a pure state machine, but driving it
has three fiddly rules that the broker's listener, the reference client's wire, the
python-qpid-proton adapter and the benchmark client each used to re-implement:

* ``Transport.push`` refuses more than ``capacity()`` bytes, so a large read must be fed in
  pieces, with the events of each piece handled in between (handling them is what frees
  the input buffer); ``capacity() < 0`` means the transport is closed for input, and a
  buffer still full after handling events is stuck;
* collector events must be popped even when the handler raises, or the same event is
  seen again on the next pass;
* output is read with ``pending()``/``peek()`` and consumed with ``pop()`` only for the
  bytes the socket actually took.

:class:`EnginePump` owns exactly that and nothing else: no socket, no thread, no clock.
Callers keep their own I/O and their own way of reporting a lost connection (the
:class:`Fed` result says why feeding stopped). :func:`client_engine` builds the client
side engine with the SASL choice all three clients make.
"""

from __future__ import annotations

import enum
import ipaddress
import ssl
from collections.abc import Callable

from proton import SSL, Collector, Connection, Event, SSLDomain, Transport


class Fed(enum.Enum):
    """How :meth:`EnginePump.feed` ended."""

    ALL = "all"
    """Every byte went into the transport."""
    CLOSED = "closed"
    """The transport is closed for input (``capacity() < 0``); the rest was dropped."""
    STUCK = "stuck"
    """The input buffer stayed full (``capacity() == 0``) even after ``on_full``; the rest was dropped."""


class EnginePump:
    """Feeds bytes into a proton transport, dispatches its collector's events, hands out its output.

    ``on_event`` handles one collector event. ``dispatch`` replaces the default event loop
    entirely (the broker's listener has a faster one on proton's C API); it is also what
    :meth:`feed` runs between pieces of a large read.
    """

    __slots__ = ("collector", "dispatch", "on_event", "transport")

    def __init__(self, transport: Transport, collector: Collector, on_event: Callable[[Event], None], *,
                 dispatch: Callable[[], None] | None = None) -> None:
        self.transport = transport
        self.collector = collector
        self.on_event = on_event
        self.dispatch: Callable[[], None] = dispatch or self.dispatch_events

    # -- input ------------------------------------------------------------------------------------

    def feed(self, data: bytes, *, on_full: Callable[[], None] | None = None) -> Fed:
        """Push ``data`` at most ``capacity()`` bytes at a time, dispatching between pieces.

        The events of the last piece are left to the caller (it usually ticks or flushes
        first). When the input buffer is full, ``on_full`` gets a chance to drain it
        (typically: dispatch and write output); without ``on_full``, or when it did not
        help, feeding stops with :attr:`Fed.STUCK`.
        """
        transport = self.transport
        view = memoryview(data)
        while view:
            capacity = transport.capacity()
            if capacity < 0:
                return Fed.CLOSED
            if capacity == 0:
                if on_full is None:
                    return Fed.STUCK
                on_full()
                if transport.capacity() == 0:
                    return Fed.STUCK
                continue
            transport.push(bytes(view[:capacity]))
            view = view[capacity:]
            if view:
                self.dispatch()
        return Fed.ALL

    # -- events -----------------------------------------------------------------------------------

    def dispatch_events(self) -> None:
        """Hand every collected event to ``on_event``, popping each even if the handler raises."""
        collector = self.collector
        on_event = self.on_event
        while True:
            event = collector.peek()
            if event is None:
                return
            try:
                on_event(event)
            finally:
                collector.pop()

    # -- output -----------------------------------------------------------------------------------

    def pending(self) -> int:
        """Output bytes waiting; negative once the transport has written its last frame."""
        return int(self.transport.pending())

    def peek(self, size: int) -> bytes:
        """Up to ``size`` output bytes, left in the transport until :meth:`pop`."""
        return bytes(self.transport.peek(size) or b"")

    def pop(self, size: int) -> None:
        """Drop ``size`` output bytes: the socket took them."""
        self.transport.pop(size)

    def take_output(self) -> bytes:
        """All output bytes now waiting, consumed (for callers that buffer writes themselves)."""
        chunks: list[bytes] = []
        transport = self.transport
        while True:
            pending = transport.pending()
            if pending <= 0:
                break
            chunk = transport.peek(pending) or b""
            transport.pop(len(chunk))
            chunks.append(bytes(chunk))
        return b"".join(chunks)


def client_engine(container: str, hostname: str, user: str | None, password: str | None, *,
                  tls: bool = False, tls_ca: str | None = None) -> tuple[Connection, Transport, Collector]:
    """A client-side engine, bound: SASL PLAIN with a user (insecure mechs allowed), else ANONYMOUS.

    ``tls``: proton's engine speaks TLS on the same bytes (so the callers' plain sockets stay as they are),
    verifying the server's certificate against ``tls_ca`` (default: the system's CA certificates) and, when
    ``hostname`` is a DNS name, its name."""
    conn = Connection()
    conn.container = container
    conn.hostname = hostname
    collector = Collector()
    conn.collect(collector)
    transport = Transport()
    sasl = transport.sasl()
    if user is not None:
        conn.user = user
        conn.password = password or ""
        sasl.allowed_mechs("PLAIN")
        sasl.allow_insecure_mechs = True
    else:
        sasl.allowed_mechs("ANONYMOUS")
    if tls:
        domain = SSLDomain(SSLDomain.MODE_CLIENT)
        domain.set_trusted_ca_db(tls_ca or ssl.get_default_verify_paths().openssl_cafile)
        # proton checks the name as a DNS name only: for an IP literal it checks the chain (docs/security.md)
        domain.set_peer_authentication(SSLDomain.VERIFY_PEER if _is_ip(hostname) else SSLDomain.VERIFY_PEER_NAME)
        SSL(transport, domain).peer_hostname = hostname
    transport.bind(conn)
    return conn, transport, collector


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


__all__ = ["EnginePump", "Fed", "client_engine"]
