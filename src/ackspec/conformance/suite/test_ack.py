"""Acknowledgement modes: auto, client (cumulative per subscription), client-individual.

Pattern: a consumer receives, acknowledges some, goes away; a fresh consumer then
drains the queue up to a sentinel (a barrier). What comes back before the
sentinel is exactly what was not acknowledged.
"""

from __future__ import annotations

import pytest

from ackspec.adapters.base import AckMode, Capability
from ackspec.conformance.cited import req
from ackspec.conformance.harness import Harness
from ackspec.conformance.harness import seqs as _seqs
from ackspec.conformance.rawstomp import frame
from ackspec.conformance.suite.support import command_of, left_after_disconnect, received, reply_to
from ackspec.conformance.verdicts import Checks, check

requirement = pytest.mark.requirement


def _back_after_acking_seq_2(harness: Harness, ack: AckMode, returning: int,
                             requirement: str | None = None) -> list[int]:
    """Seqs 0-4 received in ``ack`` mode (fewer violates ``requirement``), seq 2 ACKed, the consumer gone:
    the seqs a fresh consumer then finds on the queue. ``returning``: how many the rule says come back,
    which the drain waits for (bounded) since a broker may put them back a moment after the disconnect."""
    c1, q, _sub, got = received(harness, 5, ack=ack, requirement=requirement)
    c1.ack(got[2])
    return left_after_disconnect(harness, c1, q, returning=returning)


@requirement("STOMP-ACK-AUTO")
def test_auto_ack_consumes_on_delivery(harness: Harness) -> None:
    harness.require(Capability.QUEUES)
    c1, q, _sub, got = received(harness, 3, ack=AckMode.AUTO)
    again = left_after_disconnect(harness, c1, q)
    check(not again, f"auto-acked messages delivered again: {again}")
    check([d.seq for d in got] == [0, 1, 2], f"got {_seqs(got)}")


@requirement("STOMP-ACK-CLIENT-CUMULATIVE", "STOMP-ACK-UNACKED-NOT-CONSUMED", "JMS-6.2.11-NO-DUPLICATE-AFTER-ACK",
             "AMQ-CLIENT-UNACKED-REDELIVERED-ON-RESTART", "JMS-6.1.8-CLOSE-DOES-NOT-ACK")
def test_client_ack_is_cumulative(harness: Harness) -> None:
    harness.require(Capability.RECEIPTS)
    # in client mode the ACK of seq 2 covers seqs 0, 1 and 2
    back = _back_after_acking_seq_2(harness, AckMode.CLIENT, returning=2,  # seqs 3 and 4
                                    requirement=req.STOMP_ACK_UNACKED_NOT_CONSUMED)
    checks = Checks()
    checks.check(not {0, 1} & set(back),
                 f"ACK of seq 2 did not acknowledge earlier seqs: {back} came back",
                 requirement=req.STOMP_ACK_CLIENT_CUMULATIVE)
    checks.check(2 not in back, f"acknowledged seq 2 came back: {back}",
                 requirement=req.JMS_6_2_11_NO_DUPLICATE_AFTER_ACK)
    # the consumer closed its connection (DISCONNECT) and a new one came: what it never acknowledged is back
    for rid in (req.STOMP_ACK_UNACKED_NOT_CONSUMED, req.AMQ_CLIENT_UNACKED_REDELIVERED_ON_RESTART,
                req.JMS_6_1_8_CLOSE_DOES_NOT_ACK):
        checks.check({3, 4} <= set(back), f"unacknowledged seqs 3, 4 were not delivered again: {back}",
                     requirement=rid)
    checks.done()


