"""Acknowledgement patterns as a property: any ACKs and NACKs on two subscriptions of one connection, judged
by the model.

One connection holds two subscriptions, on two queues, each in a mode drawn from the catalogue's ``ack``
domain (STOMP-ACK-AUTO); each receives what was sent to its queue; then any sequence of ACKs and NACKs
(where the target has NACK), each of any message of either subscription still held, and the connection
goes. A fresh consumer per queue
takes what is left, up to a barrier, and the executable model (:class:`QueueModel`) judges every
delivery and what is missing: an ACK in client mode covers its message and every earlier one *of its
subscription*, in client-individual mode its message only (a NACK likewise, and what it covers is the
broker's to redeliver, drop or dead-letter), and whatever no ACK or NACK covered comes back.

A message that should have come back and did not was taken by an ACK that should not have covered it:
charged to STOMP-ACK-CLIENT-PER-SUBSCRIPTION when the other subscription sent a client-mode (cumulative)
ACK, else to STOMP-ACK-CLIENT-INDIVIDUAL (STOMP-NACK-INDIVIDUAL after a NACK) when its own
client-individual subscription settled any, else to STOMP-ACK-CLIENT-CUMULATIVE when its own client-mode
subscription sent an ACK (which covered a later message). With no ACK or NACK it is plain loss
(STOMP-ACK-UNACKED-NOT-CONSUMED).
Redelivery marks are not judged here (test_nack.py and the lifecycle matrix do). Whether a client-mode NACK
covers earlier messages is not judged either: what it covers may come back, so nothing here could tell.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ackspec.adapters.base import AckMode, Capability, Client, Delivery
from ackspec.conformance.cited import req
from ackspec.conformance.config import hypothesis_seed, hypothesis_settings
from ackspec.conformance.harness import Harness
from ackspec.conformance.markers import requirement
from ackspec.conformance.model import ABORTED_ACK_LOST, DUPLICATE_AFTER_ACK, RETURNED_LOST, QueueModel
from ackspec.conformance.strategies import drawn

SUBSCRIPTIONS = ("a", "b")
MAX_SENT = 5

class _Subscription:
    """One subscription of the connection under test, with its queue, deliveries and model."""

    def __init__(self, harness: Harness, client: Client, name: str, ack: AckMode, sent: int) -> None:
        self.mode, self.queue = ack, harness.queue(name)
        self.sub = client.subscribe(self.queue, ack=ack)
        self.model = QueueModel(redelivered_flag=False, delivery_count=False)
        self.model.subscribed(self.sub, ack)
        self.model.sent(harness.send_seq(client, self.queue, range(sent), producer=f"p-{name}"))
        self.got: list[Delivery] = []
        self.acked = self.nacked = False

    def receive(self, harness: Harness, client: Client, sent: int, requirement: str) -> None:
        """The ``sent`` messages of the subscription, or a violation of ``requirement``."""
        self.got = harness.expect_n(client, self.sub, sent, requirement, f"messages on {self.queue}")
        for d in self.got:
            self.model.delivered(self.sub, d.seq, d.body, d.redelivered, d.delivery_count)

    def settle(self, harness: Harness, client: Client, index: int, nack: bool) -> None:
        """ACK (or NACK) the ``index``-th delivery if the model says it is still held (never one twice)."""
        if self.mode is AckMode.AUTO or index >= len(self.got) or self.got[index].seq not in self.model.held(self.sub):
            return
        delivery, seq = self.got[index], self.got[index].seq or 0
        if nack:
            client.nack(delivery)
            held = self.model.held(self.sub)
            self.model.nacked(self.sub, seq)
            harness.expect_dropped(self.queue, [s for s in held if s not in self.model.held(self.sub)],
                                   reason="NACKed: the broker may redeliver, drop or dead-letter it")
            self.nacked = True
        else:
            client.ack(delivery)
            self.model.acked(self.sub, seq)
            self.acked = True

    def judge_left(self, harness: Harness, other: _Subscription) -> None:
        self.model.closed(self.sub)
        self.model.rules[RETURNED_LOST] = self._rule_of_a_loss(other)
        self.model.subscribed("drain", AckMode.AUTO)
        for d in harness.drain(self.queue, returning=len(self.model.owed())):
            self.model.delivered("drain", d.seq, d.body, d.redelivered, d.delivery_count)
        self.model.final()

    def _rule_of_a_loss(self, other: _Subscription) -> str:
        """Which rule a message of this subscription that never came back breaks: the ACK that took it."""
        if other.mode is AckMode.CLIENT and other.acked:
            return req.STOMP_ACK_CLIENT_PER_SUBSCRIPTION  # the other subscription's cumulative ACK reached it
        if self.mode is AckMode.CLIENT_INDIVIDUAL and (self.acked or self.nacked):
            return req.STOMP_NACK_INDIVIDUAL if self.nacked else req.STOMP_ACK_CLIENT_INDIVIDUAL
        if self.mode is AckMode.CLIENT and self.acked:
            return req.STOMP_ACK_CLIENT_CUMULATIVE  # an ACK covered a message after the one it named
        return RETURNED_LOST


def _pattern(harness: Harness, modes: tuple[str, str], sent: tuple[int, int],
             steps: list[tuple[int, int, bool]]) -> None:
    client = harness.client("acking")
    subs = [_Subscription(harness, client, name, AckMode(mode), n)
            for name, mode, n in zip(SUBSCRIPTIONS, modes, sent, strict=True)]
    for s, n in zip(subs, sent, strict=True):
        s.receive(harness, client, n, req.JMS_6_2_UNACKED_RETAINED)
    nacks = harness.has(Capability.NACK)
    for which, index, nack in steps:
        subs[which].settle(harness, client, index, nack and nacks)
    client.disconnect()
    subs[0].judge_left(harness, subs[1])
    subs[1].judge_left(harness, subs[0])


@requirement("STOMP-ACK-CLIENT-PER-SUBSCRIPTION", "STOMP-ACK-CLIENT-INDIVIDUAL", "STOMP-ACK-CLIENT-CUMULATIVE",
             "STOMP-NACK-INDIVIDUAL", "STOMP-ACK-UNACKED-NOT-CONSUMED", "JMS-6.2-UNACKED-RETAINED",
             "JMS-6.2.11-NO-DUPLICATE-AFTER-ACK")
def test_any_acknowledgement_pattern_leaves_what_the_model_says(harness: Harness) -> None:
    """Over the catalogue's ack modes, 1..5 messages per subscription and any ACK and NACK sequence."""
    mode = drawn("STOMP-ACK-AUTO", "ack")

    @hypothesis_settings()
    @hypothesis_seed()
    @given(modes=st.tuples(mode, mode), sent=st.tuples(st.integers(1, MAX_SENT), st.integers(1, MAX_SENT)),
           steps=st.lists(st.tuples(st.integers(0, 1), st.integers(0, MAX_SENT - 1), st.booleans()), max_size=6))
    @harness.example
    def pattern(modes: tuple[str, str], sent: tuple[int, int], steps: list[tuple[int, int, bool]]) -> None:
        _pattern(harness, modes, sent, steps)

    pattern()


