"""Helpers shared by the suite modules: the usual consumer set-up, what comes back, one raw frame's answer.

Each helper is a step several tests take the same way; the test keeps what it checks. A helper
that can find a requirement violated (a message that never arrives) takes the requirement ID
from the test, so the failure is charged to what that test cites.
"""

from __future__ import annotations

from typing import TypeGuard

from ackspec.adapters.base import AckMode, Client, Delivery
from ackspec.conformance.harness import Harness, seqs
from ackspec.conformance.rawstomp import RawFrame, RawStomp

DURABLE_NAME = "ackspec-durable"
"""The durable subscriptions' name; each test's client id is unique per run, so no two runs share one."""


def suspended_durable(harness: Harness, name: str, *, selector: str | None = None) -> tuple[str, str]:
    """A fresh topic with durable subscription ``name`` (with ``selector``, if given) made and left without
    a consumer: its consumer closed and its connection ended. Returns the topic and the owning client id."""
    t = harness.topic("durable")
    client_id = f"ackspec-{t.rsplit('/', 1)[-1]}"  # the topic's name is unique per run
    first = harness.client("durable-1", client_id=client_id)
    first.unsubscribe(first.subscribe(t, durable=name, selector=selector))
    first.disconnect()
    return t, client_id


def subscribed(harness: Harness, *, ack: AckMode = AckMode.AUTO,
               prefetch: int | None = None) -> tuple[Client, str, str]:
    """A client subscribed to a fresh queue: returns the client, the queue and the subscription."""
    q = harness.queue()
    c = harness.client()
    sub = c.subscribe(q, ack=ack, prefetch=prefetch)
    return c, q, sub


def received(harness: Harness, count: int, *, ack: AckMode, requirement: str | None = None,
             prefetch: int | None = None, persistent: bool = False) -> tuple[Client, str, str, list[Delivery]]:
    """A client subscribed to a fresh queue, seqs ``0 .. count-1`` sent to it and received.

    Fewer than ``count`` arriving violates ``requirement`` (default: the test's only cited one).
    Returns the client, the queue, the subscription and the deliveries, for the test to acknowledge, NACK,
    disconnect or crash.
    """
    c, q, sub = subscribed(harness, ack=ack, prefetch=prefetch)
    harness.send_seq(c, q, range(count), persistent=persistent)
    return c, q, sub, harness.expect_n(c, sub, count, requirement)


def left_after_disconnect(harness: Harness, c: Client, q: str, returning: int = 0) -> list[int]:
    """Disconnect ``c``, then the seqs a fresh consumer drains from ``q``: what ``c`` left unacknowledged
    (``returning``: how many should come back, for the grace :meth:`Harness.drain` gives a slow return)."""
    c.disconnect()
    return seqs(harness.drain(q, returning=returning))


def reply_to(raw: RawStomp, data: bytes) -> RawFrame | None:
    """Send one frame and read the broker's next frame (``None``: nothing came in time)."""
    raw.send(data)
    return raw.read_frame()


def raw_reply(harness: Harness, data: bytes) -> tuple[RawStomp, RawFrame | None]:
    """A fresh CONNECTed raw connection, ``data`` sent on it, and the broker's next frame."""
    raw = harness.raw_connected()
    return raw, reply_to(raw, data)


def is_error(reply: RawFrame | None) -> TypeGuard[RawFrame]:
    """The reply is an ERROR frame."""
    return reply is not None and reply.command == "ERROR"


def command_of(reply: RawFrame | None, absent: str = "nothing") -> str:
    """What a reply was, for failure messages: its command, or ``absent`` when nothing came."""
    return reply.command if reply is not None else absent
