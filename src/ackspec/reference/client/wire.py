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
import select
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from ackspec.reference.client.errors import ConnectionLostError, JMSError
from ackspec.reference.stomp import Frame, FrameParser, StompProtocolError, encode

REJECTED_OUTCOME_HEADER = "ackspec-outcome"
NACK_HEADER = "ackspec-nack"
ACK_TYPE_HEADER = "ackspec-ack-type"


class WireEvents(Protocol):
    def on_receipt(self, token: str, headers: Mapping[str, str]) -> None: ...

    def on_rejected(self, token: str, error: str) -> None: ...

    def on_message(self, subscription: str, ack_id: str, headers: Mapping[str, str], body: bytes) -> None: ...

    def on_lost(self, error: str, receipt_id: str | None) -> None: ...

    def on_tick(self) -> None: ...


class Wire(Protocol):
    def send(self, destination: str, body: bytes, headers: Mapping[str, str], *, persistent: bool,
             receipt: str | None, transaction: str | None) -> None: ...

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


class StompWire:
    """STOMP 1.2 over a TCP socket, with one reader thread."""

    def __init__(self, host: str, port: int, events: WireEvents, *, login: str | None, passcode: str | None,
                 connect_timeout: float = 10.0, tick: float = 0.02,
                 wakeup: Callable[[], float | None] | None = None) -> None:
        self._events = events
        self._tick = tick
        self._next_deadline = wakeup
        self._write_lock = threading.Lock()
        self._closed = False
        self._lost = False
        try:
            self._sock = socket.create_connection((host, port), timeout=connect_timeout)
        except OSError as exc:
            raise JMSError(f"cannot connect to {host}:{port}: {exc}") from exc
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._parser = FrameParser()
        headers = {"accept-version": "1.2", "host": host, "heart-beat": "0,0"}
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

    def _write(self, frame: Frame) -> None:
        data = encode(frame, content_length=bool(frame.body))
        with self._write_lock:
            if self._lost or self._closed:
                raise ConnectionLostError("the connection is closed")
            try:
                self._sock.sendall(data)
            except OSError as exc:
                raise ConnectionLostError(f"write failed: {exc}") from exc

    def send(self, destination: str, body: bytes, headers: Mapping[str, str], *, persistent: bool,
             receipt: str | None, transaction: str | None) -> None:
        pairs: list[tuple[str, str]] = [("destination", destination), ("persistent", "true" if persistent else "false")]
        if receipt is not None:
            pairs.append(("receipt", receipt))
        if transaction is not None:
            pairs.append(("transaction", transaction))
        pairs.extend((k, v) for k, v in headers.items() if k not in {"destination", "receipt", "transaction",
                                                                      "persistent", "content-length"})
        self._write(Frame("SEND", tuple(pairs), body))

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
            self._write(Frame(command, tuple(pairs)))

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
        with contextlib.suppress(OSError):
            self._sock.close()
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout=5)

    def crash(self) -> None:
        """Abrupt close without DISCONNECT (tests of indeterminate outcomes)."""
        self.close()

    # -- reading ------------------------------------------------------------------------

    def _timeout(self) -> float:
        deadline = self._next_deadline() if self._next_deadline else None
        return self._tick if deadline is None else max(0.0, min(self._tick, deadline))

    def _read_loop(self) -> None:
        error = "connection closed by the broker"
        receipt_id: str | None = None
        try:
            while not self._closed:
                ready, _, _ = select.select([self._sock], [], [], self._timeout())
                self._events.on_tick()
                if not ready:
                    continue
                data = self._sock.recv(65536)
                if not data:
                    break
                for item in self._parser.feed(data):
                    if not isinstance(item, Frame):
                        continue
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
                        receipt_id = item.get("receipt-id")
                        break
                else:
                    continue
                break
        except (OSError, ValueError, StompProtocolError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        finally:
            self._lost = True
            with contextlib.suppress(OSError):
                self._sock.close()
            self._events.on_lost("connection closed by the client" if self._closed else error, receipt_id)


_counter = itertools.count(1)


def next_id(prefix: str) -> str:
    return f"{prefix}{next(_counter)}"
