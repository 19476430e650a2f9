"""STOMP 1.2 driver on stomp.py: any STOMP broker by URL (``stomp://[user:pass@]host:port``).

stomp.py delivers frames on its own receiver thread. :class:`_FrameQueue` turns
those callbacks into thread-safe state the test thread waits on with a timeout:
MESSAGE frames queue per subscription, RECEIPTs and ERRORs are kept by id, and
a lost connection wakes every waiter. Nothing here sleeps.

Confirmation: with ``confirm=True`` every frame carries a ``receipt`` header and
the verb returns only when the RECEIPT came (ok), an ERROR naming the receipt
came (fail: :class:`AdapterError`), the connection died (:class:`ConnectionLost`)
or the timeout passed (:class:`Indeterminate`).

An abrupt disconnect closes the socket with no DISCONNECT frame.
"""

from __future__ import annotations

import contextlib
import itertools
import ssl
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import stomp
from stomp.exception import ConnectFailedException, StompException
from stomp.protocol import Protocol12

from ackspec.adapters.base import (
    NO_LOCAL_OPTION,
    AckMode,
    Adapter,
    AdapterError,
    Capability,
    Client,
    ConnectionLost,
    Delivery,
    Indeterminate,
    NackOutcome,
    NotSupported,
    SendResult,
    TargetUnreachable,
)
from ackspec.adapters.settings import TargetSettings
from ackspec.adapters.stomp_ws import ws_connection
from ackspec.history import PRODUCER_HEADER, SEQ_HEADER, Recorder


@dataclass(frozen=True, slots=True)
class ErrorFrame:
    """An ERROR frame as received."""

    headers: Mapping[str, str]
    body: bytes

    @property
    def message(self) -> str:
        text = self.headers.get("message") or self.body.decode("utf-8", "replace").strip()
        return text.splitlines()[0] if text else "ERROR frame"


@dataclass
class _FrameQueue:
    """Everything the broker sent on one connection, guarded by one condition."""

    cond: threading.Condition = field(default_factory=threading.Condition)
    messages: dict[str, deque[tuple[dict[str, str], bytes]]] = field(default_factory=dict)
    receipts: set[str] = field(default_factory=set)
    receipt_order: list[str] = field(default_factory=list)
    errors: list[ErrorFrame] = field(default_factory=list)
    connected: bool = False
    lost: bool = False
    connected_headers: dict[str, str] = field(default_factory=dict)


def stomp_connection(settings: TargetSettings, heartbeats: tuple[int, int], timeout: float) -> Any:
    """stomp.py's STOMP 1.2 connection to the target: over TCP, over TLS (verified against ``?cafile=`` or the
    system's CA certificates, never unchecked), or over WebSocket (``ws://``) through stomp.py's WebSocket
    transport, kept from closing an idle connection (:mod:`ackspec.adapters.stomp_ws`).

    Both roles build their stomp.py connection here: the suite's driver (:class:`StompPyClient`) and stomp.py as
    a client under test (:mod:`ackspec.adapters.stomp_py_cut`)."""
    common: dict[str, Any] = {"vhost": settings.vhost, "auto_decode": False, "reconnect_attempts_max": 1,
                              "timeout": timeout}
    if settings.websocket_path is not None:
        conn = ws_connection(settings.host, settings.port, settings.websocket_path, heartbeats=heartbeats,
                             text=settings.websocket_text, **common)
    else:
        conn = stomp.StompConnection12([(settings.host, settings.port)], heartbeats=heartbeats, **common)
    if settings.tls:
        conn.set_ssl(for_hosts=[(settings.host, settings.port)],
                     ca_certs=settings.tls_ca or ssl.get_default_verify_paths().openssl_cafile)
    return conn


class _Listener(stomp.ConnectionListener):  # type: ignore[misc]
    """Called on stomp.py's receiver thread; only appends and notifies."""

    def __init__(self, queue: _FrameQueue) -> None:
        self.q = queue

    def on_connected(self, frame: Any) -> None:
        with self.q.cond:
            self.q.connected = True
            self.q.connected_headers = dict(frame.headers)
            self.q.cond.notify_all()

    def on_message(self, frame: Any) -> None:
        headers = dict(frame.headers)
        body = frame.body if isinstance(frame.body, bytes) else str(frame.body or "").encode()
        with self.q.cond:
            sub = headers.get("subscription")
            if sub is None:  # a broker that omits it: the only subscription, so the tests can see what is missing
                known = [k for k in self.q.messages if k]
                sub = known[0] if len(known) == 1 else ""
            self.q.messages.setdefault(sub, deque()).append((headers, body))
            self.q.cond.notify_all()

    def on_receipt(self, frame: Any) -> None:
        rid = frame.headers.get("receipt-id", "")
        with self.q.cond:
            self.q.receipts.add(rid)
            self.q.receipt_order.append(rid)
            self.q.cond.notify_all()

    def on_error(self, frame: Any) -> None:
        body = frame.body if isinstance(frame.body, bytes) else str(frame.body or "").encode()
        with self.q.cond:
            self.q.errors.append(ErrorFrame(dict(frame.headers), body))
            self.q.cond.notify_all()

    def on_disconnected(self) -> None:
        with self.q.cond:
            self.q.lost = True
            self.q.cond.notify_all()

    def on_heartbeat_timeout(self) -> None:
        self.on_disconnected()


