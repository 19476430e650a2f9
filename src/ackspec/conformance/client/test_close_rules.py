"""Closing from inside listeners, closing consumers, NACK discipline, and a commit the broker fails.

Acknowledgement is checked at the broker with a *marker* message instead of waiting for
something not to arrive (:meth:`Env.contents`): after the client under test is done, a
marker is sent to the same queue and an observer reads up to it. A message the client
failed to acknowledge is back in the queue ahead of the marker.
"""

from __future__ import annotations

from collections.abc import Callable

from ackspec.adapters.cut import ClientFeature, ClientUnderTest, CutError, NotApplicable, Received
from ackspec.conformance.client.conftest import STILL_WAITING_FOR, TIMEOUT, Env
from ackspec.conformance.client.test_consumer_acks import REDELIVERED, acks, fill
from ackspec.conformance.markers import requirement
from ackspec.reference.faults import FaultRule

MakeCut = Callable[..., ClientUnderTest]
AUTO, CLIENT = 1, 2
MARKER = b"marker"
RECEIVE_ENDS_WITHIN = 1.0
"""Seconds a receive ended by the consumer's close may take to come back after close returned; a receive
that close did not end goes on waiting for its own timeout (2 x TIMEOUT)."""


def next_on_queue(make_cut: MakeCut, env: Env, q: str) -> bytes:
    """What an observer reads first from ``q``: a message left behind, else :data:`MARKER`."""
    left = env.contents(q)
    return left[0] if left else MARKER


def listener_result(cut: ClientUnderTest, action: str) -> str:
    events = cut.events.wait_count("callback-result", 1, TIMEOUT)
    results = [e["outcome"] for e in events if e["action"] == action]
    assert results, f"the listener's {action} did not return (deadlock?)"
    return str(results[0])


def listening(make_cut: MakeCut, env: Env, action: str,
              *also: ClientFeature) -> tuple[ClientUnderTest, str, str]:
    """A client whose listener (auto-ack session) does ``action`` on the one message then put on a fresh queue.

    ``also``: features the test needs besides a listener, required before anything is opened. Returns the
    client, the queue and the consumer.
    """
    q = env.queue()
    cut = make_cut()
    cut.require(ClientFeature.LISTENER, *also)
    cut.set_listener_action(action)
    c = cut.consumer(cut.session(ack_mode=AUTO), q, listener=True)
    fill(make_cut, q, 1)
    return cut, q, c


def holding_two(make_cut: MakeCut, env: Env, feature: ClientFeature, *, transacted: bool = False,
                ack_mode: int = AUTO) -> tuple[ClientUnderTest, str, str, str, list[Received | None]]:
    """A client (needing ``feature``) that has received, and not yet settled, the two messages put on a fresh
    queue; returns the client, queue, session, consumer and messages."""
    q = env.queue()
    fill(make_cut, q, 2)
    cut = make_cut()
    cut.require(feature)
    s = cut.session(transacted=transacted, ack_mode=ack_mode)
    c = cut.consumer(s, q)
    received = [cut.receive(c, TIMEOUT) for _ in range(2)]
    assert all(received), "the two messages put on the queue were not both received"
    return cut, q, s, c, received


def settle_after_consumer_close(make_cut: MakeCut, env: Env, *, transacted: bool) -> None:
    """Receive one message, close its consumer, then settle it (acknowledge() in a CLIENT session, else
    commit()): the settling must still work and consume the message (JMS 3.1 8.8)."""
    q = env.queue()
    fill(make_cut, q, 1)
    cut = make_cut()
    cut.require(ClientFeature.TRANSACTIONS if transacted else ClientFeature.ACK_MODES, ClientFeature.CLOSE_CONSUMER)
    s = cut.session(transacted=True) if transacted else cut.session(ack_mode=CLIENT)
    c = cut.consumer(s, q)
    message = cut.receive(c, TIMEOUT)
    assert message is not None
    cut.close_consumer(c)
    what = "commit" if transacted else "acknowledge()"
    try:
        if transacted:
            cut.commit(s)
        else:
            cut.acknowledge(message.handle)  # still allowed: the session is open
        cut.close()
    except CutError as exc:
        raise AssertionError(f"{what} after the consumer's close failed: {exc}") from exc
    effect = "did not consume it" if transacted else "had no effect"
    assert next_on_queue(make_cut, env, q) == MARKER, f"{what} after the consumer's close {effect}"


@requirement("JMS-6.1.8-LISTENER-CLOSE-AUTO-ACK")
def test_listener_closing_its_connection_still_acks_its_message(make_cut: MakeCut, env: Env) -> None:
    cut, q, _ = listening(make_cut, env, "close-connection")
    outcome = listener_result(cut, "close-connection")
    if outcome == "IllegalStateError":
        raise NotApplicable("the client refuses a listener's close of its own connection (the rule is conditional)")
    assert outcome == "ok", f"close from the listener failed: {outcome}"
    cut.events.wait_count("listener-returned", 1, TIMEOUT)
    assert next_on_queue(make_cut, env, q) == MARKER, "the listener's message was not acknowledged"


@requirement("JMS-6.2.15-LISTENER-CLOSES-OWN-SESSION")
def test_listener_closing_its_session_fails_cleanly_or_acks(make_cut: MakeCut, env: Env) -> None:
    cut, q, _ = listening(make_cut, env, "close-session")
    outcome = listener_result(cut, "close-session")
    assert outcome in ("ok", "IllegalStateError"), f"neither IllegalStateError nor success: {outcome}"
    cut.events.wait_count("listener-returned", 1, TIMEOUT)
    cut.close()
    assert next_on_queue(make_cut, env, q) == MARKER, "the listener's message was not acknowledged"


