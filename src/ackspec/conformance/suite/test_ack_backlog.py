"""The backlog of a client-acknowledging consumer is bounded (Jakarta Messaging 3.1, 6.2.10), as a property.

A consumer in client (cumulative) acknowledgement mode asks for a limit on what it may hold unacknowledged:
over STOMP the prefetch header the profile names, over AMQP 1.0 the link credit. For any limit of the
catalogue's domain (``limit``: 1.., capped per run), any backlog beyond it and any cumulative acknowledgement
of part of what it holds, the broker gives it the limit, one more per message the acknowledgement covered,
and never more. What it may not hold goes to a second consumer; once every message is accounted for, nothing
more can reach the first, so counting its excess needs no waiting.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ackspec.adapters.base import AckMode, Client, Delivery
from ackspec.conformance.config import hypothesis_seed, hypothesis_settings
from ackspec.conformance.harness import Harness, seqs
from ackspec.conformance.markers import requirement
from ackspec.conformance.strategies import drawn


@requirement("JMS-6.2.10-CLIENT-ACK-BACKLOG-BOUND")
def test_client_ack_backlog_stays_within_its_limit(harness: Harness) -> None:
    """Any limit, backlog and cumulative acknowledgement: a client-ack consumer never holds more than its limit."""

    @hypothesis_settings(examples=4)  # the prefetch property of test_delivery.py covers the same bound in depth
    @hypothesis_seed()
    @given(limit=drawn("JMS-6.2.10-CLIENT-ACK-BACKLOG-BOUND", "limit"), data=st.data())
    @harness.example
    def bounded(limit: int, data: st.DataObject) -> None:
        beyond = data.draw(st.integers(1, limit), label="backlog beyond the limit")
        acked = data.draw(st.integers(0, limit), label="messages the cumulative acknowledgement covers")
        _backlog_example(harness, limit, beyond, acked)

    bounded()


def _backlog_example(harness: Harness, limit: int, beyond: int, acked: int) -> None:
    q = harness.queue()
    held_by = harness.client("client-ack")
    sub = held_by.subscribe(q, ack=AckMode.CLIENT, prefetch=limit)
    harness.send_seq(held_by, q, range(limit + beyond))
    held = harness.expect_n(held_by, sub, limit, what=f"deliveries up to the limit {limit}")
    if acked:
        held_by.ack(held[acked - 1])  # cumulative: covers the first ``acked``
        held = held[acked:] + harness.expect_n(held_by, sub, min(acked, beyond),
                                               what=f"deliveries after acknowledging {acked}")
    excess = _excess(harness, held_by, sub, q, limit + beyond - acked - len(held))
    harness.check(not excess, f"limit {limit}: the client-ack consumer held {len(held) + len(excess)} "
                  f"unacknowledged messages (excess seqs {seqs(excess)})")
    if held or excess:
        held_by.ack((held + excess)[-1])
    held_by.disconnect()


def _excess(harness: Harness, held_by: Client, sub: str, q: str, rest: int) -> list[Delivery]:
    """What reaches the bounded consumer beyond its limit while a second consumer takes the ``rest``."""
    other = harness.client("auto")
    other_sub = other.subscribe(q, ack=AckMode.AUTO)
    excess: list[Delivery] = []
    taken = 0
    while taken + len(excess) < rest:
        delivery = held_by.receive(sub, 0)
        if delivery is not None:
            excess.append(delivery)
        elif other.receive(other_sub) is not None:
            taken += 1
        else:
            break
    late = held_by.receive(sub, 0)
    other.disconnect()
    return excess + ([late] if late is not None else [])
