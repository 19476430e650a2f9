"""Session, MessageProducer and MessageConsumer of the reference client.

The session is where the Jakarta Messaging rules about *who may do what when* are
checked: 7.3.4 (close/commit/rollback wait for incomplete sends; a callback may not close
or commit its own producer, session or connection), 6.2.15 (using a closed session
raises), and where acknowledgement modes choose the consumer core's behaviour.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ackspec.reference.client.consumer_core import AckMode, AckRecord, AckType, ConsumerAckCore, Inbound
from ackspec.reference.client.dispatch import (
    LISTENER_SCOPE,
    SessionExecutor,
    current_scopes,
    in_callback_of,
    in_message_listener,
    outside_callbacks,
)
from ackspec.reference.client.errors import (
    ControlRefusedError,
    IllegalStateError,
    InvalidDestinationError,
    JMSError,
    TransactionRolledBackError,
)
from ackspec.reference.client.message import DEFAULT_PRIORITY, DeliveryMode, Message, closed_acknowledger
from ackspec.reference.client.selector import Selector

if TYPE_CHECKING:
    from ackspec.reference.client.connection import Connection


class CompletionListener(Protocol):
    def on_completion(self, message: Message) -> None: ...

    def on_exception(self, message: Message, exception: Exception) -> None: ...


class MessageListener(Protocol):
    def on_message(self, message: Message) -> None: ...


SESSION_TRANSACTED = int(AckMode.SESSION_TRANSACTED)
AUTO_ACKNOWLEDGE = int(AckMode.AUTO_ACKNOWLEDGE)
CLIENT_ACKNOWLEDGE = int(AckMode.CLIENT_ACKNOWLEDGE)
DUPS_OK_ACKNOWLEDGE = int(AckMode.DUPS_OK_ACKNOWLEDGE)
INDIVIDUAL_ACKNOWLEDGE = int(AckMode.INDIVIDUAL_ACKNOWLEDGE)

PROVIDER_HEADERS = frozenset({"message-id", "destination", "subscription", "ack", "redelivered", "persistent",
                              "priority", "expires", "timestamp", "content-length", "content-type",
                              "correlation-id", "type", "ackspec-message-id", "ackspec-timestamp"})
DELIVERY_COUNT_HEADERS = ("delivery-count", "ackspec-delivery-count", "JMSXDeliveryCount", "x-delivery-count",
                          "redelivery-count")


_DELIVERY_MODES: dict[int, DeliveryMode] = {int(m): m for m in DeliveryMode}


def _check_destination(destination: str | None) -> str:
    if not destination or not destination.startswith(("/queue/", "/topic/", "/temp-queue/", "/temp-topic/")):
        raise InvalidDestinationError(f"not a destination: {destination!r} (use /queue/NAME or /topic/NAME)")
    return destination


class Session:
    def __init__(self, connection: Connection, session_id: str, transacted: bool, acknowledge_mode: int) -> None:
        if transacted:
            mode = AckMode.SESSION_TRANSACTED
        else:
            try:
                mode = AckMode(acknowledge_mode)
            except ValueError:
                raise JMSError(f"unknown acknowledge mode {acknowledge_mode}") from None
            if mode is AckMode.SESSION_TRANSACTED:
                raise JMSError("SESSION_TRANSACTED needs transacted=True")
        self.connection = connection
        self.id = session_id
        self.transacted = transacted
        self.ack_mode = mode
        self.executor = SessionExecutor(f"callbacks-{session_id}")
        self._producers: list[MessageProducer] = []
        self._consumers: list[MessageConsumer] = []
        self._closed = False
        self._close_after_listener = False
        self._tx: str | None = None
        if transacted:
            self._begin()

    # -- factories ----------------------------------------------------------------------------

    def create_queue(self, name: str) -> str:
        return _check_destination(f"/queue/{name}")

    def create_topic(self, name: str) -> str:
        return _check_destination(f"/topic/{name}")

    def create_message(self, body: bytes | str = b"", properties: Mapping[str, str] | None = None) -> Message:
        self._check()
        return Message(body, properties)

    def create_producer(self, destination: str | None = None) -> MessageProducer:
        self._check()
        if destination is not None:
            _check_destination(destination)
        producer = MessageProducer(self, self.connection.new_id("p"), destination)
        self._producers.append(producer)
        return producer

    def create_consumer(self, destination: str, selector: str | None = None, *,
                        prefetch: int | None = None) -> MessageConsumer:
        self._check()
        consumer = MessageConsumer(self, self.connection.new_id("sub"), _check_destination(destination),
                                   Selector.parse(selector), prefetch)
        self._consumers.append(consumer)
        return consumer

    # -- state --------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def transaction(self) -> str | None:
        return self._tx

    def _check(self) -> None:
        if self._closed or self._close_after_listener:
            raise IllegalStateError("the session is closed")
        self.connection._check_open()

    def _scopes(self, *extra: object) -> frozenset[int]:
        return frozenset({id(self.connection), id(self), *(id(x) for x in extra)})

    def _forbid_in_own_callback(self, what: str) -> None:
        if in_callback_of(self) or in_callback_of(self.connection):
            raise IllegalStateError(f"a callback may not {what} its own session (Jakarta Messaging 7.3.4)")

    def _begin(self) -> None:
        self._tx = self.connection.new_id("tx")
        self.connection.wire.begin(self._tx)

    # -- transactions and acknowledgement ------------------------------------------------------------

    def commit(self) -> None:
        self._check()
        if not self.transacted:
            raise IllegalStateError("commit() on a session that is not transacted")
        self._forbid_in_own_callback("commit")
        self.connection.wait_incomplete(f"session:{self.id}")
        tx = self._tx
        assert tx is not None
        acked: list[AckRecord] = []
        for consumer in self._consumers:
            records = consumer._locked(consumer.core.commit)
            acked.extend(records)
            self.connection.write_acks(records, transaction=tx)
        token = self.connection.new_id("commit")
        try:
            self.connection._control_request(token, lambda: self.connection.wire.commit(tx, token))
        except ControlRefusedError as exc:
            # The broker failed the commit and rolled back: the inner rollback asks for redelivery of the
            # transaction's messages (AMQ-TX-FAILED-COMMIT-ROLLS-BACK), then the next transaction begins.
            self.connection.write_acks([AckRecord(AckType.REDELIVERED, r.consumer, r.messages, "commit failed")
                                        for r in acked if r.messages], on_wire=False)
            self._begin()
            self._finish_consumer_closes()
            raise TransactionRolledBackError(f"commit failed, the transaction was rolled back: {exc}") from exc
        self._begin()
        self._finish_consumer_closes()

    def rollback(self) -> None:
        self._check()
        if not self.transacted:
            raise IllegalStateError("rollback() on a session that is not transacted")
        self._forbid_in_own_callback("roll back")
        self.connection.wait_incomplete(f"session:{self.id}")
        tx = self._tx
        assert tx is not None
        token = self.connection.new_id("abort")
        self.connection._control_request(token, lambda: self.connection.wire.abort(tx, token))
        self._redeliver_unacknowledged("rollback")
        self._begin()
        self._finish_consumer_closes()

    def recover(self) -> None:
        """Redeliver every delivered, unacknowledged message (6.2.10)."""
        self._check()
        if self.transacted:
            raise IllegalStateError("recover() on a transacted session")
        self._redeliver_unacknowledged("recover")
        self._finish_consumer_closes()

    def _redeliver_unacknowledged(self, reason: str) -> None:
        """recover() and rollback() alike: every consumer delivers its unacknowledged messages again, oldest
        first, ahead of what it prefetched (JMS 6.2.10 and 6.2.7), see :meth:`MessageConsumer._recover`."""
        for consumer in self._consumers:
            logged, sent = consumer._locked(functools.partial(consumer._recover, reason))
            self.connection.write_acks(logged, on_wire=False)
            self.connection.write_acks(sent)
            consumer._pump()

    def acknowledge(self) -> None:
        """CLIENT_ACKNOWLEDGE: acknowledge everything the session delivered (6.2.10)."""
        self._check()
        for consumer in self._consumers:
            self.connection.write_acks(consumer._locked(consumer.core.acknowledge))
        self._finish_consumer_closes()

    def _finish_consumer_closes(self) -> None:
        """Unsubscribe closed consumers whose delivered messages are now settled (8.8)."""
        for consumer in self._consumers:
            consumer._finish_close()

    def _after_listener(self) -> None:
        """Run a close that a MessageListener of this session asked for, now that it returned."""
        if self._close_after_listener and not self._closed:
            self._close_after_listener = False
            with outside_callbacks():
                self.close()

    def close(self) -> None:
        """Close: wait for incomplete sends, roll back, return unacknowledged messages.

        From one of this session's MessageListeners the close completes once ``on_message``
        returns, so its message is acknowledged first (6.2.15 allows this or IllegalStateError)."""
        if self._closed:
            return
        if in_message_listener() and (in_callback_of(self) or in_callback_of(self.connection)):
            self._close_after_listener = True
            return
        self._forbid_in_own_callback("close")
        if self.connection.lost is None:
            self.connection.wait_incomplete(f"session:{self.id}")
        for consumer in list(self._consumers):
            consumer.close(final=True)
        for producer in list(self._producers):
            producer._closed = True
        if self.transacted and self._tx is not None and self.connection.lost is None:
            token = self.connection.new_id("abort")
            with contextlib.suppress(JMSError):
                self.connection._control_request(token, lambda: self.connection.wire.abort(self._tx or "", token))
        self._closed = True
        self.executor.wait_idle(timeout=10)
        self.executor.shutdown()
        self.connection.forget_session(self)


class MessageProducer:
    def __init__(self, session: Session, producer_id: str, destination: str | None) -> None:
        self.session = session
        self.id = producer_id
        self.destination = destination
        self.delivery_mode = DeliveryMode.PERSISTENT
        self.priority = DEFAULT_PRIORITY
        self.time_to_live = 0.0
        self._closed = False
        self._numbers = 0
        self._scope_ids = session._scopes(self)  # what a callback of this producer's sends belongs to (7.3.4)

    @property
    def closed(self) -> bool:
        return self._closed

    def send(self, message: Message, destination: str | None = None, *, delivery_mode: int | None = None,
             priority: int | None = None, time_to_live: float | None = None,
             completion_listener: CompletionListener | None = None) -> None:
        """Send synchronously, or asynchronously when ``completion_listener`` is given (7.3).

        Errors found before the message is on the wire are raised here, in the caller's
        thread, and then no callback follows (7.3.2)."""
        if self._closed:
            raise IllegalStateError("the producer is closed")
        self.session._check()
        if message is None:
            raise JMSError("message is None")
        if self.destination is not None and destination is not None:
            raise JMSError("this producer has a fixed destination")  # UnsupportedOperation in JMS
        target = _check_destination(destination or self.destination)
        if completion_listener is not None and not (
                callable(getattr(completion_listener, "on_completion", None))
                and callable(getattr(completion_listener, "on_exception", None))):
            raise JMSError("completion_listener needs on_completion and on_exception")
        requested = delivery_mode if delivery_mode is not None else self.delivery_mode
        mode = _DELIVERY_MODES.get(requested) or DeliveryMode(requested)  # the latter raises for a bad value
        prio = self.priority if priority is None else priority
        ttl = self.time_to_live if time_to_live is None else time_to_live
        message._check()  # not while an earlier asynchronous send of it is in flight (7.3.9)
        # the frame is built from a snapshot: the body (immutable bytes) and a copy of the properties
        body = message._body
        headers = dict(message._properties)
        fields = message._fields
        correlation_id, message_type = fields["correlation_id"], fields["type"]
        self._numbers += 1
        now_ms = int(time.time() * 1000)
        message_id = f"ID:{self.id}-{self._numbers}"
        # provider-set headers (7.3.6), stored without the access check like Message._provider_set does
        fields["message_id"] = message_id
        fields["timestamp"] = now_ms
        fields["destination"] = target
        fields["delivery_mode"] = mode
        fields["priority"] = prio
        fields["expiration"] = now_ms + int(ttl * 1000) if ttl else 0
        headers["priority"] = str(prio)
        headers["ackspec-message-id"] = message_id
        headers["ackspec-timestamp"] = str(now_ms)
        if ttl:
            headers["expires"] = str(now_ms + int(ttl * 1000))
        if correlation_id:
            headers["correlation-id"] = str(correlation_id)
        if message_type:
            headers["type"] = str(message_type)
        self.session.connection.send_message(
            session=self.session, producer=self.id, destination=target, message=message,
            persistent=mode is DeliveryMode.PERSISTENT, transaction=self.session.transaction,
            listener=completion_listener, body=body, headers=headers,
            scopes=self._scope_ids)

    def close(self) -> None:
        """Wait for this producer's incomplete sends and callbacks (7.3.4)."""
        if self._closed:
            return
        if in_callback_of(self) or in_callback_of(self.session.connection):
            raise IllegalStateError("a callback may not close its own producer (Jakarta Messaging 7.3.4)")
        conn = self.session.connection
        if in_callback_of(self.session) and conn.incomplete(self.id):
            raise IllegalStateError("closing a producer with incomplete sends from its session's callback "
                                    "would deadlock (Jakarta Messaging 7.3.4)")
        if conn.lost is None:
            conn.wait_incomplete(self.id)
        self._closed = True