@requirement("JMS-8.8-CONSUMER-CLOSE-KEEPS-ACK-STATE")
def test_client_ack_after_consumer_close(make_cut: MakeCut, env: Env) -> None:
    settle_after_consumer_close(make_cut, env, transacted=False)


@requirement("JMS-8.8-CONSUMER-CLOSE-KEEPS-ACK-STATE")
def test_commit_after_consumer_close(make_cut: MakeCut, env: Env) -> None:
    settle_after_consumer_close(make_cut, env, transacted=True)


@requirement("JMS-8.8-CONSUMER-CLOSE-BLOCKS")
def test_close_ends_a_blocked_receive(make_cut: MakeCut, env: Env) -> None:
    q = env.queue()
    cut = make_cut()
    cut.require(ClientFeature.CLOSE_CONSUMER)  # before a receive blocks on another thread
    c = cut.consumer(cut.session(), q)
    receiving = env.background(lambda: cut.receive(c, 2 * TIMEOUT))
    assert receiving.wait_parked(TIMEOUT), "receive neither returned nor waited"
    assert not receiving.done, "receive on an empty queue returned at once"
    closing = env.background(lambda: cut.close_consumer(c))
    closing.wait()
    # The receive ends inside close, but its return reaches us on another thread (through a pipe for a
    # shim client), a moment after close's may: so it must follow promptly, not strictly before.
    assert receiving.returned_within(RECEIVE_ENDS_WITHIN), "close returned while a receive was still in progress"
    assert receiving.wait() is None, "a receive ended by close returns null"


@requirement("JMS-8.8-CONSUMER-CLOSE-BLOCKS")
def test_close_waits_for_a_running_listener(make_cut: MakeCut, env: Env) -> None:
    cut, _, c = listening(make_cut, env, "block", ClientFeature.CLOSE_CONSUMER)
    cut.events.wait_count("listener-blocked", 1, TIMEOUT)
    closing = env.background(lambda: cut.close_consumer(c))
    assert closing.wait_parked(TIMEOUT), "close neither returned nor waited"
    assert not closing.returned_within(STILL_WAITING_FOR), "close returned while onMessage was running"
    cut.release_listeners()
    closing.wait()
    assert cut.events.of("listener-returned"), "close returned before onMessage did"


@requirement("JMS-8.8-CONSUMER-CLOSE-BLOCKS")
def test_listener_closing_its_own_consumer_completes(make_cut: MakeCut, env: Env) -> None:
    cut, _, _ = listening(make_cut, env, "close-consumer")
    assert listener_result(cut, "close-consumer") == "ok", "a listener closing its own consumer must succeed"
    cut.events.wait_count("listener-returned", 1, TIMEOUT)


@requirement("STOMP-NACK-CLIENT-SHOULD-NACK")
def test_unprocessed_messages_are_nacked_not_left_to_a_cumulative_ack(make_cut: MakeCut, env: Env) -> None:
    """recover(): the application did not process the two messages. The client NACKs them, or gives them to
    the application again itself (local redelivery, as ActiveMQ's client does, which keeps JMS 6.2.10's
    order ahead of what it prefetched); either way no ACK covers them before the application has them."""
    cut, q, s, c, first = holding_two(make_cut, env, ClientFeature.RECOVER, ack_mode=CLIENT)
    proxy = env.stomp_proxy
    cut.recover(s)  # the application says: these were not processed
    again = [cut.receive(c, TIMEOUT) for _ in range(2)]
    assert all(again)
    ids = [f.get("ack") for _, f in proxy.broker_frames if f.command == "MESSAGE" and f.get("destination") == q]
    nacked = {f.get("id") for _, f in proxy.client_frames if f.command == "NACK"}
    acked = [f.get("id") for _, f in proxy.client_frames if f.command == "ACK"]
    local = [(m.body, m.redelivered) for m in again if m] == [(m.body, True) for m in first if m]
    assert set(ids[:2]) <= nacked or (local and not set(ids[:2]) & set(acked)), (
        "messages given back by recover() were neither NACKed nor redelivered by the client itself before an ACK "
        f"(NACKed {[i for i in ids[:2] if i in nacked]}, ACKed {acked}, received again {[m.body for m in again if m]})")


@requirement("AMQ-TX-FAILED-COMMIT-ROLLS-BACK")
def test_failed_commit_rolls_back_and_redelivers(make_cut: MakeCut, env: Env) -> None:
    cut, q, s, c, first = holding_two(make_cut, env, ClientFeature.TRANSACTIONS, transacted=True)
    rule = env.broker.faults.add(FaultRule(fail_commit="commit failed by fault injection"))
    try:
        cut.commit(s)
    except CutError as exc:
        error: CutError | None = exc
    else:
        error = None
    env.broker.faults.remove(rule)
    assert error is not None, "commit() returned normally although the broker failed (rolled back) the commit"
    assert "RolledBack" in error.kind or "Rollback" in error.kind, (
        f"a failed commit must be reported as rolled back, got {error.kind}")
    if cut.events.of("ack"):
        assert acks(cut, REDELIVERED) == [(REDELIVERED, 2)], "the inner rollback asks for redelivery"
    again = [cut.receive(c, TIMEOUT) for _ in range(2)]
    assert [(m.body, m.redelivered) for m in again if m] == [(m.body, True) for m in first if m], (
        "the rolled-back messages were not redelivered")
    cut.commit(s)
    cut.close()
    assert next_on_queue(make_cut, env, q) == MARKER
