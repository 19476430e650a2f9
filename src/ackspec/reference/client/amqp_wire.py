"""The AMQP 1.0 wire of the reference client: proton's engine, sans-IO, driven by one I/O thread.

Same :class:`~.wire.Wire` contract as the STOMP wire, so the connection, the send tracker
(Jakarta Messaging 7.3) and the consumer cores do not know which protocol runs below.
proton's ``Connection``/``Transport``/``Collector`` is a pure state machine: this module
feeds it bytes and reads bytes back; no proton reactor and no proton threads.

Threading: the engine is not thread-safe, so application threads never touch it. A wire
verb appends a command to a queue and pokes a wake-up pipe; the I/O thread runs every
queued command, then writes everything the engine produced with one ``send`` (many
transfers coalesce into one segment), reads, and dispatches engine events. Verbs that
need an answer before the caller may go on (``begin`` needs the txn-id) wait on an event.

Mapping (docs/client-conformance.md, "AMQP 1.0 wire"):

=====================================  ====================================================
wire verb                              AMQP 1.0
=====================================  ====================================================
``send(receipt=token)``                unsettled transfer on a sender link per destination;
                                       ``accepted`` -> ``on_receipt``; ``rejected`` /
                                       ``released`` / ``modified`` -> ``on_rejected``
``send(receipt=None)``                 pre-settled transfer (written = complete)
``send(transaction=tx)``               transfer with ``transactional-state(txn-id)``
``subscribe(prefetch=n)``              receiver link, ``snd-settle-mode=unsettled``, credit
                                       topped up to ``max(1, n)`` minus unsettled deliveries
``ack``                                ``accepted`` (settled; in a transaction:
                                       ``transactional-state{txn, accepted}``, settled at
                                       discharge); with a receipt (block on acknowledge)
                                       the link uses ``rcv-settle-mode=second`` and the
                                       receipt is the broker's settlement
``nack`` (REDELIVERED)                 ``modified{delivery-failed}`` (redelivered, count + 1)
``nack`` (POISON)                      ``rejected`` (dead-letter queue)
``begin`` / ``commit`` / ``abort``     coordinator: ``declare`` / ``discharge(fail)``; the
                                       discharge's ``accepted`` is the receipt, a
                                       ``rejected`` discharge rejects it
``disconnect(receipt)``                ``close``; the peer's ``close`` is the receipt
=====================================  ====================================================

Messages: headers become application properties (``correlation-id`` travels in the
properties section, as the broker's mapping expects), ``persistent`` is ``durable``.
Inbound, AMQP's ``delivery-count`` (earlier failed attempts) becomes JMSXDeliveryCount
(``+ 1``); ``redelivered`` is ``delivery-count > 0`` or ``first-acquirer`` false.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from proton import (
    Condition,
    Described,
    Endpoint,
    Event,
    Link,
    Message,
    Terminus,
    symbol,
    ulong,
)
from proton import Delivery as PnDelivery

from ackspec.net import connect
from ackspec.reference.amqp.pump import EnginePump, Fed, client_engine
from ackspec.reference.client.errors import ConnectionLostError, JMSError
from ackspec.reference.client.wire import WireEvents
from ackspec.reference.stomp.frames import ACK_TYPE_HEADER, POISON_ACK_TYPE

ACCEPTED = 0x24
REJECTED = 0x25
RELEASED = 0x26
MODIFIED = 0x27
DECLARED = 0x33
TRANSACTIONAL_STATE = 0x34
OUTCOME_NAMES = {ACCEPTED: "accepted", REJECTED: "rejected", RELEASED: "released", MODIFIED: "modified"}


def _condition_text(cond: Condition | None) -> str:
    if cond is None:
        return ""
    return f"{cond.name}: {cond.description}" if cond.description else str(cond.name)


def _outcome(dlv: PnDelivery) -> int:
    """The terminal outcome of a delivery's remote state (unwrapping transactional-state)."""
    state = int(dlv.remote_state or 0)
    if state == TRANSACTIONAL_STATE:
        data = dlv.remote.data or []
        inner = data[1] if len(data) > 1 else None
        return int(inner.descriptor) if isinstance(inner, Described) else ACCEPTED
    return state


