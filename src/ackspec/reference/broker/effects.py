"""Effects: what the broker core asks its host to do. Frozen, protocol-neutral.

The host (STOMP session, AMQP listener) executes them in list order. ``conn`` names the
connection the effect is for.
"""

from __future__ import annotations

from dataclasses import dataclass

from ackspec.reference.broker.model import ConnId, Message
from ackspec.reference.broker.records import Record


@dataclass(frozen=True, slots=True)
class Deliver:
    """Send ``message`` to subscription ``sub`` of ``conn``.

    ``delivery_id`` identifies this delivery for settlement (unique per broker run);
    ``delivery_count`` is the number of earlier unsuccessful deliveries (AMQP semantics:
    0 on the first delivery); ``redelivered`` is JMSRedelivered.
    """

    conn: ConnId
    sub: str
    delivery_id: int
    message: Message
    redelivered: bool
    delivery_count: int


@dataclass(frozen=True, slots=True)
class Confirm:
    """The operation identified by ``token`` is done: a receipt/disposition may be sent.

    With ``durable=True`` the host must first make every :class:`JournalAppend` emitted
    before this effect durable (fsync); group commit shares one fsync among many confirms.
    """

    conn: ConnId
    token: object
    durable: bool = False


@dataclass(frozen=True, slots=True)
class Reject:
    """The operation identified by ``token`` failed (negative acknowledgement) with ``reason``."""

    conn: ConnId
    token: object
    reason: str


@dataclass(frozen=True, slots=True)
class Drained:
    """AMQP drain finished: ``credit`` unused credit of ``sub`` was consumed (set to 0)."""

    conn: ConnId
    sub: str
    credit: int


@dataclass(frozen=True, slots=True)
class Close:
    """Close ``conn`` with ``reason`` (the core's own decision, e.g. fault injection)."""

    conn: ConnId
    reason: str


@dataclass(frozen=True, slots=True)
class JournalAppend:
    """Append ``record`` to the journal (in order; durable only once synced)."""

    record: Record


Effect = Deliver | Confirm | Reject | Drained | Close | JournalAppend
