"""The wire under the client: what a protocol mapping must offer, and the STOMP 1.2 one.

The connection logic never builds frames itself; it calls a :class:`Wire`. A wire
reports what arrives through :class:`WireEvents` from its own reader thread.

STOMP mapping (documented in docs/client-conformance.md):

* send -> SEND with ``persistent``, ``priority``, properties as headers, ``receipt`` when a
  confirmation is wanted, ``transaction`` in a transacted session;
* a RECEIPT confirms; a RECEIPT carrying ``ackspec-outcome:rejected`` (the reference
  broker's publish-window extension) rejects that one send and keeps the connection; an
  ERROR with ``receipt-id`` rejects that send, and ERROR closes the connection;
* every subscription uses ``ack:client-individual`` with ``activemq.prefetchSize`` and
  ``prefetch-count``; ack records become ACK (STANDARD, INDIVIDUAL, UNMATCHED) or NACK
  (REDELIVERED, and POISON with ``ackspec-ack-type:1``); DELIVERED has no STOMP frame.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from ackspec.net import connect
from ackspec.reference.client.errors import ConnectionLostError, JMSError
from ackspec.reference.stomp import Frame, FrameParser, StompProtocolError, encode
from ackspec.reference.stomp.codec import escape

REJECTED_OUTCOME_HEADER = "ackspec-outcome"
NACK_HEADER = "ackspec-nack"


class WireEvents(Protocol):
    def on_receipt(self, token: str, headers: Mapping[str, str]) -> None: ...

    def on_rejected(self, token: str, error: str) -> None: ...

    def on_message(self, subscription: str, ack_id: str, headers: Mapping[str, str], body: bytes) -> None: ...

    def on_lost(self, error: str, receipt_id: str | None) -> None: ...

    def on_tick(self) -> None: ...


class Wire(Protocol):
    def send(self, destination: str, body: bytes, headers: Mapping[str, str], *, persistent: bool,
             receipt: str | None, transaction: str | None, flush: bool = True) -> None:
        """``flush=False``: the frame may wait in an output buffer briefly (nobody blocks on it)."""

    def pump_until(self, done: Callable[[], bool], timeout: float) -> bool:
        """Optionally do the reading on the calling thread until ``done()``; returns ``done()``."""

    def subscribe(self, sub_id: str, destination: str, *, individual: bool, prefetch: int,
                  selector: str | None) -> None: ...

    def unsubscribe(self, sub_id: str) -> None: ...

    def ack(self, ack_ids: Sequence[str], *, transaction: str | None, receipt: str | None,
            extra: Mapping[str, str] | None = None) -> None: ...

    def nack(self, ack_ids: Sequence[str], *, transaction: str | None, receipt: str | None,
             extra: Mapping[str, str] | None = None) -> None: ...

    def begin(self, transaction: str) -> None: ...

    def commit(self, transaction: str, receipt: str) -> None: ...

    def abort(self, transaction: str, receipt: str) -> None: ...

    def disconnect(self, receipt: str) -> None: ...

    def close(self) -> None: ...


PLAIN_RECEIPT = re.compile(rb"RECEIPT\nreceipt-id:([-.\w]{1,200})\n\n\x00", re.ASCII)
"""One whole RECEIPT with nothing but a plain ``receipt-id`` (no escapes, no CR): what the parser would
return for these bytes is known, so :meth:`StompWire._read_once` takes it without the parser (a test
checks both agree)."""

_SEND_OWN_HEADERS = frozenset({"destination", "receipt", "transaction", "persistent", "content-length"})
"""Headers :func:`encode_send` writes itself; an application header of that name is dropped."""


_PLAIN_NAMES = frozenset({"priority", "ackspec-message-id", "ackspec-timestamp", "expires", "correlation-id", "type"})
"""Header names the client sets on every send that need no escaping (spares a check per send)."""


def _escaped(value: str) -> str:
    if "\\" in value or "\n" in value or ":" in value or "\r" in value:
        return escape(value, "1.2")
    return value


def encode_send(destination: str, body: bytes, headers: Mapping[str, str], *, persistent: bool,
                receipt: str | None, transaction: str | None) -> bytes:
    """The SEND frame the client writes, formatted directly: the same bytes as
    ``encode(Frame("SEND", ...), content_length=bool(body))`` (a test checks it), without building
    a :class:`Frame` first; it is on every send's path."""
    parts = ["SEND\ndestination:", _escaped(destination), "\npersistent:", "true" if persistent else "false", "\n"]
    if receipt is not None:
        parts += ("receipt:", _escaped(receipt), "\n")
    if transaction is not None:
        parts += ("transaction:", _escaped(transaction), "\n")
    for name, value in headers.items():
        if name not in _SEND_OWN_HEADERS:
            parts += (name if name in _PLAIN_NAMES else _escaped(name), ":", _escaped(value), "\n")
    if body:
        parts += ("content-length:", str(len(body)), "\n")
    parts.append("\n")
    return "".join(parts).encode() + body + b"\x00"


