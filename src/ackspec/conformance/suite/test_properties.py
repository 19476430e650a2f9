"""Property-based: random workloads checked against the executable model (conformance/model.py).

:class:`QueueMachine` is a hypothesis ``RuleBasedStateMachine``: one producer and
a succession of consumers (one live at a time, so every receive the model
promises is sure to come) send, receive, ACK, NACK, run transactions, and
disconnect cleanly or abruptly, in any order hypothesis finds. Every delivery
is checked by :class:`~ackspec.conformance.model.QueueModel`; at the end a
barrier-terminated drain must find exactly what the model still owes. A
failure shrinks to the minimal sequence of steps, printed with the seed and the
``@reproduce_failure`` blob (the run's seed is in results.json).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.errors import Flaky
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test

from ackspec.adapters.base import AckMode, Capability, Client, Delivery, Indeterminate
from ackspec.conformance.cited import req
from ackspec.conformance.config import hypothesis_seed, hypothesis_settings
from ackspec.conformance.harness import LOSS_CLEANUP_GRACE, SENTINEL_HEADER, Harness
from ackspec.conformance.model import QueueModel
from ackspec.conformance.strategies import drawn
from ackspec.conformance.verdicts import RequirementViolation

requirement = pytest.mark.requirement



DRAIN_ROUNDS = 4
"""Sentinel rounds the final drain waits through while the model still owes messages."""


class QueueMachine(RuleBasedStateMachine):
    """Operations on one queue; the model judges every observation."""

    harness: Harness  # set by the test before the machine runs
    violations: ClassVar[list[RequirementViolation]] = []
    """Every violation any example raised, in order: kept in case hypothesis cannot replay it."""

    def __init__(self) -> None:
        super().__init__()
        h = self.harness
        self.q = h.queue("sm")
        self.model = QueueModel(redelivered_flag=h.has(Capability.REDELIVERED_FLAG),
                                delivery_count=h.has(Capability.DELIVERY_COUNT))
        self.producer = h.client("producer")
        self.seq = itertools.count()
        self.consumer: Client | None = None
        self.sub: str | None = None
        self.prefetch: int | None = None
        self.ack_mode = AckMode.AUTO
        self.tx_ids = itertools.count(1)
        self.tx_acks = h.has(Capability.TRANSACTIONAL_ACK)
        self.txs = h.has(Capability.TRANSACTIONS)
        self.nacks = h.has(Capability.NACK)
        self.deliveries: dict[int, Delivery] = {}  # latest delivery of each seq: what an ACK names

    def _ops(self) -> tuple[int, ...]:
        return tuple(self.harness.last_ops(2))

    def _judge(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call a model oracle, remembering a violation before it propagates."""
        try:
            return fn(*args)
        except RequirementViolation as violation:
            type(self).violations.append(violation)
            raise

    def _violation(self, requirement: str, message: str, ops: tuple[int, ...] = ()) -> RequirementViolation:
        violation = RequirementViolation(requirement, message, ops)
        type(self).violations.append(violation)
        return violation

    def _receive_one(self) -> None:
        assert self.consumer is not None and self.sub is not None
        d = self.consumer.receive(self.sub)
        if d is None:
            raise self._violation(req.JMS_9_1_QUEUE_PERSISTENT_RELIABLE,
                                  "a message the model says is deliverable did not arrive", self._ops())
        self._judge(self.model.delivered, self.sub, d.seq, d.body, d.redelivered, d.delivery_count, self._ops())
        if d.seq is not None:
            self.deliveries[d.seq] = d

    # -- producer ---------------------------------------------------------------------

    @rule(n=st.integers(1, 4))
    def send(self, n: int) -> None:
        seqs = [next(self.seq) for _ in range(n)]
        for s in seqs:
            self.producer.send(self.q, f"m{s}".encode(), seq=s, producer="p1", persistent=True)
        self.model.sent(seqs)

    @precondition(lambda self: self.txs)
    @rule(n=st.integers(1, 3), commit=st.booleans())
    def send_in_transaction(self, n: int, commit: bool) -> None:
        seqs = [next(self.seq) for _ in range(n)]
        tx = self.producer.begin(f"tx{next(self.tx_ids)}")
        for s in seqs:
            self.producer.send(self.q, f"m{s}".encode(), seq=s, producer="p1", persistent=True, transaction=tx,
                               confirm=False)
        self.model.sent(seqs, transaction=True)
        if commit:
            self.producer.commit(tx)
            self.model.committed(seqs)
        else:
            self.producer.abort(tx)
            self.model.aborted(seqs)

    # -- consumer lifecycle -------------------------------------------------------------

    @precondition(lambda self: self.consumer is None)
    @rule(ack=drawn("STOMP-ACK-AUTO", "ack").map(AckMode),
          prefetch=st.none() | drawn("STOMP-SUBSCRIBE-PREFETCH", "prefetch"))
    def subscribe(self, ack: AckMode, prefetch: int | None) -> None:
        self.consumer = self.harness.client()
        self.prefetch = prefetch if self.harness.has(Capability.PREFETCH) else None
        self.sub = self.consumer.subscribe(self.q, ack=ack, prefetch=self.prefetch)
        self.ack_mode = ack
        self.model.subscribed(self.sub, ack)

    @precondition(lambda self: self.consumer is not None)
    @rule(n=st.integers(1, 4))
    def receive(self, n: int) -> None:
        assert self.sub is not None
        for _ in range(min(n, self.model.available(self.sub, self.prefetch))):
            self._receive_one()

    # Preconditions depend only on the machine's own steps, never on what the broker delivered: a faulty
    # broker must not change which rules exist, or hypothesis cannot replay and shrink its failure.
    @precondition(lambda self: self.consumer is not None)
    @rule(pick=st.integers(0, 10))
    def ack(self, pick: int) -> None:
        self._settle(pick, nack=False)

    @precondition(lambda self: self.nacks and self.consumer is not None)
    @rule(pick=st.integers(0, 10))
    def nack(self, pick: int) -> None:
        self._settle(pick, nack=True)

    def _settle(self, pick: int, *, nack: bool) -> None:
        assert self.consumer is not None and self.sub is not None
        held = self.model.held(self.sub)
        if not held:
            return
        seq = held[pick % len(held)]
        delivery = self.deliveries.get(seq)
        if delivery is None:
            return
        if nack:
            self.consumer.nack(delivery)
            self.model.nacked(self.sub, seq)
        else:
            self.consumer.ack(delivery)
            self.model.acked(self.sub, seq)

    @precondition(lambda self: self.tx_acks and self.consumer is not None)
    @rule(commit=st.booleans())
    def ack_all_in_transaction(self, commit: bool) -> None:
        assert self.consumer is not None and self.sub is not None
        held = self.model.held(self.sub)
        if not held:
            return
        tx = self.consumer.begin(f"tx{next(self.tx_ids)}")
        for seq in held:
            self.consumer.ack(self.deliveries[seq], transaction=tx)
        if commit:
            self.consumer.commit(tx)
            for seq in held:
                self.model.acked(self.sub, seq)
        else:
            self.consumer.abort(tx)
            self.model.tx_acks_aborted(self.sub, held)
            self._end_consumer(crash=False)  # make the undone ACKs observable: they must come back

    @precondition(lambda self: self.consumer is not None)
    @rule(crash=st.booleans())
    def go_away(self, crash: bool) -> None:
        # An auto-ack consumer only leaves cleanly: after an abrupt close the broker may still hand it
        # messages sent later, until it notices, and those are legitimately lost (STOMP-ACK-AUTO).
        self._end_consumer(crash=crash and self.ack_mode is not AckMode.AUTO)

    def _end_consumer(self, *, crash: bool) -> None:
        assert self.consumer is not None and self.sub is not None
        if crash:
            self.consumer.crash()
        else:
            # every ACK was receipted; a DISCONNECT receipt lost with the connection ends it all the same
            with contextlib.suppress(Indeterminate):
                self.consumer.disconnect()
        self.model.closed(self.sub)
        self.consumer, self.sub = None, None

    def teardown(self) -> None:
        if self.consumer is not None and self.sub is not None:
            self._end_consumer(crash=False)
        # drain: everything the model still owes must come, and nothing else. A consumer that went away
        # gives its unacknowledged messages back when the broker has noticed, which may be after a first
        # sentinel was queued (Artemis handles a dropped connection asynchronously), and redelivered
        # messages may come in any order: while something is owed, another sentinel round follows, up to
        # DRAIN_ROUNDS; what is still owed after them is lost.
        drain = self.harness.client("drain")
        sub = drain.subscribe(self.q, ack=AckMode.AUTO)
        self.model.subscribed(sub, AckMode.AUTO)
        for _ in range(DRAIN_ROUNDS):
            token = self.harness.sentinel(self.producer, self.q)
            while True:
                d = drain.receive(sub)
                if d is None:
                    raise self._violation(req.JMS_9_1_QUEUE_PERSISTENT_RELIABLE, "drain: the sentinel never arrived")
                if d.headers.get(SENTINEL_HEADER) == token:
                    break
                if d.headers.get(SENTINEL_HEADER) is None:
                    self._judge(self.model.delivered, sub, d.seq, d.body, d.redelivered, d.delivery_count,
                                self._ops())
            if not self.model.owed():
                break
        for _ in range(len(self.model.owed())):  # a dead consumer's messages may come back late: the after-loss grace
            d = drain.receive(sub, self.harness.timeout * LOSS_CLEANUP_GRACE)
            if d is None:
                break
            if d.headers.get(SENTINEL_HEADER) is None:
                self._judge(self.model.delivered, sub, d.seq, d.body, d.redelivered, d.delivery_count, self._ops())
        self._judge(self.model.final, self._ops())
        gone = self.model.undecided()
        if gone:  # the model allows their absence: the history checks must not count them lost either
            self.harness.expect_dropped(self.q, gone, producer="p1", reason="possibly consumed on delivery by an "
                                        "auto-ack consumer that closed before the test received them")
        for client in (drain, self.producer):  # clean-up: the verdict is already decided
            with contextlib.suppress(Indeterminate):
                client.disconnect()


