"""The reference client as a client under test (client-side conformance).

:class:`RefClientCUT` drives :mod:`ackspec.reference.client` through the
:class:`~ackspec.adapters.cut.ClientUnderTest` verbs and forwards the client's
own event log (ack types, window events) as :class:`~ackspec.adapters.cut.CutEvent`
values. It is registered under the ``ackspec.clients`` entry point group as ``reference``.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from typing import Any

from ackspec import __version__
from ackspec.adapters.cut import ClientFeature, ClientUnderTest, CutError, Received
from ackspec.reference.client import (
    ClientEvent,
    Connection,
    ConnectionFactory,
    DeliveryMode,
    JMSError,
    Message,
    MessageConsumer,
    MessageProducer,
    PublishEvent,
    Session,
)

_SEND_EVENTS = frozenset({"window-ack", "window-reject", "send-ack"})  # events that name sends by wire token


def _cut_error(exc: Exception) -> CutError:
    return CutError(type(exc).__name__, str(exc))


class RefClientCUT(ClientUnderTest):
    name = "reference"
    library = "ackspec reference client"
    library_version = __version__
    # every feature but dispatch events (the messages a broker pushes reach it through its wire, which reports none)
    # and the simplified API (it has no JMSContext: the rules' context cases are not applicable to it)
    features = frozenset(ClientFeature) - {ClientFeature.DISPATCH_EVENTS, ClientFeature.CONTEXT}

    def __init__(self) -> None:
        super().__init__()
        self._ids = itertools.count(1)
        self._conn: Connection | None = None
        self._sessions: dict[str, Session] = {}
        self._producers: dict[str, MessageProducer] = {}
        self._consumers: dict[str, MessageConsumer] = {}
        self._sends: dict[str, Message] = {}
        self._token_to_send: dict[str, str] = {}
        self._token_of_thread: dict[int, str] = {}  # the send this thread is making: its wire token
        self._unresolved: list[ClientEvent] = []  # send events that name a send not yet mapped to its handle
        self._received: dict[str, Message] = {}
        self._session_of: dict[str, str] = {}
        self._running: dict[str, int] = {}
        self._lock = threading.Lock()
        self._listener_action: str | None = None
        self._listeners_released = threading.Event()

    def _id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    @property
    def connection(self) -> Connection:
        if self._conn is None:
            raise CutError("IllegalStateError", "not connected")
        return self._conn

    # -- lifecycle --------------------------------------------------------------------------
    def open(self, url: str, options: Mapping[str, Any] | None = None) -> None:
        try:
            self._conn = ConnectionFactory(url, **dict(options or {})).create_connection()
        except JMSError as exc:
            raise _cut_error(exc) from exc
        self._conn.log.subscribe(self._forward)
        self._conn.start()

    def _forward(self, event: ClientEvent) -> None:
        """Report a client event in the CUT's terms (send handles, not wire tokens).

        A window or send acknowledgement can come (on the wire's thread) before the send that
        it names has returned and its token is mapped; such an event waits in ``_unresolved``
        and is reported when the send is (:meth:`_register_token`), so no event ever carries
        a raw token.
        """
        if event.kind == "send":
            with self._lock:
                self._token_of_thread[event["thread"]] = event["token"]
            return
        with self._lock:
            if event.kind in _SEND_EVENTS and (self._unresolved or not self._resolvable(event)):
                self._unresolved.append(event)
                return
        self._report(event)

    def _resolvable(self, event: ClientEvent) -> bool:
        d = event.detail
        tokens = d["tokens"] if event.kind == "window-ack" else (d["token"],)
        return all(t in self._token_to_send for t in tokens)

    def _report(self, event: ClientEvent) -> None:
        d = event.detail
        if event.kind == "ack":
            self.events.append("ack", ack_type=int(d["ack_type"]), consumer=d["consumer"], messages=d["ack_ids"],
                               reason=d["reason"], wire=d["wire"])
        elif event.kind == "send-blocked":
            self.events.append("send-blocked", in_flight=d.get("in_flight"))
        elif event.kind == "window-ack":
            self.events.append("window-ack", sends=tuple(self._token_to_send.get(t, t) for t in d["tokens"]),
                               last=self._token_to_send.get(d["last"], d["last"]))
        elif event.kind == "window-reject":
            self.events.append("window-reject", send=self._token_to_send.get(d["token"], d["token"]))
        elif event.kind == "send-ack":
            self.events.append("send-ack", send=self._token_to_send.get(d["token"], d["token"]))
        elif event.kind == "pull":
            self.events.append("pull", consumer=d["consumer"])

    def session(self, *, transacted: bool = False, ack_mode: int = 1) -> str:
        try:
            s = self.connection.create_session(transacted, ack_mode)
        except JMSError as exc:
            raise _cut_error(exc) from exc
        handle = self._id("s")
        self._sessions[handle] = s
        return handle

    def producer(self, session: str) -> str:
        handle = self._id("p")
        self._producers[handle] = self._sessions[session].create_producer()
        self._session_of[handle] = session
        return handle

    # -- sends --------------------------------------------------------------------------------
    def _message(self, body: bytes, properties: Mapping[str, str] | None, handle: str) -> Message:
        message = Message(body, properties)
        message.set_property("ackspec-send", handle)
        return message

    def _register_token(self, handle: str) -> None:
        """Map the wire token of the send this thread just made (if it got that far) to ``handle``.

        Then report, in order, the acknowledgement events that were waiting for it.
        """
        with self._lock:
            token = self._token_of_thread.pop(threading.get_ident(), None)
            if token is None:
                return
            self._token_to_send[token] = handle
            ready: list[ClientEvent] = []
            while self._unresolved and self._resolvable(self._unresolved[0]):
                ready.append(self._unresolved.pop(0))
        for event in ready:
            self._report(event)

    def sync_send(self, producer: str, destination: str, body: bytes, *, persistent: bool = True,
                  properties: Mapping[str, str] | None = None) -> str:
        handle = self._id("m")
        message = self._message(body, properties, handle)
        self._sends[handle] = message
        mode = DeliveryMode.PERSISTENT if persistent else DeliveryMode.NON_PERSISTENT
        try:
            self._producers[producer].send(message, destination, delivery_mode=mode)
        except JMSError as exc:
            raise _cut_error(exc) from exc
        finally:
            self._register_token(handle)
        return handle

    def async_send(self, producer: str, destination: str, body: bytes, *, persistent: bool = True,
                   properties: Mapping[str, str] | None = None, on_callback: str | None = None) -> str:
        handle = self._id("m")
        message = self._message(body, properties, handle)
        self._sends[handle] = message
        mode = DeliveryMode.PERSISTENT if persistent else DeliveryMode.NON_PERSISTENT
        session_handle = self._session_of[producer]
        listener = _Listener(self, handle, session_handle, producer, on_callback)
        try:
            self._producers[producer].send(message, destination, delivery_mode=mode, completion_listener=listener)
        except JMSError as exc:
            raise _cut_error(exc) from exc
        finally:
            self._register_token(handle)
        return handle

    def _enter(self, session: str) -> int:
        with self._lock:
            self._running[session] = self._running.get(session, 0) + 1
            return self._running[session]

    def _leave(self, session: str) -> None:
        with self._lock:
            self._running[session] -= 1

    def _callback_action(self, action: str, producer: str, session: str, send: str) -> None:
        if action == "block":
            self.events.append("callback-blocked", send=send)
            self._listeners_released.wait(30)
            return
        try:
            if action == "close-producer":
                self._producers[producer].close()
            elif action == "close-session":
                self._sessions[session].close()
            elif action == "close-connection":
                self.connection.close()
            elif action == "commit":
                self._sessions[session].commit()
            elif action == "rollback":
                self._sessions[session].rollback()
            outcome = "ok"
        except Exception as exc:
            outcome = type(exc).__name__
        self.events.append("callback-result", action=action, outcome=outcome)

    def touch_message(self, send: str) -> str:
        try:
            _ = self._sends[send].body
        except JMSError as exc:
            return type(exc).__name__
        return "ok"

    def message_id(self, send: str) -> str | None:
        try:
            return self._sends[send].message_id
        except JMSError as exc:
            raise _cut_error(exc) from exc

    def set_publish_event_listener(self) -> None:
        def on_event(event: PublishEvent) -> None:
            pass  # the connection's event log already reports window events; the handler must exist

        self.connection.set_publish_event_listener(on_event)

    def set_send_ack_handler(self) -> None:
        try:
            self.connection.set_send_acknowledgement_handler(lambda message: None)
        except JMSError as exc:
            raise _cut_error(exc) from exc

    # -- consumers ----------------------------------------------------------------------------
    def consumer(self, session: str, destination: str, *, prefetch: int | None = None, listener: bool = False,
                 selector: str | None = None, fail_first: int = 0) -> str:
        handle = self._id("c")
        try:
            consumer = self._sessions[session].create_consumer(destination, selector, prefetch=prefetch)
            self._consumers[handle] = consumer
            if listener:
                consumer.set_message_listener(_MessageListener(self, handle, session, fail_first,
                                                               self._listener_action))
        except JMSError as exc:
            raise _cut_error(exc) from exc
        return handle

    def _received_message(self, message: Message) -> Received:
        handle = self._id("r")
        self._received[handle] = message
        return Received(handle, message.body, message.redelivered, message.delivery_count, message.properties)

    def receive(self, consumer: str, timeout: float) -> Received | None:
        try:
            message = self._consumers[consumer].receive(timeout)
        except JMSError as exc:
            raise _cut_error(exc) from exc
        return None if message is None else self._received_message(message)

    def close_consumer(self, consumer: str) -> None:
        self._call(self._consumers[consumer].close)

    def set_listener_action(self, action: str | None) -> None:
        self._listener_action = action

    def release_listeners(self) -> None:
        self._listeners_released.set()

    def _listener_act(self, action: str, consumer: str, session: str) -> None:
        if action == "block":
            self.events.append("listener-blocked", consumer=consumer)
            self._listeners_released.wait(30)
            return
        try:
            if action == "close-consumer":
                self._consumers[consumer].close()
            elif action == "close-session":
                self._sessions[session].close()
            elif action == "close-connection":
                self.connection.close()
            outcome = "ok"
        except Exception as exc:
            outcome = type(exc).__name__
        self.events.append("callback-result", action=action, outcome=outcome)

    def acknowledge(self, message: str) -> None:
        try:
            self._received[message].acknowledge()
        except JMSError as exc:
            raise _cut_error(exc) from exc

    def recover(self, session: str) -> None:
        self._call(self._sessions[session].recover)

    def commit(self, session: str) -> None:
        self._call(self._sessions[session].commit)

    def rollback(self, session: str) -> None:
        self._call(self._sessions[session].rollback)

    def close_producer(self, producer: str) -> None:
        self._call(self._producers[producer].close)

    def close_session(self, session: str) -> None:
        self._call(self._sessions[session].close)

    def close(self) -> None:
        if self._conn is not None:
            self._call(self._conn.close)

    def crash(self) -> None:
        self.connection.crash()

    @staticmethod
    def _call(fn: Any) -> None:
        try:
            fn()
        except JMSError as exc:
            raise _cut_error(exc) from exc


class _Listener:
    """A CompletionListener that reports to the CUT's event log."""

    def __init__(self, cut: RefClientCUT, send: str, session: str, producer: str, action: str | None) -> None:
        self.cut, self.send, self.session, self.producer, self.action = cut, send, session, producer, action
        self.sender_thread = threading.get_ident()  # constructed on the sending thread

    def on_completion(self, message: Message) -> None:
        concurrent = self.cut._enter(self.session)
        try:
            self.cut.events.append("completion", send=self.send, thread=threading.get_ident(),
                                   sender_thread=self.sender_thread, session=self.session, concurrent=concurrent,
                                   message_id=message.message_id)
            if self.action:
                self.cut._callback_action(self.action, self.producer, self.session, self.send)
        finally:
            self.cut._leave(self.session)

    def on_exception(self, message: Message, exception: Exception) -> None:
        concurrent = self.cut._enter(self.session)
        try:
            self.cut.events.append("exception", send=self.send, thread=threading.get_ident(),
                                   sender_thread=self.sender_thread, session=self.session, concurrent=concurrent,
                                   error=f"{type(exception).__name__}: {exception}")
            if self.action:
                self.cut._callback_action(self.action, self.producer, self.session, self.send)
        finally:
            self.cut._leave(self.session)


class _MessageListener:
    def __init__(self, cut: RefClientCUT, consumer: str, session: str, fail_first: int,
                 action: str | None = None) -> None:
        self.cut, self.consumer, self.session, self.fail_left = cut, consumer, session, fail_first
        self.action = action

    def on_message(self, message: Message) -> None:
        concurrent = self.cut._enter(self.session)
        try:
            received = self.cut._received_message(message)
            self.cut.events.append("message", consumer=self.consumer, message=received.handle, body=received.body,
                                   redelivered=received.redelivered, delivery_count=received.delivery_count,
                                   concurrent=concurrent, thread=threading.get_ident())
            if self.action is not None:
                self.cut._listener_act(self.action, self.consumer, self.session)
            if self.fail_left > 0:
                self.fail_left -= 1
                raise RuntimeError("listener failure requested by the test")
        finally:
            self.cut._leave(self.session)
            self.cut.events.append("listener-returned", consumer=self.consumer)


class RefClientAmqpCUT(RefClientCUT):
    """The reference client over its AMQP 1.0 wire (``amqp://``): the same verbs, another protocol."""

    name = "reference-amqp"
    protocol = "amqp"