@requirement("STOMP-ACK-CLIENT-INDIVIDUAL", "JMS-6.2.11-NO-DUPLICATE-AFTER-ACK")
def test_client_individual_ack_covers_one(harness: Harness) -> None:
    harness.require(Capability.ACK_CLIENT_INDIVIDUAL, Capability.RECEIPTS)
    back = _back_after_acking_seq_2(harness, AckMode.CLIENT_INDIVIDUAL, returning=4,  # all but seq 2
                                    requirement=req.STOMP_ACK_CLIENT_INDIVIDUAL)
    checks = Checks()
    checks.check(sorted(x for x in back if x != 2) == [0, 1, 3, 4],
                 f"ACK of seq 2 in client-individual mode changed other messages: came back {back}",
                 requirement=req.STOMP_ACK_CLIENT_INDIVIDUAL)
    checks.check(2 not in back, f"acknowledged seq 2 came back: {back}",
                 requirement=req.JMS_6_2_11_NO_DUPLICATE_AFTER_ACK)
    checks.done()


@requirement("STOMP-ACK-UNACKED-NOT-CONSUMED", "JMS-6.2-UNACKED-RETAINED")
def test_unacked_redelivered_after_crash(harness: Harness) -> None:
    harness.require(Capability.ACK_CLIENT_INDIVIDUAL, Capability.ABRUPT_DISCONNECT)
    c1, q, _sub, got = received(harness, 3, ack=AckMode.CLIENT_INDIVIDUAL,
                                persistent=True, requirement=req.STOMP_ACK_UNACKED_NOT_CONSUMED)
    c1.ack(got[0])
    c1.crash()
    c2 = harness.client()
    sub2 = c2.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL)
    back = harness.expect_n_after_loss(c2, sub2, 2, req.STOMP_ACK_UNACKED_NOT_CONSUMED,
                                       "redeliveries after the crash")
    for d in back:
        c2.ack(d)
    more = harness.barrier(c2, q, c2, sub2, ack_each=True)
    seqs = sorted(_seqs(back) + _seqs(more))
    check(seqs == [1, 2],
          f"after the crash expected seqs [1, 2] again, got {seqs}", requirement=req.STOMP_ACK_UNACKED_NOT_CONSUMED)


@requirement("STOMP-ACK-CLIENT-PER-SUBSCRIPTION")
def test_client_ack_stays_within_subscription(harness: Harness) -> None:
    qa, qb = harness.queue("a"), harness.queue("b")
    c1 = harness.client()
    sa = c1.subscribe(qa, ack=AckMode.CLIENT)
    sb = c1.subscribe(qb, ack=AckMode.CLIENT)
    harness.send_seq(c1, qb, range(2))
    harness.expect_n(c1, sb, 2)
    harness.send_seq(c1, qa, range(2))
    got_a = harness.expect_n(c1, sa, 2)
    c1.ack(got_a[-1])
    c1.disconnect()
    # the unacknowledged messages of b come back to a new consumer; a broker may give them back a little after
    # the DISCONNECT receipt (Artemis closes the session's consumers asynchronously), hence the grace
    c2 = harness.client("after")
    back_b = _seqs(harness.expect_n_after_loss(c2, c2.subscribe(qb), 2,
                                                        what="unacknowledged messages of the other subscription"))
    check(sorted(back_b) == [0, 1],
          f"an ACK on another subscription acknowledged messages of this one: only {back_b} came back")


@requirement("STOMP-MESSAGE-ACK-HEADER", "STOMP-ACK-ID-MATCHES-MESSAGE")
def test_client_messages_carry_ack_header(harness: Harness) -> None:
    harness.require(Capability.ACK_CLIENT_INDIVIDUAL)
    c1, q, _sub, got = received(harness, 2, ack=AckMode.CLIENT_INDIVIDUAL,
                                requirement=req.STOMP_MESSAGE_ACK_HEADER)
    check(all(d.ack_id for d in got), "a client-individual MESSAGE has no ack header",
          requirement=req.STOMP_MESSAGE_ACK_HEADER)
    c1.ack(got[1])
    back = left_after_disconnect(harness, c1, q, returning=1)
    check(back == [0], f"ACK by the ack header of seq 1 left {back} (expected [0])",
          requirement=req.STOMP_ACK_ID_MATCHES_MESSAGE)


