"""Delivery: per-producer order, prefetch bound, queue vs topic distribution, unsubscribe, MESSAGE headers."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ackspec.adapters.base import AckMode, Capability, Delivery, NotSupported
from ackspec.conformance.cited import req
from ackspec.conformance.config import hypothesis_seed, hypothesis_settings
from ackspec.conformance.harness import Harness, seqs
from ackspec.conformance.strategies import drawn
from ackspec.conformance.suite.support import DURABLE_NAME, received, suspended_durable
from ackspec.conformance.verdicts import Checks, check

requirement = pytest.mark.requirement


@requirement("JMS-6.2.9.1-PER-PRODUCER-ORDER")
def test_order_per_producer(harness: Harness) -> None:
    q = harness.queue()
    consumer = harness.client("consumer")
    sub = consumer.subscribe(q, ack=AckMode.AUTO)
    p1, p2 = harness.client("p1"), harness.client("p2")
    for i in range(15):
        p1.send(q, f"a{i}".encode(), seq=i, producer="p1", confirm=i % 5 == 4)
        p2.send(q, f"b{i}".encode(), seq=i, producer="p2", confirm=i % 5 == 4)
    got = harness.receive_n(consumer, sub, 30)
    by: dict[str, list[int]] = {}
    for d in got:
        by.setdefault(d.producer or "?", []).append(d.seq if d.seq is not None else -1)
    checks = Checks()
    for producer, order in sorted(by.items()):
        checks.check(order == sorted(order),
                     f"producer {producer} received out of send order: {order}")
    checks.check(len(got) == 30, f"received {len(got)} of 30")
    checks.done()
    harness.check_history({"order", "duplicate"})


@requirement("STOMP-SUBSCRIBE-PREFETCH", "AMQ-PREFETCH-PUSH-BOUND")
def test_prefetch_bounds_unacked_deliveries(harness: Harness) -> None:
    """Over the catalogue's prefetch domain (1.., capped per run), any backlog beyond it and any number
    of acknowledgements: the broker fills the prefetch, sends one more per ACK, and never more."""

    @hypothesis_settings()
    @hypothesis_seed()
    @given(prefetch=drawn("STOMP-SUBSCRIBE-PREFETCH", "prefetch"), beyond=st.integers(1, 8),
           acks=st.integers(0, 8))
    @harness.example
    def bounded(prefetch: int, beyond: int, acks: int) -> None:
        _prefetch_example(harness, prefetch, prefetch + beyond, min(acks, prefetch, beyond))

    bounded()


def _prefetch_example(harness: Harness, n: int, total: int, acks: int) -> None:
    q = harness.queue()
    c1 = harness.client("bounded")
    sub1 = c1.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=n)
    harness.send_seq(c1, q, range(total))
    first = harness.expect_n(c1, sub1, n, req.STOMP_SUBSCRIBE_PREFETCH)
    for acked in first[:acks]:  # each acknowledgement makes room for one more
        c1.ack(acked)
    first = first[acks:] + harness.expect_n(c1, sub1, acks, req.AMQ_PREFETCH_PUSH_BOUND,
                                            f"deliveries after {acks} acknowledgements")
    total -= acks
    # A second consumer takes what the first may not hold; once every message is accounted for,
    # nothing more can reach the first: counting its extra deliveries needs no waiting.
    c2 = harness.client("unbounded")
    sub2 = c2.subscribe(q, ack=AckMode.AUTO)
    second: list[Delivery] = []
    extra: list[Delivery] = []
    while len(first) + len(extra) + len(second) < total:
        d = c1.receive(sub1, 0)
        if d is not None:
            extra.append(d)
            continue
        d = c2.receive(sub2, harness.timeout if not extra else 0.2)
        if d is None and not extra:
            break
        if d is not None:
            second.append(d)
    checks = Checks()
    for rid in (req.STOMP_SUBSCRIBE_PREFETCH, req.AMQ_PREFETCH_PUSH_BOUND):
        checks.check(not extra, f"prefetch {n}: {n + len(extra)} unacknowledged deliveries reached the "
                     f"subscription (extra seqs {seqs(extra)})", requirement=rid)
    checks.done()
    for held in first:
        c1.ack(held)
    c1.disconnect()
    c2.disconnect()


@requirement("JMS-4.1.2-QUEUE-ONE-CONSUMER", "JMS-6.2.12-NO-DUPLICATE-PRODUCTION")
def test_queue_gives_each_message_to_one_consumer(harness: Harness) -> None:
    harness.require(Capability.RECEIPTS)
    q = harness.queue()
    a, b = harness.client("a"), harness.client("b")
    sa, sb = a.subscribe(q), b.subscribe(q)
    harness.send_seq(a, q, range(20))
    got: list[Delivery] = []
    deadline = time.monotonic() + harness.timeout
    while len(got) < 20 and time.monotonic() < deadline:
        for c, s in ((a, sa), (b, sb)):
            d = c.receive(s, 0.02)
            if d is not None:
                got.append(d)
    # the UNSUBSCRIBE receipts are barriers: any copy the broker sent is buffered by now
    a.unsubscribe(sa)
    b.unsubscribe(sb)
    for c, s in ((a, sa), (b, sb)):
        while (d := c.receive(s, 0)) is not None:
            got.append(d)
    found = seqs(got)
    checks = Checks()
    dups = sorted({s for s in found if found.count(s) > 1})
    checks.check(not dups, f"queue messages delivered twice: {dups}",
                 requirement=req.JMS_4_1_2_QUEUE_ONE_CONSUMER)
    checks.check(not [d for d in got if d.seq in dups and not d.redelivered],
                 f"unmarked duplicate deliveries: {dups}", requirement=req.JMS_6_2_12_NO_DUPLICATE_PRODUCTION)
    checks.check(sorted(set(found)) == list(range(20)),
                 f"missing: {sorted(set(range(20)) - set(found))}", requirement=req.JMS_4_1_2_QUEUE_ONE_CONSUMER)
    checks.done()


@requirement("JMS-4.2-TOPIC-EVERY-SUBSCRIBER")
def test_topic_copies_to_every_subscriber(harness: Harness) -> None:
    t = harness.topic()
    a, b = harness.client("a"), harness.client("b")
    sa, sb = a.subscribe(t), b.subscribe(t)
    harness.send_seq(a, t, range(5))
    ga, gb = seqs(harness.receive_n(a, sa, 5)), seqs(harness.receive_n(b, sb, 5))
    check(ga == gb == list(range(5)),
          f"subscriber a got {ga}, b got {gb}, expected [0..4] each")


@requirement("JMS-4.2.11-DURABLE-SUBSCRIPTION-RETAINS")
def test_durable_subscription_keeps_messages_while_inactive(harness: Harness) -> None:
    """A durable subscription made, its consumer closed and its connection ended; five persistent messages
    published; a new connection of the same client resumes it and must get all five, in order. The
    subscription is deleted at the end (JMS unsubscribe), so nothing stays on the target."""
    harness.require(Capability.RECEIPTS)
    t, client_id = suspended_durable(harness, DURABLE_NAME)
    harness.send_seq(harness.client("producer"), t, range(5), persistent=True)
    second = harness.client("durable-2", client_id=client_id)
    sub = second.subscribe(t, durable=DURABLE_NAME)
    got = seqs(harness.expect_n(second, sub, 5,
                                          what="messages published while the durable subscription had no consumer"))
    check(got == list(range(5)),
          f"the resumed durable subscription delivered seqs {got}, expected [0..4] in order")
    second.unsubscribe(sub)
    second.remove_durable(t, DURABLE_NAME)


@requirement("JMS-9.1-QUEUE-PERSISTENT-RELIABLE")
def test_durable_subscription_keeps_persistent_messages_across_restart(harness: Harness) -> None:
    """JMS 9.1: persistent messages sent to a durable subscription are delivered once and only once, also
    when the broker restarts while the subscription has no consumer."""
    harness.require(Capability.TOPICS, Capability.DURABLE_SUBSCRIPTIONS, Capability.BROKER_RESTART)
    t, client_id = suspended_durable(harness, DURABLE_NAME)
    harness.send_seq(harness.client("producer"), t, range(3), persistent=True)
    harness.restart_broker()
    second = harness.client("durable-2", client_id=client_id)
    sub = second.subscribe(t, durable=DURABLE_NAME)
    found = seqs(harness.receive_n(second, sub, 3) + harness.barrier(second, t, second, sub))
    checks = Checks()
    lost = sorted({0, 1, 2} - set(found))
    checks.check(not lost,
                 f"persistent messages kept by a durable subscription lost in a restart: {lost}")
    checks.check(sorted(found) == sorted(set(found)),
                 f"delivered more than once after the restart: {found}")
    checks.done()
    second.unsubscribe(sub)
    second.remove_durable(t, DURABLE_NAME)


@requirement("STOMP-UNSUBSCRIBE-STOPS")
def test_unsubscribe_stops_deliveries(harness: Harness) -> None:
    harness.require(Capability.TOPICS)
    t = harness.topic()
    c = harness.client()
    gone = c.subscribe(t)
    c.unsubscribe(gone)
    kept = c.subscribe(t)
    harness.send_seq(c, t, range(3))
    # deliveries on one connection come in order: once the live subscription has all three
    # plus a sentinel, anything for the ended subscription would already be buffered
    harness.receive_n(c, kept, 3)
    harness.barrier(c, t, c, kept)
    stray = c.receive(gone, 0)
    check(stray is None,
          "a MESSAGE arrived for a subscription after its UNSUBSCRIBE receipt")


@requirement("STOMP-MESSAGE-REQUIRED-HEADERS", "STOMP-MESSAGE-NO-LEAKED-HEADERS")
def test_message_headers(harness: Harness) -> None:
    harness.require(Capability.QUEUES, Capability.RECEIPTS)
    if harness.adapter.protocol != "stomp":  # MESSAGE frame headers: AMQP has no such frame
        raise NotSupported("stomp-frames", f"{harness.adapter.name} does not speak STOMP")
    _c, q, sub, got = received(harness, 2, ack=AckMode.CLIENT_INDIVIDUAL,
                               requirement=req.STOMP_MESSAGE_REQUIRED_HEADERS)
    checks = Checks()
    for d in got:
        h = d.headers
        checks.check(h.get("destination") == q and h.get("subscription") == sub and h.get("message-id"),
                     f"MESSAGE headers destination={h.get('destination')!r} subscription={h.get('subscription')!r} "
                     f"message-id={h.get('message-id')!r}", requirement=req.STOMP_MESSAGE_REQUIRED_HEADERS)
        leaked = sorted(k for k in h if k in ("receipt", "transaction"))
        checks.check(not leaked, f"SEND headers leaked into MESSAGE: {leaked}",
                     requirement=req.STOMP_MESSAGE_NO_LEAKED_HEADERS)
    ids = [d.message_id for d in got]
    checks.check(len(set(ids)) == len(ids), f"message-ids not unique: {ids}",
                 requirement=req.STOMP_MESSAGE_REQUIRED_HEADERS)
    checks.done()


@requirement("STOMP-MESSAGE-ID-STABLE")
def test_message_id_stable_across_redelivery(harness: Harness) -> None:
    harness.require(Capability.ACK_CLIENT_INDIVIDUAL, Capability.ABRUPT_DISCONNECT)
    c1, q, _s1, [first] = received(harness, 1, ack=AckMode.CLIENT_INDIVIDUAL)
    c1.crash()
    c2 = harness.client()
    s2 = c2.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL)
    again = harness.expect_n_after_loss(c2, s2, 1, what="redelivery")[0]
    check(first.message_id == again.message_id,
          f"message-id changed on redelivery: {first.message_id!r} -> {again.message_id!r}")
