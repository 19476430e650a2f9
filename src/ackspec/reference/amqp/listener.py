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

from ackspec.reference.amqp.connection import AmqpConnection, Gateway
from ackspec.reference.broker import Effect

log = logging.getLogger(__name__)

_ids = itertools.count(1)


class AmqpProtocol(asyncio.Protocol):
    """One client socket."""

    def __init__(self, gateway: Gateway, register: Callable[[str, AmqpConnection | None], None]) -> None:
        self.gateway = gateway
        self.register = register
        self.transport: asyncio.Transport | None = None
        self.conn = AmqpConnection(f"amqp-{next(_ids)}", gateway, on_output=self._schedule_flush)
        self._flush_scheduled = False
        self._closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.register(self.conn.conn_id, self.conn)

    def data_received(self, data: bytes) -> None:
        try:
            self.conn.receive_data(data)
        except Exception:  # a bug must cost one connection, never the broker
            log.exception("AMQP connection %s failed", self.conn.conn_id)
            self._abort()
            return
        self.flush()

    def eof_received(self) -> bool | None:
        self.flush()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        try:
            self.conn.connection_lost()
        except Exception:
            log.exception("AMQP connection %s failed while closing", self.conn.conn_id)
        self.register(self.conn.conn_id, None)
        self.transport = None

    def pause_writing(self) -> None:
        if self.conn.opened and not self.conn.finished:
            self.gateway.execute(self.gateway.core.set_writable(self.conn.conn_id, False))

    def resume_writing(self) -> None:
        if self.conn.opened and not self.conn.finished:
            self.gateway.execute(self.gateway.core.set_writable(self.conn.conn_id, True))

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
        if self.conn.should_close:
            self._closing = True
            transport.close()

    def _abort(self) -> None:
        if self.transport is not None:
            self._closing = True
            self.transport.abort()


class AmqpListener:
    """Accepts AMQP connections for one broker (``gateway``) and keeps them addressable by id."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.connections: dict[str, AmqpConnection] = {}
        self.server: asyncio.Server | None = None

    def _register(self, conn_id: str, conn: AmqpConnection | None) -> None:
        if conn is None:
            self.connections.pop(conn_id, None)
        else:
            self.connections[conn_id] = conn

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen; returns the bound (host, port) (``port=0`` picks a free one)."""
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: AmqpProtocol(self.gateway, self._register), host, port)
        sock = self.server.sockets[0].getsockname()
        return str(sock[0]), int(sock[1])

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None

    def owns(self, conn_id: str) -> bool:
        return conn_id in self.connections

    def apply(self, conn_id: str, effect: Effect) -> bool:
        """Route an effect to its connection; False if the connection is not (or no longer) ours."""
        conn = self.connections.get(conn_id)
        if conn is None:
            return False
        conn.apply(effect)
        return True
