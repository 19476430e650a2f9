"""Link credit and drain (AMQP 1.0 section 2.6.7).

The tests grant credit by hand (``amqp-credit: manual``: the driver never tops it up) and
count transfers against it. Absence is checked with a round trip on the same connection
(the broker's answer to a link attach): transfers the broker sent before answering have
been read by then.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ackspec.adapters.amqp_proton import DrainResult, ProtonClient
from ackspec.adapters.base import AckMode, AdapterError, Capability, Delivery, NotSupported
from ackspec.conformance.cited import req
from ackspec.conformance.config import hypothesis_seed, hypothesis_settings
from ackspec.conformance.harness import Harness, seqs
from ackspec.conformance.strategies import drawn
from ackspec.conformance.suite.amqp.support import amqp_client, unsettled_modes
from ackspec.conformance.verdicts import Checks, RequirementViolation, check, violation

requirement = pytest.mark.requirement

CREDIT_CAP = 6
"""Largest single grant a run draws from the credit domain (0..4294967295): each is filled from a backlog of
at most 12 messages, so larger grants test nothing more than 12 would."""


def drain_or_violation(c: ProtonClient, sub: str, *, credit: int = 0) -> DrainResult:
    """A drain; the target failing the drain itself (ending the link or session) violates AMQP-2.6.7-DRAIN."""
    try:
        return c.drain(sub, credit=credit)
    except AdapterError as exc:
        raise violation(f"the drain failed: {exc}", requirement=req.AMQP_2_6_7_DRAIN) from exc


@requirement("AMQP-2.6.7-INITIAL-CREDIT-ZERO", "AMQP-2.6.7-CREDIT-BOUND", "AMQP-2.6.7-CREDIT-REPLENISH")
def test_transfers_never_exceed_credit(harness: Harness) -> None:
    harness.require(Capability.QUEUES, Capability.ACK_CLIENT_INDIVIDUAL)
    c = amqp_client(harness)
    q = harness.queue()
    harness.send_seq(c, q, range(8))
    harness.expect_left(q, reason="credit is granted for five of the eight")
    sub = c.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=0, headers=unsettled_modes())
    checks = Checks()
    c.round_trip(q)
    granted, transfers = c.accounting(sub)
    checks.check(transfers == 0,
                 f"{transfers} transfers arrived on a link that was given no credit",
                 requirement=req.AMQP_2_6_7_INITIAL_CREDIT_ZERO)
    c.flow(sub, 2)
    first = harness.receive_n(c, sub, 2)
    c.round_trip(q)
    granted, transfers = c.accounting(sub)
    checks.check(len(first) == 2, f"credit 2 with 8 queued gave {seqs(first)}",
                 requirement=req.AMQP_2_6_7_CREDIT_REPLENISH)
    checks.check(transfers <= granted,
                 f"{transfers} transfers for {granted} credit granted", requirement=req.AMQP_2_6_7_CREDIT_BOUND)
    c.flow(sub, 3)  # exactly three more
    more = harness.receive_n(c, sub, 3)
    c.round_trip(q)
    granted, transfers = c.accounting(sub)
    checks.check(len(more) == 3,
                 f"flow adding 3 credit (5 queued) let {len(more)} through: {seqs(more)}",
                 requirement=req.AMQP_2_6_7_CREDIT_REPLENISH)
    checks.check(transfers <= granted and transfers == 5,
                 f"{transfers} transfers for {granted} credit granted (expected exactly 5)",
                 requirement=req.AMQP_2_6_7_CREDIT_BOUND)
    checks.check(c.credit(sub) == 0, f"credit left {c.credit(sub)}, expected 0",
                 requirement=req.AMQP_2_6_7_CREDIT_BOUND)
    checks.done()


@requirement("AMQP-2.6.7-DRAIN")
def test_drain_with_nothing_available(harness: Harness) -> None:
    harness.require(Capability.QUEUES, Capability.ACK_CLIENT_INDIVIDUAL)
    c = amqp_client(harness)
    q = harness.queue("empty")
    sub = c.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=4, headers=unsettled_modes())
    result = drain_or_violation(c, sub)
    checks = Checks()
    checks.check(result.echoed, "the sender did not answer the drain with its flow state")
    checks.check(result.credit_after == 0,
                 f"after draining an empty queue the link still has {result.credit_after} of "
                 f"{result.credit_before} credit")
    checks.check(not result.delivered, f"draining an empty queue delivered {result.delivered}")
    # the credit is gone: a message sent now must wait for new credit
    harness.send_seq(c, q, [0])
    c.round_trip(q)
    _granted, transfers = c.accounting(sub)
    checks.check(transfers == 0, f"{transfers} transfers after the drain used up the credit")
    c.flow(sub, 1)
    checks.check(seqs(harness.receive_n(c, sub, 1)) == [0],
                 "a message queued after the drain did not arrive once credit was granted")
    checks.done()


@requirement("AMQP-2.6.7-DRAIN", "AMQP-2.6.7-CREDIT-BOUND")
def test_drain_sends_what_is_there_then_stops(harness: Harness) -> None:
    harness.require(Capability.QUEUES, Capability.ACK_CLIENT_INDIVIDUAL)
    c = amqp_client(harness)
    q = harness.queue()
    harness.send_seq(c, q, range(2))
    sub = c.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=0, headers=unsettled_modes())
    checks = Checks()
    try:
        result = drain_or_violation(c, sub, credit=5)
    except RequirementViolation as exc:
        # the drain broke the link or session: the credit bound still holds or not over what did arrive
        granted, transfers = c.accounting(sub)
        checks.check(False, str(exc).removeprefix(f"{exc.requirement}: "), requirement=exc.requirement)
        checks.check(transfers <= granted, f"{transfers} transfers for {granted} credit",
                     requirement=req.AMQP_2_6_7_CREDIT_BOUND)
        checks.done()
        return
    got = seqs(result.delivered)
    checks.check(sorted(got) == [0, 1], f"drain with 5 credit and 2 queued delivered {got}",
                 requirement=req.AMQP_2_6_7_DRAIN)
    checks.check(result.credit_after == 0, f"credit left after the drain: {result.credit_after}",
                 requirement=req.AMQP_2_6_7_DRAIN)
    checks.check(result.transfers <= result.granted,
                 f"{result.transfers} transfers for {result.granted} credit", requirement=req.AMQP_2_6_7_CREDIT_BOUND)
    checks.done()


@requirement("AMQP-2.6.7-TRANSFER-LIMIT-EXCEEDED")
def test_transfer_beyond_credit_ends_the_link(harness: Harness) -> None:
    """Transfers beyond the credit the broker granted: it must end the link (or connection) with
    amqp:link:transfer-limit-exceeded and keep serving. Needs a target whose credit the test sets
    (the embedded reference broker): a real broker may top credit up while the transfers are in
    flight, and then an overrun cannot be told from a race."""
    harness.require(Capability.QUEUES)
    set_window = getattr(harness.adapter, "set_receive_window", None)
    if set_window is None:
        raise NotSupported(Capability.FAULT_INJECTION, f"{harness.adapter.name} cannot fix the credit it grants")
    q = harness.queue()
    c = amqp_client(harness)
    old = set_window(4)
    try:
        credit, condition = c.overrun_credit(q, extra=2)
    finally:
        set_window(old)
    checks = Checks()
    checks.check(condition == "amqp:link:transfer-limit-exceeded",
                 f"{credit + 2} transfers for credit {credit}: ended with {condition or 'nothing (accepted)'}")
    # the broker stays up and kept what was within credit
    sub = c.subscribe(q, ack=AckMode.AUTO)
    kept = harness.barrier(c, q, c, sub)
    checks.check(len(kept) <= credit,
                 f"{len(kept)} of the transfers beyond credit {credit} were taken")
    checks.done()


@requirement("AMQP-2.6.7-CREDIT-BOUND")
def test_prefetch_credit_with_acknowledgements(harness: Harness) -> None:
    """The driver's prefetch mapping: held unsettled deliveries + credit never exceed the prefetch."""
    harness.require(Capability.QUEUES, Capability.ACK_CLIENT_INDIVIDUAL)
    c = amqp_client(harness)
    q = harness.queue()
    harness.send_seq(c, q, range(6))
    sub = c.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=2)
    held = harness.receive_n(c, sub, 2)
    c.round_trip(q)
    _granted, transfers = c.accounting(sub)
    check(transfers == 2, f"prefetch 2 (credit 2): {transfers} transfers before any ack")
    for d in held:
        c.ack(d)  # each settlement gives one credit back
    rest: list[Delivery] = []
    while len(rest) < 4 and (nxt := c.receive(sub)) is not None:
        rest.append(nxt)
        c.ack(nxt)
    check(sorted(seqs(held + rest)) == list(range(6)),
          f"after acknowledging, the rest did not arrive: {seqs(held + rest)}")


