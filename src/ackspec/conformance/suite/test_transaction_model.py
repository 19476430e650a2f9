"""Transactions as a stateful model: interleaved sends, acks, commits, rollbacks and crashes.

:class:`TransactionMachine` is a hypothesis ``RuleBasedStateMachine`` over two transacted sessions
(one connection each, as JMS maps a session onto STOMP and AMQP) and two queues. Session *i*
consumes queue *i* (client-individual, its acknowledgements in its current transaction) and sends to
either queue in its current transaction; a transaction begins with the session's first operation
after the previous one ended (JMS chained transactions). In any order hypothesis finds, sessions
send, receive, acknowledge, commit, roll back (ABORT, then the session closes so the messages it
consumed come back: JMS ``rollback`` recovers them), close with a transaction open, or die. A session is
one connection here (STOMP has no other session), so closing it is closing the transacted session
(JMS-6.2.15-CLOSE-ROLLS-BACK) and its connection (JMS-6.1.8-CLOSE-ROLLS-BACK) at once.

Every delivery is judged by :class:`~ackspec.conformance.model.QueueModel` (one per queue and
producing session, so order is per producer), with the model's rules named as the Jakarta
Messaging transaction rules state them. At the end a barrier-terminated drain of each queue must
find exactly what the model still owes. A failure shrinks to the minimal sequence of steps.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from hypothesis import strategies as st
from hypothesis.errors import Flaky
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from ackspec.adapters.base import AckMode, Capability, Client, Delivery, Indeterminate
from ackspec.conformance import model as rules
from ackspec.conformance.cited import req
from ackspec.conformance.config import hypothesis_seed, hypothesis_settings
from ackspec.conformance.harness import LOSS_CLEANUP_GRACE, SENTINEL_HEADER, Harness
from ackspec.conformance.model import QueueModel
from ackspec.conformance.verdicts import RequirementViolation

requirement = pytest.mark.requirement

SESSIONS = 2
"""Transacted sessions, and queues (session i consumes queue i)."""


def jms_rules() -> dict[str, str]:
    """The queue model's STOMP-worded rules, as the transaction rules of Jakarta Messaging state them (the
    running test's cited requirements)."""
    return {
        rules.TX_INVISIBLE: req.JMS_6_2_7_SENDS_INVISIBLE_UNTIL_COMMIT,
        rules.TX_COMMIT: req.JMS_6_2_7_COMMIT_ATOMIC,
        rules.ORDER: req.JMS_6_2_9_2_TRANSACTION_ORDER,
        rules.DUPLICATE_AFTER_ACK: req.JMS_6_2_10_SESSION_TRANSACTED,
        rules.REDELIVERED: req.JMS_3_4_7_REDELIVERED_SET,
        rules.LOST: req.JMS_6_2_7_COMMIT_ATOMIC,  # every message is sent in a transaction: owed because committed
    }

DRAIN_ROUNDS = 4
"""Sentinel rounds a final drain waits through while the model still owes messages of that queue."""


@dataclass
class _Session:
    client: Client
    sub: str
    tx: str | None = None
    sends: list[tuple[int, list[int]]] = field(default_factory=list)  # (queue index, seqs)
    acks: list[int] = field(default_factory=list)
    held: dict[int, Delivery] = field(default_factory=dict)  # received, not acknowledged by a commit


