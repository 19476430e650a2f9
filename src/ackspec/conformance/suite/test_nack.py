"""NACK and redelivery: scope of a NACK, the redelivered flag, the delivery count, dead-lettering.

What a broker does with a NACKed message is its choice (STOMP-NACK-NOT-CONSUMED is
UNDEF: redeliver, discard or dead-letter); the tests check only what the rules
fix: which messages a NACK covers, how redeliveries are marked, and that the
redelivery limit leads to the dead-letter queue where the target has one.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ackspec.adapters.base import AckMode, Capability, Delivery
from ackspec.conformance.cited import req
from ackspec.conformance.config import hypothesis_seed, hypothesis_settings
from ackspec.conformance.harness import Harness, seqs
from ackspec.conformance.suite.support import left_after_disconnect, received
from ackspec.conformance.verdicts import Checks, check

requirement = pytest.mark.requirement


@requirement("STOMP-NACK-INDIVIDUAL")
def test_nack_individual_covers_one(harness: Harness) -> None:
    c1, q, _sub, got = received(harness, 3, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=10)
    c1.nack(got[1])
    # seqs 0 and 2 must still be ours to acknowledge (a NACK of seq 1 touched nothing else)
    c1.ack(got[0])
    c1.ack(got[2])
    back = left_after_disconnect(harness, c1, q)
    check(not {0, 2} & set(back),
          f"NACK of seq 1 affected other messages: {back} came back after they were ACKed")


@requirement("STOMP-NACK-CLIENT-CUMULATIVE")
def test_nack_client_mode_is_cumulative(harness: Harness) -> None:
    """Any number of messages (2..6) received in client mode and any one of them after the first NACKed: the
    NACK covers it and every earlier one, whatever the broker then does with them."""

    @hypothesis_settings()
    @hypothesis_seed()
    @given(data=st.data(), count=st.integers(2, 6))
    @harness.example
    def cumulative(data: st.DataObject, count: int) -> None:
        _nack_covers_earlier(harness, count, data.draw(st.integers(1, count - 1), label="nacked"))

    cumulative()


def _nack_covers_earlier(harness: Harness, count: int, nacked: int) -> None:
    c1, q, sub, got = received(harness, count, ack=AckMode.CLIENT, prefetch=10,
                               requirement=req.STOMP_NACK_CLIENT_CUMULATIVE)
    harness.expect_dropped(q, range(nacked + 1), reason="NACKed: the broker may redeliver, drop or dead-letter it")
    c1.nack(got[nacked])  # covers seqs 0 .. nacked; the later ones stay held
    live = seqs(harness.barrier(c1, q, c1, sub))
    earlier = set(range(nacked))
    if nacked in live:  # the broker redelivers NACKed messages at once: so must every earlier one come back
        check(earlier <= set(live),
              f"NACK of seq {nacked} redelivered {live} but not all the earlier seqs {sorted(earlier)}",
              requirement=req.STOMP_NACK_CLIENT_CUMULATIVE)
        c1.disconnect()
        return
    back = left_after_disconnect(harness, c1, q)
    # not redelivered live: NACKed messages were discarded or dead-lettered. An earlier seq returning on
    # disconnect while the NACKed one did not means the NACK did not cover it.
    left = sorted(earlier & set(back))
    check(not (left and nacked not in back),
          f"NACK of seq {nacked} in client mode left seqs {left} unacknowledged (returned on disconnect: {back})",
          requirement=req.STOMP_NACK_CLIENT_CUMULATIVE)


def _delivered_across_crashes(harness: Harness, n: int) -> list[Delivery]:
    """Send seq 0 (persistent) and deliver it ``n`` times, each time losing the consumer's connection before an ACK.

    Returns the deliveries seen (fewer than ``n`` when the message stopped coming back).
    """
    q = harness.queue()
    p = harness.client("producer")
    harness.send_seq(p, q, [0], persistent=True)
    seen = []
    for _ in range(n):
        c = harness.client()
        sub = c.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=1)
        d = c.receive(sub)
        if d is None:
            break
        seen.append(d)
        c.crash()
    return seen


@requirement("STOMP-REDELIVERED-HEADER", "JMS-3.4.7-REDELIVERED-FALSE-FIRST", "JMS-6.2.11-REDELIVERY-MARKED")
def test_redelivered_flag(harness: Harness) -> None:
    harness.require(Capability.ABRUPT_DISCONNECT, Capability.ACK_CLIENT_INDIVIDUAL)
    seen = _delivered_across_crashes(harness, 2)
    checks = Checks()
    checks.check(len(seen) == 2, f"message delivered {len(seen)} times, expected 2",
                 requirement=req.STOMP_REDELIVERED_HEADER)
    if seen:
        checks.check(not seen[0].redelivered,
                     "first delivery carries redelivered:true", requirement=req.JMS_3_4_7_REDELIVERED_FALSE_FIRST)
    if len(seen) == 2:  # its acknowledgement was lost with the connection: delivered again, marked
        for rid in (req.STOMP_REDELIVERED_HEADER, req.JMS_6_2_11_REDELIVERY_MARKED):
            checks.check(seen[1].redelivered is True,
                         f"redelivery after a lost connection has redelivered={seen[1].redelivered}", requirement=rid)
    checks.done()


@requirement("STOMP-DELIVERY-COUNT-HEADER", "JMS-3.5.11-DELIVERY-COUNT-FIRST-ONE",
             "JMS-3.5.11-DELIVERY-COUNT-INCREMENTS", "JMS-3.5.11-REDELIVERED-IMPLIES-COUNT")
def test_delivery_count_grows(harness: Harness) -> None:
    harness.require(Capability.ABRUPT_DISCONNECT, Capability.ACK_CLIENT_INDIVIDUAL)
    seen = _delivered_across_crashes(harness, 3)
    counts = [d.delivery_count for d in seen]
    checks = Checks()
    checks.check(len(seen) == 3, f"delivered {len(seen)} times, expected 3",
                 requirement=req.STOMP_DELIVERY_COUNT_HEADER)
    checks.check(bool(counts) and counts[0] == 1,
                 f"first delivery count is {counts[:1]}", requirement=req.JMS_3_5_11_DELIVERY_COUNT_FIRST_ONE)
    ok = all(a is not None and b is not None and b > a for a, b in itertools.pairwise(counts))
    checks.check(ok, f"counts over redeliveries: {counts}",
                 requirement=req.JMS_3_5_11_DELIVERY_COUNT_INCREMENTS)
    checks.check(ok and None not in counts, f"counts over redeliveries: {counts}",
                 requirement=req.STOMP_DELIVERY_COUNT_HEADER)
    marked = [(d.redelivered, d.delivery_count) for d in seen if d.redelivered]
    checks.check(all(count is not None and count >= 2 for _, count in marked),
                 f"(redelivered, count) of the deliveries marked redelivered: {marked}",
                 requirement=req.JMS_3_5_11_REDELIVERED_IMPLIES_COUNT)
    checks.done()


@requirement("AMQ-REDELIVERY-MAX", "AMQ-REDELIVERY-POISON-TO-DLQ")
def test_dead_letter_after_redelivery_limit(harness: Harness) -> None:
    harness.require(Capability.ACK_CLIENT_INDIVIDUAL)
    limit, dlq_pattern = harness.settings.max_redeliveries, harness.settings.dead_letter_queue
    if limit is None or not dlq_pattern:
        pytest.skip("the profile names no redelivery limit or dead-letter queue")
    q = harness.queue()
    dlq = dlq_pattern.replace("{destination}", q.rsplit("/", 1)[-1])
    c = harness.client()
    watcher = harness.client("dlq")
    dsub = watcher.subscribe(dlq, ack=AckMode.CLIENT_INDIVIDUAL)
    sub = c.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=1)
    harness.send_seq(c, q, [0], persistent=True)
    deliveries = 0
    checks = Checks()
    for _ in range(limit + 1):
        d = c.receive(sub)
        if d is None:
            break
        deliveries += 1
        c.nack(d)
    checks.check(deliveries == limit + 1,
                 f"expected {limit + 1} deliveries (1 + {limit} redeliveries) before dead-lettering, got {deliveries}",
                 requirement=req.AMQ_REDELIVERY_MAX)
    # it must now be on the dead-letter queue, and no longer on the queue
    dead = None
    while True:
        got = watcher.receive(dsub)
        if got is None:
            break
        watcher.ack(got)
        if got.headers.get("original-destination", q) == q and got.seq == 0 and got.producer == "p1":
            dead = got
            break
    checks.check(dead is not None,
                 f"message not found on the dead-letter queue {dlq} after {deliveries} deliveries",
                 requirement=req.AMQ_REDELIVERY_POISON_TO_DLQ)
    extra = seqs(harness.barrier(c, q, c, sub, ack_each=True))
    checks.check(not extra, f"redelivered beyond the limit: {extra}",
                 requirement=req.AMQ_REDELIVERY_MAX)
    checks.done()


REDELIVERY_CAUSES: tuple[tuple[str, Capability], ...] = (
    ("crash", Capability.ABRUPT_DISCONNECT), ("disconnect", Capability.ACK_CLIENT_INDIVIDUAL),
    ("nack", Capability.NACK))
"""What sends a delivered, unacknowledged message back, and what the target must offer for each: the
consumer's connection dropping, the consumer disconnecting, or a NACK (then a disconnect, in case the
broker redelivered it at once to the same consumer)."""


@requirement("JMS-3.5.11-DELIVERY-COUNT-INCREMENTS")
def test_delivery_count_grows_over_any_redeliveries(harness: Harness) -> None:
    """Any sequence of one to four redeliveries, each caused by a dropped connection, a disconnect or a NACK:
    every further delivery of the message has a larger delivery count than the one before."""
    harness.require(Capability.ACK_CLIENT_INDIVIDUAL)
    causes = [cause for cause, needs in REDELIVERY_CAUSES if harness.has(needs)]
    producer = harness.client("producer")

    @hypothesis_settings(examples=6)
    @hypothesis_seed()
    @given(sequence=st.lists(st.sampled_from(causes), min_size=1, max_size=4))
    @harness.example
    def grows(sequence: list[str]) -> None:
        q = harness.queue()
        harness.send_seq(producer, q, [0], persistent=True)
        seen = _deliveries_over(harness, q, sequence)
        counts = [d.delivery_count for d in seen]
        check(all(a is not None and b is not None and b > a for a, b in itertools.pairwise(counts)),
              f"delivery counts {counts} over deliveries ended by {sequence[:len(seen)]}")

    grows()


def _deliveries_over(harness: Harness, q: str, sequence: list[str]) -> list[Delivery]:
    """Deliver seq 0 of ``q`` once per cause in ``sequence`` (each ending its delivery so), then once more,
    acknowledged. Stops early when it does not come back: after a NACK the broker may drop or dead-letter
    it (declared dropped); after a disconnect or a drop, its loss is left to the history checks."""
    seen: list[Delivery] = []
    for cause in [*sequence, None]:
        c = harness.client()
        sub = c.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=1)
        got = harness.receive_n(c, sub, 1, timeout=harness.timeout * (2 if seen else 1))
        if not got:
            if seen and sequence[len(seen) - 1] == "nack":
                harness.expect_dropped(q, [0], reason="NACKed: the broker may drop or dead-letter it")
            c.disconnect()
            return seen
        seen.append(got[0])
        if cause == "crash":
            c.crash()
            continue
        if cause == "nack":
            c.nack(got[0])
        elif cause is None:
            c.ack(got[0])
        c.disconnect()
    return seen
