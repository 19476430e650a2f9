"""STOMP over WebSocket (RFC 6455, subprotocols ``v12.stomp``, ``v11.stomp``, ``v10.stomp``): the
transport browsers and ``@stomp/stompjs`` use, on the same broker as the TCP listener.

The handshake, framing, masking, ping/pong and close are the ``websockets`` library's; this module only
carries bytes between WebSocket messages and a :class:`~ackspec.reference.stomp.session.StompSession`, as
the TCP protocol of :mod:`ackspec.reference.server` does with a socket. A message may hold part of a frame,
one frame or several (the session's codec reassembles the stream); what the session writes goes out as one
message per flush, a text message when it is UTF-8 (what browser clients expect), else binary. A handshake
without one of the STOMP subprotocols is refused (HTTP 400 from the library).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from ssl import SSLContext
from typing import TYPE_CHECKING

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from ackspec.reference.flow import WRITE_HIGH_WATER

if TYPE_CHECKING:
    from ackspec.reference.server import BrokerServer
    from ackspec.reference.stomp.session import StompSession

log = logging.getLogger("ackspec.reference.websocket")

SUBPROTOCOLS = [Subprotocol("v12.stomp"), Subprotocol("v11.stomp"), Subprotocol("v10.stomp")]


class _WsStomp:
    """One STOMP session over one WebSocket connection; the interface the server flushes and ticks."""

    def __init__(self, server: BrokerServer, ws: ServerConnection) -> None:
        self.server = server
        self.ws = ws
        self.session: StompSession = server.new_session()
        self.session.on_output = lambda: server.mark_dirty(self)  # type: ignore[arg-type]  # same interface
        self.closed = False
        self._out: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.queued = 0
        """Bytes handed to the writer and not yet sent (what consumer back-pressure bounds)."""

    def flush(self) -> None:
        """Hand what the session wrote to the writer (in order); close after it when the session ended."""
        if self.closed:
            return
        data = self.session.take_output()
        if data:
            self._out.put_nowait(data)
            self.queued += len(data)
        self._give_room()
        if self.session.close_requested:
            self.closed = True
            self._out.put_nowait(None)
            self.server.protocols.pop(self.session.conn_id, None)

    def _give_room(self) -> None:
        """Consumer back-pressure, as the TCP protocol does: the core may hand this connection what fits under
        :data:`~ackspec.reference.flow.WRITE_HIGH_WATER` besides what the writer still holds (at least one
        message), once the writer has sent enough."""
        core = self.server.core
        conn_id = self.session.conn_id
        if conn_id in core.out_of_room and self.queued < WRITE_HIGH_WATER and not self.closed:
            self.server.hub.apply(core.set_output_room(conn_id, WRITE_HIGH_WATER - self.queued))

    def abort(self) -> None:
        self.closed = True
        self._out.put_nowait(None)

    async def write_forever(self) -> None:
        """Send each flush as one WebSocket message, then close the connection when told."""
        while (data := await self._out.get()) is not None:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                await self.ws.send(data)
            else:
                await self.ws.send(text)
            self.queued -= len(data)
            self._give_room()
        await self.ws.close()

    def receive(self, message: str | bytes) -> None:
        data = message.encode("utf-8") if isinstance(message, str) else message
        self.server.feed(self, data)  # type: ignore[arg-type]  # the TCP protocol's interface

    def lost(self) -> None:
        self.closed = True
        self.server.protocols.pop(self.session.conn_id, None)
        self.session.connection_lost()
        self.server.flush()


class WebSocketListener:
    """``ackspec broker --ws HOST:PORT``: STOMP over WebSocket on ``server``'s broker."""

    def __init__(self, server: BrokerServer) -> None:
        self.server = server
        self._ws_server: Server | None = None

    async def start(self, host: str, port: int, *, ssl: SSLContext | None = None) -> tuple[str, int]:
        """Listen (``ssl``: ``wss://``); returns the bound (host, port) (port 0 = ephemeral)."""
        self._ws_server = await serve(self._handle, host, port, subprotocols=SUBPROTOCOLS, ssl=ssl,
                                      max_size=self.server.session_config.max_frame + 1024)
        bound = next(iter(self._ws_server.sockets)).getsockname()
        return host, int(bound[1])

    async def _handle(self, ws: ServerConnection) -> None:
        conn = _WsStomp(self.server, ws)
        if len(self.server.protocols) >= self.server.max_connections:
            await ws.close(1013, f"too many connections (limit {self.server.max_connections})")
            self.server.hub.detach(conn.session.conn_id)
            return
        self.server.protocols[conn.session.conn_id] = conn  # type: ignore[assignment]  # same interface
        writer = asyncio.create_task(conn.write_forever())
        try:
            async for message in ws:
                conn.receive(message)
                if conn.closed:
                    break
        except ConnectionClosed:
            pass
        finally:
            if not conn.closed:
                conn.abort()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer, 2)
            conn.lost()

    async def stop(self) -> None:
        if self._ws_server is not None:
            self._ws_server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._ws_server.wait_closed(), 2)
