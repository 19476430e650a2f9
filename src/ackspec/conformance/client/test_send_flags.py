"""Artemis synchronous-send flags and asynchronous send acknowledgements (seeds 000/002)."""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ackspec.adapters.cut import ClientFeature, ClientUnderTest, CutError
from ackspec.conformance.cited import req
from ackspec.conformance.client.conftest import TIMEOUT, Env
from ackspec.conformance.client.proxies.stomp import Gate
from ackspec.conformance.config import hypothesis_seed, hypothesis_settings
from ackspec.conformance.markers import requirement
from ackspec.conformance.strategies import drawn
from ackspec.conformance.verdicts import Checks

MakeCut = Callable[..., ClientUnderTest]


def _sync_send_under_block_flag(make_cut: MakeCut, env: Env, *, persistent: bool, block: bool) -> Gate:
    """One synchronous send, durable or not, from a client whose matching blockOn flag is ``block``.

    The proxy holds the confirmation. With ``block`` the send must not return before it, though the
    broker already has the message; without, it returns although no confirmation came. Returns the gate.
    """
    kind, flag, option, body = (("durable", "blockOnDurableSend", "block_on_durable_send", b"d") if persistent
                                else ("non-durable", "blockOnNonDurableSend", "block_on_non_durable_send", b"n"))
    cut = make_cut(**{option: block})
    cut.require(ClientFeature.SEND_FLAGS)
    q = env.queue()
    gate = env.proxy.hold("SEND", q)
    p = cut.producer(cut.session())
    call = env.background(lambda: cut.sync_send(p, q, body, persistent=persistent))
    if block:
        gate.wait_held(1, TIMEOUT)
        assert [m.body for m in env.drain(q, 1)] == [body]
        assert not call.done, f"a {kind} send returned before its confirmation ({flag}=true)"
        gate.release()
    call.wait()
    return gate


@requirement("ARTEMIS-BLOCK-ON-DURABLE-SEND")
@pytest.mark.parametrize("block", [True, False])
def test_block_on_durable_send(make_cut: MakeCut, env: Env, block: bool) -> None:
    _sync_send_under_block_flag(make_cut, env, persistent=True, block=block)


@requirement("ARTEMIS-BLOCK-ON-NON-DURABLE-SEND", "AMQ-SEND-ASYNC-BY-DEFAULT")
@pytest.mark.parametrize("block", [False, True])
def test_block_on_non_durable_send(make_cut: MakeCut, env: Env, block: bool) -> None:
    # without the flag the send returned although the proxy holds whatever confirmation the client asked for
    # (a STOMP client asks for none; an AMQP client's unsettled transfer is answered by a disposition)
    _sync_send_under_block_flag(make_cut, env, persistent=False, block=block)


@requirement("ARTEMIS-TRANSACTED-SENDS-DO-NOT-BLOCK", "ARTEMIS-COMMIT-BLOCKS")
def test_transacted_sends_do_not_block_but_commit_does(cut: ClientUnderTest, env: Env) -> None:
    cut.require(ClientFeature.TRANSACTIONS)
    q = env.queue()
    send_gate = env.proxy.hold("SEND", q)
    commit_gate = env.proxy.hold("COMMIT")
    s = cut.session(transacted=True)
    p = cut.producer(s)
    checks = Checks()  # each requirement is charged only for its own check
    # the sends return although the proxy holds any confirmation the client asked for (a STOMP client asks for
    # none; an AMQP client's unsettled transfers are each answered by a disposition it must not wait for)
    sending = env.background(lambda: [cut.sync_send(p, q, b"t%d" % i, persistent=True) for i in range(3)])
    if not checks.check(sending.returned_within(TIMEOUT),
                        f"a transacted send waited for the broker (held: {send_gate.pending()})",
                        requirement=req.ARTEMIS_TRANSACTED_SENDS_DO_NOT_BLOCK):
        send_gate.close()
        checks.done()
    sending.wait()
    committing = env.background(lambda: cut.commit(s))
    commit_gate.wait_held(1, TIMEOUT)  # a client that asks for no answer has none held: nothing to wait for
    assert [m.body for m in env.drain(q, 3)] == [b"t0", b"t1", b"t2"], "the broker committed..."
    if checks.check(not committing.done,
                    "...but commit() returned before the broker's answer", requirement=req.ARTEMIS_COMMIT_BLOCKS):
        commit_gate.release()
        committing.wait()
    checks.done()


