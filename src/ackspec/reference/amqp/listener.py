"""The thin asyncio layer of the AMQP 1.0 listener: sockets in, :class:`AmqpConnection` does the rest.

Each accepted socket gets one :class:`AmqpConnection` (sans-IO). Bytes read are
fed to it; whatever it has to send is written after every read and whenever the
broker core addresses an effect to it (a delivery caused by another
connection's publish, a confirmation released by a journal sync). When the
connection says it is over (a close frame, a protocol error, a failed SASL
exchange) the socket is closed after its last bytes are written. The broker
keeps running whatever one connection sends.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from ssl import SSLContext
from typing import cast

from ackspec.reference.amqp.connection import RECEIVE_WINDOW, AmqpConnection
from ackspec.reference.broker.auth import Authenticator
from ackspec.reference.broker.hub import Hub
from ackspec.reference.flow import WRITE_HIGH_WATER, ProducerFlow
from ackspec.reference.limits import AmqpLimits

log = logging.getLogger(__name__)

_ids = itertools.count(1)


class AmqpProtocol(asyncio.Protocol):
    """One client socket."""

    def __init__(self, hub: Hub, auth: Authenticator,
                 register: Callable[[str, AmqpProtocol | None], bool], *, receive_window: int,
                 on_activity: Callable[[], None] | None = None, limits: AmqpLimits | None = None,
                 connection_class: type[AmqpConnection] = AmqpConnection) -> None:
        self.hub = hub
        self.on_activity = on_activity
        self.register = register
        self.limits = limits or AmqpLimits()
        self.transport: asyncio.Transport | None = None
        self.conn = connection_class(f"amqp-{next(_ids)}", hub, auth, on_output=self._schedule_flush,
                                     receive_window=receive_window, flush_now=self.flush, limits=self.limits)
        self._flush_scheduled = False
        self._closing = False
        self._last_input = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._accepted = False
        self.flow: ProducerFlow | None = None
        self.paused = False
        self.writing_paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # not isinstance: uvloop's transports implement the interface without subclassing it
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        self._accepted = self.register(self.conn.conn_id, self)
        if not self._accepted:
            self._closing = True
            self.transport.close()
            return
        loop = asyncio.get_running_loop()
        self._last_input = loop.time()
        if self.limits.open_timeout:
            self._timer = loop.call_later(self.limits.open_timeout, self._open_deadline)
        elif self.limits.idle_timeout:
            self._timer = loop.call_later(self.limits.idle_timeout, self._idle_check)

    def _open_deadline(self) -> None:
        """No completed AMQP open in time (an idle or slowloris socket): close it."""
        self._timer = None
        if self.transport is None or self._closing:
            return
        if not self.conn.opened:
            log.info("AMQP connection %s: no open within %g s, closing", self.conn.conn_id, self.limits.open_timeout)
            self._abort()
            return
        if self.limits.idle_timeout:
            self._idle_check()

    def _idle_check(self) -> None:
        """Close a client that sent nothing for ``idle_timeout``; else look again when it could be."""
        self._timer = None
        if self.transport is None or self._closing:
            return
        loop = asyncio.get_running_loop()
        due = self._last_input + self.limits.idle_timeout
        if loop.time() >= due and not self.paused:
            log.info("AMQP connection %s: idle for %g s, closing", self.conn.conn_id, self.limits.idle_timeout)
            self._abort()
            return
        self._timer = loop.call_at(due, self._idle_check)

    def data_received(self, data: bytes) -> None:
        if self.limits.idle_timeout:
            self._last_input = asyncio.get_running_loop().time()
        try:
            self.conn.receive_data(data)
        except Exception:  # a bug must cost one connection, never the broker
            log.exception("AMQP connection %s failed", self.conn.conn_id)
            self._abort()
            return
        self.flush()
        if self.on_activity is not None:
            self.on_activity()
        if self.flow is not None and self.conn.producer_only and self.flow.over() and self.transport is not None:
            self.transport.pause_reading()  # producer flow control (see ackspec.reference.flow)
            self.flow.pause()
            self.paused = True

    def resume(self) -> None:
        """The stored messages are under the low-water mark again: read this producer again."""
        if self.paused and self.transport is not None and not self._closing:
            self.paused = False
            self._last_input = asyncio.get_running_loop().time()  # paused time is not idle time
            self.transport.resume_reading()

    def eof_received(self) -> bool | None:
        self.flush()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._accepted:
            self.transport = None
            return  # refused at accept (connection limit): never registered
        try:
            self.conn.connection_lost()
        except Exception:
            log.exception("AMQP connection %s failed while closing", self.conn.conn_id)
        if self.on_activity is not None:
            self.on_activity()
        self.register(self.conn.conn_id, None)
        self.transport = None

    def pause_writing(self) -> None:
        self.writing_paused = True
        if self.conn.opened and not self.conn.finished:
            self.hub.apply(self.hub.core.set_writable(self.conn.conn_id, False))

    def resume_writing(self) -> None:
        self.writing_paused = False
        if self.conn.opened and not self.conn.finished:
            self.hub.apply(self.hub.core.set_writable(self.conn.conn_id, True))
            self._give_room()

    def _give_room(self) -> None:
        """Consumer back-pressure (:meth:`~.broker.core.BrokerCore.set_output_room`): once what the core handed
        this connection is in the transport, let it hand what fits under the write high-water mark (at least one
        message); those deliveries go out in the next flush, so a backlog stays queued, not in this buffer."""
        transport = self.transport
        core = self.hub.core
        if transport is None or self.writing_paused or self.conn.conn_id not in core.out_of_room:
            return
        room = max(WRITE_HIGH_WATER - transport.get_write_buffer_size(), 1)
        self.hub.apply(core.set_output_room(self.conn.conn_id, room))

    def _schedule_flush(self) -> None:
        if self._flush_scheduled or self.transport is None:
            return
        self._flush_scheduled = True
        asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._flush_scheduled = False
        transport = self.transport
        if transport is None or self._closing:
            return
        data = self.conn.data_to_send()
        if data:
            transport.write(data)
        self._give_room()
        if self.conn.should_close:
            self._closing = True
            transport.close()

    def abort(self) -> None:
        """Drop the socket now (broker shutdown)."""
        self._abort()

    def _abort(self) -> None:
        if self.transport is not None:
            self._closing = True
            self.transport.abort()


class AmqpListener:
    """Accepts AMQP connections for one broker: each registers with the hub under its id."""

    def __init__(self, hub: Hub, auth: Authenticator | None = None, *,
                 receive_window: int = RECEIVE_WINDOW, on_activity: Callable[[], None] | None = None,
                 limits: AmqpLimits | None = None, connection_class: type[AmqpConnection] = AmqpConnection) -> None:
        """``on_activity`` runs after every batch of input: the server writes the journal there.
        ``connection_class``: what each connection is built as (see :class:`~ackspec.reference.parts.BrokerParts`)."""
        self.connection_class = connection_class
        self.limits = limits or AmqpLimits()
        self.flow: ProducerFlow | None = None
        """Producer flow control shared with the server (None: none)."""
        self.on_activity = on_activity
        self.hub = hub
        self.receive_window = receive_window
        self.auth = auth or Authenticator()
        self.protocols: dict[str, AmqpProtocol] = {}
        self.server: asyncio.Server | None = None

    @property
    def connections(self) -> dict[str, AmqpConnection]:
        return {cid: p.conn for cid, p in self.protocols.items()}

    def _register(self, conn_id: str, protocol: AmqpProtocol | None) -> bool:
        """Track a new connection (False: refused, the connection limit is reached) or forget one."""
        if protocol is None:
            self.protocols.pop(conn_id, None)
            self.hub.detach(conn_id)
            return True
        if len(self.protocols) >= self.limits.max_connections:
            log.warning("AMQP: connection refused, the limit of %d connections is reached", self.limits.max_connections)
            return False
        self.protocols[conn_id] = protocol
        protocol.flow = self.flow
        self.hub.attach(conn_id, protocol.conn)
        return True

    def resume_producers(self) -> None:
        """Read every producer the flow control paused again."""
        for protocol in list(self.protocols.values()):
            protocol.resume()

    async def start(self, host: str, port: int, *, ssl: SSLContext | None = None) -> tuple[str, int]:
        """Listen (over TLS with ``ssl``); returns the bound (host, port) (``port=0`` picks a free one)."""
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: AmqpProtocol(self.hub, self.auth, self._register,
                                                                            receive_window=self.receive_window,
                                                                            on_activity=self.on_activity,
                                                                            limits=self.limits,
                                                                            connection_class=self.connection_class),
                                               host, port, ssl=ssl)
        sock = self.server.sockets[0].getsockname()
        return str(sock[0]), int(sock[1])

    async def stop(self) -> None:
        """Stop accepting and drop every open connection (the core hears of each as abrupt)."""
        if self.server is not None:
            self.server.close()
            self.server = None
        for protocol in list(self.protocols.values()):
            protocol.abort()
