"""Frame-level AMQP 1.0 rules no client library provokes, spoken with the raw peer (``raw.py``).

A disposition over a range of deliveries (2.7.6), credit computed from a receiver's (stale)
delivery-count (2.6.7), a transfer asking for receiver settle mode second on a link that negotiated
first (2.7.5), a second outcome for a delivery that has one (2.7.5), a source's default-outcome (3.5.3).
The messages are sent by the recorded proton client; the raw peer receives and settles them, and
records that in the history. What happened to a message is read back with a drain (a barrier), never
waited for by time.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from proton import Described, Message

from ackspec.adapters.base import Capability, Indeterminate, NotSupported
from ackspec.conformance.config import hypothesis_seed, hypothesis_settings
from ackspec.conformance.harness import Harness, seqs
from ackspec.conformance.rawamqp import (
    DISPOSITION,
    FLOW,
    SECOND,
    SERIAL,
    Performative,
    RawAmqp,
    outcome,
    state_name,
)
from ackspec.conformance.strategies import drawn
from ackspec.conformance.suite.amqp.raw import (
    BARRIER_HANDLES,
    COMES_BACK,
    Links,
    RawDelivery,
    attach_receiver,
    attach_sender,
    detached,
    ended,
    raw_amqp,
    receive,
    record_settled,
    round_trip,
)
from ackspec.conformance.suite.amqp.support import amqp_client

requirement = pytest.mark.requirement

MAX_DELIVERIES = 8
"""Most unsettled deliveries one example of the range property holds (a cost cap: each is a message)."""
CREDIT_CAP = 6
"""Largest single grant drawn from the credit domain (0..4294967295): backlogs are at most 12 messages."""


def outcomes(harness: Harness) -> st.SearchStrategy[str]:
    """The catalogue's outcomes (AMQP-3.4-OUTCOMES's domain); only ``accepted`` on a target that cannot
    settle with the others."""
    domain = drawn("AMQP-3.4-OUTCOMES", "outcome")
    return domain if harness.has(Capability.NACK_OUTCOMES) else domain.filter(lambda name: name == "accepted")


def state(name: str) -> Described:
    """The outcome ``name`` as a receiver settles with it (modified: delivery-failed, as the driver's NACK)."""
    return outcome(name, True) if name == "modified" else outcome(name)


def settle(harness: Harness, raw: RawAmqp, links: Links, deliveries: list[RawDelivery], name: str) -> None:
    """One settled disposition over ``deliveries`` (consecutive delivery-ids) with outcome ``name``."""
    first, last = deliveries[0].delivery_id, deliveries[-1].delivery_id
    raw.disposition(first, last if last != first else None, state=state(name))
    for d in deliveries:
        record_settled(harness, links[d.handle], d, name)


def came_back(harness: Harness, queue: str, expected: int) -> list[int]:
    """The seqs a fresh consumer drains from ``queue`` (waiting past the barrier for ``expected``)."""
    return sorted(seqs(harness.drain(queue, returning=expected)))


@dataclass(frozen=True, slots=True)
class RangePlan:
    """Deliveries spread round-robin over ``links`` receiver links of one session, their delivery-ids cut
    into ranges before each index of ``cuts``, each range settled with its outcome."""

    links: int
    count: int
    cuts: tuple[int, ...]
    outcomes: tuple[str, ...]


def range_plans(outcome_names: st.SearchStrategy[str]) -> st.SearchStrategy[RangePlan]:
    @st.composite
    def plans(draw: st.DrawFn) -> RangePlan:
        links, count = draw(st.integers(1, 2)), draw(st.integers(1, MAX_DELIVERIES))
        cuts = tuple(sorted(draw(st.sets(st.integers(1, count - 1))))) if count > 1 else ()
        return RangePlan(links, count, cuts, tuple(draw(outcome_names) for _ in range(len(cuts) + 1)))

    return plans()


ACROSS_LINKS = RangePlan(links=2, count=4, cuts=(), outcomes=("accepted",))
"""Tried by every run: one range over the deliveries of both links, accepted. A broker that applies a
range to one end of it, or to one link's part, leaves the rest unsettled, and they come back."""


@requirement("AMQP-2.7.6-DISPOSITION-RANGE")
def test_dispositions_over_any_ranges_settle_every_delivery_in_them(harness: Harness) -> None:
    """Any number of unsettled deliveries on one or two links of a session, settled by dispositions over
    any partition of their delivery-ids into ranges, any outcome per range: afterwards exactly the
    released and modified ones are on their queues again, the accepted ones are not (and the rejected
    ones are left to the outcome's own rule)."""
    c = amqp_client(harness)

    @hypothesis_settings()
    @hypothesis_seed()
    @given(plan=range_plans(outcomes(harness)))
    @example(plan=ACROSS_LINKS)
    @harness.example
    def ranges(plan: RangePlan) -> None:
        links, count = plan.links, plan.count
        queues = [harness.queue("range") for _ in range(links)]
        for seq in range(count):
            harness.send_seq(c, queues[seq % links], [seq])
        with raw_amqp(harness) as raw:
            by_handle: Links = {}
            for handle, q in enumerate(queues):  # every link attached before any credit: no transfer unread
                by_handle[int(attach_receiver(harness, raw, q, handle).field(1))] = q
            for handle in range(links):
                raw.flow(handle, 0, len(range(handle, count, links)))
            got = sorted(receive(harness, raw, by_handle, count), key=lambda d: d.delivery_id)
            harness.check(len(got) == count, f"{count} messages on {links} link(s) with credit for each: "
                          f"{len(got)} transfers came")
            ids = [d.delivery_id for d in got]
            harness.check(ids == list(range(ids[0], ids[0] + count)),
                          f"the delivery-ids of one session are not consecutive: {ids}")
            spans = [got[a:b] for a, b in zip([0, *plan.cuts], [*plan.cuts, count], strict=True)]
            fates: dict[int, str] = {}
            for span, name in zip(spans, plan.outcomes, strict=True):
                settle(harness, raw, by_handle, span, name)
                fates.update({-1 if d.seq is None else d.seq: name for d in span})
            # a barrier on the connection: the dispositions were read before the attach is answered
            round_trip(harness, raw, queues[0], BARRIER_HANDLES, [], by_handle)
        back = sorted(seq for seq, name in fates.items() if name in COMES_BACK)
        dropped = [seq for seq, name in fates.items() if name == "rejected"]
        for q in queues:
            harness.expect_dropped(q, dropped, reason="rejected: dead-lettered or discarded")
        # whether a rejected message is dead-lettered, dropped or (wrongly) kept is 3.4.3's question, not
        # this rule's: the range applied its outcome to it either way
        returning = [sum(seq % links == i for seq in back) for i in range(links)]
        again = sorted(seq for i, q in enumerate(queues) for seq in came_back(harness, q, returning[i])
                       if seq not in dropped)
        ranges_settled = [(span[0].delivery_id, span[-1].delivery_id) for span in spans]
        harness.check(again == back, f"dispositions over ranges {ranges_settled} with outcomes {fates}: back on the "
                      f"queues {again}, expected {back}")

    ranges()


STALE_FLOW = {"backlog": 8, "grants": [(4, 0), (2, 2)]}
"""Tried by every run: after 4 transfers, a flow stating delivery-count 2 and credit 2 allows none more
(2 + 2 - 4 = 0). A sender that takes link-credit as fresh credit from its own count sends 2 more."""


def _sender_flows_agree(flows: list[Performative], handle: int, initial: int, received: int,
                        limits: list[int]) -> str | None:
    """What is wrong with the flow frames the target (the sender) sent on ``handle``, or None: each must
    state a delivery-count plus link-credit equal to a limit the receiver set (2.6.7: the receiver sets
    the credit; the sender only computes it), and its delivery-count never beyond what it sent."""
    for flow in flows:
        if flow.code != FLOW or flow.field(4) != handle or flow.field(5) is None or flow.field(6) is None:
            continue
        count, credit = int(flow.field(5)), int(flow.field(6))
        if (count + credit) % SERIAL not in {limit % SERIAL for limit in limits}:
            return (f"the sender's flow states delivery-count {count} + link-credit {credit}, which no flow of "
                    f"the receiver set (limits {limits})")
        if (count - initial) % SERIAL > received:
            return f"the sender's flow states delivery-count {count} after {received} transfers from {initial}"
    return None


@requirement("AMQP-2.6.7-CREDIT-RECEIVER-SETS")
def test_sender_computes_credit_from_the_receivers_flow(harness: Harness) -> None:
    """Any backlog and any sequence of flows, each granting credit from the catalogue's domain and
    stating a delivery-count that may lag behind the transfers already received: the sender's credit
    is delivery-count(rcv) + link-credit(rcv) - delivery-count(snd), so after each flow exactly
    min(backlog, that limit) transfers have come in all, never more, and the flow frames the sender
    sends state that same limit. The link is detached at the end: every transfer the sender sent on it
    comes before its detach, so a transfer beyond the limit that its dispatch sent late is still seen."""
    c = amqp_client(harness)

    @hypothesis_settings()
    @hypothesis_seed()
    @given(backlog=st.integers(0, 12),
           grants=st.lists(st.tuples(drawn("AMQP-2.6.7-CREDIT-BOUND", "credit", cap=CREDIT_CAP),
                                     st.integers(0, 3)), min_size=1, max_size=4))
    @example(**STALE_FLOW)
    @harness.example
    def flows_in_steps(backlog: int, grants: list[tuple[int, int]]) -> None:
        q = harness.queue("credit")
        harness.send_seq(c, q, range(backlog))
        with raw_amqp(harness) as raw:
            answer = attach_receiver(harness, raw, q, 0)
            initial, link = int(answer.field(9, 0)), {int(answer.field(1)): q}
            got: list[RawDelivery] = []
            flows: list[Performative] = []
            limits: list[int] = []
            for step, (credit, lag) in enumerate(grants):
                stated = len(got) - min(lag, len(got))  # the receiver's delivery-count, maybe stale
                limits.append(initial + stated + credit)
                raw.flow(0, initial + stated, credit, echo=True)
                expected = max(len(got), min(backlog, stated + credit))
                got += receive(harness, raw, link, expected - len(got), flows)
                got += round_trip(harness, raw, q, BARRIER_HANDLES + step, flows, link)
                harness.check(len(got) == expected,
                              f"flows (credit, lag) {grants[:step + 1]} with {backlog} queued: {len(got)} "
                              f"transfers, expected {expected} (the last flow set the limit {stated + credit})")
                problem = _sender_flows_agree(flows, next(iter(link)), initial, len(got), limits)
                harness.check(problem is None, f"{problem} (flows {grants[:step + 1]})")
            if got:
                settle(harness, raw, link, got, "accepted")
            # settling grants no credit: whatever comes now came late, beyond the last flow's limit
            late = round_trip(harness, raw, q, BARRIER_HANDLES + len(grants), flows, link)
            if late:
                settle(harness, raw, link, late, "accepted")
            # and what a target's dispatch sent later still: all of it comes before the target's detach
            later = detached(harness, raw, link, 0, flows)
        came_back(harness, q, backlog - len(got) - len(late))  # the later ones, unsettled, are given back
        harness.check(not late and not later, f"flows (credit, lag) {grants} with {backlog} queued: "
                      f"{len(late) + len(later)} more transfers came after the {len(got)} the last flow allowed")

    flows_in_steps()


@requirement("AMQP-2.7.5-RCV-SECOND-NOT-ON-FIRST")
def test_target_sends_no_second_mode_transfer_on_a_first_link(harness: Harness) -> None:
    """As sender: on a receiver link attached with rcv-settle-mode first, no transfer of the target asks
    for mode second."""
    c = amqp_client(harness)
    q = harness.queue()
    harness.send_seq(c, q, range(3))
    with raw_amqp(harness) as raw:
        link = {int(attach_receiver(harness, raw, q, 0).field(1)): q}
        raw.flow(0, 0, 3)
        got = receive(harness, raw, link, 3)
        harness.check(len(got) == 3, f"3 queued with credit 3: {len(got)} transfers came")
        modes = [d.frame.field(6) for d in got]
        harness.check(SECOND not in modes, f"transfers on a link of rcv-settle-mode first carry rcv-settle-mode "
                      f"{modes} (1 is second)")
        settle(harness, raw, link, got, "accepted")
        round_trip(harness, raw, q, BARRIER_HANDLES, [], link)


@requirement("AMQP-2.7.5-RCV-SECOND-NOT-ON-FIRST")
def test_target_does_not_act_on_a_second_mode_transfer_on_a_first_link(harness: Harness) -> None:
    """As receiver: a transfer asking for rcv-settle-mode second on a link that negotiated first is
    illegal. The target may refuse it (end the link, session or connection with an error) or settle it
    as the link's mode says (first: it settles spontaneously); it must not hold it unsettled, waiting
    for a settlement that mode second would need. No answer at all is indeterminate."""
    q = harness.queue()
    with raw_amqp(harness) as raw:
        answer = attach_sender(harness, raw, q, 0)
        if answer.field(4) == SECOND:
            raise Indeterminate("the target answered the sender's attach with rcv-settle-mode second: "
                                "a second-mode transfer is legal there")
        flows: list[Performative] = []
        raw.read_until(lambda p: p.code == FLOW and p.field(6, 0) > 0, into=flows)
        raw.transfer(0, 0, b"illegal-second", Message(body="second on first").encode(), rcv_settle=SECOND)
        reply = raw.read_until(lambda p: p.code == DISPOSITION or ended(p))
        if reply is None:
            raise Indeterminate("the target neither settled nor refused the transfer within the timeout")
        harness.check(ended(reply) or bool(reply.field(3)),
                      f"the target answered a rcv-settle-mode second transfer on a first link with an unsettled "
                      f"disposition {reply.fields}: it acted on the illegal mode")
    if reply.code == DISPOSITION and state_name(reply.field(4)) == "accepted":
        harness.drain(q)  # the message it took: off the broker (it carries no seq, so no history counts it)


def _fate_differs(first: str) -> st.SearchStrategy[str]:
    return st.sampled_from(sorted(COMES_BACK)) if first not in COMES_BACK else st.sampled_from(["accepted"])


@requirement("AMQP-2.7.5-TERMINAL-STATE-FINAL")
def test_a_later_disposition_does_not_change_an_announced_outcome(harness: Harness) -> None:
    """The receiver announces an outcome (an unsettled disposition with a terminal state), then settles
    with another outcome of a different effect: the first one holds. Accepted or rejected first, the
    message is gone; released or modified first, it is on the queue again. The target may refuse the
    second disposition (end the link or more); the first outcome holds all the same."""
    c = amqp_client(harness)

    @hypothesis_settings(examples=4)
    @hypothesis_seed()
    @given(data=st.data())
    @harness.example
    def twice(data: st.DataObject) -> None:
        first = data.draw(outcomes(harness), label="first")
        second = data.draw(_fate_differs(first), label="second")
        q = harness.queue("final")
        harness.send_seq(c, q, [0])
        with raw_amqp(harness) as raw:
            link = {int(attach_receiver(harness, raw, q, 0).field(1)): q}
            raw.flow(0, 0, 1)
            got = receive(harness, raw, link, 1)
            harness.check(len(got) == 1, "a queued message did not come with credit 1")
            raw.disposition(got[0].delivery_id, state=state(first), settled=False)
            record_settled(harness, q, got[0], first)
            raw.disposition(got[0].delivery_id, state=state(second))
            round_trip(harness, raw, q, BARRIER_HANDLES, [], link)
        if first == "rejected":
            harness.expect_dropped(q, [0], reason="rejected: dead-lettered or discarded")
        expected = [0] if first in COMES_BACK else []
        again = came_back(harness, q, len(expected))
        harness.check(again == expected, f"outcome {first} announced, then settled {second}: the queue holds "
                      f"{again}, expected {expected} ({first} is final)")

    twice()


def _source_default(attach: Performative) -> str | None:
    """The default-outcome of the source an attach states (None: none)."""
    source = attach.field(5)
    fields = source.value if isinstance(source, Described) and isinstance(source.value, list) else []
    return state_name(fields[8]) if len(fields) > 8 else None


@requirement("AMQP-3.5.3-DEFAULT-OUTCOME")
def test_settled_without_outcome_gets_the_default_outcome(harness: Harness) -> None:
    """A receiver asks for a default-outcome on its source; the target's attach states the source in
    force (the sender's). A delivery the receiver settles without a state gets that default-outcome:
    accepted, gone; released or modified, on the queue again; rejected, off the queue. Refusing the
    stateless settlement (ending the session) breaks the rule. A target whose source states no
    default-outcome leaves the outcome to itself: not-applicable then, naming why."""
    c = amqp_client(harness)

    @hypothesis_settings(examples=4)
    @hypothesis_seed()
    @given(asked=outcomes(harness))
    @harness.example
    def by_default(asked: str) -> None:
        q = harness.queue("default")
        harness.send_seq(c, q, [0])
        with raw_amqp(harness) as raw:
            answer = attach_receiver(harness, raw, q, 0, default_outcome=state(asked),
                                     outcomes=("accepted", "released", "modified", "rejected"))
            in_force, link = _source_default(answer), {int(answer.field(1)): q}
            raw.flow(0, 0, 1)
            got = receive(harness, raw, link, 1)
            harness.check(len(got) == 1, "a queued message did not come with credit 1")
            settled_as = in_force or "released"  # no default in force: released explicitly, to clean up
            raw.disposition(got[0].delivery_id, state=None if in_force else state(settled_as))
            record_settled(harness, q, got[0], settled_as)
            frames: list[Performative] = []
            round_trip(harness, raw, q, BARRIER_HANDLES, frames, link)
        if settled_as == "rejected":
            harness.expect_dropped(q, [0], reason="rejected by default: dead-lettered or discarded")
        expected = [0] if settled_as in COMES_BACK else []
        again = came_back(harness, q, len(expected))
        if in_force is None:
            raise NotSupported("amqp-default-outcome", f"the target's source states no default-outcome (asked {asked})")
        refused = next((f for f in frames if ended(f)), None)
        harness.check(refused is None, f"a delivery settled without a state (default-outcome {in_force} in force) "
                      f"was refused: {refused.name if refused else ''} {refused.fields if refused else ''}")
        harness.check(again == expected, f"settled without a state under default-outcome {in_force} (asked "
                      f"{asked}): the queue holds {again}, expected {expected}")

    by_default()
