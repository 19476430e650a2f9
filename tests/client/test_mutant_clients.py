"""The client-side tests must fail against broken clients: each mutant breaks one rule.

A mutant is the reference client with one piece sabotaged through instance attributes of
its connection, sessions, consumers or wire (the reference client's code is not touched).
The conformance test for that rule is run against it and must raise AssertionError: a test
that crashes, errors or skips against a broken client has not caught it. The same tests
pass against the unmodified reference client, over each protocol a case is run on.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from ackspec.adapters.cut import ClientFeature, ClientUnderTest
from ackspec.adapters.refclient import RefClientAmqpCUT, RefClientCUT
from ackspec.conformance.client import test_close_rules as close_rules
from ackspec.conformance.client import test_consumer_acks as consumer_acks
from ackspec.conformance.client import test_jms_send as jms
from ackspec.conformance.client import test_stomp_client as stomp_client
from ackspec.conformance.client.conftest import Env, opened_clients
from ackspec.reference.client import Connection, IllegalStateError, dispatch
from ackspec.reference.client.consumer_core import AckRecord, AckType
from ackspec.reference.client.dispatch import (
    SessionExecutor,
    in_message_listener,
    is_callback_thread,
    outside_callbacks,
)
from ackspec.reference.client.errors import ControlRefusedError
from ackspec.reference.client.send_core import Complete, SendState, SendTracker
from ackspec.reference.client.session import MessageConsumer, Session
from ackspec.reference.client.wire import StompWire

HEART_BEAT = stomp_client.INTERVAL_MS / 1000


class _Mutant(RefClientCUT):
    """The reference client; subclasses sabotage the objects it creates, as they are created."""

    def open(self, url: str, options: Any = None) -> None:
        super().open(url, options)
        self.mutate_connection(self.connection)

    def session(self, *, transacted: bool = False, ack_mode: int = 1) -> str:
        handle = super().session(transacted=transacted, ack_mode=ack_mode)
        self.mutate_session(self._sessions[handle])
        return handle

    def consumer(self, session: str, destination: str, *, prefetch: int | None = None, listener: bool = False,
                 selector: str | None = None, fail_first: int = 0) -> str:
        handle = super().consumer(session, destination, prefetch=prefetch, listener=listener, selector=selector,
                                  fail_first=fail_first)
        self.mutate_consumer(self._consumers[handle])
        return handle

    def mutate_connection(self, conn: Connection) -> None:
        pass

    def mutate_session(self, session: Session) -> None:
        pass

    def mutate_consumer(self, consumer: MessageConsumer) -> None:
        pass


def _stomp_wire(conn: Connection) -> StompWire:
    wire = conn.wire
    assert isinstance(wire, StompWire), "a STOMP wire mutant"
    return wire


# -- Jakarta Messaging 7.3 sends ------------------------------------------------------------------


class UnorderedCallbacks(_Mutant):
    """Releases any completed send at once, not in send order (breaks 7.3.8)."""

    def mutate_connection(self, conn: Connection) -> None:
        tracker: SendTracker = conn._tracker

        def release(producer: str) -> list[Any]:
            queue = tracker._per_producer.get(producer)
            out = []
            for send in list(queue or ()):
                if send.state is not SendState.PENDING:
                    queue.remove(send)  # type: ignore[union-attr]
                    send.released = send.callback_running = True
                    out.append(Complete(send))
            return out

        tracker._release = release  # type: ignore[method-assign]


class EarlyCompletion(_Mutant):
    """Completes asynchronous sends when written, before the broker confirmed (breaks 7.3.1)."""

    def mutate_connection(self, conn: Connection) -> None:
        tracker = conn._tracker
        original = tracker.sent

        def sent(token: str) -> list[Any]:
            send = tracker.get(token)
            if send is not None:
                send.wants_receipt = False
            return original(token)

        tracker.sent = sent  # type: ignore[method-assign]


class CloseDoesNotWait(_Mutant):
    """Reports no incomplete sends, so close returns at once (breaks 7.3.4)."""

    def mutate_connection(self, conn: Connection) -> None:
        conn._tracker.incomplete = lambda scope: 0  # type: ignore[method-assign]


class CloseWaitsOnlyForConfirmations(_Mutant):
    """Counts a send finished once the broker confirmed it, not once its callback returned, so close
    returns while a callback still runs (breaks 7.3.4; what Qpid JMS 2.10's producer close does)."""

    def mutate_connection(self, conn: Connection) -> None:
        tracker = conn._tracker
        release = tracker._release

        def released(producer: str) -> list[Any]:
            actions = release(producer)
            for action in actions:
                if isinstance(action, Complete):
                    tracker._finish_scopes(action.send)
            return actions

        tracker._release = released  # type: ignore[method-assign]


class ParallelCallbacks(_Mutant):
    """Runs every callback of a session on a thread of its own, so two of one session can run at once
    (breaks 7.3.8); close and commit still wait for all of them."""

    def mutate_session(self, session: Session) -> None:
        executor = session.executor

        def submit(fn: Callable[[], None], scopes: frozenset[int]) -> None:
            with executor._idle:
                executor._pending += 1
            threading.Thread(target=_as_callback, args=(executor, fn, scopes), daemon=True).start()

        executor.submit = submit  # type: ignore[method-assign]


def _as_callback(executor: SessionExecutor, fn: Callable[[], None], scopes: frozenset[int]) -> None:
    """``fn`` run as the session's callback thread would run it, counted as pending on ``executor``."""
    dispatch._context.executor = True
    dispatch._context.scopes = scopes
    try:
        fn()
    finally:
        with executor._idle:
            executor._pending -= 1
            executor._idle.notify_all()


def _not_from_a_callback(original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` (a wait), skipped on a callback thread, as a client that never checked for one does."""

    def wait(*args: Any, **kwargs: Any) -> Any:
        return None if is_callback_thread() else original(*args, **kwargs)

    return wait


class CallbackMayEndItsSession(_Mutant):
    """A completion callback may close, commit or roll back its own session: the check is gone, and (as in a
    client that never had one, Artemis's session commit) the call does not wait for the callback making it
    (breaks 7.3.4)."""

    def mutate_session(self, session: Session) -> None:
        session._forbid_in_own_callback = lambda what: None  # type: ignore[method-assign]
        session.executor.wait_idle = _not_from_a_callback(session.executor.wait_idle)  # type: ignore[method-assign]
        conn = session.connection  # wrapped once per session: each wrapper skips the same waits
        conn.wait_incomplete = _not_from_a_callback(conn.wait_incomplete)  # type: ignore[method-assign]


class _WithContext(RefClientCUT):
    """A test double, not a client under test: the reference client has no simplified API (its context cases are
    not applicable), so to show that the context cases of the 7.3 tests can fail, this gives it a JMSContext as
    Jakarta Messaging defines one, a session used through the context's verbs (``JMSContext.createContext``'s
    sharing of the connection). Mixed into a mutant, the context case meets that mutant's sabotage."""

    features = RefClientCUT.features | {ClientFeature.CONTEXT}

    def context(self, *, transacted: bool = False, ack_mode: int = 1) -> str:
        return self.session(transacted=transacted, ack_mode=ack_mode)

    def close_context(self, context: str) -> None:
        self.close_session(context)

    def async_send(self, producer: str, destination: str, body: bytes, *, persistent: bool = True,
                   properties: Mapping[str, str] | None = None, on_callback: str | None = None) -> str:
        action = "close-session" if on_callback == "close-context" else on_callback
        return super().async_send(producer, destination, body, persistent=persistent, properties=properties,
                                  on_callback=action)


class ContextCloseDoesNotWait(_WithContext, CloseDoesNotWait):
    """CloseDoesNotWait, met through a context's close."""


class ContextCallbackMayEndIt(_WithContext, CallbackMayEndItsSession):
    """CallbackMayEndItsSession, met through a context's close, commit and rollback from its callback."""


class ContextUnorderedCallbacks(_WithContext, UnorderedCallbacks):
    """UnorderedCallbacks, met through a context's sends."""


class ContextParallelCallbacks(_WithContext, ParallelCallbacks):
    """ParallelCallbacks, met through a context's JMSProducers."""


# -- closing from listeners, closing consumers, NACK, failed commit ----------------------------------


def _closes_at_once_from_a_listener(original: Callable[[], None]) -> Callable[[], None]:
    """``close`` that, called from a message listener, runs as if outside any callback: it does not
    wait for the listener's message to be acknowledged first."""

    def close() -> None:
        if in_message_listener():
            with outside_callbacks():
                original()
            return
        original()

    return close


class ListenerConnectionCloseSkipsItsAck(_Mutant):
    """A listener's close of its own connection runs at once, before its message is acknowledged (breaks 6.1.8)."""

    def mutate_connection(self, conn: Connection) -> None:
        conn.close = _closes_at_once_from_a_listener(conn.close)  # type: ignore[method-assign]


class ListenerSessionCloseSkipsItsAck(_Mutant):
    """A listener's close of its own session runs at once, before its message is acknowledged (breaks 6.2.15)."""

    def mutate_session(self, session: Session) -> None:
        session.close = _closes_at_once_from_a_listener(session.close)  # type: ignore[method-assign]


class ConsumerCloseDropsAckState(_Mutant):
    """Closing a consumer unsubscribes at once, giving back messages that await acknowledge/commit (breaks 8.8)."""

    def mutate_consumer(self, consumer: MessageConsumer) -> None:
        original = consumer._finish_close

        def finish_close(*, final: bool = False) -> None:
            original(final=True)

        consumer._finish_close = finish_close  # type: ignore[method-assign]


class ConsumerCloseLeavesReceiveBlocked(_Mutant):
    """Closing a consumer unsubscribes and returns; a receive in progress goes on waiting (breaks 8.8)."""

    def mutate_consumer(self, consumer: MessageConsumer) -> None:
        conn = consumer.session.connection

        def close(*, final: bool = False) -> None:
            if not consumer._unsubscribed:
                consumer._unsubscribed = True
                conn.wire.unsubscribe(consumer.id)
                conn.unregister_consumer(consumer)

        consumer.close = close  # type: ignore[method-assign]


class ConsumerCloseIgnoresRunningListener(_Mutant):
    """Closing a consumer returns while its listener's onMessage is still running (breaks 8.8)."""

    def mutate_consumer(self, consumer: MessageConsumer) -> None:
        conn = consumer.session.connection

        def close(*, final: bool = False) -> None:  # the real close minus waiting for the session's listener thread
            if not consumer._closed:
                consumer._closed = True
                conn.write_acks(consumer._locked(consumer.core.flush))
                with conn.cond:
                    conn.cond.notify_all()
                    conn.cond.wait_for(lambda: consumer._receiving == 0, 10)
            consumer._finish_close(final=final)

        consumer.close = close  # type: ignore[method-assign]


class ListenerMayNotCloseItsConsumer(_Mutant):
    """A listener closing its own consumer gets IllegalStateError, as a 7.3.4 callback would (breaks 8.8)."""

    def mutate_consumer(self, consumer: MessageConsumer) -> None:
        original = consumer.close

        def close(*, final: bool = False) -> None:
            if in_message_listener() and not final:
                raise IllegalStateError("a listener may not close its own consumer")
            original(final=final)

        consumer.close = close  # type: ignore[method-assign]


class _Remembering(deque[Any]):
    """A consumer's buffer that remembers what ``receive`` took from it."""

    def __init__(self, items: Any = ()) -> None:
        super().__init__(items)
        self.handed: list[Any] = []

    def popleft(self) -> Any:
        item = super().popleft()
        self.handed.append(item)
        return item


class RecoverWithoutNack(_Mutant):
    """recover() hands the unprocessed messages out again from its own buffer, NACKs none and does not mark
    them redelivered, so neither the broker nor the application learns they came back: a later cumulative
    ACK covers them as if processed once (breaks STOMP-NACK-CLIENT-SHOULD-NACK; the reference client's own
    local redelivery marks and counts them)."""

    def mutate_consumer(self, consumer: MessageConsumer) -> None:
        with consumer.session.connection.cond:  # deliveries may already be arriving
            consumer._buffer = _Remembering(consumer._buffer)

    def mutate_session(self, session: Session) -> None:
        cond = session.connection.cond

        def recover() -> None:
            for consumer in session._consumers:
                buffer = consumer._buffer
                assert isinstance(buffer, _Remembering)
                with cond:
                    consumer.core.rollback("recover")  # the records (NACKs) are dropped
                    buffer.extendleft(reversed(buffer.handed))
                    buffer.handed = []
                    cond.notify_all()

        session.recover = recover  # type: ignore[method-assign]


class RollbackGivesBackByNack(_Mutant):
    """rollback() hands the transaction's messages back to the broker (NACK / released) instead of delivering
    them again itself: they come back behind what the consumer prefetched (breaks JMS-6.2.7-ROLLBACK-REDELIVERS,
    whose recovery restarts with the oldest unacknowledged message; the reference client's rollback of
    before 2026-11-26 did this)."""

    def mutate_session(self, session: Session) -> None:
        conn = session.connection

        def rollback() -> None:
            tx = session._tx
            assert tx is not None
            token = conn.new_id("abort")
            conn._control_request(token, lambda: conn.wire.abort(tx, token))
            for consumer in session._consumers:
                conn.write_acks(consumer._locked(functools.partial(consumer.core.rollback, "rollback")))
            session._begin()
            session._finish_consumer_closes()

        session.rollback = rollback  # type: ignore[method-assign]


class DeliveredAcksConsume(_Mutant):
    """Also writes each DELIVERED ack as an ACK of its range, as if the broker treated a DELIVERED ack as a
    STANDARD one (AMQ-ACKTYPE-DELIVERED's broker side, seen through the reference broker, which gets no
    DELIVERED frame from the unmodified client): messages nobody acknowledged are consumed."""

    def mutate_connection(self, conn: Connection) -> None:
        original = conn.write_acks

        def write_acks(records: list[AckRecord], **kwargs: Any) -> None:
            for record in records:
                if record.type is AckType.DELIVERED and conn.lost is None:
                    conn._put_ack(record, [m.ack_id for m in record.messages], "ACK", None, False)
            original(records, **kwargs)

        conn.write_acks = write_acks  # type: ignore[method-assign]


class RangeAckSettlesOnlyItsLast(_Mutant):
    """A STANDARD ack over a range puts only its last message on the wire (the event log still shows the
    whole range): the earlier messages of the range stay unacknowledged (AMQ-ACKTYPE-RANGE's broker side)."""

    def mutate_connection(self, conn: Connection) -> None:
        original = conn._put_ack

        def put_ack(record: AckRecord, ids: list[str], wire: str, transaction: str | None, block: bool) -> None:
            last = ids[-1:] if record.type is AckType.STANDARD and wire == "ACK" else ids
            original(record, last, wire, transaction, block)

        conn._put_ack = put_ack  # type: ignore[method-assign]


class FailedCommitReportedAsSuccess(_Mutant):
    """Takes the broker's refusal of a COMMIT / discharge as success: the application never learns its
    transaction was rolled back (breaks AMQ-TX-FAILED-COMMIT-ROLLS-BACK)."""

    def mutate_connection(self, conn: Connection) -> None:
        original = conn._control_request

        def control_request(token: str, write: Callable[[], None], timeout: float | None = None) -> None:
            try:
                original(token, write, timeout)
            except ControlRefusedError:
                if "-commit" not in token:
                    raise

        conn._control_request = control_request  # type: ignore[method-assign]


class FailedCommitNoInnerRollback(_Mutant):
    """Reports a failed commit as rolled back but skips the inner rollback that asks for redelivery of the
    transaction's messages (breaks AMQ-TX-FAILED-COMMIT-ROLLS-BACK)."""

    def mutate_connection(self, conn: Connection) -> None:
        original = conn.write_acks

        def write_acks(records: list[AckRecord], **kwargs: Any) -> None:
            original([r for r in records if r.reason != "commit failed"], **kwargs)

        conn.write_acks = write_acks  # type: ignore[method-assign]


# -- STOMP heart-beats and DISCONNECT -----------------------------------------------------------------


class SlowHeartBeats(_Mutant):
    """Heart-beats at a sixth of the negotiated rate (breaks STOMP-HEARTBEAT-NEGOTIATION)."""

    def mutate_connection(self, conn: Connection) -> None:
        wire = _stomp_wire(conn)
        wire.send_interval *= 6


class HeartBeatsWhenNoneNegotiated(_Mutant):
    """Heart-beats every 40 ms even when its own cx or the broker's sy is 0 (breaks STOMP-HEARTBEAT-NONE-WHEN-ZERO)."""

    def mutate_connection(self, conn: Connection) -> None:
        wire = _stomp_wire(conn)
        wire.send_interval = wire.send_interval or HEART_BEAT


class NeverDropsSilentBroker(_Mutant):
    """Declares dead-peer detection but never acts on a broker's missing heart-beats (breaks
    STOMP-HEARTBEAT-DEAD-PEER for a client that promises it)."""

    def mutate_connection(self, conn: Connection) -> None:
        _stomp_wire(conn).receive_interval = 0.0


class HangsUpBeforeDisconnectReceipt(_Mutant):
    """Closes its socket right after writing DISCONNECT, without waiting for the receipt (breaks
    STOMP-DISCONNECT-GRACEFUL)."""

    def mutate_connection(self, conn: Connection) -> None:
        wire = _stomp_wire(conn)
        original = wire.disconnect

        def disconnect(receipt: str) -> None:
            original(receipt)
            wire.close()

        wire.disconnect = disconnect  # type: ignore[method-assign]


class FramesAfterDisconnect(_Mutant):
    """Flushes a late fire-and-forget SEND after its DISCONNECT (breaks STOMP-DISCONNECT-NO-FRAMES-AFTER)."""

    def mutate_connection(self, conn: Connection) -> None:
        wire = _stomp_wire(conn)
        original = wire.disconnect

        def disconnect(receipt: str) -> None:
            original(receipt)
            wire.send("/queue/ackspec.mutant.after-disconnect", b"late", {}, persistent=False, receipt=None,
                      transaction=None)

        wire.disconnect = disconnect  # type: ignore[method-assign]


# -- the cases ----------------------------------------------------------------------------------------

BOTH = ("stomp", "amqp")


@dataclass(frozen=True)
class Case:
    mutant: type[RefClientCUT]
    check: Callable[..., None]
    params: Mapping[str, Any] = field(default_factory=dict)
    protocols: tuple[str, ...] = ("stomp",)
    clean: type[RefClientCUT] = RefClientCUT  # what the same check must pass against

    @property
    def check_id(self) -> str:
        return self.check.__name__ + "".join(f"[{v}]" for v in self.params.values())


NO_BEATS = stomp_client.test_client_sends_no_heart_beats_when_none_were_negotiated
NO_BEATS_CASES = [{"offer": "0,0", "answer": f"0,{stomp_client.INTERVAL_MS}"},
                  {"offer": f"{stomp_client.INTERVAL_MS},0", "answer": "0,0"}]

CASES: list[Case] = [
    Case(UnorderedCallbacks, jms.test_callback_order_across_destinations_and_mixed_with_sync),
    Case(UnorderedCallbacks, jms.test_rejections_reported_by_on_exception_in_send_order, {"sender": "producer"}),
    Case(EarlyCompletion, jms.test_completion_only_after_confirmation_and_sends_pipeline),
    Case(CloseDoesNotWait, jms.test_close_waits_for_incomplete_sends_which_complete_normally),
    *(Case(mutant, jms.test_commit_and_rollback_wait_for_incomplete_sends,
           {"operation": operation, "transacted_object": "session"})
      for mutant in (CloseDoesNotWait, CloseWaitsOnlyForConfirmations) for operation in ("commit", "rollback")),
    Case(ParallelCallbacks, jms.test_callbacks_serial_per_session_and_never_on_sending_thread, {"session": "session"}),
    # producer only: the reference client's session and connection close also wait for the session's
    # callback thread, so this sabotage shows only where Qpid JMS's does
    Case(CloseWaitsOnlyForConfirmations, jms.test_close_waits_for_a_running_completion_callback,
         {"closed_object": "producer"}, protocols=BOTH),
    # the context cases (a test double gives the reference client a context: _WithContext)
    Case(ContextCloseDoesNotWait, jms.test_close_waits_for_a_running_completion_callback, {"closed_object": "context"},
         clean=_WithContext),
    *(Case(ContextCallbackMayEndIt, jms.test_callback_acting_on_its_own_objects_gets_illegal_state,
           {"action": action, "transacted": action != "close-context", "owner": "context"}, clean=_WithContext)
      for action in ("close-context", "commit", "rollback")),
    Case(ContextUnorderedCallbacks, jms.test_rejections_reported_by_on_exception_in_send_order, {"sender": "context"},
         clean=_WithContext),
    *(Case(ContextCloseDoesNotWait, jms.test_commit_and_rollback_wait_for_incomplete_sends,
           {"operation": operation, "transacted_object": "context"}, clean=_WithContext)
      for operation in ("commit", "rollback")),
    Case(ContextParallelCallbacks, jms.test_callbacks_serial_per_session_and_never_on_sending_thread,
         {"session": "context"}, clean=_WithContext),
    Case(ListenerConnectionCloseSkipsItsAck, close_rules.test_listener_closing_its_connection_still_acks_its_message,
         protocols=BOTH),
    # STOMP only: over AMQP the same sabotage is not observable (the late disposition still settled the
    # message at the reference broker), so that client keeps the rule anyway.
    Case(ListenerSessionCloseSkipsItsAck, close_rules.test_listener_closing_its_session_fails_cleanly_or_acks),
    # STOMP only: over AMQP the same sabotage is not observable (the late disposition still settled the
    # message at the reference broker), so that client keeps the rule anyway.
    Case(ConsumerCloseDropsAckState, close_rules.test_client_ack_after_consumer_close),
    Case(ConsumerCloseDropsAckState, close_rules.test_commit_after_consumer_close),
    Case(ConsumerCloseLeavesReceiveBlocked, close_rules.test_close_ends_a_blocked_receive, protocols=BOTH),
    Case(ConsumerCloseIgnoresRunningListener, close_rules.test_close_waits_for_a_running_listener, protocols=BOTH),
    Case(ListenerMayNotCloseItsConsumer, close_rules.test_listener_closing_its_own_consumer_completes,
         protocols=BOTH),
    Case(RecoverWithoutNack, close_rules.test_unprocessed_messages_are_nacked_not_left_to_a_cumulative_ack),
    Case(DeliveredAcksConsume, consumer_acks.test_delivered_acks_never_remove_messages, protocols=BOTH),
    Case(RangeAckSettlesOnlyItsLast, consumer_acks.test_one_ack_over_a_range_settles_exactly_the_messages_in_it,
         protocols=BOTH),
    Case(RollbackGivesBackByNack, consumer_acks.test_rollback_redelivers_oldest_first_over_any_prefetch,
         protocols=BOTH),
    Case(FailedCommitReportedAsSuccess, close_rules.test_failed_commit_rolls_back_and_redelivers, protocols=BOTH),
    Case(FailedCommitNoInnerRollback, close_rules.test_failed_commit_rolls_back_and_redelivers, protocols=BOTH),
    Case(SlowHeartBeats, stomp_client.test_client_heart_beats_at_the_negotiated_interval),
    *(Case(HeartBeatsWhenNoneNegotiated, NO_BEATS, params) for params in NO_BEATS_CASES),
    Case(NeverDropsSilentBroker, stomp_client.test_client_drops_a_silent_broker),
    Case(HangsUpBeforeDisconnectReceipt, stomp_client.test_disconnect_waits_for_its_receipt_and_sends_nothing_after),
    Case(FramesAfterDisconnect, stomp_client.test_disconnect_waits_for_its_receipt_and_sends_nothing_after),
]


def over(kind: type[RefClientCUT], protocol: str) -> type[RefClientCUT]:
    """The same client (mutant or not) over ``protocol``."""
    if protocol == "stomp":
        return kind
    if kind is RefClientCUT:
        return RefClientAmqpCUT
    return type(f"{kind.__name__}Amqp", (kind, RefClientAmqpCUT), {})


def _release_listeners(cut: ClientUnderTest) -> None:
    assert isinstance(cut, RefClientCUT)
    cut.release_listeners()  # a listener left blocked by a caught mutant would hold close() up


def clients(kind: type[RefClientCUT], env: Env) -> contextlib.AbstractContextManager[Callable[..., ClientUnderTest]]:
    """``make_cut`` for ``kind``: every client the check opens (feeders too) is one; all closed after."""
    return opened_clients(kind, env, before_close=_release_listeners)


def run_check(check: Callable[..., None], kind: type[RefClientCUT], env: Env, params: Mapping[str, Any]) -> None:
    """Call a conformance test function with its fixtures (``cut``, ``make_cut``, ``env``) built from ``kind``."""
    with clients(kind, env) as make:
        wanted = inspect.signature(check).parameters
        kwargs: dict[str, Any] = dict(params)
        if "make_cut" in wanted:
            kwargs["make_cut"] = make
        if "cut" in wanted:
            kwargs["cut"] = make()
        if "env" in wanted:
            kwargs["env"] = env
        check(**kwargs)


MUTANT_RUNS = [(c, p) for c in CASES for p in c.protocols]


@pytest.mark.parametrize(("case", "protocol"), MUTANT_RUNS,
                         ids=[f"{c.mutant.__name__}-{c.check_id}-{p}" for c, p in MUTANT_RUNS])
def test_conformance_test_catches_mutant(case: Case, protocol: str, env: Env) -> None:
    with pytest.raises(AssertionError):
        run_check(case.check, over(case.mutant, protocol), env, case.params)


CLEAN_RUNS = sorted({(c.check, tuple(c.params.items()), c.check_id, p, c.clean) for c in CASES for p in c.protocols},
                    key=lambda r: (r[2], r[3]))


@pytest.mark.parametrize(("check", "params", "check_id", "protocol", "clean"), CLEAN_RUNS,
                         ids=[f"{r[2]}-{r[3]}" for r in CLEAN_RUNS])
def test_same_checks_pass_for_the_reference_client(check: Callable[..., None], params: tuple[tuple[str, Any], ...],
                                                   check_id: str, protocol: str, clean: type[RefClientCUT],
                                                   env: Env) -> None:
    run_check(check, over(clean, protocol), env, dict(params))


def test_every_close_rule_and_stomp_client_rule_has_a_mutant() -> None:
    """A new test in these modules needs a mutant here (the heart-beat/disconnect ones of test_stomp_client)."""
    covered = {c.check for c in CASES}
    close = {f for name, f in vars(close_rules).items() if name.startswith("test_") and callable(f)}
    stomp = {stomp_client.test_client_heart_beats_at_the_negotiated_interval, NO_BEATS,
             stomp_client.test_client_drops_a_silent_broker,
             stomp_client.test_disconnect_waits_for_its_receipt_and_sends_nothing_after}
    assert close | stomp <= covered, sorted(f.__name__ for f in (close | stomp) - covered)