def _transaction_of_acks(harness: Harness, sent: int, acked: frozenset[int], commit: bool) -> None:
    """``sent`` messages received (client-individual), the ``acked`` ones ACKed inside one transaction that
    then commits or aborts; the connection goes and a fresh consumer finds the rest."""
    client = harness.client("tx-acking")
    amqp = harness.adapter.protocol == "amqp"  # there the rule is AMQP's transactional retirement
    at_commit, at_abort = ((req.AMQP_4_4_2_RETIREMENT_ON_DISCHARGE, req.AMQP_4_4_2_RETIREMENT_ON_DISCHARGE) if amqp
                           else (req.STOMP_ACK_IN_TRANSACTION, ABORTED_ACK_LOST))
    s = _Subscription(harness, client, "tx", AckMode.CLIENT_INDIVIDUAL, sent)
    s.receive(harness, client, sent, at_commit)  # a message that never came: lost, as the model charges a loss
    tx = client.begin("acks")
    chosen = [d for d in s.got if d.seq in acked]
    for d in chosen:
        client.ack(d, transaction=tx)
    if commit:
        client.commit(tx)
        for d in chosen:
            s.model.acked(s.sub, d.seq or 0)
    else:
        client.abort(tx)
        s.model.tx_acks_aborted(s.sub, [d.seq or 0 for d in chosen], rule=at_abort)
    client.disconnect()
    s.model.closed(s.sub)
    s.model.rules[RETURNED_LOST] = at_commit if commit else at_abort
    s.model.rules[DUPLICATE_AFTER_ACK] = at_commit
    s.model.subscribed("drain", AckMode.AUTO)
    for d in harness.drain(s.queue, returning=len(s.model.owed())):
        s.model.delivered("drain", d.seq, d.body, d.redelivered, d.delivery_count)
    s.model.final()


@requirement("STOMP-ACK-IN-TRANSACTION", "STOMP-TX-ABORT-ACKS-UNDONE", "AMQP-4.4.2-RETIREMENT-ON-DISCHARGE")
def test_acks_in_a_transaction_take_effect_at_its_end(harness: Harness) -> None:
    """Any subset of 1..5 received messages ACKed in a transaction: after COMMIT exactly those are consumed
    (a committed one back, or an unACKed one lost: STOMP-ACK-IN-TRANSACTION); after ABORT none is, so all
    come back once the connection ends (STOMP-TX-ABORT-ACKS-UNDONE). Over AMQP the ACKs are accepted
    outcomes with a transactional state, and both halves are AMQP-4.4.2-RETIREMENT-ON-DISCHARGE."""

    @hypothesis_settings()
    @hypothesis_seed()
    @given(data=st.data(), sent=st.integers(1, MAX_SENT), commit=st.booleans())
    @harness.example
    def transaction(data: st.DataObject, sent: int, commit: bool) -> None:
        acked = data.draw(st.frozensets(st.integers(0, sent - 1), min_size=1), label="acked")
        _transaction_of_acks(harness, sent, acked, commit)

    transaction()