@requirement("ARTEMIS-ROLLBACK-BLOCKS")
def test_rollback_blocks_until_the_broker_answers(cut: ClientUnderTest, env: Env) -> None:
    cut.require(ClientFeature.TRANSACTIONS)
    q = env.queue()
    abort_gate = env.proxy.hold("ABORT")
    s = cut.session(transacted=True)
    p = cut.producer(s)
    cut.sync_send(p, q, b"gone", persistent=True)
    rolling = env.background(lambda: cut.rollback(s))
    abort_gate.wait_held(1, TIMEOUT)
    assert not rolling.done, "rollback() returned before the broker's answer"
    abort_gate.release()
    rolling.wait()
    assert env.contents(q) == []


@requirement("ARTEMIS-BLOCK-ON-ACKNOWLEDGE")
def test_block_on_acknowledge(make_cut: MakeCut, env: Env) -> None:
    q = env.queue()
    setup = make_cut()
    sp = setup.producer(setup.session())
    setup.sync_send(sp, q, b"a", persistent=True)
    cut = make_cut(block_on_acknowledge=True)
    cut.require(ClientFeature.SEND_FLAGS, ClientFeature.ACK_MODES)
    gate = env.proxy.hold("ACK", None)
    s = cut.session(ack_mode=2)
    c = cut.consumer(s, q)
    message = cut.receive(c, TIMEOUT)
    assert message is not None
    acking = env.background(lambda: cut.acknowledge(message.handle))
    gate.wait_held(1, TIMEOUT)
    assert not acking.done, "acknowledge() returned before the broker confirmed it (blockOnAcknowledge=true)"
    gate.release()
    acking.wait()


@requirement("ARTEMIS-ASYNC-SEND-ACK-HANDLER")
def test_send_acknowledgement_handler_called_per_message_in_order(make_cut: MakeCut, env: Env) -> None:
    cut = make_cut(confirmation_window_size=1 << 20, block_on_durable_send=False)
    cut.require(ClientFeature.CONFIRMATION_WINDOW)
    cut.set_send_ack_handler()
    q = env.queue()
    gate = env.proxy.hold("SEND", q)
    p = cut.producer(cut.session())
    sends = [cut.sync_send(p, q, b"h%d" % i, persistent=i % 2 == 0) for i in range(4)]  # none blocks
    held = gate.wait_held(4, TIMEOUT)
    assert cut.events.of("send-ack") == []
    for answered in reversed(held):
        gate.release(answered.receipt_id)
    acks = cut.events.wait_count("send-ack", 4, TIMEOUT)
    assert sorted(e["send"] for e in acks) == sorted(sends)


@requirement("ARTEMIS-CONFIRMATION-WINDOW")
def test_confirmation_window_bounds_unconfirmed_bytes(make_cut: MakeCut, env: Env) -> None:
    cut = make_cut(confirmation_window_size=1000, block_on_durable_send=False)
    cut.require(ClientFeature.CONFIRMATION_WINDOW)
    cut.set_send_ack_handler()
    q = env.queue()
    gate = env.proxy.hold("SEND", q)
    p = cut.producer(cut.session())
    body = b"x" * 400
    cut.sync_send(p, q, body)
    cut.sync_send(p, q, body)
    third = env.background(lambda: cut.sync_send(p, q, body))
    gate.wait_held(2, TIMEOUT)
    cut.events.wait_count("send-blocked", 1, TIMEOUT)
    assert env.proxy.seen("SEND", q) == 2 and not third.done, "more unconfirmed bytes than the window allows"
    gate.release()
    third.wait()


MAX_CONFIRMATION_WINDOW = 4096
"""Cap on the window drawn from ARTEMIS-CONFIRMATION-WINDOW (-1 or 1.. bytes): with bodies up to 1 KiB and a
few sends per example, larger windows would never fill."""


@requirement("ARTEMIS-CONFIRMATION-WINDOW")
def test_confirmation_window_over_its_domain(make_cut: MakeCut, env: Env) -> None:
    """Any confirmationWindowSize of the catalogue's domain, any body size and number of sends, the
    confirmations held: with -1 there are no send acknowledgements (the handler refused, or never called);
    with a positive window no second send goes out while the unconfirmed bytes would pass the window, and
    once the confirmations come every send is acknowledged."""
    examples = itertools.count()

    @hypothesis_settings()
    @hypothesis_seed()
    @given(window=drawn("ARTEMIS-CONFIRMATION-WINDOW", "confirmationWindowSize", cap=MAX_CONFIRMATION_WINDOW),
           size=st.integers(1, 1024), count=st.integers(1, 6))
    def bounded(window: int, size: int, count: int) -> None:
        cut = make_cut(confirmation_window_size=window, block_on_durable_send=False)
        cut.require(ClientFeature.CONFIRMATION_WINDOW)
        q = env.queue(f"x{next(examples)}")
        try:
            if window > 0:
                _windowed_sends(cut, env, q, window, b"x" * size, count)
            else:
                _unwindowed_sends(cut, q, b"x" * size, count)
        finally:
            cut.close()

    bounded()