@requirement("AMQP-2.6.7-CREDIT-BOUND", "AMQP-2.6.7-CREDIT-REPLENISH")
def test_transfers_follow_any_sequence_of_credit_grants(harness: Harness) -> None:
    """Any backlog and any sequence of credit grants (each from the catalogue's credit domain, capped for a
    run): after each grant, exactly min(credit granted so far, backlog) transfers have come, never more."""
    harness.require(Capability.QUEUES, Capability.ACK_CLIENT_INDIVIDUAL)
    c = amqp_client(harness)

    @hypothesis_settings()
    @hypothesis_seed()
    @given(backlog=st.integers(0, 12),
           grants=st.lists(drawn("AMQP-2.6.7-CREDIT-BOUND", "credit", cap=CREDIT_CAP), min_size=1, max_size=4))
    @harness.example
    def granted_in_steps(backlog: int, grants: list[int]) -> None:
        q = harness.queue("credit")
        harness.send_seq(c, q, range(backlog))
        harness.expect_left(q, reason="credit may be granted for fewer messages than were sent")
        sub = c.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=0, headers=unsettled_modes())
        got: list[Delivery] = []
        total = 0
        checks = Checks()
        for grant in grants:
            c.flow(sub, grant)
            total += grant
            got += harness.receive_n(c, sub, min(total, backlog) - len(got))
            c.round_trip(q)
            granted, transfers = c.accounting(sub)
            checks.check(transfers <= granted,
                         f"{transfers} transfers for {granted} credit granted (grants {grants}, backlog {backlog})",
                         requirement=req.AMQP_2_6_7_CREDIT_BOUND)
            checks.check(transfers == min(total, backlog),
                         f"grants {grants} (total so far {total}) with {backlog} queued: {transfers} transfers, "
                         f"expected {min(total, backlog)}", requirement=req.AMQP_2_6_7_CREDIT_REPLENISH)
        for d in got:
            c.ack(d)
        c.unsubscribe(sub)
        checks.done()

    granted_in_steps()
