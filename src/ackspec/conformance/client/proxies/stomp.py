"""Confirmation control for client-side tests: a STOMP-aware proxy in front of the broker.

Client-side rules are about *when* confirmations arrive and in *which order*: a blocking
send must not return while its receipt is outstanding (7.2), callbacks must follow send
order even when confirmations arrive out of order (7.3.8), a full publish window must
block the sender (Solace). The reference broker's fault rules delay, batch or reject
receipts, but keep them in order and are timed. This module adds what those rules need
on top, without touching the broker: a proxy that sits between the client and
:class:`~ackspec.reference.server.EmbeddedBroker` (or any STOMP broker) and

* **gates** receipts (:meth:`ConfirmationProxy.hold`): the RECEIPTs answering frames
  that match (command and destination pattern) are held until the test releases them,
  one by one, in any order, or all at once -- deterministic, no clocks;
* can **reject** a held SEND receipt as the broker's nack policy would
  (``RECEIPT`` with ``ackspec-nack:true``), to script rejection sequences exactly;
* **counts** what the client wrote (:meth:`ConfirmationProxy.seen`), so a test can tell
  "the client wrote N SENDs and is blocked" from outside any client library;
* adds a fixed **one-way delay** in both directions (the RTT benchmark's network).

The proxy speaks plain STOMP on both sides; it forwards client bytes untouched and
re-encodes broker frames (heart-beats preserved). It runs its own event loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import select
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ackspec.reference.stomp import Frame, FrameParser, HeartBeat, StompProtocolError, encode

NACK_HEADER = "ackspec-nack"


@dataclass(frozen=True, slots=True)
class Answered:
    """What a held receipt answers: the client frame that asked for it."""

    receipt_id: str
    command: str
    destination: str | None
    connection: int
    index: int  # order in which the proxy saw the client frames (per proxy)


@dataclass(eq=False)
class Gate:
    """Receipts held for frames matching ``command`` and ``destination`` (fnmatch)."""

    proxy: ConfirmationProxy
    command: str
    destination: str | None
    held: list[tuple[Answered, Responder]] = field(default_factory=list)
    active: bool = True

    def matches(self, answered: Answered) -> bool:
        if not self.active or answered.command != self.command:
            return False
        return self.destination is None or (
            answered.destination is not None and fnmatch.fnmatchcase(answered.destination, self.destination))

    def pending(self) -> list[Answered]:
        with self.proxy._lock:
            return [a for a, _ in self.held]

    def wait_held(self, count: int, timeout: float) -> list[Answered]:
        """Wait until at least ``count`` receipts are held; returns them (fewer on timeout)."""
        with self.proxy._cond:
            self.proxy._cond.wait_for(lambda: len(self.held) >= count, timeout)
            return [a for a, _ in self.held]

    def release(self, receipt_id: str | None = None) -> Answered:
        """Send one held receipt (the oldest when ``receipt_id`` is None)."""
        return self._take(receipt_id, extra=())

    def reject(self, receipt_id: str | None = None, message: str = "rejected by the confirmation gate") -> Answered:
        """Answer one held SEND with a negative acknowledgement instead of its receipt."""
        return self._take(receipt_id, extra=((NACK_HEADER, "true"), ("message", message)))

    def release_all(self) -> list[Answered]:
        out: list[Answered] = []
        while True:
            with self.proxy._lock:
                if not self.held:
                    return out
            out.append(self.release())

    def close(self) -> None:
        """Stop holding and release everything held."""
        self.active = False
        self.release_all()

    def _take(self, receipt_id: str | None, extra: tuple[tuple[str, str], ...]) -> Answered:
        with self.proxy._lock:
            index = next((i for i, (a, _) in enumerate(self.held)
                          if receipt_id is None or a.receipt_id == receipt_id), None)
            if index is None:
                raise KeyError(f"no held receipt {receipt_id!r}")
            answered, responder = self.held.pop(index)
            self.proxy.release_log.append((answered.receipt_id, len(self.proxy._frames_seen)))
        responder(answered, extra)
        return answered


Responder = Callable[[Answered, tuple[tuple[str, str], ...]], None]
"""Writes the held answer to the client: the original one, or a rejection when ``extra`` carries
``ackspec-nack: true`` and ``message`` (the STOMP proxy writes a RECEIPT; the AMQP proxy a disposition)."""


class _Link:
    """One proxied connection: client <-> broker, with optional delay in each direction."""

    def __init__(self, proxy: ConfirmationProxy, number: int, client_writer: asyncio.StreamWriter,
                 upstream_writer: asyncio.StreamWriter) -> None:
        self.proxy = proxy
        self.number = number
        self.client_writer = client_writer
        self.upstream_writer = upstream_writer
        self.asked: dict[str, Answered] = {}
        self.to_client: deque[tuple[float, bytes]] = deque()
        self.to_broker: deque[tuple[float, bytes]] = deque()
        self.wake_client = asyncio.Event()
        self.wake_broker = asyncio.Event()
        self.client_reader: asyncio.StreamReader | None = None
        self.client_fd = -1


class ConfirmationProxy:
    """A STOMP proxy with receipt gates and a fixed one-way delay (see the module docstring)."""

    def __init__(self, upstream_host: str, upstream_port: int, *, one_way_delay: float = 0.0,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.one_way_delay = one_way_delay
        self.host = host
        self.port = port
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._gates: list[Gate] = []
        self._frames_seen: list[tuple[str, str | None, int]] = []
        self.client_frames: list[tuple[int, Frame]] = []
        """Every frame clients wrote, with the proxy connection number (wire-level client tests)."""
        self.broker_frames: list[tuple[int, Frame]] = []
        """Every frame the broker wrote (before gating)."""
        self.closed_links: list[int] = []
        self.first_eof: dict[int, str] = {}
        """Per connection number, which side ended its stream first: ``"client"`` or ``"broker"``."""
        self.endings: list[tuple[int, str, str]] = []
        """In the order the proxy read them: (connection, side, what) for each RECEIPT the broker
        wrote (``"RECEIPT <id>"``) and each side's end of stream (``"EOF"``). Whether a client
        hung up before or after the receipt it asked for reached the proxy, without racing the two
        ends of one connection (both EOFs can be ready in the same loop turn)."""
        self.release_log: list[tuple[str, int]] = []
        self.client_writes: list[tuple[int, float, bool]] = []
        """(connection, monotonic time, heart-beat only) per chunk a client wrote: heart-beat timing."""
        self.connected_heart_beat: str | None = None
        """If set, CONNECTED frames reach the client with this ``heart-beat`` header instead of the
        broker's, so heart-beat intervals can be chosen per test (the broker keeps its own)."""
        """(receipt id, client frames seen so far) for each gate release: ordering evidence, e.g.
        "the COMMIT was written only after the held SEND receipt was released"."""
        self._links: list[_Link] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._counter = 0

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> ConfirmationProxy:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            loop.run_until_complete(self._start())
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="ackspec-confirmation-proxy", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        for gate in list(self._gates):
            gate.active = False

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for link in list(self._links):
                link.client_writer.close()
                link.upstream_writer.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        self._loop = None

    def __enter__(self) -> ConfirmationProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def stomp_url(self) -> str:
        return f"stomp://{self.host}:{self.port}"

    # -- test API -------------------------------------------------------------------------------
    def hold(self, command: str = "SEND", destination: str | None = None) -> Gate:
        """Hold the receipts of matching client frames until released."""
        gate = Gate(self, command.upper(), destination)
        with self._lock:
            self._gates.append(gate)
        return gate

    def seen(self, command: str = "SEND", destination: str | None = None) -> int:
        """How many matching frames the client has written so far."""
        with self._lock:
            return sum(1 for c, d, _ in self._frames_seen
                       if c == command and (destination is None or (d is not None
                                                                    and fnmatch.fnmatchcase(d, destination))))

    def wait_seen(self, count: int, command: str = "SEND", destination: str | None = None,
                  timeout: float = 5.0) -> int:
        with self._cond:
            self._cond.wait_for(lambda: self.seen(command, destination) >= count, timeout)
            return self.seen(command, destination)

    def first_seen(self, command: str, destination: str | None = None) -> int | None:
        """1-based position of the first matching client frame among all seen, or None."""
        with self._lock:
            for i, (c, d, _) in enumerate(self._frames_seen, 1):
                if c == command and (destination is None or (d is not None and fnmatch.fnmatchcase(d, destination))):
                    return i
            return None

    def wire_log(self) -> list[dict[str, object]]:
        """What the client wrote, in order (command, destination, connection; a STOMP frame's headers), and
        when each held answer was released (after how many client frames): a test's wire evidence."""
        with self._lock:
            frames: list[dict[str, object]] = [
                {"frame": i, "command": c, "destination": d, "connection": link}
                for i, (c, d, link) in enumerate(self._frames_seen, 1)]
            if len(self.client_frames) == len(frames):  # STOMP: the headers too (e.g. whether a receipt was asked)
                for entry, (_, frame) in zip(frames, self.client_frames, strict=True):
                    entry["headers"] = dict(frame.headers)
            releases: list[dict[str, object]] = [{"released": r, "after_frames": n} for r, n in self.release_log]
        return frames + releases

    def released_after(self, receipt_id: str) -> int | None:
        """How many client frames had been seen when ``receipt_id`` was released (None: not released)."""
        with self._lock:
            return next((n for r, n in self.release_log if r == receipt_id), None)

    def settle(self, timeout: float = 5.0) -> bool:
        """Barrier: every byte the clients have written so far has been read and parsed.

        Runs on the proxy's loop thread, so no reader is mid-step while it looks: a link is
        settled when its client socket has nothing unread (``select``) and its stream buffer
        is empty. Use it after a client call is seen blocked: whatever the client wrote before
        blocking is then counted by :meth:`seen` / :meth:`first_seen`.
        """
        loop = self._loop
        if loop is None:
            return False
        deadline = time.monotonic() + timeout

        async def quiet() -> bool:
            while time.monotonic() < deadline:
                busy = False
                for link in list(self._links):
                    buffered = getattr(link.client_reader, "_buffer", b"")  # asyncio keeps unread bytes here
                    if buffered or (link.client_fd >= 0 and not link.client_reader.at_eof()  # type: ignore[union-attr]
                                    and select.select([link.client_fd], [], [], 0)[0]):
                        busy = True
                if not busy:
                    return True
                await asyncio.sleep(0)
            return False

        try:
            return asyncio.run_coroutine_threadsafe(quiet(), loop).result(timeout + 1)
        except Exception:
            return False

    def wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``predicate()`` holds (checked whenever the proxy sees traffic)."""
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    def clear(self) -> None:
        """Release every gate and forget counts (between tests)."""
        for gate in list(self._gates):
            gate.close()
        with self._lock:
            self._gates.clear()
            self._frames_seen.clear()
            self.release_log.clear()
            self.client_writes.clear()
            self.connected_heart_beat = None
            self.client_frames.clear()
            self.first_eof.clear()
            self.endings.clear()
            self.broker_frames.clear()

    # -- pumping ----------------------------------------------------------------------------------
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        for w in (writer, up_writer):
            sock = w.get_extra_info("socket")
            if sock is not None:
                import socket  # noqa: PLC0415

                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._counter += 1
            link = _Link(self, self._counter, writer, up_writer)
            link.client_reader = reader
            client_sock = writer.get_extra_info("socket")
            link.client_fd = client_sock.fileno() if client_sock is not None else -1
            self._links.append(link)
        tasks = [asyncio.ensure_future(t) for t in (
            self._client_to_broker(reader, link), self._broker_to_client(up_reader, link),
            self._drain(link.to_broker, link.wake_broker, up_writer),
            self._drain(link.to_client, link.wake_client, writer))]
        try:
            await asyncio.wait(tasks[:2], return_when=asyncio.FIRST_COMPLETED)
            await asyncio.sleep(self.one_way_delay + 0.01)  # let delayed bytes drain
        except asyncio.CancelledError:
            pass  # proxy shutting down
        for task in tasks:
            task.cancel()
        for w in (writer, up_writer):
            with contextlib.suppress(Exception):
                w.close()
        with self._cond:
            self._links.remove(link)
            self.closed_links.append(link.number)
            self._cond.notify_all()

    def _enqueue(self, queue: deque[tuple[float, bytes]], wake: asyncio.Event, data: bytes) -> None:
        queue.append((time.monotonic() + self.one_way_delay, data))
        wake.set()

    async def _drain(self, queue: deque[tuple[float, bytes]], wake: asyncio.Event,
                     writer: asyncio.StreamWriter) -> None:
        while True:
            await wake.wait()
            wake.clear()
            while queue:
                due, _ = queue[0]
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                chunks = []
                now = time.monotonic()
                while queue and queue[0][0] <= now:
                    chunks.append(queue.popleft()[1])
                if chunks:
                    writer.write(b"".join(chunks))
                    await writer.drain()

    def _note_eof(self, link: _Link, side: str) -> None:
        with self._cond:
            self.first_eof.setdefault(link.number, side)
            self.endings.append((link.number, side, "EOF"))
            self._cond.notify_all()

    async def _client_to_broker(self, reader: asyncio.StreamReader, link: _Link) -> None:
        parser = FrameParser()
        while True:
            data = await reader.read(65536)
            if not data:
                self._note_eof(link, "client")
                return
            self._enqueue(link.to_broker, link.wake_broker, data)
            try:
                items = parser.feed(data)
            except StompProtocolError:
                continue  # the broker will answer the malformed input itself
            with self._cond:
                self.client_writes.append((link.number, time.monotonic(),
                                           all(isinstance(i, HeartBeat) for i in items) and bool(items)))
                for item in items:
                    if not isinstance(item, Frame):
                        continue
                    destination = item.get("destination")
                    self._frames_seen.append((item.command, destination, link.number))
                    self.client_frames.append((link.number, item))
                    receipt = item.get("receipt")
                    if receipt is not None:
                        link.asked[receipt] = Answered(receipt, item.command, destination, link.number,
                                                       len(self._frames_seen))
                self._cond.notify_all()

    async def _broker_to_client(self, reader: asyncio.StreamReader, link: _Link) -> None:
        parser = FrameParser()
        loop = asyncio.get_running_loop()

        def writer_for(answered: Answered, extra: tuple[tuple[str, str], ...]) -> None:
            data = encode(Frame("RECEIPT", (("receipt-id", answered.receipt_id), *extra)))
            loop.call_soon_threadsafe(self._enqueue, link.to_client, link.wake_client, data)

        while True:
            data = await reader.read(65536)
            if not data:
                self._note_eof(link, "broker")
                return
            try:
                items = parser.feed(data)
            except StompProtocolError:
                self._enqueue(link.to_client, link.wake_client, data)
                continue
            out: list[bytes] = []
            with self._cond:
                self.broker_frames.extend((link.number, i) for i in items if isinstance(i, Frame))
                self.endings.extend((link.number, "broker", f"RECEIPT {i.get('receipt-id')}") for i in items
                                    if isinstance(i, Frame) and i.command == "RECEIPT")
                self._cond.notify_all()
            for item in items:
                if isinstance(item, HeartBeat):
                    out.append(b"\n")
                    continue
                if item.command == "CONNECTED" and self.connected_heart_beat is not None:
                    beat = self.connected_heart_beat
                    out.append(encode(Frame(item.command, tuple((k, beat if k == "heart-beat" else v)
                                                                for k, v in item.headers), item.body)))
                    continue
                if item.command == "RECEIPT":
                    answered = link.asked.pop(item.get("receipt-id") or "", None)
                    if answered is not None and item.get(NACK_HEADER) is None:
                        with self._cond:
                            gate = next((g for g in self._gates if g.matches(answered)), None)
                            if gate is not None:
                                gate.held.append((answered, writer_for))
                                self._cond.notify_all()
                                continue
                out.append(encode(item, content_length=bool(item.body)))
            if out:
                self._enqueue(link.to_client, link.wake_client, b"".join(out))