_HELD_UNTIL_ACKNOWLEDGED = (AckMode.CLIENT_ACKNOWLEDGE, AckMode.INDIVIDUAL_ACKNOWLEDGE, AckMode.SESSION_TRANSACTED)
"""Modes whose delivered messages a consumer keeps until acknowledged or committed: recover() or rollback()
delivers them again itself."""


class MessageConsumer:
    def __init__(self, session: Session, consumer_id: str, destination: str, selector: Selector | None,
                 prefetch: int | None) -> None:
        conn = session.connection
        self.session = session
        self.id = consumer_id
        self.destination = destination
        self.selector = selector
        self.prefetch = conn.options.prefetch if prefetch is None else prefetch
        self.core = ConsumerAckCore(
            consumer_id, session.ack_mode, prefetch=self.prefetch,
            optimize_acknowledge=conn.options.optimize_acknowledge,
            optimize_acknowledge_timeout=conn.options.optimize_acknowledge_timeout,
            maximum_redeliveries=conn.options.maximum_redeliveries, clock=conn.clock,
            topic=destination.startswith("/topic/"))
        self._buffer: deque[tuple[Message, Inbound]] = deque()
        self._unacked: dict[str, Message] = {}  # delivered, not acknowledged (CLIENT / INDIVIDUAL): for recover()
        self._listener: MessageListener | None = None
        self._closed = False
        self._unsubscribed = False
        self._receiving = 0
        conn.register_consumer(self)
        conn.wire.subscribe(consumer_id, destination,
                            individual=True, prefetch=self.prefetch, selector=None)

    @property
    def closed(self) -> bool:
        return self._closed

    def _locked(self, fn: Callable[[], Any]) -> Any:
        with self.session.connection.cond:
            return fn()

    # -- synchronous receive ------------------------------------------------------------------

    def receive(self, timeout: float | None = None) -> Message | None:
        """Next message, or None after ``timeout`` seconds (None = wait forever, 0 = no wait)."""
        if self._closed:
            raise IllegalStateError("the consumer is closed")
        if self._listener is not None:
            raise IllegalStateError("receive() on a consumer with a MessageListener")
        self.session._check()
        conn = self.session.connection
        if self.core.pull:
            conn.log.append("pull", consumer=self.id)
        with conn.cond:
            self._receiving += 1
            try:
                ok = conn.cond.wait_for(
                    lambda: self._closed or conn.lost is not None or (conn.started and bool(self._buffer)),
                    timeout)
                if not ok or self._closed or not self._buffer:
                    return None
                message, inbound = self._buffer.popleft()
                records = self._delivered(message, inbound)
                records += self.core.on_consumed(inbound)
            finally:
                self._receiving -= 1
                conn.cond.notify_all()
        conn.log.append("deliver", consumer=self.id, ack_id=inbound.ack_id, delivery_count=inbound.delivery_count)
        conn.write_acks(records)
        return message

    def receive_no_wait(self) -> Message | None:
        return self.receive(0)

    # -- listener -----------------------------------------------------------------------------

    @property
    def message_listener(self) -> MessageListener | None:
        return self._listener

    def set_message_listener(self, listener: MessageListener | None) -> None:
        if self._closed:
            raise IllegalStateError("the consumer is closed")
        if listener is not None and self.prefetch == 0:
            raise JMSError("a MessageListener needs a prefetch of at least 1 (prefetch 0 is pull mode)")
        self._listener = listener
        self._pump()

    def _pump(self) -> None:
        """Hand buffered messages to the listener on the session's callback thread."""
        conn = self.session.connection
        with conn.cond:
            if self._listener is None or not conn.started:
                return
            items = list(self._buffer)
            self._buffer.clear()
        for message, inbound in items:
            self.session.executor.submit(functools.partial(self._dispatch, message, inbound),
                                         self.session._scopes(self) | {LISTENER_SCOPE})

    def _dispatch(self, message: Message, inbound: Inbound) -> None:
        conn = self.session.connection
        listener = self._listener
        if self._closed or listener is None:
            return
        with conn.cond:
            records = self._delivered(message, inbound)
        conn.log.append("deliver", consumer=self.id, ack_id=inbound.ack_id, delivery_count=inbound.delivery_count)
        conn.write_acks(records)
        try:
            listener.on_message(message)
        except Exception as exc:
            with conn.cond:
                records = self.core.on_listener_failed(inbound, f"{type(exc).__name__}: {exc}")
        else:
            with conn.cond:
                records = self.core.on_consumed(inbound)
        if not self.session.closed or records:
            conn.write_acks(records)
        self.session._after_listener()
        conn._after_listener()

    def _delivered(self, message: Message, inbound: Inbound) -> list[AckRecord]:
        """The application gets ``message`` (under the lock); kept for a local recover() until acknowledged."""
        if self.session.ack_mode in _HELD_UNTIL_ACKNOWLEDGED:
            if len(self._unacked) > 2 * self.core.delivered_count + 16:  # drop the acknowledged ones now and then:
                unacked = self.core.delivered_ack_ids()  # amortised, not a pass over the backlog per receive
                self._unacked = {ack_id: m for ack_id, m in self._unacked.items() if ack_id in unacked}
            self._unacked[inbound.ack_id] = message
        return self.core.on_delivered(inbound)

    def _recover(self, reason: str = "recover") -> tuple[list[AckRecord], list[AckRecord]]:
        """recover() or rollback() for this consumer (under the lock): the records only logged, and those sent.

        JMS 6.2.10 (recover) and 6.2.7 (rollback): delivery restarts with the oldest unacknowledged
        message. Handing the messages back to the broker (a NACK) would put them behind what this consumer
        has prefetched, so, as ActiveMQ's client does, they go back to the front of the local buffer,
        marked redelivered and counted, and the REDELIVERED records are only logged (the broker still
        holds them for this consumer: a rolled-back transaction never acknowledged them, its acks go out
        with the commit). One redelivered past ``maximum_redeliveries`` gets its POISON ack sent instead.
        In pull mode (prefetch 0) nothing is buffered, and the broker redelivers them.
        """
        delivered = {ack_id: self._unacked.get(ack_id) for ack_id in self.core.delivered_ack_ids()}
        records = self.core.rollback(reason)
        if self.core.pull or any(m is None for m in delivered.values()):
            return [], records
        again: list[tuple[Message, Inbound]] = []
        poison: list[AckRecord] = []
        for inbound in (i for r in records for i in r.messages):
            message, counted = self._redelivered_locally(delivered[inbound.ack_id], inbound)
            refused = self.core.on_arrival(counted)
            if refused is None:
                again.append((message, counted))
            else:
                poison.append(refused)
        self._buffer.extendleft(reversed(again))
        self._unacked.clear()
        self.session.connection.cond.notify_all()
        return records, poison

    def _redelivered_locally(self, message: Message | None, inbound: Inbound) -> tuple[Message, Inbound]:
        assert message is not None
        again = Inbound(inbound.ack_id, inbound.message_id, inbound.delivery_count + 1)
        message._provider_set(redelivered=True, delivery_count=again.delivery_count)
        if self.session.ack_mode is AckMode.INDIVIDUAL_ACKNOWLEDGE:
            message._bind_acknowledger(self._acknowledger_for(again))
        return message, again

    # -- from the connection --------------------------------------------------------------------

    def _arrived(self, ack_id: str, headers: Mapping[str, str], body: bytes) -> None:
        conn = self.session.connection
        message = _to_message(headers, body)
        inbound = Inbound(ack_id, message.message_id, message.delivery_count or 1)
        matches = self.selector is None or self.selector.matches(message)
        with conn.cond:
            record = self.core.on_arrival(inbound, matches=matches)
            if record is None:
                if self.session.ack_mode in (AckMode.CLIENT_ACKNOWLEDGE, AckMode.INDIVIDUAL_ACKNOWLEDGE):
                    message._bind_acknowledger(self._acknowledger_for(inbound))
                self._buffer.append((message, inbound))
            conn.cond.notify_all()
        if record is not None:
            conn.write_acks([record])
        else:
            self._pump()

    def _acknowledger_for(self, inbound: Inbound) -> Callable[[], None]:
        def acknowledge() -> None:
            if self.session.closed:
                closed_acknowledger()
            if self.session.ack_mode is AckMode.INDIVIDUAL_ACKNOWLEDGE:
                self.session.connection.write_acks(self._locked(lambda: self.core.acknowledge(inbound)))
            else:
                self.session.acknowledge()
        return acknowledge

    def _tick(self) -> None:
        records = self._locked(self.core.on_timer)
        if records:
            self.session.connection.write_acks(records)

    def close(self, *, final: bool = False) -> None:
        """Close: end a blocked receive (it returns None), wait for a running listener, send deferred acks.

        Acknowledgement state stays (8.8): while messages it delivered await acknowledge, commit
        or rollback, the subscription stays on the wire (a STOMP UNSUBSCRIBE or an AMQP detach
        would give them back), and ends once they are settled or the session closes (``final``)."""
        conn = self.session.connection
        if not self._closed:
            self._closed = True
            records = self._locked(self.core.flush)
            if conn.lost is None:
                conn.write_acks(records)
            with conn.cond:
                conn.cond.notify_all()  # a blocked receive returns None ...
                conn.cond.wait_for(lambda: self._receiving == 0, 10)  # ... and close waits for it (8.8)
            if threading.current_thread() is not self.session.executor.thread and not current_scopes():
                self.session.executor.wait_idle(timeout=10)
        self._finish_close(final=final)

    def _finish_close(self, *, final: bool = False) -> None:
        if not self._closed or self._unsubscribed:
            return
        if not final and self.core.unacknowledged() and self.session.ack_mode is not AckMode.AUTO_ACKNOWLEDGE:
            return
        self._unsubscribed = True
        conn = self.session.connection
        if conn.lost is None:
            with contextlib.suppress(JMSError):
                conn.wire.unsubscribe(self.id)
        conn.unregister_consumer(self)