DURABLE_NAME_HEADER = "activemq.subscriptionName"
"""SUBSCRIBE/UNSUBSCRIBE header naming a durable subscription (ActiveMQ's; Artemis and the reference broker
read it too)."""

NOT_OVER_STOMP: frozenset[Capability] = frozenset({
    Capability.NACK_OUTCOMES, Capability.ASYNC_SEND,
})
"""Claimed capabilities STOMP through this driver cannot exercise. (A publish window it can: the suite writes a
window's SENDs back to back on a raw connection, see ackspec.conformance.suite.publish_burst.)"""


class StompPyAdapter(Adapter):
    """Drives any STOMP 1.2 broker through stomp.py."""

    name = "stomp.py"
    protocol = "stomp"

    def __init__(self, url: str, recorder: Recorder, *, timeout: float = 5.0,
                 settings: TargetSettings | None = None) -> None:
        super().__init__(url, recorder, timeout=timeout)
        self.settings = TargetSettings.from_url(url, settings)

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What the profile claims, minus what STOMP through this driver cannot express; with
        :attr:`Capability.WEBSOCKET` when the target is reached over WebSocket (without
        :attr:`Capability.BINARY_BODY` when its frames go in text messages, ``?frames=text``)."""
        caps = self.settings.capabilities - NOT_OVER_STOMP
        if self.settings.websocket_path is None:
            return caps
        if self.settings.websocket_text:  # a text message must be UTF-8: a binary body cannot be sent
            caps -= {Capability.BINARY_BODY}
        return caps | {Capability.WEBSOCKET}

    def queue(self, name: str) -> str:
        return self.settings.queue_prefix + name

    def topic(self, name: str) -> str:
        return self.settings.topic_prefix + name

    def _open(self, process: str, **options: Any) -> StompPyClient:
        return StompPyClient(self, process, **options)


class StompPyClient(Client):
    """One stomp.py connection."""

    adapter: StompPyAdapter

    def __init__(self, adapter: StompPyAdapter, process: str, *, heartbeats: tuple[int, int] = (0, 0),
                 connect_headers: Mapping[str, str] | None = None, client_id: str | None = None) -> None:
        super().__init__(adapter, process)
        if client_id is not None:  # owner of durable subscriptions (ActiveMQ, Artemis)
            connect_headers = {**(connect_headers or {}), "client-id": client_id}
        self.settings = adapter.settings
        self.frames = _FrameQueue()
        self._ids = itertools.count(1)
        self._closed = False
        self.conn = stomp_connection(self.settings, heartbeats, self.timeout)
        self.conn.set_listener("ackspec", _Listener(self.frames))
        try:
            self.conn.connect(self.settings.login, self.settings.passcode, wait=False,
                              headers=dict(connect_headers or {}))
        except ConnectFailedException as exc:  # stomp.py's "no socket would connect", after its retries
            raise TargetUnreachable(f"cannot connect to {adapter.url}: {type(exc).__name__} {exc}".strip()) from exc
        except StompException as exc:
            raise AdapterError(f"cannot connect to {adapter.url}: {type(exc).__name__} {exc}".strip()) from exc
        with self.frames.cond:
            ok = self.frames.cond.wait_for(
                lambda: self.frames.connected or self.frames.lost or bool(self.frames.errors), self.timeout)
            errors = list(self.frames.errors)
            connected = self.frames.connected
        if not connected:
            self._close_socket()
            if errors:
                raise AdapterError(f"CONNECT refused: {errors[0].message}")
            if not ok:
                raise Indeterminate(f"no CONNECTED frame within {self.timeout:g}s")
            raise AdapterError("connection closed before CONNECTED")

    # -- helpers -------------------------------------------------------------------

    @property
    def server_heartbeat(self) -> tuple[int, int]:
        """The ``heart-beat`` header of CONNECTED as (server sends, server wants)."""
        raw = self.frames.connected_headers.get("heart-beat", "0,0")
        sx, _, sy = raw.partition(",")
        try:
            return int(sx), int(sy or 0)
        except ValueError:
            return 0, 0

    @property
    def errors(self) -> list[ErrorFrame]:
        with self.frames.cond:
            return list(self.frames.errors)

    @property
    def lost(self) -> bool:
        with self.frames.cond:
            return self.frames.lost

    def _receipt_id(self) -> str:
        return f"{self.process}-r{next(self._ids)}"

    def _transmit(self, fn: Any, *args: Any, **kwargs: Any) -> None:
        if self._closed or self.lost:
            raise ConnectionLost("connection is closed")
        try:
            fn(*args, **kwargs)
        except (StompException, OSError) as exc:
            raise ConnectionLost(f"{type(exc).__name__}: {exc}") from exc

    def wait_receipt(self, receipt: str, timeout: float | None = None) -> None:
        """Wait for RECEIPT ``receipt``: ERROR naming it fails, a lost connection is indeterminate."""
        limit = self.timeout if timeout is None else timeout

        def settled() -> bool:
            q = self.frames
            return receipt in q.receipts or q.lost or any(e.headers.get("receipt-id") == receipt for e in q.errors)

        with self.frames.cond:
            self.frames.cond.wait_for(settled, limit)
            error = next((e for e in self.frames.errors if e.headers.get("receipt-id") == receipt), None)
            got = receipt in self.frames.receipts
            lost = self.frames.lost
        if error is not None:
            raise AdapterError(f"ERROR for receipt {receipt}: {error.message}")
        if got:
            return
        if lost:
            raise ConnectionLost(f"connection lost before RECEIPT {receipt}")
        raise Indeterminate(f"no RECEIPT {receipt} within {limit:g}s")

    def _confirmed(self, confirm: bool) -> dict[str, str]:
        return {"receipt": self._receipt_id()} if confirm else {}

    def _await(self, headers: Mapping[str, str]) -> None:
        if "receipt" in headers:
            self.wait_receipt(headers["receipt"])

    # -- hooks -----------------------------------------------------------------------

    def _subscribe(self, destination: str, ack: AckMode, prefetch: int | None, headers: dict[str, str]) -> str:
        sub_id = headers.pop("id", None) or f"{self.process}-s{next(self._ids)}"
        if headers.get(NO_LOCAL_OPTION) == "true":  # sent as no-local too: ActiveMQ reads activemq.noLocal
            headers["activemq.noLocal"] = "true"
        if prefetch is not None and Capability.PREFETCH in self.settings.capabilities:
            # a prefetch is only a hint to a target without message-count prefetch (Artemis' window is in bytes)
            for name in self.settings.prefetch_headers:
                headers[name] = str(prefetch)
        headers.update(self._confirmed(True))
        with self.frames.cond:
            self.frames.messages.setdefault(sub_id, deque())
        self._transmit(self.conn.subscribe, destination, id=sub_id, ack=str(ack), headers=headers)
        self._await(headers)
        return sub_id

    def _unsubscribe(self, subscription: str) -> None:
        headers = self._confirmed(True)
        self._transmit(self.conn.unsubscribe, id=subscription, headers=headers)
        self._await(headers)

    def _subscribe_durable(self, destination: str, name: str, ack: AckMode, prefetch: int | None,
                           headers: dict[str, str]) -> str:
        """STOMP has no durable subscriptions; the profile's ``durable_subscription`` names the dialect:
        ``activemq`` (ActiveMQ, Artemis, the reference broker: ``client-id`` on CONNECT and
        ``activemq.subscriptionName``) or ``rabbitmq`` (the subscription id is the name, with
        ``durable:true`` and ``auto-delete:false``)."""
        if self._durable_dialect() == "rabbitmq":
            headers.update({"id": name, "durable": "true", "auto-delete": "false"})
        else:
            headers[DURABLE_NAME_HEADER] = name
        return self._subscribe(destination, ack, prefetch, headers)

    def _remove_durable(self, destination: str, name: str) -> None:
        """ActiveMQ deletes a durable subscription by name; RabbitMQ only in the UNSUBSCRIBE of a live
        subscription (it ignores, without a receipt, one for an id not subscribed), so the driver resumes
        it first."""
        headers = self._confirmed(True)
        if self._durable_dialect() == "rabbitmq":
            if name not in self._subscriptions:  # no consumer open on it here
                self._subscribe_durable(destination, name, AckMode.AUTO, None, {})
            headers["durable"] = "true"
            sub_id = name
        else:
            headers[DURABLE_NAME_HEADER] = name
            sub_id = f"{self.process}-s{next(self._ids)}"
        self._transmit(self.conn.unsubscribe, id=sub_id, headers=headers)
        self._await(headers)

    def _durable_dialect(self) -> str:
        dialect = str(self.settings.options.get("durable_subscription", "activemq"))
        if dialect not in ("activemq", "rabbitmq"):
            raise NotSupported(Capability.DURABLE_SUBSCRIPTIONS, f"unknown durable_subscription dialect {dialect!r}")
        return dialect

    def _send(self, destination: str, body: bytes, headers: dict[str, str], persistent: bool, confirm: bool,
              transaction: str | None) -> SendResult:
        if persistent:
            headers[self.settings.persistent_header] = "true"
        if transaction is not None:
            headers["transaction"] = transaction
        headers.update(self._confirmed(confirm))
        if body:
            headers["content-length"] = str(len(body))
        self._transmit(self.conn.send, destination, body, headers=headers)
        self._await(headers)
        return SendResult(seq=None, confirmed=confirm, detail={"receipt": headers.get("receipt")})

    def _receive(self, subscription: str, timeout: float) -> Delivery | None:
        q = self.frames
        with q.cond:
            box = q.messages.setdefault(subscription, deque())
            q.cond.wait_for(lambda: bool(box) or q.lost, timeout)
            if not box:
                if q.lost:
                    raise ConnectionLost("connection lost while waiting for a MESSAGE")
                return None
            headers, body = box.popleft()
        return self.to_delivery(subscription, headers, body)

    def to_delivery(self, subscription: str, headers: dict[str, str], body: bytes) -> Delivery:
        """Map a MESSAGE frame onto a :class:`Delivery`, normalising the broker's redelivery headers."""
        seq_text = headers.get(SEQ_HEADER)
        seq = int(seq_text) if seq_text is not None and seq_text.lstrip("-").isdigit() else None
        flag = headers.get(self.settings.redelivered_header)
        redelivered = None if flag is None else flag.strip().lower() == "true"
        count: int | None = None
        for name, first in self.settings.delivery_count_headers:
            raw = headers.get(name)
            if raw is not None and raw.strip().lstrip("-").isdigit():
                count = int(raw) - first + 1
                break
        if redelivered is None and count is not None:
            redelivered = count > 1
        if redelivered is None and Capability.REDELIVERED_FLAG in self.settings.capabilities:
            redelivered = False  # brokers that send the flag only when true (ActiveMQ)
        return Delivery(
            destination=headers.get("destination", ""), subscription=headers.get("subscription", subscription),
            body=body, headers=headers, message_id=headers.get("message-id"), ack_id=headers.get("ack"),
            seq=seq, producer=headers.get(PRODUCER_HEADER), redelivered=redelivered, delivery_count=count,
        )

    def _ack_id(self, delivery: Delivery) -> str:
        if delivery.ack_id is None:
            raise AdapterError(f"MESSAGE seq={delivery.seq} has no ack header (ack:auto subscription?)")
        return delivery.ack_id

    def _ack(self, delivery: Delivery, transaction: str | None, confirm: bool) -> None:
        receipt = self._receipt_id() if confirm else None
        self._transmit(self.conn.ack, self._ack_id(delivery), transaction=transaction, receipt=receipt)
        if receipt:
            self.wait_receipt(receipt)

    def _nack(self, delivery: Delivery, outcome: NackOutcome, transaction: str | None, confirm: bool) -> None:
        if outcome is not NackOutcome.NACK:
            raise NotSupported(Capability.NACK_OUTCOMES, "STOMP has only NACK")
        receipt = self._receipt_id() if confirm else None
        self._transmit(self.conn.nack, self._ack_id(delivery), transaction=transaction, receipt=receipt)
        if receipt:
            self.wait_receipt(receipt)

    def _tx(self, fn: Any, transaction: str) -> None:
        headers = self._confirmed(True)
        self._transmit(fn, transaction, headers=headers)
        self._await(headers)

    def _begin(self, transaction: str) -> None:
        self._tx(self.conn.begin, transaction)

    def _commit(self, transaction: str) -> None:
        self._tx(self.conn.commit, transaction)

    def _abort(self, transaction: str) -> None:
        self._tx(self.conn.abort, transaction)

    def _disconnect(self) -> None:
        if self._closed:
            return
        receipt = self._receipt_id()
        try:
            # Protocol12.disconnect only sends the frame; StompConnection12.disconnect would then block
            # without a timeout until the broker closes the socket.
            self._transmit(Protocol12.disconnect, self.conn, receipt=receipt)
            self.wait_receipt(receipt)
        except ConnectionLost:
            # stomp.py closes the socket itself once the DISCONNECT receipt arrives
            with self.frames.cond:
                if receipt not in self.frames.receipts:
                    raise
        finally:
            self._closed = True
            self._close_socket()

    def _crash(self) -> None:
        self._closed = True
        self._close_socket()

    def _close_socket(self) -> None:
        transport = self.conn.transport
        with contextlib.suppress(OSError, StompException, AttributeError):
            transport.disconnect_socket()
        io_thread = getattr(transport, "io_thread", None)
        if io_thread is not None and io_thread is not threading.current_thread():
            io_thread.join(self.timeout)

    def close(self) -> None:
        """Release the connection without recording anything (test clean-up)."""
        if not self._closed:
            self._closed = True
            self._close_socket()
