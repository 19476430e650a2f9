"""Ordering across delivery modes and competing consumers, over values drawn from the catalogue.

JMS 6.2.9.2: a later non-persistent message may overtake an earlier persistent one, never an earlier
one of its own delivery mode. JMS 4.1.2: with several consumers on a queue, each still sees its share
of one producer's messages in send order. Both are properties: any mix of delivery modes (drawn from
the two delivery-mode values the catalogue states), any number of competing consumers (the
catalogue's ``consumers`` domain, ``2..``, capped for a run).
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ackspec.adapters.base import AckMode, Client, Delivery
from ackspec.conformance.cited import req
from ackspec.conformance.config import hypothesis_seed, hypothesis_settings
from ackspec.conformance.harness import Harness, seqs
from ackspec.conformance.strategies import drawn
from ackspec.conformance.verdicts import check

requirement = pytest.mark.requirement

PERSISTENT_MODE = 2  # DeliveryMode.PERSISTENT (JMS-7.7-PERSISTENT-ONCE-AND-ONLY-ONCE's delivery_mode)
DELIVERY_MODES = st.one_of(drawn("JMS-7.7-NON-PERSISTENT-AT-MOST-ONCE", "delivery_mode"),
                           drawn("JMS-7.7-PERSISTENT-ONCE-AND-ONLY-ONCE", "delivery_mode"))
MAX_CONSUMERS = 4
"""Practical cap of the ``consumers`` domain (``2..``) for a run: each consumer is one more connection."""


@requirement("JMS-6.2.9.2-DELIVERY-MODE-ORDER")
def test_order_within_each_delivery_mode(harness: Harness) -> None:
    """Any sequence of persistent and non-persistent sends: each mode's messages arrive in send order."""
    producer, consumer = harness.client("producer"), harness.client("consumer")

    @hypothesis_settings()
    @hypothesis_seed()
    @given(modes=st.lists(DELIVERY_MODES, min_size=2, max_size=16))
    @harness.example
    def per_mode(modes: list[int]) -> None:
        q = harness.queue("modes")
        sub = consumer.subscribe(q, ack=AckMode.AUTO)
        for seq, mode in enumerate(modes):
            producer.send(q, f"m{seq}".encode(), seq=seq, producer="p1", persistent=mode == PERSISTENT_MODE)
        got = harness.expect_n(consumer, sub, len(modes), what=f"messages of {len(modes)} sent")
        consumer.unsubscribe(sub)
        for mode in sorted(set(modes)):
            order = [s for s in seqs(got) if 0 <= s < len(modes) and modes[s] == mode]
            check(order == sorted(order),
                  f"delivery mode {mode} out of send order: {order} (modes by seq: {modes})")

    per_mode()


@requirement("JMS-4.1.2-COMPETING-CONSUMER-ORDER", "JMS-4.1.2-QUEUE-ONE-CONSUMER")
def test_each_competing_consumer_sees_its_share_in_order(harness: Harness) -> None:
    """Any number of consumers on a queue, any number of messages: each one's share is in send order."""
    producer = harness.client("producer")
    consumers = [harness.client(f"c{i}") for i in range(MAX_CONSUMERS)]

    @hypothesis_settings()
    @hypothesis_seed()
    @given(count=drawn("JMS-4.1.2-COMPETING-CONSUMER-ORDER", "consumers", cap=MAX_CONSUMERS),
           n=st.integers(2, 24))
    @harness.example
    def shares_in_order(count: int, n: int) -> None:
        q = harness.queue("share")
        subs = [(c, c.subscribe(q, ack=AckMode.AUTO)) for c in consumers[:count]]
        harness.send_seq(producer, q, range(n))
        shares = _collect(harness, subs, n)
        for c, sub in subs:
            c.unsubscribe(sub)
        every = sorted(s for share in shares for s in seqs(share))
        check(len(every) == len(set(every)),
              f"a message reached two of {count} consumers: {every}", requirement=req.JMS_4_1_2_QUEUE_ONE_CONSUMER)
        check(len(every) == n, f"{len(every)} of {n} messages reached the "
              "consumers", requirement=req.JMS_4_1_2_COMPETING_CONSUMER_ORDER)
        for i, share in enumerate(shares):
            order = seqs(share)
            check(order == sorted(order),
                  f"consumer {i} of {count} got its share out of send order: {order}",
                  requirement=req.JMS_4_1_2_COMPETING_CONSUMER_ORDER)

    shares_in_order()


def _collect(harness: Harness, subs: list[tuple[Client, str]], n: int) -> list[list[Delivery]]:
    """Each consumer's deliveries, polled in turn until ``n`` arrived or the timeout passed."""
    shares: list[list[Delivery]] = [[] for _ in subs]
    deadline = time.monotonic() + harness.timeout
    while sum(map(len, shares)) < n and time.monotonic() < deadline:
        for share, (c, sub) in zip(shares, subs, strict=True):
            d = c.receive(sub, 0.02)
            if d is not None:
                share.append(d)
    return shares
