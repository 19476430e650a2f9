"""What a receiving link holds unsettled, as properties over its credit and any order of settling.

Two rules of AMQP 1.0 about unsettled deliveries hold whatever the credit and whatever the
receivers do in between, so they are checked over the catalogue's credit domain
(``AMQP-2.6.7-CREDIT-BOUND``) and random interleavings of sends and settlements:

- 2.6.12: a delivery's tag is not shared with any other delivery the link still holds unsettled
  (the tag of a settled delivery may come back);
- 3.3: a message acquired by one link (delivered, unsettled) goes to no other link of the queue
  while it stays acquired.

Tags are the sender's own (the driver's ``amqp:delivery-tag`` header): the driver's ``ack_id``
adds an arrival number, so comparing ack ids could never find a reused tag.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ackspec.adapters.amqp_proton import ProtonClient
from ackspec.adapters.base import AckMode, Capability, Delivery
from ackspec.conformance.cited import req
from ackspec.conformance.config import hypothesis_seed, hypothesis_settings
from ackspec.conformance.harness import Harness, seqs
from ackspec.conformance.strategies import drawn
from ackspec.conformance.suite.amqp.support import amqp_client
from ackspec.conformance.verdicts import violation

requirement = pytest.mark.requirement

MAX_CREDIT = 8
"""Cap on a link's credit drawn from ``AMQP-2.6.7-CREDIT-BOUND`` (0..2^32-1): each example holds up to
this many unsettled deliveries per link and sends up to about twice as many messages."""

TAG_HEADER = "amqp:delivery-tag"


def _credit() -> st.SearchStrategy[int]:
    """A link's credit from the catalogue's domain; 0 is left out (a link without credit is sent nothing,
    so holds nothing to compare)."""
    return drawn("AMQP-2.6.7-CREDIT-BOUND", "credit", cap=MAX_CREDIT).filter(lambda credit: credit > 0)


@requirement("AMQP-2.6.12-DELIVERY-TAG-UNIQUE", "AMQP-2.6.12-UNSETTLED-AT-LEAST-ONCE")
def test_delivery_tags_unique_among_unsettled(harness: Harness) -> None:
    """Any credit and any order of settling while more deliveries arrive: no delivery arrives with the tag
    of another the link still holds unsettled; every message accepted at send arrives."""
    harness.require(Capability.QUEUES, Capability.ACK_CLIENT_INDIVIDUAL)
    c = amqp_client(harness)

    @hypothesis_settings(examples=8)
    @hypothesis_seed()
    @given(credit=_credit(), extra=st.integers(0, MAX_CREDIT), data=st.data())
    @harness.example
    def unique(credit: int, extra: int, data: st.DataObject) -> None:
        q = harness.queue()
        sub = c.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=credit)
        total = credit + extra
        harness.send_seq(c, q, range(total))
        held: dict[str, Delivery] = {}
        arrived = 0
        while arrived < total:
            wanted = min(credit - len(held), total - arrived)
            for d in harness.expect_n(c, sub, wanted, req.AMQP_2_6_12_UNSETTLED_AT_LEAST_ONCE,
                                      f"deliveries of the {total} accepted sends ({arrived} so far)"):
                _hold(held, d)
            arrived += wanted
            chosen = data.draw(st.lists(st.sampled_from(sorted(held)), min_size=1, unique=True), label="settled")
            for tag in chosen:
                c.ack(held.pop(tag))
        for d in held.values():
            c.ack(d)
        c.unsubscribe(sub)

    unique()


def _hold(held: dict[str, Delivery], d: Delivery) -> None:
    """Add one arrival to the link's unsettled deliveries, unless its tag is already among them."""
    tag = d.headers.get(TAG_HEADER)
    if tag is None:
        raise violation(
                                   f"an unsettled delivery (seq {d.seq}) arrived without a delivery tag",
                                   requirement=req.AMQP_2_6_12_DELIVERY_TAG_UNIQUE)
    if tag in held:
        raise violation(
                                   f"seq {d.seq} arrived with tag {tag}, the tag of seq {held[tag].seq} which the "
                                   f"link still holds unsettled (unsettled: {seqs(held.values())})",
                                   requirement=req.AMQP_2_6_12_DELIVERY_TAG_UNIQUE)
    held[tag] = d