@requirement(
    "JMS-9.1-QUEUE-PERSISTENT-RELIABLE", "STOMP-ACK-UNACKED-NOT-CONSUMED", "JMS-6.2.11-NO-DUPLICATE-AFTER-ACK",
    "STOMP-ACK-CLIENT-CUMULATIVE", "STOMP-ACK-AUTO", "JMS-4.1.2-QUEUE-ONE-CONSUMER",
    "JMS-6.2.12-NO-DUPLICATE-PRODUCTION", "JMS-6.2.9.1-PER-PRODUCER-ORDER", "STOMP-TX-SEND-INVISIBLE",
    "STOMP-TX-ABORT-DISCARDS-SENDS", "STOMP-TX-COMMIT-ATOMIC", "STOMP-SEND-BODY-INTACT", "STOMP-TX-ABORT-ACKS-UNDONE",
)
def test_queue_state_machine(harness: Harness) -> None:
    """Random operation sequences on a queue obey the model of the ack/nack/transaction rules."""
    harness.require(Capability.QUEUES, Capability.ACK_CLIENT, Capability.ACK_CLIENT_INDIVIDUAL, Capability.RECEIPTS)
    QueueMachine.harness = harness
    QueueMachine.violations = []
    try:
        run_state_machine_as_test(hypothesis_seed()(QueueMachine), settings=hypothesis_settings(stateful_steps=12))
    except Flaky as exc:
        # The target did not behave the same when hypothesis replayed the failing steps (a broker that
        # loses or duplicates now and then). The violation it first showed is still a failure of that
        # requirement: report it with its operations (the history has every step), not as a suite error.
        if not QueueMachine.violations:
            raise
        first = QueueMachine.violations[0]
        raise RequirementViolation(first.requirement, f"{str(first).partition(': ')[2]} (not reproducible on "
                                   f"replay, so not shrunk: {type(exc).__name__}; see the history)",
                                   first.operations) from exc