def _to_message(headers: Mapping[str, str], body: bytes) -> Message:
    properties = {k: v for k, v in headers.items() if k not in PROVIDER_HEADERS and k not in DELIVERY_COUNT_HEADERS}
    message = Message(body, properties)
    redelivered = headers.get("redelivered", "false").lower() == "true"
    count: int | None = None
    for name in DELIVERY_COUNT_HEADERS:
        raw = headers.get(name)
        if raw is not None and raw.isdigit():
            count = int(raw)
            # AMQP-style counts (earlier failed deliveries) are converted by the broker; we accept JMSX semantics
            break
    if count is None:
        count = 2 if redelivered else 1
    message._provider_set(
        message_id=headers.get("ackspec-message-id") or headers.get("message-id"),
        destination=headers.get("destination"),
        delivery_mode=DeliveryMode.PERSISTENT if headers.get("persistent", "").lower() == "true"
        else DeliveryMode.NON_PERSISTENT,
        priority=int(headers.get("priority", DEFAULT_PRIORITY) or DEFAULT_PRIORITY),
        redelivered=redelivered or count > 1,
        delivery_count=count,
        timestamp=int(headers.get("ackspec-timestamp", "0") or 0),
        correlation_id=headers.get("correlation-id"),
        type=headers.get("type"),
    )
    return message
