"""ConnectionFactory and Connection: the thin threaded I/O around the sans-IO cores.

One :class:`Connection` owns a :class:`~.wire.Wire` (its reader thread reports receipts,
rejections, messages and loss), one :class:`~.send_core.SendTracker` and the consumers'
:class:`~.consumer_core.ConsumerAckCore` objects. Every core call happens under the
connection's state lock; the actions the cores return are executed here: waking blocked
senders, queueing callbacks on the session's callback thread, writing acks.

Two locks, for a reason: ``_send_lock`` keeps "number a send" and "write it" atomic, so
the tracker's order is the wire order (a cumulative publish-window receipt relies on it);
the reader thread never takes it, so a sender blocked in a socket write cannot stall the
processing of receipts.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ackspec.reference.client.clock import Clock, MonotonicClock
from ackspec.reference.client.consumer_core import AckRecord, AckType
from ackspec.reference.client.dispatch import (
    current_scopes,
    in_callback_of,
    in_message_listener,
    outside_callbacks,
)
from ackspec.reference.client.errors import (
    ConnectionLostError,
    ControlRefusedError,
    IllegalStateError,
    JMSError,
    SendRejectedError,
)
from ackspec.reference.client.eventlog import EventLog
from ackspec.reference.client.message import Message
from ackspec.reference.client.options import ClientOptions, parse_url
from ackspec.reference.client.send_core import (
    Action,
    Complete,
    Outcome,
    PendingSend,
    SendAcknowledged,
    SendKind,
    SendState,
    SendTracker,
    WindowAck,
    WindowOpened,
    WindowReject,
    classify,
)
from ackspec.reference.client.wire import StompWire, Wire
from ackspec.reference.stomp.frames import ACK_TYPE_HEADER

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ackspec.reference.client.session import MessageConsumer, Session

_conn_ids = itertools.count(1)


class _Condition(threading.Condition):
    """A condition that counts its waiters, so that ``notify_all`` with nobody waiting (the
    common case on a send's path, several times per send) costs one attribute test."""

    def __init__(self, lock: threading.RLock) -> None:
        super().__init__(lock)
        self.waiting = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting += 1  # the lock is held here ...
        try:
            return super().wait(timeout)
        finally:
            self.waiting -= 1  # ... and again here

    def notify_all(self) -> None:
        if self.waiting:
            super().notify_all()


@dataclass(frozen=True, slots=True)
class PublishEvent:
    """A publish-window event for the application (Solace ack event modes).

    ``kind`` is ``"ack"`` or ``"reject"``; ``messages`` are the sends it covers, in order
    (one in per-message mode; every covered message in windowed mode, ``last`` naming the
    acknowledged one)."""

    kind: str
    messages: tuple[Message, ...]
    last: Message
    error: str | None = None


class ConnectionFactory:
    """Builds connections from ``stomp://host:port?options`` or ``amqp://host:port?options``
    (see :mod:`.options`); both give the same API."""

    def __init__(self, url: str, *, clock: Clock | None = None, **options: Any) -> None:
        self.scheme, self.host, self.port, self.options = parse_url(url, **options)
        self.url = url
        self.clock = clock or MonotonicClock()

    def create_connection(self, login: str | None = None, passcode: str | None = None) -> Connection:
        options = self.options
        if login is not None:
            options = options.replace(login=login, passcode=passcode)
        return Connection(self.host, self.port, options, self.clock, protocol=self.scheme)


class _ControlWait:
    __slots__ = ("done", "error", "refused")

    def __init__(self) -> None:
        self.done = False
        self.error: str | None = None
        self.refused: str | None = None  # the broker answered "no" and kept the connection (AMQP discharge)


class Connection:
    """A Jakarta-Messaging-shaped connection. Thread-safe."""

    def __init__(self, host: str, port: int, options: ClientOptions, clock: Clock, *,
                 protocol: str = "stomp") -> None:
        self.id = f"c{next(_conn_ids)}"
        self.options = options
        self.clock = clock
        self.log = EventLog()
        self._lock = threading.RLock()
        self._cond = _Condition(self._lock)  # on _lock: "with self._lock" enters it (one C call, not two)
        self._send_lock = threading.Lock()
        self._tracker = SendTracker(options, token_prefix=f"{self.id}-send-", cumulative=protocol != "amqp")
        self._sessions: list[Session] = []
        self._session_by_id: dict[str, Session] = {}
        self._consumers: dict[str, MessageConsumer] = {}
        self._control: dict[str, _ControlWait] = {}
        self._orphans: set[str] = set()
        self._scopes_of_send: dict[str, frozenset[int]] = {}
        self._classified: dict[tuple[bool, bool, bool, bool], tuple[SendKind, bool, bool]] = {}
        self._window_quarter = max(1, options.publish_window_size // 4)
        self._ids = itertools.count(1)
        self._started = False
        self._closed = False
        self._close_after_listener = False
        self._lost: str | None = None
        self.exception_listener: Callable[[JMSError], None] | None = None
        self._publish_listener: Callable[[PublishEvent], None] | None = None
        self._send_ack_handler: Callable[[Message], None] | None = None
        self.protocol = protocol
        if protocol == "amqp":
            from ackspec.reference.client.amqp_wire import AmqpWire  # noqa: PLC0415 - proton only when asked

            self._wire: Wire = AmqpWire(host, port, self, login=options.login, passcode=options.passcode,
                                        wakeup=self._next_deadline,
                                        block_on_acknowledge=options.block_on_acknowledge)
        else:
            self._wire = StompWire(host, port, self, login=options.login, passcode=options.passcode,
                                   wakeup=self._next_deadline, heart_beat=options.heart_beat)

    # -- public API -------------------------------------------------------------------------------

    def create_session(self, transacted: bool = False, acknowledge_mode: int = 1) -> Session:
        from ackspec.reference.client.session import Session  # noqa: PLC0415 - cycle by design

        self._check_open()
        session = Session(self, f"{self.id}-s{next(self._ids)}", transacted, acknowledge_mode)
        with self._lock:
            self._sessions.append(session)
            self._session_by_id[session.id] = session
        return session

    def start(self) -> None:
        self._check_open()
        with self._lock:
            self._started = True
            consumers = list(self._consumers.values())
            self._cond.notify_all()
        for consumer in consumers:
            consumer._pump()

    def stop(self) -> None:
        with self._lock:
            self._started = False

    @property
    def started(self) -> bool:
        return self._started

    def set_publish_event_listener(self, listener: Callable[[PublishEvent], None] | None) -> None:
        """Receive publish-window acknowledgement and rejection events (Solace)."""
        self._publish_listener = listener

    def set_send_acknowledgement_handler(self, handler: Callable[[Message], None] | None) -> None:
        """Artemis SendAcknowledgementHandler; needs ``confirmation_window_size`` > 0."""
        if handler is not None and self.options.confirmation_window_size <= 0:
            raise JMSError("a send-acknowledgement handler needs confirmation_window_size > 0")
        with self._lock:
            self._send_ack_handler = handler
            self._tracker.ack_handler_enabled = handler is not None

    def close(self) -> None:
        """Wait for incomplete sends and their callbacks (7.3.4), close sessions, disconnect.

        From a MessageListener of this connection the close is deferred until ``on_message``
        returns, so that the message it is processing is acknowledged first (6.1.8)."""
        if self._closed:
            return
        if in_message_listener():
            self._close_after_listener = True
            return
        if in_callback_of(self):
            raise IllegalStateError("a callback may not close its own connection (Jakarta Messaging 7.3.4)")
        self.wait_incomplete("connection")
        for session in list(self._sessions):
            session.close()
        self._closed = True
        if self._lost is None:
            token = f"{self.id}-bye"
            with contextlib.suppress(JMSError):
                self._control_request(token, lambda: self._wire.disconnect(token), timeout=5.0)
        self._wire.close()

    def crash(self) -> None:
        """Drop the socket without DISCONNECT (for tests of indeterminate outcomes)."""
        self._wire.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _after_listener(self) -> None:
        """Run a close that a MessageListener asked for, now that it has returned (6.1.8)."""
        if self._close_after_listener and not self._closed:
            with outside_callbacks():
                self.close()

    @property
    def lost(self) -> str | None:
        return self._lost

    # -- used by sessions -------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed or self._close_after_listener:
            raise IllegalStateError("the connection is closed")
        if self._lost is not None:
            raise ConnectionLostError(f"the connection was lost: {self._lost}")

    def new_id(self, kind: str) -> str:
        return f"{self.id}-{kind}{next(self._ids)}"

    def wait_incomplete(self, scope: str, timeout: float | None = None) -> None:
        with self._lock:
            if not self._cond.wait_for(lambda: self._tracker.incomplete(scope) == 0, timeout):
                raise JMSError(f"timed out waiting for incomplete sends of {scope}")

    def incomplete(self, scope: str) -> int:
        with self._lock:
            return self._tracker.incomplete(scope)

    def send_message(self, *, session: Session, producer: str, destination: str, message: Message,
                     persistent: bool, transaction: str | None, listener: object,
                     body: bytes, headers: Mapping[str, str], scopes: frozenset[int]) -> PendingSend:
        """Number, window-wait, write and (for blocking sends) wait. Raises in the caller's thread."""
        shape = (persistent, transaction is not None, listener is not None, self._send_ack_handler is not None)
        classified = self._classified.get(shape)
        if classified is None:  # the options are frozen: four flags decide, so classify each shape once
            classified = self._classified[shape] = classify(
                self.options, persistent=shape[0], transacted=shape[1], asynchronous=shape[2], ack_handler=shape[3])
        kind, wants_receipt, windowed = classified
        size = len(body) + sum(map(len, headers)) + sum(map(len, headers.values()))
        with self._send_lock:
            with self._lock:
                self._check_open()
                # without a publish window or a confirmation window (no handler) there is always room
                room = not (windowed or self._tracker.ack_handler_enabled) or self._tracker.has_room(
                    windowed=windowed, size=size)
                if not room:
                    self.log.append("send-blocked", producer=producer, in_flight=self._tracker.window_in_flight,
                                    unconfirmed_bytes=self._tracker.unconfirmed_bytes)
            if not room:
                self._await_room(windowed, size)
            with self._lock:
                self._check_open()
                send = self._tracker.submit(producer=producer, session=session.id, destination=destination,
                                            kind=kind, wants_receipt=wants_receipt, windowed=windowed, size=size,
                                            ref=message, listener=listener)
                self._scopes_of_send[send.token] = scopes
                if listener is not None:
                    message._set_in_flight(True)
                # coalesce frames nobody blocks on and whose receipt confirms them (one write per burst); in a
                # publish window every quarter of it goes out at once, so the broker confirms the first ones
                # while later ones are made, and the send that fills it too (its sender blocks next anyway)
                flush = kind is SendKind.BLOCKING or not wants_receipt or (windowed and (
                    self._tracker.window_in_flight % self._window_quarter == 0
                    or self._tracker.window_in_flight >= self.options.publish_window_size))
            try:
                self._wire.send(destination, body, headers, persistent=persistent,
                                receipt=send.token if wants_receipt else None, transaction=transaction,
                                flush=flush)
            except JMSError:
                with self._lock:
                    if listener is not None:
                        message._set_in_flight(False)
                    self._run(self._tracker.abandon(send.token))
                    self._scopes_of_send.pop(send.token, None)
                raise
            self.log.append("send", token=send.token, destination=destination, producer=producer, kind=str(kind),
                            receipt=wants_receipt, windowed=windowed, thread=threading.get_ident())
            with self._lock:
                actions = self._tracker.sent(send.token)
                if actions:  # none: nothing changed (a send that waits for its receipt)
                    self._run(actions)
        if kind is SendKind.BLOCKING:
            self._await_blocking(send)
        return send

    def _await_room(self, windowed: bool, size: int) -> None:
        """Block until the publish/confirmation window has room (Solace, Artemis). The blocked sender reads
        the receipts that open it on its own thread first (like a blocking send), so a sender that keeps
        a window full wakes no other thread per message; then it waits on the condition as before.
        Called with ``_send_lock`` held: no other send can take the room meanwhile."""
        def room() -> bool:
            return self._lost is not None or self._tracker.has_room(windowed=windowed, size=size)

        deadline = time.monotonic() + self.options.send_timeout
        self._wire.pump_until(room, self.options.send_timeout)
        with self._lock:
            ok = room() or self._cond.wait_for(room, max(0.0, deadline - time.monotonic()))
            self._check_open()
            if not ok:
                raise JMSError("timed out waiting for room in the publish window")

    def _await_blocking(self, send: PendingSend) -> None:
        self._wire.pump_until(lambda: send.released, self.options.send_timeout)  # read the receipt here
        with self._lock:
            ok = send.released or self._cond.wait_for(lambda: send.released, self.options.send_timeout)
            if not ok:
                self._orphans.add(send.token)
                from ackspec.reference.client.errors import SendTimeoutError  # noqa: PLC0415

                raise SendTimeoutError(f"no confirmation for {send.token} within {self.options.send_timeout}s; "
                                       "the outcome is unknown")
            self._tracker.callback_returned(send.token)
            self._cond.notify_all()
        if send.state is SendState.FAILED:
            raise _send_error(send)

    def _control_request(self, token: str, write: Callable[[], None], timeout: float | None = None) -> None:
        """Write a frame carrying ``receipt: token`` and wait for that receipt."""
        wait = _ControlWait()
        with self._lock:
            self._check_open() if not self._closed else None
            self._control[token] = wait
        write()
        self._wire.pump_until(lambda: wait.done, timeout or self.options.send_timeout)
        with self._lock:
            ok = self._cond.wait_for(lambda: wait.done, timeout or self.options.send_timeout)
            self._control.pop(token, None)
        if not ok:
            raise JMSError(f"no receipt for {token}")
        if wait.error is not None:
            raise ConnectionLostError(wait.error)
        if wait.refused is not None:
            raise ControlRefusedError(wait.refused)

    def write_acks(self, records: list[AckRecord], *, transaction: str | None = None,
                   block: bool | None = None, on_wire: bool = True) -> None:
        """Log each ack record with its type and put it on the wire (DELIVERED has no STOMP frame).

        ``on_wire=False`` only logs: the broker already did what the record asks (a failed commit's
        rollback returned the transaction's messages itself)."""
        block = self.options.block_on_acknowledge if block is None else block
        for record in records:
            ids = [m.ack_id for m in record.messages]
            wire = {AckType.DELIVERED: None, AckType.REDELIVERED: "NACK", AckType.POISON: "NACK"}.get(
                record.type, "ACK") if on_wire else None
            try:
                if wire is not None and self._lost is None:
                    self._put_ack(record, ids, wire, transaction, block)
            finally:  # logged once its frame is on the wire: whoever reads the log may close the connection at once
                self.log.append("ack", ack_type=record.type, ack_type_name=record.type.name,
                                consumer=record.consumer, ack_ids=tuple(ids), reason=record.reason, wire=wire,
                                transaction=transaction)

    def _put_ack(self, record: AckRecord, ids: list[str], wire: str, transaction: str | None, block: bool) -> None:
        extra = {ACK_TYPE_HEADER: str(int(record.type))} if record.type is AckType.POISON else None
        if wire == "NACK":
            self._wire.nack(ids, transaction=None, receipt=None, extra=extra)
        elif block and transaction is None and record.type in (AckType.STANDARD, AckType.INDIVIDUAL):
            token = self.new_id("ack")
            self._control_request(token, functools.partial(self._wire.ack, ids, transaction=None, receipt=token))
        else:
            self._wire.ack(ids, transaction=transaction, receipt=None)

    @property
    def wire(self) -> Wire:
        return self._wire

    def register_consumer(self, consumer: MessageConsumer) -> None:
        with self._lock:
            self._consumers[consumer.id] = consumer

    def unregister_consumer(self, consumer: MessageConsumer) -> None:
        with self._lock:
            self._consumers.pop(consumer.id, None)

    def forget_session(self, session: Session) -> None:
        with self._lock:
            if session in self._sessions:
                self._sessions.remove(session)

    @property
    def cond(self) -> threading.Condition:
        return self._cond

    # -- actions ----------------------------------------------------------------------------------

    def _run(self, actions: list[Action]) -> None:
        """Execute core actions; called with the state lock held."""
        for action in actions:
            if isinstance(action, Complete):
                self._complete(action.send)
            elif isinstance(action, SendAcknowledged):
                self._to_session(action.send, functools.partial(self._call_send_ack, action.send))
            elif isinstance(action, WindowAck):
                messages = tuple(_as_message(s.ref) for s in action.sends)
                self.log.append("window-ack", tokens=tuple(s.token for s in action.sends), last=action.last.token)
                if self._publish_listener is not None:
                    event = PublishEvent("ack", messages, _as_message(action.last.ref))
                    self._to_session(action.last, functools.partial(self._call_publish, event))
            elif isinstance(action, WindowReject):
                self.log.append("window-reject", token=action.send.token, error=action.error)
                if self._publish_listener is not None:
                    msg = _as_message(action.send.ref)
                    event = PublishEvent("reject", (msg,), msg, action.error)
                    self._to_session(action.send, functools.partial(self._call_publish, event))
            elif isinstance(action, WindowOpened):
                pass
        self._cond.notify_all()

    def _complete(self, send: PendingSend) -> None:
        ok = send.state is SendState.CONFIRMED
        self.log.append("complete", token=send.token, ok=ok, producer=send.producer, kind=str(send.kind),
                        error=send.error)
        if send.kind is SendKind.ASYNC:
            self._to_session(send, lambda: self._run_completion(send), release=True)
            return
        self._scopes_of_send.pop(send.token, None)
        if send.kind is SendKind.FIRE or send.token in self._orphans:
            self._orphans.discard(send.token)
            self._tracker.callback_returned(send.token)
        # BLOCKING: the waiting sender calls callback_returned itself

    def _to_session(self, send: PendingSend, fn: Callable[[], None], release: bool = False) -> None:
        session = self._session_by_id.get(send.session)
        scopes = self._scopes_of_send.get(send.token, frozenset())
        if release:
            self._scopes_of_send.pop(send.token, None)
        if session is None:
            fn()
            return
        session.executor.submit(fn, scopes)

    def _run_completion(self, send: PendingSend) -> None:
        message = _as_message(send.ref)
        listener: Any = send.listener
        message._set_in_flight(False)
        ok = send.state is SendState.CONFIRMED
        method = "on_completion" if ok else "on_exception"
        self.log.append("callback", token=send.token, method=method, thread=threading.get_ident(),
                        producer=send.producer, scopes=len(current_scopes()))
        try:
            if ok:
                listener.on_completion(message)
            else:
                listener.on_exception(message, _send_error(send))
        finally:
            with self._lock:
                self._tracker.callback_returned(send.token)
                self._cond.notify_all()

    def _call_send_ack(self, send: PendingSend) -> None:
        self.log.append("send-ack", token=send.token)
        handler = self._send_ack_handler
        if handler is not None:
            handler(_as_message(send.ref))

    def _call_publish(self, event: PublishEvent) -> None:
        listener = self._publish_listener
        if listener is not None:
            listener(event)

    # -- wire events (reader thread) ----------------------------------------------------------------

    def on_receipt(self, token: str, headers: Mapping[str, str]) -> None:
        with self._lock:
            wait = self._control.get(token)
            if wait is not None:
                wait.done = True
                self._cond.notify_all()
                return
            self.log.append("confirmed", token=token)
            self._run(self._tracker.on_receipt(token))

    def on_rejected(self, token: str, error: str) -> None:
        with self._lock:
            wait = self._control.get(token)
            if wait is not None:
                wait.done = True
                wait.refused = error
                self._cond.notify_all()
                return
            self.log.append("rejected", token=token, error=error)
            self._run(self._tracker.on_rejected(token, error))

    def on_message(self, subscription: str, ack_id: str, headers: Mapping[str, str], body: bytes) -> None:
        with self._lock:
            consumer = self._consumers.get(subscription)
        if consumer is not None:
            consumer._arrived(ack_id, headers, body)

    def on_lost(self, error: str, receipt_id: str | None) -> None:
        with self._lock:
            self._lost = error
            self.log.append("connection-lost", error=error, receipt_id=receipt_id)
            if receipt_id is not None and self._tracker.get(receipt_id) is not None:
                self.log.append("rejected", token=receipt_id, error=error)
                self._run(self._tracker.on_rejected(receipt_id, error))
            self._run(self._tracker.on_connection_lost(f"connection lost: {error}"))
            for token, wait in self._control.items():
                wait.done = True
                if not (self._closed and token.endswith("-bye")):
                    wait.error = error
            self._cond.notify_all()
        listener = self.exception_listener
        if listener is not None and not self._closed:
            listener(ConnectionLostError(error))

    def on_tick(self) -> None:
        if not self._consumers:
            return
        with self._lock:
            consumers = list(self._consumers.values())
        for consumer in consumers:
            consumer._tick()

    def _next_deadline(self) -> float | None:
        if not self._consumers:
            return None
        with self._lock:
            deadlines = [d for c in self._consumers.values() if (d := c.core.next_deadline()) is not None]
        if not deadlines:
            return None
        return min(deadlines) - self.clock.now()


def _as_message(ref: object) -> Message:
    assert isinstance(ref, Message)
    return ref


def _send_error(send: PendingSend) -> JMSError:
    if send.outcome is Outcome.REJECTED:
        return SendRejectedError(send.error or "rejected by the broker")
    return ConnectionLostError(send.error or "connection lost before the confirmation; outcome unknown")