@requirement("STOMP-TX-COMMIT-ATOMIC", "STOMP-TX-ABORT-DISCARDS-SENDS", "JMS-6.2.9.1-PER-PRODUCER-ORDER")
def test_transaction_boundaries(harness: Harness) -> None:
    """Random batches, each committed or aborted: exactly the committed messages arrive, in order."""
    harness.require(Capability.TRANSACTIONS, Capability.QUEUES)
    producer = harness.client("producer")
    consumer = harness.client("consumer")
    ids = itertools.count(1)

    @hypothesis_settings(examples=10)
    @hypothesis_seed()
    @given(batches=st.lists(st.tuples(st.integers(1, 4), st.booleans()), min_size=1, max_size=5))
    @harness.example
    def batches_commit_or_abort(batches: list[tuple[int, bool]]) -> None:
        q = harness.queue("tx")
        sub = consumer.subscribe(q, ack=AckMode.AUTO)
        seq = itertools.count()
        model = QueueModel(redelivered_flag=False, delivery_count=False)
        model.subscribed(sub, AckMode.AUTO)
        for size, commit in batches:
            tx = producer.begin(f"b{next(ids)}")
            seqs = [next(seq) for _ in range(size)]
            for s in seqs:
                producer.send(q, f"m{s}".encode(), seq=s, producer="p1", transaction=tx, confirm=False)
            model.sent(seqs, transaction=True)
            if commit:
                producer.commit(tx)
                model.committed(seqs)
            else:
                producer.abort(tx)
                model.aborted(seqs)
        for d in harness.barrier(producer, q, consumer, sub):
            model.delivered(sub, d.seq, d.body, d.redelivered, d.delivery_count)
        model.final()
        consumer.unsubscribe(sub)

    batches_commit_or_abort()