@requirement("STOMP-ACK-UNKNOWN-ID-ERROR", "STOMP-RECEIPT-MEANS-SUCCESS")
def test_ack_of_unknown_id_is_an_error(harness: Harness) -> None:
    """A second ACK of an already acknowledged delivery (a well-formed id that names nothing now)."""
    harness.require(Capability.ACK_CLIENT_INDIVIDUAL, Capability.RECEIPTS)
    q = harness.queue()
    raw = harness.raw_connected()
    raw.send(frame("SUBSCRIBE", {"destination": q, "id": "s1", "ack": "client-individual", "receipt": "r-sub"}))
    raw.read_until("RECEIPT")
    raw.send(frame("SEND", {"destination": q}, b"once"))
    message = raw.read_until("MESSAGE")
    check(message is not None and message.headers.get("ack"),
          "no MESSAGE with an ack header arrived", requirement=req.STOMP_ACK_UNKNOWN_ID_ERROR)
    assert message is not None
    ack_id = message.headers["ack"]
    first = reply_to(raw, frame("ACK", {"id": ack_id, "receipt": "r-ack-1"}))
    check(command_of(first) == "RECEIPT", f"the first ACK got {command_of(first)}",
          requirement=req.STOMP_ACK_UNKNOWN_ID_ERROR)
    reply = reply_to(raw, frame("ACK", {"id": ack_id, "receipt": "r-ack-2"}))
    checks = Checks()
    checks.check(reply is None or reply.command != "RECEIPT",
                 "a second ACK of the same delivery was answered with RECEIPT",
                 requirement=req.STOMP_RECEIPT_MEANS_SUCCESS)
    error = reply if reply is not None and reply.command == "ERROR" else raw.read_until("ERROR", 1.0)
    checks.check(error is not None, "ACK of an already acknowledged id got no ERROR",
                 requirement=req.STOMP_ACK_UNKNOWN_ID_ERROR)
    checks.done()


@requirement("JMS-6.2.11-AUTO-ONLY-LAST-REDELIVERED")
def test_auto_failure_redelivers_at_most_the_last(harness: Harness) -> None:
    """An ack:auto session dies after consuming some messages: none but the last may come back."""
    c1, q, _sub, got = received(harness, 4, ack=AckMode.AUTO,
                                persistent=True)
    c1.crash()
    back = _seqs(harness.drain(q))
    consumed = _seqs(got)
    harness.check(not set(back) & set(consumed[:-1]), f"after the failure of an ack:auto session that consumed "
                  f"{consumed}, earlier consumed messages came back: {back}")


@requirement("JMS-7.7-NON-PERSISTENT-AT-MOST-ONCE")
def test_non_persistent_never_delivered_twice_unmarked(harness: Harness) -> None:
    """Non-persistent messages, some acknowledged, the consumer dies: what comes back (it may be lost) comes
    back once, and marked redelivered (every one of them was delivered before); an acknowledgement the
    broker confirmed (a STOMP receipt) is never undone."""
    harness.require(Capability.ABRUPT_DISCONNECT, Capability.ACK_CLIENT_INDIVIDUAL)
    c1, q, _sub, got = received(harness, 6, ack=AckMode.CLIENT_INDIVIDUAL)
    for d in got[:3]:
        c1.ack(d)
    harness.expect_dropped(q, reason="non-persistent messages may be lost on a failure (JMS 7.7)")
    c1.crash()
    back = harness.drain(q)
    again = _seqs(back)
    checks = Checks()
    checks.check(len(again) == len(set(again)),
                 f"a non-persistent message came back twice: {again}")
    if harness.has(Capability.REDELIVERED_FLAG):
        unmarked = [d.seq for d in back if d.redelivered is False]
        checks.check(not unmarked,
                     f"non-persistent messages delivered a second time without redelivered: {unmarked}")
    if harness.adapter.protocol == "stomp":  # each ACK had its RECEIPT: the broker applied it
        checks.check(not {0, 1, 2} & set(again),
                     f"acknowledged (receipted) non-persistent messages delivered again: {again}")
    checks.done()