@dataclass
class _Link:
    """One receiving link and what it holds unsettled (seq -> delivery)."""

    client: ProtonClient
    sub: str
    name: str
    held: dict[int, Delivery] = field(default_factory=dict)


STEPS = st.one_of(st.tuples(st.just("send"), st.integers(1, 4)),
                  st.tuples(st.just("settle"), st.sampled_from(("a", "b"))))
"""One step of the interleaving: send 1..4 messages, or let link a or b settle some of what it holds."""


@requirement("AMQP-3.3-ACQUIRED-EXCLUSIVE")
def test_acquired_messages_go_to_no_other_link(harness: Harness) -> None:
    """Two links on one queue with any credits and any interleaving of sends and settlements: a message
    one link holds acquired (unsettled) is never delivered on the other."""
    harness.require(Capability.ACK_CLIENT_INDIVIDUAL)
    producer = amqp_client(harness, "producer")
    a, b = amqp_client(harness, "a"), amqp_client(harness, "b")

    @hypothesis_settings(examples=8)
    @hypothesis_seed()
    @given(credits=st.tuples(_credit(), _credit()), steps=st.lists(STEPS, min_size=1, max_size=8),
           data=st.data())
    @harness.example
    def exclusive(credits: tuple[int, int], steps: list[tuple[str, object]], data: st.DataObject) -> None:
        q = harness.queue()
        links = {"a": _Link(a, a.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=credits[0]), "a"),
                 "b": _Link(b, b.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=credits[1]), "b")}
        sent = 0
        for kind, arg in steps:
            if kind == "send":
                harness.send_seq(producer, q, range(sent, sent + int(str(arg))))
                sent += int(str(arg))
            else:
                link = links[str(arg)]
                if link.held:
                    chosen = data.draw(st.lists(st.sampled_from(sorted(link.held)), min_size=1, unique=True),
                                       label=f"settled by {link.name}")
                    for seq in chosen:
                        link.client.ack(link.held.pop(seq))
            _poll(links, q)
        _finish(harness, producer, q, links)

    exclusive()


def _poll(links: dict[str, _Link], q: str) -> None:
    """Take what each link has been sent so far (a round trip on its connection reads every frame the
    broker sent before it); a seq the other link holds acquired is a violation. Only settling with
    ``accepted`` ends a hold here, so a seq seen on one link while the other holds it is always one."""
    for link in links.values():
        other = links["b" if link.name == "a" else "a"]
        link.client.round_trip(q)
        while (d := link.client.receive(link.sub, 0)) is not None:
            if d.seq in other.held:
                raise violation(
                                           f"seq {d.seq} was delivered on link {link.name} while link {other.name} "
                                           f"held it acquired and unsettled (held by {other.name}: "
                                           f"{sorted(other.held)})", requirement=req.AMQP_3_3_ACQUIRED_EXCLUSIVE)
            if d.seq is not None:
                link.held[d.seq] = d


def _finish(harness: Harness, producer: ProtonClient, q: str, links: dict[str, _Link]) -> None:
    """Settle what both links hold, detach b (what was in flight to it goes back to the queue), then drain
    the queue through a up to a barrier, so every message is consumed and none is left."""
    for link in links.values():
        for d in link.held.values():
            link.client.ack(d)
        link.held.clear()
    a, b = links["a"], links["b"]
    b.client.unsubscribe(b.sub)
    harness.barrier(producer, q, a.client, a.sub, ack_each=True)
    a.client.unsubscribe(a.sub)
