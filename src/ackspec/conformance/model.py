"""An executable model of the delivery rules of one queue, used as the oracle of property tests.

The model is fed what a test *did* (sends, commits, acks, nacks, disconnects) and
what it *saw* (each delivery) and raises :class:`RequirementViolation` naming
the rule the broker broke. It does not predict a single correct run: where the
rules leave freedom (which message comes next after a redelivery, what a NACK
does, whether a message buffered in a crashed auto-ack client was consumed), it
keeps the set of allowed outcomes and checks membership.

Message states::

    pending   sent in an open transaction: must not be delivered (STOMP-TX-SEND-INVISIBLE)
    void      sent in an aborted transaction: never delivered (STOMP-TX-ABORT-DISCARDS-SENDS)
    ready     deliverable; must eventually be delivered (once the consumers are gone)
    held      delivered on a client-ack subscription, not yet acknowledged
    consumed  acknowledged (or delivered in auto mode): never delivered again
    maybe     the rules allow either: NACKed (UNDEF), or possibly taken by an auto-ack
              client that went away; may be delivered at most once more, need not be

Per-producer order is checked on first deliveries only; a message that may have
been delivered before (returned by a disconnect, NACKed, buffered in a client
that went away) may overtake (JMS-6.2.9.2-REDELIVERY-MAY-REORDER).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from ackspec.adapters.base import AckMode
from ackspec.conformance.verdicts import RequirementViolation

LOST = "JMS-9.1-QUEUE-PERSISTENT-RELIABLE"
RETURNED_LOST = "STOMP-ACK-UNACKED-NOT-CONSUMED"
ABORTED_ACK_LOST = "STOMP-TX-ABORT-ACKS-UNDONE"
DUPLICATE_AFTER_ACK = "JMS-6.2.11-NO-DUPLICATE-AFTER-ACK"
DUPLICATE_AFTER_CUMULATIVE_ACK = "STOMP-ACK-CLIENT-CUMULATIVE"
DUPLICATE_AFTER_AUTO = "STOMP-ACK-AUTO"
DUPLICATE_WHILE_HELD = "JMS-4.1.2-QUEUE-ONE-CONSUMER"
DUPLICATE_PRODUCTION = "JMS-6.2.12-NO-DUPLICATE-PRODUCTION"
ORDER = "JMS-6.2.9.1-PER-PRODUCER-ORDER"
TX_INVISIBLE = "STOMP-TX-SEND-INVISIBLE"
TX_ABORT = "STOMP-TX-ABORT-DISCARDS-SENDS"
TX_COMMIT = "STOMP-TX-COMMIT-ATOMIC"
REDELIVERED = "STOMP-REDELIVERED-HEADER"
DELIVERY_COUNT = "STOMP-DELIVERY-COUNT-HEADER"
ROLLBACK_COUNT = "JMS-6.2.10-ROLLBACK-INCREMENTS-COUNT"
HEADERS = "STOMP-SEND-HEADERS-PASSED"
BODY = "STOMP-SEND-BODY-INTACT"


class State(StrEnum):
    PENDING = "pending"
    VOID = "void"
    READY = "ready"
    HELD = "held"
    CONSUMED = "consumed"
    MAYBE = "maybe"


@dataclass
class _Message:
    seq: int
    body: bytes
    state: State = State.READY
    holder: str | None = None  # subscription holding it (HELD)
    observed: int = 0  # deliveries we saw
    possibly_delivered: bool = False  # may have been delivered without us seeing it
    last_count: int | None = None
    consumed_by: str = ""  # requirement that made it consumed
    returned_by: str = LOST  # requirement that makes it required again
    voided_by: str = TX_ABORT  # requirement that keeps it from ever being delivered (VOID)


@dataclass
class _Sub:
    ack: AckMode
    held: list[int] = field(default_factory=list)  # delivery order
    live: bool = True


class QueueModel:
    """The rules for one queue with one producer (messages identified by seq)."""

    def __init__(self, *, redelivered_flag: bool = True, delivery_count: bool = True,
                 rules: Mapping[str, str] | None = None, rollback_marks: bool = False) -> None:
        """``rules`` renames the requirements the model charges (e.g. the STOMP transaction rules to their
        JMS statements when a test checks those): ``{model constant: requirement ID}``. With
        ``rollback_marks`` a redelivery a rolled-back transaction caused that lacks its redelivered flag
        or count increment is charged to the rollback's rule (and JMS-6.2.10-ROLLBACK-INCREMENTS-COUNT),
        not to the general marking rules."""
        self.check_flag = redelivered_flag
        self.check_count = delivery_count
        self.rules = dict(rules or {})
        self.rollback_marks = rollback_marks
        self.messages: dict[int, _Message] = {}
        self.subs: dict[str, _Sub] = {}
        self.last_first_delivery: int | None = None

    # -- what the test did --------------------------------------------------------------

    def sent(self, seqs: Iterable[int], body: bytes | None = None, *, transaction: bool = False) -> None:
        for seq in seqs:
            self.messages[seq] = _Message(seq, body if body is not None else f"m{seq}".encode(),
                                          State.PENDING if transaction else State.READY)

    def committed(self, seqs: Iterable[int]) -> None:
        for seq in seqs:
            if self.messages[seq].state is State.PENDING:
                self.messages[seq].state = State.READY
                self.messages[seq].returned_by = TX_COMMIT

    def aborted(self, seqs: Iterable[int], *, rule: str = TX_ABORT) -> None:
        """The transaction of these sends ended without a commit (``rule``: what makes them void: an
        ABORT, or a connection that closed or died with the transaction open)."""
        for seq in seqs:
            if self.messages[seq].state is State.PENDING:
                self.messages[seq].state = State.VOID
                self.messages[seq].voided_by = rule

    def subscribed(self, sub: str, ack: AckMode) -> None:
        self.subs[sub] = _Sub(ack)

    def _settle(self, sub: str, seq: int) -> list[int]:
        """The held messages an ACK or NACK of ``seq`` on ``sub`` covers (cumulative in client mode; none when
        ``seq`` is not held), which ``sub`` holds no more."""
        s = self.subs[sub]
        if seq not in s.held:
            return []
        covered = s.held[: s.held.index(seq) + 1] if s.ack is AckMode.CLIENT else [seq]
        for other in covered:
            s.held.remove(other)
        return covered

    def acked(self, sub: str, seq: int) -> None:
        """An ACK (confirmed) of ``seq`` on ``sub``: cumulative in client mode."""
        for other in self._settle(sub, seq):
            m = self.messages[other]
            m.state, m.holder = State.CONSUMED, None
            m.consumed_by = DUPLICATE_AFTER_ACK if other == seq else DUPLICATE_AFTER_CUMULATIVE_ACK

    def nacked(self, sub: str, seq: int) -> None:
        """A NACK: what follows is the broker's choice (STOMP-NACK-NOT-CONSUMED is UNDEF)."""
        for other in self._settle(sub, seq):
            m = self.messages[other]
            m.state, m.holder = State.MAYBE, None

    def tx_acks_aborted(self, sub: str, seqs: Iterable[int], *, rule: str = ABORTED_ACK_LOST) -> None:
        """ACKs in a transaction that ended without a commit: the messages stay held (``rule``, by default
        STOMP-TX-ABORT-ACKS-UNDONE, charges a message that then never comes back, is not marked
        redelivered or does not count the redelivery)."""
        for seq in seqs:
            self.messages[seq].returned_by = rule

    def closed(self, sub: str) -> None:
        """The subscription ended (disconnect, crash or unsubscribe): unacked messages come back."""
        s = self.subs[sub]
        s.live = False
        for seq in s.held:
            m = self.messages[seq]
            m.state, m.holder = State.READY, None
            if m.returned_by == LOST:
                m.returned_by = RETURNED_LOST
        s.held.clear()
        # whatever was ready while this consumer lived may sit unseen in its buffer
        for m in self.messages.values():
            if m.state is State.READY and s.ack is AckMode.AUTO:
                m.state = State.MAYBE  # taken into the auto-ack client's buffer (consumed) or still queued
            if m.state in (State.READY, State.MAYBE) and m.observed == 0:
                m.possibly_delivered = True

    # -- what the test saw -----------------------------------------------------------------

    def available(self, sub: str, prefetch: int | None = None) -> int:
        """How many deliveries ``sub`` is sure to get now (so receiving them never times out)."""
        ready = sum(1 for m in self.messages.values() if m.state is State.READY)
        s = self.subs[sub]
        if prefetch is not None and s.ack is not AckMode.AUTO:
            return max(0, min(ready, prefetch - len(s.held)))
        return ready

    def delivered(self, sub: str, seq: int | None, body: bytes, redelivered: bool | None,
                  count: int | None, ops: tuple[int, ...] = ()) -> None:
        if seq is None or seq not in self.messages:
            raise RequirementViolation(self._rule(HEADERS), f"delivery with unknown ackspec-seq {seq!r}", ops)
        m = self.messages[seq]
        s = self.subs[sub]
        before = m.observed > 0 or m.possibly_delivered or m.state is State.MAYBE
        match m.state:
            case State.PENDING:
                raise RequirementViolation(self._rule(TX_INVISIBLE), f"seq {seq} delivered before its COMMIT", ops)
            case State.VOID:
                raise RequirementViolation(self._rule(m.voided_by),
                                           f"seq {seq} delivered although its transaction was rolled back", ops)
            case State.CONSUMED:
                raise RequirementViolation(self._rule(m.consumed_by or DUPLICATE_AFTER_ACK),
                                           f"seq {seq} delivered again after it was consumed", ops)
            case State.HELD:
                req = DUPLICATE_WHILE_HELD if redelivered else DUPLICATE_PRODUCTION
                raise RequirementViolation(self._rule(req), f"seq {seq} delivered again while still held by {m.holder}",
                                           ops)
        if body != m.body:
            raise RequirementViolation(self._rule(BODY), f"seq {seq} body {body[:40]!r} != sent {m.body[:40]!r}", ops)
        self._check_marks(m, before, redelivered, count, ops)
        if not before:
            if self.last_first_delivery is not None and seq < self.last_first_delivery:
                raise RequirementViolation(self._rule(ORDER), f"seq {seq} delivered after seq "
                                           f"{self.last_first_delivery}", ops)
            self.last_first_delivery = seq
        m.observed += 1
        m.last_count = count if count is not None else m.last_count
        if s.ack is AckMode.AUTO:
            m.state, m.consumed_by = State.CONSUMED, DUPLICATE_AFTER_AUTO
        else:
            m.state, m.holder = State.HELD, sub
            s.held.append(seq)

    def _check_marks(self, m: _Message, before: bool, redelivered: bool | None, count: int | None,
                     ops: tuple[int, ...]) -> None:
        """The redelivered flag and delivery count of a delivery; a redelivery that a rolled-back
        transaction caused is charged to the rule that returned it (``tx_acks_aborted``)."""
        rolled_back = self.rollback_marks and m.returned_by not in (LOST, RETURNED_LOST, TX_COMMIT)
        if self.check_flag and redelivered is not None:
            flag_rule = self._rule(m.returned_by if rolled_back else REDELIVERED)
            if m.observed > 0 and not redelivered:
                raise RequirementViolation(flag_rule, f"seq {m.seq} delivered again without redelivered:true", ops)
            if not before and redelivered:
                raise RequirementViolation(self._rule(REDELIVERED), f"first delivery of seq {m.seq} has "
                                           "redelivered:true", ops)
        if self.check_count and count is not None:
            count_rule = self._rule(ROLLBACK_COUNT if rolled_back else DELIVERY_COUNT)
            if not before and count != 1:
                raise RequirementViolation(self._rule(DELIVERY_COUNT), f"first delivery of seq {m.seq} has count "
                                           f"{count}", ops)
            if m.last_count is not None and count <= m.last_count:
                raise RequirementViolation(count_rule, f"seq {m.seq} count {count} after {m.last_count}", ops)

    def _rule(self, requirement: str) -> str:
        return self.rules.get(requirement, requirement)

    def held(self, sub: str) -> list[int]:
        return list(self.subs[sub].held)

    # -- the end -------------------------------------------------------------------------------

    def owed(self) -> list[int]:
        """Seqs that must still be delivered (queued, not held by any open subscription)."""
        return [m.seq for m in self.messages.values() if m.state is State.READY]

    def undecided(self) -> list[int]:
        """Seqs the rules allow to be gone or still queued (``maybe``) that the drain did not find: e.g.
        taken into an auto-ack consumer's buffer, which consumed them on delivery, before it closed."""
        return [m.seq for m in self.messages.values() if m.state is State.MAYBE]

    def final(self, ops: tuple[int, ...] = ()) -> None:
        """After a barrier-terminated drain (fed through :meth:`delivered`): nothing required is missing."""
        for m in self.messages.values():
            if m.state is State.READY:
                raise RequirementViolation(self._rule(m.returned_by), f"seq {m.seq} was never delivered (lost)", ops)