def _unwindowed_sends(cut: ClientUnderTest, q: str, body: bytes, count: int) -> None:
    """Without a confirmation window a send-acknowledgement handler is refused (when set, or at the first
    use of the session it applies to: the Artemis client checks it there), or never called (checked after
    a blocking round trip, so every answer to the sends before it has been read)."""
    try:
        cut.set_send_ack_handler()
        p = cut.producer(cut.session())
        cut.sync_send(p, q, body)
    except CutError:  # refused: the reference client raises JMSError, the Artemis client IllegalStateException
        return
    for _ in range(count - 1):
        cut.sync_send(p, q, body)
    cut.sync_send(p, q, body, persistent=True)  # blocks for its answer: the earlier answers came before it
    assert cut.events.of("send-ack") == [], "send acknowledgements with confirmationWindowSize -1"


def _seen(env: Env, count: int, q: str) -> int:
    """SENDs to ``q`` the broker side has seen, once at least ``count`` (bounded): a proxy counts them as it
    forwards them; the core gate counts them in the client's writing thread, so at once."""
    wait_seen = getattr(env.proxy, "wait_seen", None)
    return int(wait_seen(count, "SEND", q)) if wait_seen is not None else env.proxy.seen("SEND", q)


def _windowed_sends(cut: ClientUnderTest, env: Env, q: str, window: int, body: bytes, count: int) -> None:
    cut.set_send_ack_handler()
    gate = env.proxy.hold("SEND", q)
    p = cut.producer(cut.session())
    answered = 0
    try:
        for n in range(count):
            blocked_before = len(cut.events.of("send-blocked"))
            call = env.background(functools.partial(cut.sync_send, p, q, body))
            deadline = time.monotonic() + TIMEOUT
            while not call.done and len(cut.events.of("send-blocked")) == blocked_before:
                assert time.monotonic() < deadline, "a send neither returned nor waited for the window"
                cut.events.wait_count("send-blocked", blocked_before + 1, 0.05)
            out = _seen(env, n + 1 if call.done else n, q)  # what went out so far
            unconfirmed = out - answered
            assert unconfirmed < 2 or unconfirmed * len(body) <= window, (
                f"{unconfirmed} sends of {len(body)} bytes unconfirmed with confirmationWindowSize {window} "
                f"(send {n} {'returned' if call.done else 'waits'})")
            if not call.done:  # waiting for room: the held confirmations make it, once all have come
                gate.wait_held(n - answered, TIMEOUT)
                answered += len(gate.release_all())
                assert call.returned_within(TIMEOUT), (
                    f"send {n} still waited once every confirmation came ({out} out, {answered} answered, window "
                    f"{window}, {len(body)} bytes each, {len(gate.pending())} held)")
        gate.close()
        acks = cut.events.wait_count("send-ack", count, TIMEOUT)
        assert len(acks) == count, f"{len(acks)} send acknowledgements for {count} sends"
    finally:
        gate.close()


@requirement("ARTEMIS-RTT-BOUND")
def test_blocking_sends_never_overlap_so_each_costs_a_round_trip(cut: ClientUnderTest, env: Env) -> None:
    """The 1/RTT bound without a clock: a client that blocks on every send writes send k+1 only after send k's
    confirmation came back, so n sends take at least n round trips. Each confirmation is held in turn and the
    sends written meanwhile are counted. (The other half, windowed and asynchronous sends bounded by bandwidth
    instead, is JMS-7.3.3-PIPELINING: several sends written while the first is unconfirmed. The rates themselves
    are measured by benchmarks/rtt_bench.py.)"""
    cut.require(ClientFeature.SYNC_SEND_CONFIRMED)
    q = env.queue()
    gate = env.proxy.hold("SEND", q)
    p = cut.producer(cut.session())
    count = 3
    sending = env.background(lambda: [cut.sync_send(p, q, b"r%d" % i, persistent=True) for i in range(count)])
    for k in range(1, count + 1):
        assert gate.wait_held(1, TIMEOUT), f"no confirmation of send {k} to hold: did it ask for one?"
        env.proxy.settle()
        written = env.proxy.seen("SEND", q)
        assert written == k, f"{written} sends written while send {k}'s confirmation was held: they overlapped"
        gate.release()
    sending.wait()
    assert [m.body for m in env.drain(q, count)] == [b"r%d" % i for i in range(count)]
