"""Thin asyncio shell around the sans-IO broker: sockets, journal I/O, timers, control API.

* :class:`BrokerServer`: one asyncio server; per connection an :class:`asyncio.Protocol`
  that feeds bytes into a :class:`~ackspec.reference.stomp.session.StompSession` and writes
  what it returns. The connection that sent data gets its answer in the same callback (one
  ``transport.write``), after the journal records it caused were written to the OS; other
  connections that got output (deliveries) are flushed once per loop iteration. Durable
  confirmations wait for an fsync that runs on a dedicated thread (on the loop itself when every
  connection awaits a confirm it covers, with at most one record each: nobody to stall or join it), started
  at most once per loop iteration so that the records of every connection read in that iteration share it;
  records appended meanwhile share the next fsync (group commit). Before starting the next
  fsync the server waits briefly (at most one fsync's duration, ``SYNC_GATHER_MAX``) for the
  connections whose receipts the last fsync released to send again: producers waiting for
  receipts then keep sharing one fsync instead of splitting into alternating halves.
* :class:`EmbeddedBroker`: the broker in a background thread, for tests and the suite::

      with EmbeddedBroker() as broker:             # 127.0.0.1, ephemeral port, temp data dir
          url = broker.stomp_url                   # "stomp://127.0.0.1:PORT"
          broker.faults.add(FaultRule(destination="/queue/slow*", receipt_delay=0.5))
          broker.call(lambda core: core.queue_depth("/queue/x"))   # run on the broker thread
          broker.restart()                         # drop connections, replay the journal
          broker.tracer.counts                     # requirement IDs hit

* Other protocols on the same core (the AMQP 1.0 listener): build the listener on
  ``server.hub`` and ``server.auth``, give it ``server.request_flush`` as its activity
  callback (so journal records it caused are written and fsync'd with everyone else's),
  start it, then ``server.attach_listener(listener)``: :meth:`BrokerServer.stop` stops it
  (``await listener.stop()``) before the journal is closed.
* Control API (``--control HOST:PORT``; ``EmbeddedBroker(control=True)``): JSON over HTTP/1.1, off unless
  asked for, on a loopback address only (it can make the broker lose messages), and every request must carry
  ``Authorization: Bearer <token>`` (``control_token``; generated when not given): 401 otherwise.
  ``GET /faults`` -> configuration; ``POST /faults/rules`` body = FaultRule fields ->
  ``{"id": N}``; ``DELETE /faults/rules/N``; ``DELETE /faults`` clears all; ``GET /trace`` -> counts
  of requirement IDs; ``GET /health`` -> ``{"ok": true}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import importlib
import ipaddress
import json
import logging
import secrets
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

from ackspec.errors import AckspecError
from ackspec.reference.amqp.listener import AmqpListener
from ackspec.reference.broker.auth import Authenticator
from ackspec.reference.broker.core import BrokerCore
from ackspec.reference.broker.model import CoreConfig
from ackspec.reference.broker.trace import Tracer
from ackspec.reference.faults import FaultInjector, FaultRule
from ackspec.reference.flow import WRITE_HIGH_WATER, ProducerFlow
from ackspec.reference.journal import Journal
from ackspec.reference.limits import AmqpLimits
from ackspec.reference.parts import REFERENCE_PARTS, BrokerParts
from ackspec.reference.stomp.codec import encode
from ackspec.reference.stomp.frames import ERROR, Frame
from ackspec.reference.stomp.session import SessionConfig, StompSession
from ackspec.reference.stomp.websocket import WebSocketListener

log = logging.getLogger("ackspec.reference.server")
T = TypeVar("T")

TICK_SECONDS = 0.02
SYNC_GATHER_MAX = 0.002
"""Longest wait (s) for just-released producers before the next fsync (also capped by the last fsync's duration)."""
SYNC_GATHER_MIN = 0.0005
DRAIN_SECONDS = 2.0
"""After an ERROR: how long the rest of the peer's input is read and discarded before the socket closes."""


class Listener(Protocol):
    """An extra protocol listener sharing this server's core (e.g. AMQP 1.0)."""

    async def stop(self) -> None: ...


class Egress(Protocol):
    """Where a STOMP connection's output goes instead of ``transport.write`` (``BrokerServer(egress=...)``).

    Off by default (None): output goes straight to the transport. Benchmarks plug in a delay line
    here (benchmarks/rtt_bench.py), the in-process equivalent of netem on the broker's interface."""

    def write(self, data: bytes) -> None: ...

    def close(self) -> None:
        """Close the transport once everything written before has gone out."""

    def connection_lost(self) -> None:
        """The transport is gone: drop what is still queued."""


EgressFactory = Callable[[asyncio.Transport], Egress]


class BrokerServer:
    """The reference broker on an asyncio loop. Use :meth:`start` / :meth:`stop` inside the loop."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        data_dir: str | Path | None = None,
        core_config: CoreConfig | None = None,
        session_config: SessionConfig | None = None,
        auth: Authenticator | None = None,
        faults: FaultInjector | None = None,
        tracer: Tracer | None = None,
        max_connections: int = 1000,
        control: tuple[str, int] | None = None,
        amqp: tuple[str, int] | None = None,
        ws: tuple[str, int] | None = None,
        egress: EgressFactory | None = None,
        journal_recover: str = "refuse",
        control_token: str | None = None,
        tls: ssl.SSLContext | None = None,
        amqp_limits: AmqpLimits | None = None,
        flow: ProducerFlow | None = None,
        parts: BrokerParts = REFERENCE_PARTS,
    ) -> None:
        self.parts = parts
        """The classes of the core, the STOMP sessions and the AMQP connections (:mod:`~ackspec.reference.parts`)."""
        self.flow = flow or ProducerFlow()
        """Producer flow control (:mod:`~ackspec.reference.flow`): producers wait while too much is stored."""
        self._paused: dict[str, _StompProtocol] = {}
        self.amqp_limits = amqp_limits or AmqpLimits(max_connections=max_connections)
        """The AMQP listener's limits (:mod:`~ackspec.reference.limits`)."""
        self.tls = tls
        """Server-side TLS context for the STOMP and AMQP listeners (:mod:`~ackspec.reference.tls`); None = plain."""
        self.control_token = control_token or secrets.token_urlsafe(24)
        """What the control API's ``Authorization: Bearer`` header must carry."""
        self.journal_recover = journal_recover
        """What replay does about damage in the middle of the journal (:data:`~.journal.log.RECOVERY_MODES`)."""
        self.egress = egress
        """Optional wrapper of each STOMP connection's output (see :class:`Egress`); None = the transport."""
        self.amqp_address = amqp
        """AMQP 1.0 listener (host, port); port 0 = ephemeral, the bound one after :meth:`start`."""
        self.amqp_listener: AmqpListener | None = None
        self.ws_address = ws
        """STOMP over WebSocket listener (host, port); port 0 = ephemeral, the bound one after :meth:`start`."""
        self.host = host
        self.port = port
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.core_config = core_config or CoreConfig()
        if self.core_config.output_room is None:  # consumer back-pressure (see _StompProtocol.give_room)
            self.core_config = dataclasses.replace(self.core_config, output_room=WRITE_HIGH_WATER)
        self.session_config = session_config or SessionConfig()
        self.auth = auth or Authenticator()
        self.faults = faults or FaultInjector()
        self.tracer = tracer or Tracer()
        self.max_connections = max_connections
        self.control_address = control
        self.core = parts.core(self.core_config, tracer=self.tracer, faults=self.faults)
        self.hub = parts.hub(self.core)
        self.journal: Journal | None = None
        self.protocols: dict[str, _StompProtocol] = {}
        self._dirty: dict[str, _StompProtocol] = {}
        self._flush_scheduled = False
        self._syncing = False
        self._written = 0  # journal seq written to the OS
        self._sync_thread: ThreadPoolExecutor | None = None
        self._gather: asyncio.TimerHandle | None = None
        self._last_sync_seconds = SYNC_GATHER_MIN
        self._conn_ids = 0
        self._server: asyncio.Server | None = None
        self._control_server: asyncio.Server | None = None
        self._ticker: asyncio.Task[None] | None = None
        self.listeners: list[Listener] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        self.clock = time.monotonic

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        if self.data_dir is not None:
            self.auth.owners.load(self.data_dir / "client-ids.json")
            self.journal = Journal(self.data_dir, recover=self.journal_recover)
            records, report = self.journal.replay()
            self.core.restore(records)
            if report.records > 1000:
                live = self.core.live_records()
                if len(live) * 2 < report.records:
                    log.info("journal: compacting %d records to %d", report.records, len(live))
                    self.journal.rewrite(live)
            self.journal.open()
            self._sync_thread = ThreadPoolExecutor(1, thread_name_prefix="ackspec-journal-sync")
            log.info("journal %s: replayed %d record(s)", self.journal.path, report.records)
        else:
            self.hub.journaling = False
        self._server = await self.loop.create_server(lambda: _StompProtocol(self), self.host, self.port, ssl=self.tls)
        sock = self._server.sockets[0].getsockname()
        self.port = int(sock[1])
        if self.control_address is not None:
            chost, cport = self.control_address
            require_loopback(chost)
            self._control_server = await asyncio.start_server(self._control, chost, cport)
            self.control_address = (chost, int(self._control_server.sockets[0].getsockname()[1]))
        if self.amqp_address is not None:
            self.amqp_listener = AmqpListener(self.hub, self.auth, on_activity=self._amqp_activity,
                                              limits=self.amqp_limits, connection_class=self.parts.amqp_connection)
            self.amqp_listener.flow = self.flow
            self.amqp_address = await self.amqp_listener.start(*self.amqp_address, ssl=self.tls)
        if self.ws_address is not None:
            ws_listener = WebSocketListener(self)
            self.ws_address = await ws_listener.start(*self.ws_address, ssl=self.tls)
            self.attach_listener(ws_listener)
        self._ticker = self.loop.create_task(self._tick_forever())

    def _amqp_activity(self) -> None:
        """An AMQP connection ran core calls: write the journal and flush STOMP output they caused."""
        for p in list(self.protocols.values()):
            if p.session.has_output:
                self.mark_dirty(p)
        if not self._flush_scheduled and self.loop is not None:
            self._flush_scheduled = True
            self.loop.call_soon(self.flush)

    async def stop(self, *, crash: bool = False) -> None:
        """Stop; ``crash=True`` simulates a power loss: whatever no fsync had covered when it began is lost."""
        synced = self.journal.synced_size if self.journal is not None else 0
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        for server in (self._server, self._control_server):
            if server is not None:
                server.close()
        for p in list(self.protocols.values()):
            p.abort()
        if self.amqp_listener is not None:
            await self.amqp_listener.stop()
        for listener in self.listeners:
            await listener.stop()
        for server in (self._server, self._control_server):
            if server is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(server.wait_closed(), 2)
        while self._syncing:
            await asyncio.sleep(0.005)
        if self._gather is not None:
            self._gather.cancel()
            self._gather = None
        if not crash:
            self._write_journal(start_sync=False)
        if self._sync_thread is not None:
            self._sync_thread.shutdown(wait=True)
            self._sync_thread = None
        if self.journal is not None and crash:
            self.journal.close()
            log.info("crash: %d unsynced journal byte(s) lost", self.journal.lose_unsynced(synced))
        elif self.journal is not None:
            self.journal.sync()
            log.info("journal: %d record(s) written, %d fsync(s)", self.journal.records_written, self.journal.syncs)
            self.journal.close()

    # ------------------------------------------------------------------ connections
    def new_session(self) -> StompSession:
        self._conn_ids += 1
        return self.parts.stomp_session(f"stomp-{self._conn_ids}", self.hub, config=self.session_config,
                                        auth=self.auth, clock=self.clock, faults=self.faults, tracer=self.tracer)

    def attach_listener(self, listener: Listener) -> None:
        """Stop ``listener`` with this server (see the module docstring)."""
        self.listeners.append(listener)

    def request_flush(self) -> None:
        """Schedule a flush: journal records are written (and fsync'd for waiting confirms)."""
        if not self._flush_scheduled and self.loop is not None:
            self._flush_scheduled = True
            self.loop.call_soon(self.flush)

    def mark_dirty(self, proto: _StompProtocol) -> None:
        self._dirty[proto.session.conn_id] = proto
        if not self._flush_scheduled:
            self._flush_scheduled = True
            assert self.loop is not None
            self.loop.call_soon(self.flush)

    def feed(self, proto: _StompProtocol, data: bytes) -> None:
        """Hand one read of ``proto``'s input to its session; the output it causes is written by
        ``after_input`` at once, not by a flush scheduled meanwhile (one write per read). So the session
        does not call its ``on_output`` (to be marked for that flush) while it reads."""
        session = proto.session
        scheduled, on_output = self._flush_scheduled, session.on_output
        self._flush_scheduled = True
        session.on_output = None
        try:
            session.receive_data(data)
        finally:
            self._flush_scheduled = scheduled
            session.on_output = on_output
        self.after_input(proto)

    def after_input(self, proto: _StompProtocol) -> None:
        """``proto`` processed input: write the journal records it caused, answer it at once,
        and leave the rest (other connections' output, the fsync) to this iteration's flush."""
        if self.hub.journaling:
            self._write_journal(start_sync=False)
        if proto.session.has_output or proto.session.close_requested:
            self._dirty.pop(proto.session.conn_id, None)
            proto.flush()
        if not self._flush_scheduled and (self._dirty or self._written > self.hub.synced):
            self._flush_scheduled = True
            assert self.loop is not None
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write this iteration's journal records (start an fsync), then every connection's pending output."""
        self._flush_scheduled = False
        self._write_journal()
        dirty = self._dirty
        if not dirty:
            return
        self._dirty = {}
        for p in dirty.values():
            p.flush()
        if self._dirty and not self._flush_scheduled:  # a flush produced more (e.g. requeue on close)
            self._flush_scheduled = True
            assert self.loop is not None
            self.loop.call_soon(self.flush)

    def _write_journal(self, *, start_sync: bool = True) -> None:
        hub = self.hub
        if not hub.journaling:
            return
        if hub.appended > self._written:  # records appended since the last write (none on most reads)
            records, self._written = hub.take_journal()
            assert self.journal is not None
            self.journal.append(records)
        if start_sync and self._written > hub.synced and not self._syncing:
            self._maybe_sync()

    def _maybe_sync(self) -> None:
        """Start the fsync now, or once the producers the last one released have sent again."""
        hub = self.hub
        waiting_for = [c for c in hub.released if c not in hub.awaiting and c in hub.handlers]
        if waiting_for and self.loop is not None and SYNC_GATHER_MAX > 0:
            if self._gather is None:
                delay = min(SYNC_GATHER_MAX, max(SYNC_GATHER_MIN, self._last_sync_seconds))
                self._gather = self.loop.call_later(max(delay, timer_floor(self.loop)), self._gather_expired)
            return
        self._start_sync()

    def _gather_expired(self) -> None:
        self._gather = None
        self.hub.released = frozenset()
        self._write_journal()

    def _start_sync(self) -> None:
        if self._gather is not None:
            self._gather.cancel()
            self._gather = None
        self.hub.released = frozenset()
        executor, loop = self._sync_thread, self.loop
        if executor is None or loop is None:
            return
        self._syncing = True
        target = self._written
        if self._sync_alone(target):
            self._synced(target, self._sync_here())
            return
        fut = executor.submit(self._sync)
        fut.add_done_callback(lambda f: loop.call_soon_threadsafe(self._synced_future, target, f))

    def _sync_alone(self, target: int) -> bool:
        """Every connection on the whole broker (any protocol) waits for a confirm this fsync covers and
        has at most one record in it (one record per connection at most, each holding just that confirm):
        clients awaiting their receipts are stalled by nothing then, and have nothing to add to it (one that
        sends meanwhile is read at most one fsync later). It then runs on the loop, sparing
        the hand-over to the sync thread and back (about 20 us of CPU and two thread wake-ups per fsync), for
        a lone producer awaiting each receipt as for a group of them (persistent-8). With a connection that
        waits for nothing here (a consumer, an idle one), or more records than connections (a pipelining
        producer), the thread keeps the loop free while the disk syncs; so it does on a disk made slow on
        purpose (fault injection's ``sync_delay``), where a simulated power loss, which runs on the loop, must
        be able to strike while the fsync is under way."""
        journal = self.journal
        if journal is None or journal.sync_delay != 0:
            return False
        hub = self.hub
        records, connections = target - hub.synced, len(hub.handlers)
        if records == 1 and connections <= 1:
            return True
        return records <= connections and hub.all_wait_once_for(target)

    def _sync_here(self) -> float | Exception:
        """The fsync on the calling thread: its duration, or the error it raised."""
        try:
            return self._sync()
        except Exception as exc:  # reported by _synced exactly like a failure on the sync thread
            return exc

    def _sync(self) -> float:
        """On the sync thread: fsync, and how long it took."""
        t0 = time.perf_counter()
        if self.journal is not None:
            self.journal.sync()
        return time.perf_counter() - t0

    def _synced_future(self, target: int, fut: Future[float]) -> None:
        exc = fut.exception()
        self._synced(target, fut.result() if exc is None else cast(Exception, exc))

    def _synced(self, target: int, outcome: float | Exception) -> None:
        """The fsync up to record ``target`` finished (``outcome``: its seconds) or failed: release the
        confirms it covers and write them."""
        self._syncing = False
        if isinstance(outcome, Exception):
            log.error("journal fsync failed: %s", outcome)
            return
        self._last_sync_seconds = outcome
        scheduled = self._flush_scheduled
        self._flush_scheduled = True  # released receipts are written by the flush below, not a later one
        try:
            self.hub.mark_synced(target)
            for p in list(self.protocols.values()):
                if p.session.has_output:
                    self._dirty[p.session.conn_id] = p
        finally:
            self._flush_scheduled = scheduled
        self.flush()  # writes the receipts and starts the next group if more records arrived

    def pause_producer(self, proto: _StompProtocol) -> None:
        """Stop reading a producer-only STOMP connection while too much is stored (flow control)."""
        if proto.transport is not None and proto.session.conn_id not in self._paused:
            proto.transport.pause_reading()
            self._paused[proto.session.conn_id] = proto
            self.flow.pause()

    def _resume_producers(self) -> None:
        for proto in self._paused.values():
            if not proto.closed and proto.transport is not None:
                proto.transport.resume_reading()
        self._paused.clear()
        if self.amqp_listener is not None:
            self.amqp_listener.resume_producers()

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            if self.flow.holding and self.flow.may_resume():
                self.flow.holding = False
                self._resume_producers()
            now = self.clock()
            for p in list(self.protocols.values()):
                s = p.session
                deadline = s.next_deadline()
                if deadline is not None and deadline <= now:
                    s.tick(now)
                    if s.has_output or s.close_requested:
                        self.mark_dirty(p)

    # ------------------------------------------------------------------ control API
    async def _control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            body = await reader.readexactly(length) if length else b""
            if not hmac.compare_digest(_bearer(lines[1:]).encode(), self.control_token.encode()):
                status, payload = 401, {"error": "missing or wrong 'Authorization: Bearer <token>'"}
            else:
                status, payload = self.control_request(method, path, json.loads(body) if body else None)
        except Exception as exc:  # one clear answer, never a crash of the broker
            status, payload = 400, {"error": str(exc)}
        data = json.dumps(payload).encode()
        writer.write(f"HTTP/1.1 {status} {'OK' if status < 400 else 'Error'}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
        with contextlib.suppress(Exception):
            await writer.drain()
        writer.close()

    def control_request(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        """The control API as a function (used by the HTTP handler and by tests)."""
        f = self.faults
        parts = [p for p in path.split("/") if p]
        try:
            if method == "GET" and parts == ["health"]:
                return 200, {"ok": True, "port": self.port}
            if method == "GET" and parts == ["faults"]:
                return 200, f.snapshot()
            if method == "DELETE" and parts == ["faults"]:
                f.clear()
                return 200, {"ok": True}
            if method == "POST" and parts == ["faults", "rules"]:
                return 200, {"id": f.add(FaultRule.from_json(body or {}))}
            if method == "DELETE" and parts[:2] == ["faults", "rules"] and len(parts) == 3:
                f.remove(int(parts[2]))
                return 200, {"ok": True}
            if method == "GET" and parts == ["trace"]:
                return 200, dict(self.tracer.counts)
        except (ValueError, KeyError, TypeError) as exc:
            return 400, {"error": str(exc)}
        return 404, {"error": f"no such endpoint: {method} {path}"}


def _bearer(header_lines: list[str]) -> str:
    """The token of an ``Authorization: Bearer`` header ("" when there is none)."""
    for line in header_lines:
        name, _, value = line.partition(":")
        scheme, _, token = value.strip().partition(" ")
        if name.strip().lower() == "authorization" and scheme.lower() == "bearer":
            return token.strip()
    return ""


def require_loopback(host: str) -> None:
    """The control API can turn on message loss: refuse to expose it beyond this machine."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise AckspecError(f"the control API listens on loopback only (127.0.0.1, ::1, localhost), not {host!r}")


class _StompProtocol(asyncio.Protocol):
    def __init__(self, server: BrokerServer) -> None:
        self.server = server
        self.session = server.new_session()
        self.session.on_output = lambda: server.mark_dirty(self)
        self.transport: asyncio.Transport | None = None
        self.egress: Egress | None = None
        self.closed = False
        self.writing_paused = False
        self._drain_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # not isinstance: uvloop's transports implement the interface without subclassing it
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if len(self.server.protocols) >= self.server.max_connections:
            msg = f"too many connections (limit {self.server.max_connections})"
            self.transport.write(encode(Frame(ERROR, (("message", msg),))))
            transport.close()
            self.closed = True
            self.server.hub.detach(self.session.conn_id)
            return
        if self.server.egress is not None:
            self.egress = self.server.egress(self.transport)
        self.server.protocols[self.session.conn_id] = self

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        server = self.server
        server.feed(self, data)
        flow = server.flow
        if flow.limit and flow.over() and self.session.producer_only:
            server.pause_producer(self)

    def flush(self) -> None:
        if self.closed or self.transport is None:
            return
        data = self.session.take_output()
        egress = self.egress
        if data:
            if egress is None:
                self.transport.write(data)
            else:
                egress.write(data)
        if self.session.conn_id in self.server.core.out_of_room and not self.writing_paused:
            self.give_room()
        if self.session.close_requested:
            self.closed = True
            if egress is None:
                self._close_after_output()
            else:
                egress.close()
            self.server.protocols.pop(self.session.conn_id, None)

    def _close_after_output(self) -> None:
        """Close once the output (an ERROR, a RECEIPT) is sent, without resetting the connection.

        Closing a socket with unread input makes the kernel send a reset, which can destroy the ERROR
        before the peer reads it. So shut down our side (FIN after the output) and read on, discarding,
        until the peer closes, for at most :data:`DRAIN_SECONDS`."""
        transport = self.transport
        assert transport is not None
        if not transport.can_write_eof():  # TLS: no half-close
            transport.close()
            return
        transport.write_eof()
        loop = asyncio.get_running_loop()
        self._drain_timer = loop.call_later(DRAIN_SECONDS, transport.close)

    def give_room(self) -> None:
        """Let the core hand this consumer what fits under the write high-water mark (at least one message).

        Called once what the core handed it is in the transport; the deliveries it causes go out in the next
        flush (the next loop iteration), so the socket drains between batches and the transport never holds
        much more than :data:`WRITE_HIGH_WATER`: a backlog stays in its queue, not in this buffer."""
        assert self.transport is not None
        room = max(WRITE_HIGH_WATER - self.transport.get_write_buffer_size(), 1)
        self.server.hub.apply(self.server.core.set_output_room(self.session.conn_id, room))

    def pause_writing(self) -> None:
        self.writing_paused = True
        self.server.hub.apply(self.server.core.set_writable(self.session.conn_id, False))

    def resume_writing(self) -> None:
        self.writing_paused = False
        if self.server.core.has_connection(self.session.conn_id) and not self.closed:
            self.server.hub.apply(self.server.core.set_writable(self.session.conn_id, True))
            if self.session.conn_id in self.server.core.out_of_room:
                self.give_room()
            self.server.mark_dirty(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._drain_timer is not None:
            self._drain_timer.cancel()
        self.server._paused.pop(self.session.conn_id, None)
        if self.egress is not None:
            self.egress.connection_lost()
        self.server.protocols.pop(self.session.conn_id, None)
        self.session.connection_lost()
        self.server.flush()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


def timer_floor(loop: asyncio.AbstractEventLoop) -> float:
    """The shortest ``call_later`` delay ``loop`` really waits for (s).

    uvloop's timers are libuv's, in whole milliseconds: a delay under 0.5 ms rounds to none at all (the
    callback runs in the next iteration), so a sub-millisecond group-commit gather would not gather. On
    uvloop the gather is therefore at least 1 ms; it still ends as soon as the producers it waits for have
    sent (:meth:`BrokerServer._maybe_sync`), so the longer bound only costs when one of them does not."""
    return 0.001 if type(loop).__module__.startswith("uvloop") else 0.0


def new_event_loop(kind: str = "asyncio") -> asyncio.AbstractEventLoop:
    """A new event loop: asyncio's, or uvloop's for ``kind="uvloop"`` (falls back to asyncio's when
    uvloop is not installed). uvloop runs the loop and the transports in C: the benchmark's receipt
    round trip needs less broker CPU (docs/rtt-benchmark.md). The STOMP server and the AMQP listener
    work on both."""
    if kind == "uvloop":
        try:
            uvloop = importlib.import_module("uvloop")  # optional dependency
        except ImportError:
            log.info("uvloop is not installed: using asyncio's event loop")
        else:
            return cast(asyncio.AbstractEventLoop, uvloop.new_event_loop())
    elif kind != "asyncio":
        raise ValueError(f"unknown event loop {kind!r} (asyncio, uvloop)")
    return asyncio.new_event_loop()


class EmbeddedBroker:
    """The reference broker in a background thread (see the module docstring).

    ``data_dir=None`` uses a fresh temporary directory (journaling on, removed on stop);
    pass ``persistent=False`` for an in-memory broker (no journal, :meth:`restart` loses all).
    Thread safety: ``faults`` may be changed from any thread; the core must only be touched
    through :meth:`call`.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        data_dir: str | Path | None = None,
        persistent: bool = True,
        core_config: CoreConfig | None = None,
        session_config: SessionConfig | None = None,
        auth: Authenticator | None = None,
        control: bool | tuple[str, int] = False,
        trace: bool = False,
        amqp: bool | tuple[str, int] = False,
        egress: EgressFactory | None = None,
        event_loop: str = "asyncio",
        journal_recover: str = "refuse",
        tls: ssl.SSLContext | None = None,
        amqp_limits: AmqpLimits | None = None,
        flow: ProducerFlow | None = None,
        ws: bool | tuple[str, int] = False,
        parts: BrokerParts = REFERENCE_PARTS,
    ) -> None:
        self.parts = parts
        """What the broker is built from (:mod:`~ackspec.reference.parts`); kept across restarts."""
        self.ws = (host, 0) if ws is True else (ws or None)
        """STOMP over WebSocket listener (host, port), None: none; the bound port after start."""
        self.flow = flow
        self.amqp_limits = amqp_limits
        self.tls = tls
        """Server-side TLS context: the listeners speak ``stomp+ssl://`` and ``amqps://``."""
        self.journal_recover = journal_recover
        self.control_token = secrets.token_urlsafe(24)
        """The control API's bearer token (same across restarts)."""
        self.egress = egress
        self.event_loop = event_loop
        """"asyncio" (default) or "uvloop" (if installed; see :func:`new_event_loop`)."""
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None and persistent:
            self._tmp = tempfile.TemporaryDirectory(prefix="ackspec-broker-")
            data_dir = self._tmp.name
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.host = host
        self.port = port
        self.core_config = core_config
        self.session_config = session_config
        self.auth = auth
        self.faults = FaultInjector()
        self.tracer = Tracer(log_hits=trace)
        self.control = ("127.0.0.1", 0) if control is True else (control or None)
        self.amqp = (host, 0) if amqp is True else (amqp or None)
        self.server: BrokerServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> EmbeddedBroker:
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = new_event_loop(self.event_loop)
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._start_server())
            except BaseException as exc:
                errors.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="ackspec-embedded-broker", daemon=True)
        self._thread.start()
        ready.wait(30)
        if errors:
            raise errors[0]
        return self

    async def _start_server(self) -> None:
        control = self.control if isinstance(self.control, tuple) else None
        self.server = BrokerServer(host=self.host, port=self.port, data_dir=self.data_dir,
                                   control_token=self.control_token, tls=self.tls, amqp_limits=self.amqp_limits,
                                   flow=self.flow, parts=self.parts,
                                   core_config=self.core_config, session_config=self.session_config,
                                   auth=self.auth, faults=self.faults, tracer=self.tracer, control=control,
                                   amqp=self.amqp, egress=self.egress, journal_recover=self.journal_recover,
                                   ws=self.ws)
        await self.server.start()
        self.amqp = self.server.amqp_address  # keep the bound port across restarts
        self.ws = self.server.ws_address
        self.port = self.server.port
        if control is not None and self.server.control_address is not None:
            self.control = self.server.control_address

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        if self.server is not None:
            asyncio.run_coroutine_threadsafe(self.server.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(30)
        self._loop = None
        self.server = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def restart(self, *, crash: bool = False) -> None:
        """Stop (connections dropped abruptly), then start on the same port replaying the journal.

        ``crash=True``: a power loss; journal writes no fsync had covered are lost."""
        loop = self._loop
        assert loop is not None and self.server is not None
        asyncio.run_coroutine_threadsafe(self._restart(crash), loop).result(60)

    async def _restart(self, crash: bool = False) -> None:
        assert self.server is not None
        await self.server.stop(crash=crash)
        await self._start_server()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ access
    @property
    def stomp_url(self) -> str:
        return f"{'stomp+ssl' if self.tls is not None else 'stomp'}://{self.host}:{self.port}"

    @property
    def stomp_address(self) -> tuple[str, int]:
        return (self.host, self.port)

    @property
    def amqp_url(self) -> str | None:
        scheme = "amqps" if self.tls is not None else "amqp"
        return f"{scheme}://{self.amqp[0]}:{self.amqp[1]}" if self.amqp is not None else None

    @property
    def control_url(self) -> str | None:
        return f"http://{self.control[0]}:{self.control[1]}" if isinstance(self.control, tuple) else None

    @property
    def core(self) -> BrokerCore:
        """The live core. Read it through :meth:`call` while the broker runs."""
        assert self.server is not None
        return self.server.core

    def call(self, fn: Callable[[BrokerCore], T], timeout: float = 10) -> T:
        """Run ``fn(core)`` on the broker thread and return its result."""
        loop = self._loop
        assert loop is not None

        async def run() -> T:
            return fn(self.core)

        return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout)