class TransactionMachine(RuleBasedStateMachine):
    """Two transacted sessions on two queues; the model judges every observation."""

    harness: Harness  # set by the test before the machine runs
    violations: ClassVar[list[RequirementViolation]] = []

    def __init__(self) -> None:
        super().__init__()
        h = self.harness
        self.queues = [h.queue(f"tx{i}") for i in range(SESSIONS)]
        self.models = {(q, p): QueueModel(redelivered_flag=h.has(Capability.REDELIVERED_FLAG),
                                          delivery_count=h.has(Capability.DELIVERY_COUNT), rules=jms_rules(),
                                          rollback_marks=True)
                       for q in range(SESSIONS) for p in range(SESSIONS)}
        self.sessions: list[_Session | None] = [None] * SESSIONS
        self.seq = itertools.count()
        self.names = itertools.count(1)
        self.crashes = h.has(Capability.ABRUPT_DISCONNECT)

    # -- bookkeeping ------------------------------------------------------------------

    def _queue_models(self, q: int) -> Iterator[QueueModel]:
        return (self.models[q, p] for p in range(SESSIONS))

    def _judge(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except RequirementViolation as violation:
            type(self).violations.append(violation)
            raise

    def _violation(self, requirement: str, message: str) -> RequirementViolation:
        violation = RequirementViolation(requirement, message, tuple(self.harness.last_ops(2)))
        type(self).violations.append(violation)
        return violation

    def _session(self, i: int) -> _Session:
        s = self.sessions[i]
        if s is None:
            client = self.harness.client(f"s{i}.{next(self.names)}")
            sub = client.subscribe(self.queues[i], ack=AckMode.CLIENT_INDIVIDUAL)
            for m in self._queue_models(i):
                m.subscribed(sub, AckMode.CLIENT_INDIVIDUAL)
            s = self.sessions[i] = _Session(client, sub)
        if s.tx is None:
            s.tx = s.client.begin(f"tx{next(self.names)}")
        return s

    def _delivered(self, q: int, sub: str, d: Delivery) -> None:
        producer = int(d.producer[1:]) if d.producer and d.producer[1:].isdigit() else -1
        if producer not in range(SESSIONS):
            raise self._violation(rules.HEADERS, f"delivery with unknown producer {d.producer!r}")
        self._judge(self.models[q, producer].delivered, sub, d.seq, d.body, d.redelivered, d.delivery_count,
                    tuple(self.harness.last_ops(2)))

    # -- rules ---------------------------------------------------------------------------

    @initialize(backlog=st.lists(st.integers(1, 3), min_size=SESSIONS, max_size=SESSIONS))
    def committed_backlog(self, backlog: list[int]) -> None:
        """Each session starts by committing a few messages to the other's queue: something to consume."""
        for i, n in enumerate(backlog):
            self.send_and_commit(i, (i + 1) % SESSIONS, n)

    @rule(i=st.integers(0, SESSIONS - 1), to=st.integers(0, SESSIONS - 1), n=st.integers(1, 3))
    def send(self, i: int, to: int, n: int) -> None:
        s = self._session(i)
        seqs = [next(self.seq) for _ in range(n)]
        for seq in seqs:
            s.client.send(self.queues[to], f"m{seq}".encode(), seq=seq, producer=f"s{i}", persistent=True,
                          transaction=s.tx, confirm=False)
        self.models[to, i].sent(seqs, transaction=True)
        s.sends.append((to, seqs))

    @rule(i=st.integers(0, SESSIONS - 1), to=st.integers(0, SESSIONS - 1), n=st.integers(1, 3))
    def send_and_commit(self, i: int, to: int, n: int) -> None:
        """A whole producing transaction in one step (what the other sessions consume and interleave with)."""
        self.send(i, to, n)
        self.commit(i)

    @rule(i=st.integers(0, SESSIONS - 1), n=st.integers(1, 4), acks=st.lists(st.booleans(), min_size=4, max_size=4),
          forward=st.booleans())
    def consume(self, i: int, n: int, acks: list[bool], forward: bool) -> None:
        """Receive up to ``n`` of what queue ``i`` surely has, acknowledging the chosen ones in the
        session's transaction (the others stay received and unacknowledged, consumed by the transaction);
        with ``forward``, each acknowledged one is also sent on to the other queue in the same
        transaction (consume-transform-produce: one commit both acknowledges and sends)."""
        s = self._session(i)
        ready = sum(m.available(s.sub) for m in self._queue_models(i))
        for take in acks[:min(n, ready)]:
            d = s.client.receive(s.sub)
            if d is None:  # what a dead session held may come back late (a broker cleans up asynchronously)
                d = s.client.receive(s.sub, self.harness.timeout * LOSS_CLEANUP_GRACE)
            if d is None:
                raise self._violation(req.JMS_6_2_7_COMMIT_ATOMIC,
                                      "a committed message the model says is deliverable did not arrive")
            self._delivered(i, s.sub, d)
            if d.seq is None:
                continue
            s.held[d.seq] = d
            if take:
                s.client.ack(d, transaction=s.tx)
                s.acks.append(d.seq)
                if forward:
                    self.send(i, (i + 1) % SESSIONS, 1)

    @rule(i=st.integers(0, SESSIONS - 1))
    def commit(self, i: int) -> None:
        s = self.sessions[i]
        if s is None or s.tx is None:
            return
        s.client.commit(s.tx)
        for to, seqs in s.sends:
            self.models[to, i].committed(seqs)
        for seq in s.acks:
            for m in self._queue_models(i):
                if seq in m.held(s.sub):
                    m.acked(s.sub, seq)
            s.held.pop(seq, None)
        s.tx, s.sends, s.acks = None, [], []

    @rule(i=st.integers(0, SESSIONS - 1))
    def rollback(self, i: int) -> None:
        s = self.sessions[i]
        if s is None or s.tx is None:
            return
        s.client.abort(s.tx)
        s.tx = None
        self._end(i, req.JMS_6_2_7_ROLLBACK_DISCARDS_SENDS, req.JMS_6_2_7_ROLLBACK_REDELIVERS, crash=False)

    @rule(i=st.integers(0, SESSIONS - 1), crash=st.booleans())
    def close(self, i: int, crash: bool) -> None:
        if self.sessions[i] is not None:
            self._end(i, req.JMS_6_1_8_CLOSE_ROLLS_BACK, req.JMS_6_1_8_CLOSE_ROLLS_BACK, crash=crash and self.crashes)

    def _end(self, i: int, sends_rule: str, receives_rule: str, *, crash: bool) -> None:
        """The session closes (or dies): its open transaction rolls back, what it held comes back."""
        s = self.sessions[i]
        assert s is not None
        if crash:
            s.client.crash()
        else:
            with contextlib.suppress(Indeterminate):  # a DISCONNECT receipt lost with the connection ends it too
                s.client.disconnect()
        for to, seqs in s.sends:
            self.models[to, i].aborted(seqs, rule=sends_rule)
        for m in self._queue_models(i):  # everything it received in the transaction, acknowledged or not
            m.tx_acks_aborted(s.sub, m.held(s.sub), rule=receives_rule)
            m.closed(s.sub)
        self.sessions[i] = None

    def teardown(self) -> None:
        for i, s in enumerate(self.sessions):
            if s is not None:
                self._end(i, req.JMS_6_1_8_CLOSE_ROLLS_BACK, req.JMS_6_1_8_CLOSE_ROLLS_BACK, crash=False)
        sentinels = self.harness.client("sentinels")
        for q in range(SESSIONS):
            self._drain(q, sentinels)
        for model in self.models.values():
            self._judge(model.final, tuple(self.harness.last_ops(1)))
        with contextlib.suppress(Indeterminate):
            sentinels.disconnect()

    def _drain(self, q: int, sentinels: Client) -> None:
        """Everything the model owes of queue ``q`` must come, and nothing else (see QueueMachine)."""
        drain = self.harness.client(f"drain{q}")
        sub = drain.subscribe(self.queues[q], ack=AckMode.AUTO)
        for m in self._queue_models(q):
            m.subscribed(sub, AckMode.AUTO)
        for _ in range(DRAIN_ROUNDS):
            token = self.harness.sentinel(sentinels, self.queues[q])
            while True:
                d = drain.receive(sub)
                if d is None:
                    raise self._violation(req.JMS_6_2_7_COMMIT_ATOMIC,
                                          f"drain of queue {q}: the sentinel never arrived")
                if d.headers.get(SENTINEL_HEADER) == token:
                    break
                if d.headers.get(SENTINEL_HEADER) is None:
                    self._delivered(q, sub, d)
            if not any(m.owed() for m in self._queue_models(q)):
                break
        self._late(q, drain, sub)
        with contextlib.suppress(Indeterminate):
            drain.disconnect()

    def _late(self, q: int, drain: Client, sub: str) -> None:
        """What a dead session held may come back after the sentinels (a broker cleans up a dropped
        connection asynchronously): what is still owed gets the harness's after-loss grace before the
        model calls it lost, as :meth:`Harness.expect_n_after_loss` does."""
        owed = sum(len(m.owed()) for m in self._queue_models(q))
        for _ in range(owed):
            d = drain.receive(sub, self.harness.timeout * LOSS_CLEANUP_GRACE)
            if d is None:
                return
            if d.headers.get(SENTINEL_HEADER) is None:
                self._delivered(q, sub, d)


@requirement("JMS-6.2.7-COMMIT-ATOMIC", "JMS-6.2.7-SENDS-INVISIBLE-UNTIL-COMMIT", "JMS-6.2.7-ROLLBACK-DISCARDS-SENDS",
             "JMS-6.2.7-ROLLBACK-REDELIVERS", "JMS-6.2.9.2-TRANSACTION-ORDER", "JMS-6.2.10-SESSION-TRANSACTED",
             "JMS-6.2.10-ROLLBACK-INCREMENTS-COUNT", "JMS-6.1.8-CLOSE-ROLLS-BACK", "JMS-6.2.15-CLOSE-ROLLS-BACK",
             "JMS-3.4.7-REDELIVERED-SET")
def test_transactions_state_machine(harness: Harness) -> None:
    """Random interleavings of transacted sends, receives, acks, commits, rollbacks and crashes."""
    harness.require(Capability.QUEUES, Capability.ACK_CLIENT_INDIVIDUAL, Capability.RECEIPTS)
    TransactionMachine.harness = harness
    TransactionMachine.violations = []
    try:
        run_state_machine_as_test(hypothesis_seed()(TransactionMachine),
                                  settings=hypothesis_settings(examples=16, stateful_steps=20))
    except Flaky as exc:
        # the target did not behave the same on replay: its first violation is still a failure of that rule
        if not TransactionMachine.violations:
            raise
        first = TransactionMachine.violations[0]
        raise RequirementViolation(first.requirement, f"{str(first).partition(': ')[2]} (not reproducible on "
                                   f"replay, so not shrunk: {type(exc).__name__}; see the history)",
                                   first.operations) from exc