class StompWire:
    """STOMP 1.2 over a TCP socket: one reader thread, coalesced writes, and a sender that reads itself.

    Two latency/throughput measures (benchmarks/rtt_bench.py, docs/rtt-benchmark.md):

    * **Coalesced writes.** Frames that nobody waits for (``send(..., flush=False)``: fire-and-
      forget, windowed and asynchronous sends) are appended to an output buffer; whoever reads the
      socket (the reader thread, or a waiting sender), woken once per burst, writes everything
      buffered with one ``sendall``. Any other frame flushes the buffer and itself at once, so the
      wire order is always the call order.
    * **The waiting sender reads (leader/follower).** A thread that waits for a receipt
      (:meth:`pump_until`) reads and dispatches on its own thread until its receipt is in. The
      reader thread only selects while nobody pumps: when a pump ends it stays parked for
      :data:`READER_LINGER` before it selects again, so a blocking send that follows within that
      time finds the socket free and wakes no other thread; only a pump that starts while the
      reader thread is in ``select()`` pokes it out (one wake-up). What arrives in that gap
      (messages for listeners, heart-beats) waits at most :data:`READER_LINGER` (or the next
      heart-beat/timer deadline, whichever is sooner).
    """

    def __init__(self, host: str, port: int, events: WireEvents, *, login: str | None, passcode: str | None,
                 connect_timeout: float = 10.0, tick: float = 0.02,
                 wakeup: Callable[[], float | None] | None = None, heart_beat: str = "0,0") -> None:
        self._events = events
        self._tick = tick
        self._next_deadline = wakeup
        self._write_lock = threading.Lock()
        self._out: list[bytes] = []
        self._flush_poked = False
        self._io_lock = threading.Lock()  # held by whoever selects/reads/parses (reader thread or a pumper)
        self._io_owner = 0  # thread ident holding _io_lock as a pumper (0: none or the reader thread)
        self._pump_lock = threading.Lock()  # guards the four fields below ("with" on it: one C call)
        self._pump_cond = threading.Condition(self._pump_lock)  # the reader thread parks on it
        self._pumpers = 0  # threads in pump_until
        self._reader_active = False  # the reader thread holds (or is taking) the socket
        self._reader_parked = False  # the reader thread waits on _pump_cond
        self._last_pump_end = 0.0
        self._closed = False
        self._lost = False
        self._ended: tuple[str, str | None] | None = None  # (error, receipt id) once the peer is gone
        try:
            self._sock = connect(host, port, connect_timeout)
        except OSError as exc:
            raise JMSError(f"cannot connect to {host}:{port}: {exc}") from exc
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._parser = FrameParser()
        headers = {"accept-version": "1.2", "host": host, "heart-beat": heart_beat}
        if login is not None:
            headers["login"] = login
        if passcode is not None:
            headers["passcode"] = passcode
        self._sock.sendall(encode(Frame("CONNECT", tuple(headers.items()))))
        connected = self._read_connected(connect_timeout)
        if connected.command != "CONNECTED":
            self._sock.close()
            raise JMSError(f"broker refused the connection: {connected.get('message') or connected.command}")
        self.server = connected.get("server") or ""
        self.send_interval, self.receive_interval = negotiate(heart_beat, connected.get("heart-beat") or "0,0")
        self._last_write = self._last_read = time.monotonic()
        self._sock.settimeout(None)
        self._reader = threading.Thread(target=self._read_loop, name=f"stomp-reader-{port}", daemon=True)
        self._reader.start()

    def _read_connected(self, timeout: float) -> Frame:
        self._sock.settimeout(timeout)
        while True:
            try:
                data = self._sock.recv(65536)
            except OSError as exc:
                raise JMSError(f"no CONNECTED frame: {exc}") from exc
            if not data:
                raise JMSError("connection closed before CONNECTED")
            for item in self._parser.feed(data):
                if isinstance(item, Frame):
                    return item

    # -- writing ------------------------------------------------------------------------

    def _poke(self) -> None:
        """Wake whoever is in ``select()`` (reader thread or pumper)."""
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def _wake_for_flush(self) -> None:
        """Get the output buffer written: wake the parked reader thread if nobody holds the socket,
        else poke whoever is in ``select()``."""
        with self._pump_cond:
            if self._reader_parked and not self._pumpers:
                self._pump_cond.notify()
                return
        self._poke()

    def _write(self, frame: Frame, *, flush: bool = True) -> None:
        self._write_data(encode(frame, content_length=bool(frame.body)), flush=flush)

    def _write_data(self, data: bytes, *, flush: bool = True) -> None:
        poke = False
        with self._write_lock:
            if self._lost or self._closed:
                raise ConnectionLostError("the connection is closed")
            if flush and not self._out:  # nothing buffered before it: straight out
                try:
                    self._sock.sendall(data)
                except OSError as exc:
                    raise ConnectionLostError(f"write failed: {exc}") from exc
                self._last_write = time.monotonic()
                return
            self._out.append(data)
            if flush or len(self._out) >= FLUSH_AT:
                self._flush_locked()
            elif not self._flush_poked:
                self._flush_poked = poke = True
        if poke:
            self._wake_for_flush()

    def _flush_locked(self) -> None:
        out, self._out = self._out, []
        self._flush_poked = False
        if not out:
            return
        try:
            self._sock.sendall(out[0] if len(out) == 1 else b"".join(out))
        except OSError as exc:
            raise ConnectionLostError(f"write failed: {exc}") from exc
        self._last_write = time.monotonic()

    def flush(self) -> None:
        with self._write_lock:
            if not (self._lost or self._closed):
                self._flush_locked()

    def send(self, destination: str, body: bytes, headers: Mapping[str, str], *, persistent: bool,
             receipt: str | None, transaction: str | None, flush: bool = True) -> None:
        self._write_data(encode_send(destination, body, headers, persistent=persistent, receipt=receipt,
                                     transaction=transaction), flush=flush)

    def subscribe(self, sub_id: str, destination: str, *, individual: bool, prefetch: int,
                  selector: str | None) -> None:
        count = str(max(1, prefetch))
        headers = {"id": sub_id, "destination": destination, "ack": "client-individual",
                   "activemq.prefetchSize": count, "prefetch-count": count}
        if selector:
            headers["selector"] = selector
        self._write(Frame("SUBSCRIBE", tuple(headers.items())))

    def unsubscribe(self, sub_id: str) -> None:
        self._write(Frame.make("UNSUBSCRIBE", id=sub_id))

    def _acks(self, command: str, ack_ids: Sequence[str], transaction: str | None, receipt: str | None,
              extra: Mapping[str, str] | None) -> None:
        for i, ack_id in enumerate(ack_ids):
            pairs: list[tuple[str, str]] = [("id", ack_id)]
            if transaction is not None:
                pairs.append(("transaction", transaction))
            if receipt is not None and i == len(ack_ids) - 1:
                pairs.append(("receipt", receipt))
            pairs.extend((extra or {}).items())
            self._write(Frame(command, tuple(pairs)), flush=i == len(ack_ids) - 1)

    def ack(self, ack_ids: Sequence[str], *, transaction: str | None, receipt: str | None,
            extra: Mapping[str, str] | None = None) -> None:
        self._acks("ACK", ack_ids, transaction, receipt, extra)

    def nack(self, ack_ids: Sequence[str], *, transaction: str | None, receipt: str | None,
             extra: Mapping[str, str] | None = None) -> None:
        self._acks("NACK", ack_ids, transaction, receipt, extra)

    def begin(self, transaction: str) -> None:
        self._write(Frame.make("BEGIN", transaction=transaction))

    def commit(self, transaction: str, receipt: str) -> None:
        self._write(Frame.make("COMMIT", transaction=transaction, receipt=receipt))

    def abort(self, transaction: str, receipt: str) -> None:
        self._write(Frame.make("ABORT", transaction=transaction, receipt=receipt))

    def disconnect(self, receipt: str) -> None:
        self._write(Frame.make("DISCONNECT", receipt=receipt))

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._poke()
        with self._pump_cond:
            self._pump_cond.notify_all()  # a parked reader thread
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout=5)
        with contextlib.suppress(OSError):
            self._sock.close()
        if not self._reader.is_alive():
            for fd in (self._wake_r, self._wake_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._wake_r = self._wake_w = -1

    def crash(self) -> None:
        """Abrupt close without DISCONNECT (tests of indeterminate outcomes)."""
        self.close()

    # -- reading ------------------------------------------------------------------------

    def _timeout(self) -> float:
        deadline = self._next_deadline() if self._next_deadline else None
        timeout = self._tick if deadline is None else max(0.0, min(self._tick, deadline))
        if self.send_interval:
            timeout = min(timeout, max(0.0, self._last_write + self.send_interval - time.monotonic()))
        return timeout

    def _heart_beats(self) -> None:
        """Send an EOL when we were silent for the negotiated interval; declare a silent broker dead
        after twice its interval (STOMP 1.2 heart-beating; the margin is ours)."""
        now = time.monotonic()
        if self.send_interval and now - self._last_write >= self.send_interval:
            with self._write_lock:
                if not (self._lost or self._closed):
                    self._out.append(HEARTBEAT_EOL)
                    self._flush_locked()
        if self.receive_interval and now - self._last_read > 2 * self.receive_interval:
            self._ended = self._ended or (
                f"heart-beat timeout: nothing from the broker for {now - self._last_read:.3f}s "
                f"(negotiated {self.receive_interval:.3f}s)", None)

    def pump_until(self, done: Callable[[], bool], timeout: float) -> bool:
        """Read and dispatch on the calling thread until ``done()`` (a blocking send's receipt).

        The reader thread steps aside meanwhile (poked out of ``select()`` only if it is in it).
        Returns ``done()``; the caller still waits on its own condition, so this only shortens the
        path, it decides nothing. On the reader thread, or nested in a pump of this thread (a
        dispatch that waits), it returns at once."""
        me = threading.get_ident()
        if me in (self._io_owner, self._reader.ident):
            return done()
        with self._pump_lock:
            self._pumpers += 1
            poke = self._reader_active
        if poke:
            self._poke()  # the reader thread leaves select() and lets us read
        try:
            with self._io_lock:
                self._io_owner = me
                try:
                    deadline = time.monotonic() + timeout
                    while not done() and self._ended is None and not self._closed:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            break
                        try:
                            self._read_once(min(remaining, self._timeout()))
                        except ConnectionLostError as exc:  # a coalesced write failed
                            self._ended = self._ended or (str(exc), None)
                finally:
                    self._io_owner = 0
        finally:
            with self._pump_lock:
                self._pumpers -= 1
                self._last_pump_end = time.monotonic()
                if self._ended is not None or self._closed:
                    self._pump_cond.notify_all()  # the reader thread reports the loss now
                # otherwise no notify: the parked reader thread resumes after READER_LINGER by itself,
                # and a blocking send that follows meanwhile wakes nobody
        return done()

    def _read_once(self, timeout: float) -> None:
        """One select/recv/dispatch step; the caller holds ``_io_lock``. Sets ``_ended`` on loss."""
        if self._out:
            self.flush()
        watched: list[Any] = [self._sock, self._wake_r]
        try:
            ready, _, _ = select.select(watched, [], [], 0.0 if self._out else timeout)
        except (OSError, ValueError) as exc:
            self._ended = self._ended or (f"{type(exc).__name__}: {exc}", None)
            return
        self._events.on_tick()
        if self.send_interval or self.receive_interval:
            self._heart_beats()
        if self._wake_r in ready:
            with contextlib.suppress(OSError):
                os.read(self._wake_r, 4096)
        if self._sock not in ready:
            return
        try:
            data = self._sock.recv(65536)  # below malloc's mmap threshold: no mmap/munmap per read
        except OSError as exc:
            self._ended = self._ended or (f"{type(exc).__name__}: {exc}", None)
            return
        if not data:
            self._ended = self._ended or ("connection closed by the broker", None)
            return
        self._last_read = time.monotonic()
        if self._parser.idle:
            plain = PLAIN_RECEIPT.fullmatch(data)
            if plain is not None:  # exactly one plain RECEIPT (a blocking send's answer): no parser, no Frame
                token = plain.group(1).decode("ascii")
                self._events.on_receipt(token, {"receipt-id": token})
                return
        try:
            items = self._parser.feed(data)
        except (ValueError, StompProtocolError) as exc:
            self._ended = self._ended or (f"{type(exc).__name__}: {exc}", None)
            return
        for item in items:
            if isinstance(item, Frame) and not self._dispatch_frame(item):
                return

    def _dispatch_frame(self, item: Frame) -> bool:
        """Hand one frame from the broker to the events; False after an ERROR (the connection is over)."""
        if item.command == "RECEIPT":
            token = item.get("receipt-id") or ""
            if item.get(REJECTED_OUTCOME_HEADER) == "rejected" or item.get(NACK_HEADER) == "true":
                self._events.on_rejected(token, item.get("message") or "rejected by the broker")
            else:
                self._events.on_receipt(token, dict(item.headers))
        elif item.command == "MESSAGE":
            self._events.on_message(item.get("subscription") or "", item.get("ack") or "",
                                    dict(item.headers), item.body)
        elif item.command == "ERROR":
            error = item.get("message", "ERROR frame") or "ERROR frame"
            detail = item.body.decode(errors="replace").strip()
            if detail:
                error = f"{error}: {detail[:200]}"
            self._ended = (error, item.get("receipt-id"))
            return False
        return True

    def _park(self) -> bool:
        """Reader thread: wait while a pumper reads, and for READER_LINGER after the last pump ended
        (less if a timer or heart-beat is due sooner, nothing if output waits); then claim the
        socket. False once the connection is over."""
        cond = self._pump_cond
        while True:
            due = self._timeout()  # outside the lock: it asks the connection for consumer deadlines
            with cond:
                if self._closed or self._ended is not None:
                    return False
                if self._pumpers:
                    wait = READER_LINGER
                elif self._out:
                    wait = 0.0
                else:
                    wait = min(READER_LINGER - (time.monotonic() - self._last_pump_end), due)
                if wait <= 0:
                    self._reader_active = True
                    return True
                self._reader_parked = True
                cond.wait(wait)
                self._reader_parked = False

    def _read_loop(self) -> None:
        try:
            while self._park():
                try:
                    with self._io_lock:
                        while not self._pumpers and not self._closed and self._ended is None:
                            try:
                                self._read_once(self._timeout())
                            except ConnectionLostError as exc:  # a coalesced write failed
                                self._ended = (str(exc), None)
                finally:
                    with self._pump_cond:
                        self._reader_active = False
        finally:
            with self._write_lock:
                self._lost = True
            with contextlib.suppress(OSError):
                self._sock.close()
            error, receipt_id = self._ended or ("connection closed by the broker", None)
            self._events.on_lost("connection closed by the client" if self._closed else error, receipt_id)


FLUSH_AT = 64
"""Buffered frames a sender writes itself rather than leave to the thread it poked: a thread that sends
without pause holds the GIL, so the poked thread may get it only after the switch interval (5 ms) and the
burst (and the window it fills) would wait that long."""

READER_LINGER = 0.002
"""Seconds the reader thread stays parked after a pump ended (see :class:`StompWire`)."""


HEARTBEAT_EOL = b"\n"


def negotiate(offer: str, answer: str) -> tuple[float, float]:
    """(send, receive) heart-beat intervals in seconds from our ``cx,cy`` and the server's ``sx,sy``.

    STOMP 1.2: we send every max(cx, sy) if both are non-zero, and expect the server every
    max(sx, cy) if both are non-zero; 0 means none."""
    try:
        cx, cy = (int(x) for x in offer.split(","))
        sx, sy = (int(x) for x in answer.split(","))
    except ValueError:
        return 0.0, 0.0
    send = max(cx, sy) / 1000 if cx and sy else 0.0
    receive = max(sx, cy) / 1000 if sx and cy else 0.0
    return send, receive


_counter = itertools.count(1)


def next_id(prefix: str) -> str:
    return f"{prefix}{next(_counter)}"
