"""Effects: what the broker core asks its host to do. Immutable, protocol-neutral.

The host (STOMP session, AMQP listener) executes them in list order. ``conn`` names the
connection the effect is for.

They are ``NamedTuple`` classes, not frozen dataclasses: the core makes one or two per message
(a :class:`Deliver` per delivery, a :class:`Confirm` per confirmed send), and a frozen dataclass
costs ~0.7-1.1 us to build (an ``object.__setattr__`` per field) against ~0.3 us for a named
tuple. Hosts tell them apart by class (``isinstance`` or ``__class__ is``), never by value.
"""

from __future__ import annotations

from typing import NamedTuple

from ackspec.reference.broker.model import ConnId, Message
from ackspec.reference.broker.records import Record


class Deliver(NamedTuple):
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


class Confirm(NamedTuple):
    """The operation identified by ``token`` is done: a receipt/disposition may be sent.

    With ``durable=True`` the host must first make every :class:`JournalAppend` emitted
    before this effect durable (fsync); group commit shares one fsync among many confirms.
    """

    conn: ConnId
    token: object
    durable: bool = False


class Reject(NamedTuple):
    """The operation identified by ``token`` failed (negative acknowledgement) with ``reason``."""

    conn: ConnId
    token: object
    reason: str


class Drained(NamedTuple):
    """AMQP drain finished: ``credit`` unused credit of ``sub`` was consumed (set to 0)."""

    conn: ConnId
    sub: str
    credit: int


class Close(NamedTuple):
    """Close ``conn`` with ``reason`` (the core's own decision, e.g. fault injection)."""

    conn: ConnId
    reason: str


class JournalAppend(NamedTuple):
    """Append ``record`` to the journal (in order; durable only once synced)."""

    record: Record


Effect = Deliver | Confirm | Reject | Drained | Close | JournalAppend


def _same_effect(self: tuple[object, ...], other: object) -> bool:
    return self.__class__ is other.__class__ and tuple.__eq__(self, other)


def _other_effect(self: tuple[object, ...], other: object) -> bool:
    return not _same_effect(self, other)


def _effect_hash(self: tuple[object, ...]) -> int:
    return hash((self.__class__, tuple(self)))


# equality by class and value, as the frozen dataclasses had it: a Drained("c", "s", 1) is not a
# Confirm("c", "s", True) although the tuples are equal (True == 1)
for _cls in (Deliver, Confirm, Reject, Drained, Close, JournalAppend):
    _cls.__eq__ = _same_effect  # type: ignore[method-assign]
    _cls.__ne__ = _other_effect  # type: ignore[method-assign,assignment]
    _cls.__hash__ = _effect_hash  # type: ignore[method-assign]
del _cls
