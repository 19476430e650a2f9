"""Outcomes and the message header: accepted, released, modified, rejected; delivery-count and first-acquirer.

Each test receives on an unsettled link (``CLIENT_INDIVIDUAL``), settles with one outcome,
and then observes the message again or its absence. Absence is always checked with a
barrier: a sentinel sent after the settlement, behind anything the outcome put back.
"""

from __future__ import annotations

import pytest

from ackspec.adapters.amqp_proton import ProtonClient
from ackspec.adapters.base import AckMode, AdapterError, Capability, Delivery, NackOutcome
from ackspec.conformance.cited import req
from ackspec.conformance.harness import Harness, seqs
from ackspec.conformance.suite.amqp.support import amqp_client, amqp_count, first_acquirer, live_then_drained
from ackspec.conformance.verdicts import Checks, check, violation

requirement = pytest.mark.requirement

SETTLING = (Capability.QUEUES, Capability.ACK_CLIENT_INDIVIDUAL)
"""What every test here needs: a queue and deliveries the test settles itself."""
OUTCOMES = (*SETTLING, Capability.NACK_OUTCOMES)
"""... and settling them with an outcome other than accepted."""


def _unsettled_link(harness: Harness, count: int = 1, *, prefetch: int | None = None,
                    needs: tuple[Capability, ...] = OUTCOMES) -> tuple[ProtonClient, str, str]:
    """Seqs ``0 .. count-1`` sent to a fresh queue with an unsettled (client-individual) link on it.

    The set-up of every test here; returns the client, the queue and the link, for the test to
    receive and settle with the outcome it checks.
    """
    harness.require(*needs)
    c = amqp_client(harness)
    q = harness.queue()
    sub = c.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=prefetch)
    harness.send_seq(c, q, range(count))
    return c, q, sub


def _first_settled_with(harness: Harness, outcome: NackOutcome, *, requirement: str | None = None,
                        prefetch: int) -> tuple[ProtonClient, str, str, Delivery]:
    """Seq 0 received on an unsettled link and settled with ``outcome``; not received violates ``requirement``.

    Returns the client, the queue, the link and that first delivery, for the test to look for it again.
    """
    c, q, sub = _unsettled_link(harness, prefetch=prefetch)
    first = harness.expect_n(c, sub, 1, requirement)[0]
    c.nack(first, outcome=outcome)
    return c, q, sub, first


@requirement("AMQP-3.4.2-ACCEPTED-RETIRES", "AMQP-3.5.2-NO-RESEND-ACCEPTED")
def test_accepted_retires(harness: Harness) -> None:
    c, q, sub = _unsettled_link(harness, 3, prefetch=5, needs=SETTLING)
    got = harness.expect_n(c, sub, 3, req.AMQP_3_4_2_ACCEPTED_RETIRES)
    for d in got:
        c.ack(d)
    live, later = live_then_drained(harness, c, q, sub)
    checks = Checks()
    checks.check(not live, f"accepted deliveries sent again on the link: {live}",
                 requirement=req.AMQP_3_5_2_NO_RESEND_ACCEPTED)
    checks.check(not later, f"accepted messages still on the queue: {later}",
                 requirement=req.AMQP_3_4_2_ACCEPTED_RETIRES)
    checks.done()


@requirement("AMQP-3.2.1-DELIVERY-COUNT-FIRST-ZERO")
def test_first_delivery_header(harness: Harness) -> None:
    """delivery-count 0 on a first delivery. (first-acquirer may be false on it: false only means
    "may have been acquired before", and is the default when a broker omits the field.)"""
    c, _q, sub = _unsettled_link(harness, 2, needs=SETTLING)
    got = harness.expect_n(c, sub, 2)
    check(all(amqp_count(d) == 0 for d in got),
          f"first deliveries have delivery-count {[amqp_count(d) for d in got]}")


@requirement("AMQP-3.4.4-RELEASED-AVAILABLE", "AMQP-3.4.4-RELEASED-NO-COUNT")
def test_released_redelivered_without_count(harness: Harness) -> None:
    c, _q, sub, first = _first_settled_with(harness, NackOutcome.RELEASED, prefetch=1,
                                            requirement=req.AMQP_3_4_4_RELEASED_AVAILABLE)
    again = c.receive(sub)
    if again is None or again.seq != 0:
        raise violation(
                                   f"released message not delivered again (got {again and again.seq})",
                                   requirement=req.AMQP_3_4_4_RELEASED_AVAILABLE)
    c.ack(again)
    check(amqp_count(again) == amqp_count(first),
          f"delivery-count went from {amqp_count(first)} to {amqp_count(again)} after released",
          requirement=req.AMQP_3_4_4_RELEASED_NO_COUNT)


@requirement("AMQP-3.2.1-FIRST-ACQUIRER")
def test_released_message_is_not_first_acquired_again(harness: Harness) -> None:
    c, _q, sub, _first = _first_settled_with(harness, NackOutcome.RELEASED, prefetch=1)
    again = harness.expect_n(c, sub, 1, what="redelivery")[0]
    c.ack(again)
    check(first_acquirer(again) is False,
          f"a message acquired and released before came with first-acquirer={first_acquirer(again)}")


