"""Acknowledgement patterns as a property: any ACKs, on two subscriptions of one connection, judged by the model.

One connection holds two subscriptions, on two queues, each in a mode drawn from the catalogue's ``ack``
domain (STOMP-ACK-AUTO); each receives what was sent to its queue; then any sequence of ACKs, each of
any message of either subscription still held, and the connection goes. A fresh consumer per queue
takes what is left, up to a barrier, and the executable model (:class:`QueueModel`) judges every
delivery and what is missing: an ACK in client mode covers its message and every earlier one *of its
subscription*, in client-individual mode its message only, and whatever no ACK covered comes back.

A message that should have come back and did not was taken by an ACK that should not have covered it
once any ACK was sent: charged to STOMP-ACK-CLIENT-INDIVIDUAL in client-individual mode and to
STOMP-ACK-CLIENT-PER-SUBSCRIPTION in client mode (an ACK reaching across subscriptions, or beyond its
message). With no ACK at all it is plain loss (STOMP-ACK-UNACKED-NOT-CONSUMED, JMS-6.2-UNACKED-RETAINED).
Redelivery marks are not judged here (test_nack.py and the lifecycle matrix do).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ackspec.adapters.base import AckMode, Client, Delivery
from ackspec.conformance.config import hypothesis_seed, hypothesis_settings
from ackspec.conformance.harness import Harness
from ackspec.conformance.markers import requirement
from ackspec.conformance.model import RETURNED_LOST, QueueModel
from ackspec.conformance.strategies import drawn

SUBSCRIPTIONS = ("a", "b")
MAX_SENT = 5
RETURNED_BY_MODE = {AckMode.CLIENT: "STOMP-ACK-CLIENT-PER-SUBSCRIPTION",
                    AckMode.CLIENT_INDIVIDUAL: "STOMP-ACK-CLIENT-INDIVIDUAL"}


class _Subscription:
    """One subscription of the connection under test, with its queue, deliveries and model."""

    def __init__(self, harness: Harness, client: Client, name: str, ack: AckMode, sent: int) -> None:
        self.mode, self.queue = ack, harness.queue(name)
        self.sub = client.subscribe(self.queue, ack=ack)
        self.model = QueueModel(redelivered_flag=False, delivery_count=False)
        self.model.subscribed(self.sub, ack)
        self.model.sent(harness.send_seq(client, self.queue, range(sent), producer=f"p-{name}"))
        self.got: list[Delivery] = []

    def receive(self, harness: Harness, client: Client, sent: int) -> None:
        self.got = harness.expect_n(client, self.sub, sent, "JMS-6.2-UNACKED-RETAINED", f"messages on {self.queue}")
        for d in self.got:
            self.model.delivered(self.sub, d.seq, d.body, d.redelivered, d.delivery_count)

    def ack(self, client: Client, index: int) -> bool:
        """ACK the ``index``-th delivery if the model says it is still held (so never an ACK twice)."""
        if self.mode is AckMode.AUTO or index >= len(self.got) or self.got[index].seq not in self.model.held(self.sub):
            return False
        client.ack(self.got[index])
        self.model.acked(self.sub, self.got[index].seq or 0)
        return True

    def judge_left(self, harness: Harness, any_ack: bool) -> None:
        self.model.closed(self.sub)
        if any_ack and self.mode in RETURNED_BY_MODE:
            self.model.rules[RETURNED_LOST] = RETURNED_BY_MODE[self.mode]
        self.model.subscribed("drain", AckMode.AUTO)
        for d in harness.drain(self.queue):
            self.model.delivered("drain", d.seq, d.body, d.redelivered, d.delivery_count)
        self.model.final()


def _pattern(harness: Harness, modes: tuple[str, str], sent: tuple[int, int],
             acks: list[tuple[int, int]]) -> None:
    client = harness.client("acking")
    subs = [_Subscription(harness, client, name, AckMode(mode), n)
            for name, mode, n in zip(SUBSCRIPTIONS, modes, sent, strict=True)]
    for s, n in zip(subs, sent, strict=True):
        s.receive(harness, client, n)
    any_ack = False
    for which, index in acks:
        any_ack = subs[which].ack(client, index) or any_ack
    client.disconnect()
    for s in subs:
        s.judge_left(harness, any_ack)


@requirement("STOMP-ACK-CLIENT-PER-SUBSCRIPTION", "STOMP-ACK-CLIENT-INDIVIDUAL", "STOMP-ACK-CLIENT-CUMULATIVE",
             "STOMP-ACK-UNACKED-NOT-CONSUMED", "JMS-6.2-UNACKED-RETAINED", "JMS-6.2.11-NO-DUPLICATE-AFTER-ACK")
def test_any_acknowledgement_pattern_leaves_what_the_model_says(harness: Harness) -> None:
    """Over the catalogue's ack modes, 1..5 messages per subscription and any ACK sequence."""
    mode = drawn("STOMP-ACK-AUTO", "ack")

    @hypothesis_settings()
    @hypothesis_seed()
    @given(modes=st.tuples(mode, mode), sent=st.tuples(st.integers(1, MAX_SENT), st.integers(1, MAX_SENT)),
           acks=st.lists(st.tuples(st.integers(0, 1), st.integers(0, MAX_SENT - 1)), max_size=6))
    def pattern(modes: tuple[str, str], sent: tuple[int, int], acks: list[tuple[int, int]]) -> None:
        _pattern(harness, modes, sent, acks)

    pattern()
