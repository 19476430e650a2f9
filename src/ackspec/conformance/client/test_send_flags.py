"""Artemis synchronous-send flags and asynchronous send acknowledgements (seeds 000/002)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ackspec.adapters.cut import ClientFeature, ClientUnderTest
from ackspec.conformance.client.conftest import TIMEOUT, Env
from ackspec.conformance.client.proxies.stomp import Gate
from ackspec.conformance.markers import requirement
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
    if not checks.check(sending.returned_within(TIMEOUT), "ARTEMIS-TRANSACTED-SENDS-DO-NOT-BLOCK",
                        f"a transacted send waited for the broker (held: {send_gate.pending()})"):
        send_gate.close()
        checks.done()
    sending.wait()
    committing = env.background(lambda: cut.commit(s))
    commit_gate.wait_held(1, TIMEOUT)  # a client that asks for no answer has none held: nothing to wait for
    assert [m.body for m in env.drain(q, 3)] == [b"t0", b"t1", b"t2"], "the broker committed..."
    if checks.check(not committing.done, "ARTEMIS-COMMIT-BLOCKS",
                    "...but commit() returned before the broker's answer"):
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