@requirement("AMQP-3.4.5-MODIFIED-FAILED-COUNTS")
def test_modified_delivery_failed_counts(harness: Harness) -> None:
    c, _q, sub = _unsettled_link(harness, prefetch=1)
    counts = []
    for _ in range(3):
        d = c.receive(sub)
        if d is None:
            break
        counts.append(amqp_count(d))
        if len(counts) < 3:
            c.nack(d, outcome=NackOutcome.MODIFIED_FAILED)
        else:
            c.ack(d)
    check(counts == [0, 1, 2],
          f"delivery-count over two modified{{delivery-failed}} settlements: {counts}, expected [0, 1, 2]")


@requirement("AMQP-3.4.5-MODIFIED-UNDELIVERABLE-HERE")
def test_modified_undeliverable_here_not_redelivered_to_link(harness: Harness) -> None:
    c, q, sub, _first = _first_settled_with(harness, NackOutcome.MODIFIED_UNDELIVERABLE, prefetch=2)
    back = seqs(harness.barrier(c, q, c, sub))
    check(0 not in back,
          f"message settled modified{{undeliverable-here}} came back on the same link: {back}")


@requirement("AMQP-3.4.5-MODIFIED-ANNOTATIONS")
def test_modified_annotations_merged_into_later_deliveries(harness: Harness) -> None:
    c, q, sub = _unsettled_link(harness, prefetch=2)
    first = harness.expect_n(c, sub, 1)[0]
    note = "x-opt-ackspec-note"
    try:
        c.modify(first, {note: "retried-once"})
    except AdapterError as exc:
        raise violation(
                                   f"modified with message-annotations was refused: {exc}") from exc
    again = c.receive(sub)  # delivery-failed without undeliverable-here: may come back on this link
    if again is None or again.seq != 0:
        c.disconnect()
        again = next((d for d in harness.drain(q) if d.seq == 0), None)
    elif again.ack_id is not None:
        c.ack(again)
    check(again is not None, "the modified message was not delivered again")
    assert again is not None
    got = again.headers.get(f"amqp:annotation:{note}")
    check(got == "retried-once",
          f"message-annotations of the modified outcome not on the next delivery: {note}={got!r}")


@requirement("AMQP-3.4-OUTCOMES")
def test_rejected_not_redelivered(harness: Harness) -> None:
    c, q, sub, _first = _first_settled_with(harness, NackOutcome.REJECTED, prefetch=2)
    live, later = live_then_drained(harness, c, q, sub)
    check(0 not in live + later,
          f"rejected message delivered again (live {live}, to a new consumer {later})")


@requirement("AMQP-3.4.3-REJECTED-COUNTS")
def test_rejected_goes_to_dead_letter_queue(harness: Harness) -> None:
    harness.require(Capability.QUEUES, Capability.ACK_CLIENT_INDIVIDUAL)
    pattern = harness.settings.dead_letter_queue
    if not pattern:
        pytest.skip("the profile names no dead-letter queue")
    c = amqp_client(harness)
    q = harness.queue()
    dlq = pattern.replace("{destination}", q.rsplit("/", 1)[-1])
    watcher = amqp_client(harness, "dlq")
    dsub = watcher.subscribe(dlq, ack=AckMode.CLIENT_INDIVIDUAL)
    sub = c.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=1)
    harness.send_seq(c, q, [0], producer=f"p-{q}", persistent=True)  # some brokers dead-letter only these
    first = harness.expect_n(c, sub, 1)[0]
    c.nack(first, outcome=NackOutcome.REJECTED)
    dead = None
    while (got := watcher.receive(dsub)) is not None:
        watcher.ack(got)
        if got.seq == 0 and got.producer == f"p-{q}":
            dead = got
            break
    check(dead is not None, f"rejected message not found on {dlq}")


@requirement("AMQP-3.3-ACQUIRED-EXCLUSIVE", "AMQP-3.3-UNSETTLED-RETURN-ON-DETACH")
def test_acquired_exclusive_and_returned_on_detach(harness: Harness) -> None:
    harness.require(Capability.QUEUES, Capability.ACK_CLIENT_INDIVIDUAL)
    a, b = amqp_client(harness, "a"), amqp_client(harness, "b")
    q = harness.queue()
    sa = a.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=1)
    harness.send_seq(a, q, [0])
    held = harness.expect_n(a, sa, 1, req.AMQP_3_3_ACQUIRED_EXCLUSIVE)[0]
    sb = b.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=5)
    seen_by_b = seqs(harness.barrier(b, q, b, sb))  # a's link has no credit left: the sentinel goes to b
    checks = Checks()
    checks.check(held.seq not in seen_by_b,
                 f"a message acquired (unsettled) by one link was sent to another: {seen_by_b}",
                 requirement=req.AMQP_3_3_ACQUIRED_EXCLUSIVE)
    a.unsubscribe(sa)  # detach with the delivery unsettled
    back = harness.receive_n(b, sb, 1)
    checks.check(seqs(back) == [0],
                 f"unsettled delivery not made available again after detach: other link got {seqs(back)}",
                 requirement=req.AMQP_3_3_UNSETTLED_RETURN_ON_DETACH)
    for d in back:
        b.ack(d)
    checks.done()