@dataclass
class _Receiver:
    sub_id: str
    link: Link
    prefetch: int
    second: bool
    unsettled: dict[str, PnDelivery] = field(default_factory=dict)
    closing: bool = False
    detached: threading.Event = field(default_factory=threading.Event)
    """Set when the broker answered our detach (or the connection ended): it has taken back what it held."""


@dataclass
class _Txn:
    name: str
    declared: threading.Event = field(default_factory=threading.Event)
    txn_id: bytes | None = None
    error: str | None = None
    acked: list[tuple[_Receiver, str, PnDelivery]] = field(default_factory=list)


class AmqpWire:
    """AMQP 1.0 over TCP for the reference client (see the module docstring)."""

    def __init__(self, host: str, port: int, events: WireEvents, *, login: str | None, passcode: str | None,
                 connect_timeout: float = 10.0, tick: float = 0.02,
                 wakeup: Callable[[], float | None] | None = None, block_on_acknowledge: bool = False) -> None:
        self._events = events
        self._tick = tick
        self._next_deadline = wakeup
        self._second = block_on_acknowledge
        self._answer_timeout = connect_timeout  # bound on waiting for the broker's answer to a detach
        self._closed = False
        self._lost = False
        self._commands: deque[Callable[[], None]] = deque()
        self._commands_lock = threading.Lock()
        self._poked = False
        self._tags = itertools.count(1)
        self._names = itertools.count(1)
        self._ack_ids = itertools.count(1)
        self._senders: dict[str, Link] = {}
        self._sender_tokens: dict[str, dict[str, PnDelivery]] = {}  # link name -> tag -> unsettled send
        self._tokens: dict[tuple[str, str], str] = {}  # (link name, tag) -> receipt token (transfers, discharges)
        self._receivers: dict[str, _Receiver] = {}  # sub_id -> receiver
        self._by_link: dict[str, _Receiver] = {}  # link name -> receiver
        self._ack_receipts: dict[tuple[str, str], str] = {}  # (link name, tag) of the last acked -> token
        self._txns: dict[str, _Txn] = {}
        self._coordinator: Link | None = None
        self._unsent: dict[str, deque[tuple[bytes, str | None, _Txn | None]]] = {}  # link name -> sends
        self._after_unsent: list[Callable[[], None]] = []
        self._closing_token: str | None = None
        self._said_goodbye = False
        self._error: str | None = None
        try:
            self._sock = connect(host, port, connect_timeout, blocking=False)
        except OSError as exc:
            raise JMSError(f"cannot connect to {host}:{port}: {exc}") from exc
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._conn, self._transport, self._collector = client_engine(
            f"ackspec-refclient-{os.getpid()}-{id(self):x}", host, login, passcode)
        self._engine = EnginePump(self._transport, self._collector, self._on_event)
        self._conn.open()
        self._session = self._conn.session()
        self._session.open()
        self._opened = threading.Event()
        self.server = ""
        self._reader = threading.Thread(target=self._io_loop, name=f"amqp-io-{port}", daemon=True)
        self._reader.start()
        if not self._opened.wait(connect_timeout) or self._lost:
            self.close()
            raise JMSError(f"broker refused the connection: {self._error or 'no open frame'}")

    # -- posting commands to the I/O thread -------------------------------------------------

    def _post(self, command: Callable[[], None]) -> None:
        if self._lost or self._closed:
            raise ConnectionLostError("the connection is closed")
        with self._commands_lock:
            self._commands.append(command)
            poke = not self._poked
            self._poked = True
        if poke:
            with contextlib.suppress(BlockingIOError):
                os.write(self._wake_w, b"x")

    # -- wire verbs (application threads) -----------------------------------------------------

    def pump_until(self, done: Callable[[], bool], timeout: float) -> bool:
        """The I/O thread does all reading here (proton's engine is not thread-safe)."""
        return done()

    def send(self, destination: str, body: bytes, headers: Mapping[str, str], *, persistent: bool,
             receipt: str | None, transaction: str | None, flush: bool = True) -> None:
        msg = Message()
        msg.inferred = True
        msg.body = bytes(body)
        msg.durable = persistent
        props = {k: v for k, v in headers.items() if k not in {"destination", "receipt", "transaction",
                                                               "persistent", "content-length"}}
        message_id = props.get("ackspec-message-id")
        if message_id:
            msg.id = message_id
        msg.properties = props  # type: ignore[assignment]  # proton's stub says None
        encoded = msg.encode()
        txn = self._txns.get(transaction) if transaction is not None else None
        if transaction is not None and txn is None:
            raise JMSError(f"unknown transaction {transaction}")
        self._post(lambda: self._do_send(destination, encoded, receipt, txn))

    def subscribe(self, sub_id: str, destination: str, *, individual: bool, prefetch: int,
                  selector: str | None) -> None:
        self._post(lambda: self._do_subscribe(sub_id, destination, prefetch))

    def unsubscribe(self, sub_id: str) -> None:
        """Detach the receiver link and wait (bounded) for the broker's detach: only then has it put back
        the messages the link held unsettled, so whoever reads the queue after a consumer or session
        closed finds them there, not on their way back."""
        answered = threading.Event()
        self._post(lambda: self._do_unsubscribe(sub_id, answered))
        if threading.current_thread() is not self._reader:
            answered.wait(self._answer_timeout)

    def ack(self, ack_ids: Sequence[str], *, transaction: str | None, receipt: str | None,
            extra: Mapping[str, str] | None = None) -> None:
        txn = self._txns.get(transaction) if transaction is not None else None
        ids = list(ack_ids)
        self._post(lambda: self._do_settle(ids, ACCEPTED, txn, receipt))

    def nack(self, ack_ids: Sequence[str], *, transaction: str | None, receipt: str | None,
             extra: Mapping[str, str] | None = None) -> None:
        poison = (extra or {}).get(ACK_TYPE_HEADER) == POISON_ACK_TYPE
        txn = self._txns.get(transaction) if transaction is not None else None
        ids = list(ack_ids)
        self._post(lambda: self._do_settle(ids, REJECTED if poison else MODIFIED, txn, receipt))

    def begin(self, transaction: str) -> None:
        txn = _Txn(transaction)
        self._txns[transaction] = txn
        self._post(lambda: self._do_declare(txn))
        if not txn.declared.wait(30.0):
            raise ConnectionLostError("no answer to the transaction declare")
        if txn.error is not None:
            raise JMSError(f"declare refused: {txn.error}")

    def commit(self, transaction: str, receipt: str) -> None:
        self._post(lambda: self._in_order(lambda: self._do_discharge(transaction, False, receipt)))

    def abort(self, transaction: str, receipt: str) -> None:
        self._post(lambda: self._in_order(lambda: self._do_discharge(transaction, True, receipt)))

    def disconnect(self, receipt: str) -> None:
        self._post(lambda: self._in_order(lambda: self._do_close(receipt)))

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError, ValueError):
            os.write(self._wake_w, b"x")
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout=5)
            if not self._reader.is_alive():
                for fd in (self._wake_r, self._wake_w):
                    with contextlib.suppress(OSError):
                        os.close(fd)
                self._wake_r = self._wake_w = -1

    def crash(self) -> None:
        """Abrupt close without the AMQP close (tests of indeterminate outcomes)."""
        self.close()

    # -- commands (I/O thread) ------------------------------------------------------------------

    def _sender(self, destination: str) -> Link:
        link = self._senders.get(destination)
        if link is not None and not link.state & Endpoint.REMOTE_CLOSED:
            return link
        name = f"{self._conn.container}-s{next(self._names)}"
        link = self._session.sender(name)
        link.target.address = destination
        link.source.address = name
        link.snd_settle_mode = Link.SND_MIXED
        link.open()
        self._senders[destination] = link
        self._sender_tokens[name] = {}
        return link

    def _do_send(self, destination: str, encoded: bytes, receipt: str | None, txn: _Txn | None) -> None:
        link = self._sender(destination)
        waiting = self._unsent.setdefault(link.name, deque())
        waiting.append((encoded, receipt, txn))
        self._send_waiting(link)

    def _send_waiting(self, link: Link) -> None:
        """Transfer what waits for this link while it has credit.

        Transfers wait for credit here rather than in proton's buffer: a delivery whose
        transactional-state was set before the link had credit reaches the broker without it."""
        waiting = self._unsent.get(link.name)
        while waiting and link.credit > 0:
            self._transfer(link, *waiting.popleft())
        if self._after_unsent and not any(self._unsent.values()):
            later, self._after_unsent = self._after_unsent, []
            for command in later:
                command()

    def _in_order(self, command: Callable[[], None]) -> None:
        """Run ``command`` once every earlier send is on the wire (a discharge or close must
        not overtake a transfer still waiting for its link's credit)."""
        if any(self._unsent.values()) or self._after_unsent:
            self._after_unsent.append(command)
        else:
            command()

    def _transfer(self, link: Link, encoded: bytes, receipt: str | None, txn: _Txn | None) -> None:
        dlv = link.delivery(str(next(self._tags)))
        link.send(encoded)
        if txn is not None and txn.txn_id is not None:
            dlv.local.data = [txn.txn_id]  # type: ignore[list-item]  # proton's stub says list[int]
            dlv.update(TRANSACTIONAL_STATE)
        link.advance()
        tag = str(dlv.tag)
        if receipt is None:
            dlv.settle()  # pre-settled (also in a transaction: the discharge decides)
            return
        self._tokens[link.name, tag] = receipt
        self._sender_tokens[link.name][tag] = dlv

    def _do_subscribe(self, sub_id: str, destination: str, prefetch: int) -> None:
        name = f"{self._conn.container}-{sub_id}"
        link = self._session.receiver(name)
        link.source.address = destination
        link.target.address = destination
        link.snd_settle_mode = Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_SECOND if self._second else Link.RCV_FIRST
        receiver = _Receiver(sub_id, link, max(1, prefetch), self._second)
        self._receivers[sub_id] = receiver
        self._by_link[name] = receiver
        link.open()
        self._top_up(receiver)

    def _do_unsubscribe(self, sub_id: str, answered: threading.Event) -> None:
        receiver = self._receivers.pop(sub_id, None)
        if receiver is None or self._lost:
            answered.set()
            return
        receiver.detached = answered
        receiver.closing = True
        receiver.link.close()

    def _top_up(self, receiver: _Receiver) -> None:
        if receiver.closing:
            return
        want = receiver.prefetch - len(receiver.unsettled) - receiver.link.credit
        if want > 0:
            receiver.link.flow(want)

    def _find(self, ack_id: str) -> tuple[_Receiver, PnDelivery] | None:
        sub_id = ack_id.rpartition("/")[0]
        receiver = self._receivers.get(sub_id)
        if receiver is None:
            receiver = next((r for r in self._by_link.values() if r.sub_id == sub_id), None)
        if receiver is None:
            return None
        dlv = receiver.unsettled.get(ack_id)
        return None if dlv is None else (receiver, dlv)

    def _do_settle(self, ack_ids: list[str], outcome: int, txn: _Txn | None, receipt: str | None) -> None:
        batch: list[PnDelivery] = []
        touched: dict[str, _Receiver] = {}
        for ack_id in ack_ids:
            found = self._find(ack_id)
            if found is None:
                continue
            receiver, dlv = found
            touched[receiver.sub_id] = receiver
            if txn is not None and txn.txn_id is not None:
                dlv.local.data = [txn.txn_id, Described(ulong(outcome), [])]  # type: ignore[list-item]
                dlv.update(TRANSACTIONAL_STATE)
                txn.acked.append((receiver, ack_id, dlv))
                continue
            if outcome == MODIFIED:
                dlv.local.failed = True
            dlv.update(outcome)
            batch.append(dlv)
            if not receiver.second:
                dlv.settle()
                receiver.unsettled.pop(ack_id, None)
        if receipt is not None:
            waiting = [d for d in batch if not d.settled]
            if waiting:
                self._ack_receipts[waiting[-1].link.name, str(waiting[-1].tag)] = receipt
            else:
                self._events.on_receipt(receipt, {})
        for receiver in touched.values():
            self._top_up(receiver)

    def _coordinator_link(self) -> Link:
        coord = self._coordinator
        if coord is None or coord.state & Endpoint.REMOTE_CLOSED:
            name = f"{self._conn.container}-txn{next(self._names)}"
            coord = self._session.sender(name)
            coord.source.address = name
            coord.target.type = Terminus.COORDINATOR
            coord.target.capabilities.put_object(symbol("amqp:local-transactions"))
            coord.open()
            self._coordinator = coord
            self._sender_tokens[name] = {}
        return coord

    def _control(self, body: Described, token: str) -> PnDelivery:
        coord = self._coordinator_link()
        dlv = coord.delivery(str(next(self._tags)))
        coord.send(Message(body=body).encode())
        coord.advance()
        tag = str(dlv.tag)
        self._tokens[coord.name, tag] = token
        self._sender_tokens[coord.name][tag] = dlv
        return dlv

    def _do_declare(self, txn: _Txn) -> None:
        self._control(Described(symbol("amqp:declare:list"), [None]), f"declare:{txn.name}")

    def _do_discharge(self, name: str, fail: bool, receipt: str) -> None:
        txn = self._txns.get(name)
        if txn is None or txn.txn_id is None:
            self._events.on_rejected(receipt, f"unknown transaction {name}")
            return
        self._control(Described(symbol("amqp:discharge:list"), [txn.txn_id, fail]),
                      f"discharge:{int(fail)}:{name}:{receipt}")

    def _do_close(self, receipt: str) -> None:
        self._closing_token = receipt
        self._conn.close()

    # -- engine events (I/O thread) ---------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        kind = event.type
        if kind == Event.DELIVERY and event.delivery is not None:
            dlv = event.delivery
            if dlv.link.is_receiver:
                self._on_transfer(dlv)
            else:
                self._on_disposition(dlv)
        elif kind == Event.LINK_FLOW and event.link is not None and event.link.is_sender:
            self._send_waiting(event.link)
        elif kind == Event.SESSION_REMOTE_OPEN and not self._opened.is_set():
            self._opened.set()
        elif kind in (Event.LINK_REMOTE_CLOSE, Event.LINK_REMOTE_DETACH) and event.link is not None:
            self._on_link_closed(event.link)
        elif kind == Event.CONNECTION_REMOTE_CLOSE:
            if self._closing_token is not None:
                token, self._closing_token = self._closing_token, None
                self._said_goodbye = True
                self._events.on_receipt(token, {})
            else:
                self._fail(f"connection closed by the broker: "
                           f"{_condition_text(self._conn.remote_condition) or 'no error'}")
        elif kind == Event.SESSION_REMOTE_CLOSE and event.session is not None:
            self._fail(f"session ended by the broker: {_condition_text(event.session.remote_condition)}")

    def _on_transfer(self, dlv: PnDelivery) -> None:
        link = dlv.link
        receiver = self._by_link.get(link.name)
        if receiver is not None and receiver.second and dlv.settled:
            tag = str(dlv.tag)
            token = self._ack_receipts.pop((link.name, tag), None)
            if token is not None:
                self._events.on_receipt(token, {})
            for key, other in list(receiver.unsettled.items()):
                if str(other.tag) == tag:
                    del receiver.unsettled[key]
            dlv.settle()
            self._top_up(receiver)
            return
        if dlv.partial or not dlv.readable:
            return
        data = link.recv(dlv.pending)
        link.advance()
        if receiver is None or receiver.closing or data is None:
            if not dlv.settled:
                dlv.update(RELEASED)
                dlv.settle()
            return
        msg = Message()
        msg.decode(data)
        ack_id = f"{receiver.sub_id}/{next(self._ack_ids)}"
        if not dlv.settled:
            receiver.unsettled[ack_id] = dlv
        raw_props: dict[Any, Any] = dict(msg.properties or {})
        headers: dict[str, str] = {str(k): _text(v) for k, v in raw_props.items()}
        count = int(msg.delivery_count or 0)
        headers["JMSXDeliveryCount"] = str(count + 1)
        headers["redelivered"] = "true" if count > 0 or not msg.first_acquirer else "false"
        headers["persistent"] = "true" if msg.durable else "false"
        if msg.address:
            headers["destination"] = str(msg.address)
        if msg.id is not None:
            headers["message-id"] = str(msg.id)
        if msg.correlation_id is not None:
            headers["correlation-id"] = str(msg.correlation_id)
        body = msg.body
        raw = bytes(body) if isinstance(body, bytes | bytearray | memoryview) else (
            body.encode() if isinstance(body, str) else b"" if body is None else str(body).encode())
        self._events.on_message(receiver.sub_id, ack_id, headers, raw)

    def _on_disposition(self, dlv: PnDelivery) -> None:
        key = (dlv.link.name, str(dlv.tag))
        token = self._tokens.get(key)
        if token is None or not (dlv.remote_state or dlv.settled):
            return
        del self._tokens[key]
        pending = self._sender_tokens.get(dlv.link.name)
        if pending is not None:
            pending.pop(key[1], None)
        state = int(dlv.remote_state or 0)
        outcome = _outcome(dlv)
        cond = _condition_text(dlv.remote.condition)
        if token.startswith("declare:"):
            txn = self._txns.get(token[len("declare:"):])
            if txn is not None:
                data = dlv.remote.data
                if state == DECLARED and data:
                    txn.txn_id = bytes(data[0])
                else:
                    txn.error = f"{OUTCOME_NAMES.get(state, hex(state))} {cond}".strip()
                txn.declared.set()
            dlv.settle()
            return
        if token.startswith("discharge:"):
            _, fail, name, receipt = token.split(":", 3)
            dlv.settle()
            self._finish_txn(name, committed=outcome == ACCEPTED and fail == "0")
            if outcome == ACCEPTED:
                self._events.on_receipt(receipt, {})
            else:
                self._events.on_rejected(receipt, f"discharge {OUTCOME_NAMES.get(outcome, 'without outcome')}"
                                         + (f": {cond}" if cond else ""))
            return
        dlv.settle()
        if not token:
            return  # nobody waits for this one
        if outcome == ACCEPTED:
            self._events.on_receipt(token, {})
        else:
            name = OUTCOME_NAMES.get(outcome, "no outcome")
            self._events.on_rejected(token, f"{name}{f': {cond}' if cond else ''}")

    def _finish_txn(self, name: str, *, committed: bool) -> None:
        txn = self._txns.pop(name, None)
        if txn is None:
            return
        for receiver, ack_id, dlv in txn.acked:
            if not committed:
                dlv.local.failed = True
                dlv.update(MODIFIED)
            dlv.settle()
            receiver.unsettled.pop(ack_id, None)
        for receiver in {r.sub_id: r for r, _, _ in txn.acked}.values():
            self._top_up(receiver)

    def _on_link_closed(self, link: Link) -> None:
        receiver = self._by_link.pop(link.name, None)
        if receiver is not None:
            if not receiver.closing:
                link.close()
            receiver.detached.set()
            return
        text = _condition_text(link.remote_condition) or "link closed by the broker"
        for _, receipt, _ in self._unsent.pop(link.name, deque()):
            if receipt is not None:
                self._events.on_rejected(receipt, text)
        for tag in self._sender_tokens.pop(link.name, {}):
            token = self._tokens.pop((link.name, tag), None)
            if not token:
                continue
            if token.startswith("declare:"):
                txn = self._txns.get(token[len("declare:"):])
                if txn is not None:
                    txn.error = text
                    txn.declared.set()
            elif token.startswith("discharge:"):
                self._events.on_rejected(token.split(":", 3)[3], text)
            else:
                self._events.on_rejected(token, text)
        for dest, sender in list(self._senders.items()):
            if sender is link:
                del self._senders[dest]
        if link is self._coordinator:
            self._coordinator = None
        link.close()

    def _fail(self, why: str) -> None:
        if self._error is None:
            self._error = why
        self._lost = True

    # -- the I/O loop -------------------------------------------------------------------------------

    def _timeout(self) -> float:
        deadline = self._next_deadline() if self._next_deadline else None
        return self._tick if deadline is None else max(0.0, min(self._tick, deadline))

    def _run_commands(self) -> None:
        with self._commands_lock:
            commands, self._commands = self._commands, deque()
            self._poked = False
        for command in commands:
            command()

    def _dispatch(self) -> None:
        self._engine.dispatch()

    def _flush(self) -> None:
        while True:
            pending = self._engine.pending()
            if pending <= 0:
                if pending < 0 and not self._closed and self._closing_token is None and not self._said_goodbye:
                    self._fail(_condition_text(self._transport.condition) or "transport closed for output")
                return
            data = self._engine.peek(pending)
            if not data:
                return
            try:
                sent = self._sock.send(data)
            except BlockingIOError:
                select.select([], [self._sock], [], 0.05)
                continue
            self._engine.pop(sent)

    def _push(self, data: bytes) -> None:
        fed = self._engine.feed(data, on_full=self._drain)
        if fed is Fed.CLOSED:
            self._fail(_condition_text(self._transport.condition) or "transport closed for input")
        elif fed is Fed.STUCK:
            self._fail("transport input buffer stuck full")
        else:
            self._dispatch()

    def _drain(self) -> None:
        self._dispatch()
        self._flush()

    def _io_loop(self) -> None:
        try:
            while not self._closed and not self._lost:
                self._run_commands()
                self._dispatch()
                self._flush()
                if self._lost:
                    break
                watched: list[Any] = [self._sock, self._wake_r]
                ready, _, _ = select.select(watched, [], [], self._timeout())
                self._events.on_tick()
                if self._wake_r in ready:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self._wake_r, 4096)
                if self._sock in ready:
                    try:
                        data = self._sock.recv(262144)
                    except BlockingIOError:
                        data = None
                    if data == b"":
                        self._fail("connection closed by the broker")
                        break
                    if data:
                        self._push(data)
                self._transport.tick(time.monotonic())
                self._dispatch()
        except OSError as exc:
            if exc.errno not in (errno.EBADF,) or not self._closed:
                self._fail(f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # an engine error must surface as a lost connection, not a dead thread
            self._fail(f"{type(exc).__name__}: {exc}")
        finally:
            self._lost = True
            self._opened.set()
            for txn in self._txns.values():
                txn.declared.set()
            for receiver in self._by_link.values():  # no detach will be answered now
                receiver.detached.set()
            with contextlib.suppress(OSError):
                self._flush()
            with contextlib.suppress(OSError):
                self._sock.close()
            gone = self._closed or self._said_goodbye
            self._events.on_lost("connection closed by the client" if gone else self._error or "connection lost",
                                 None)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


__all__ = ["AmqpWire"]
