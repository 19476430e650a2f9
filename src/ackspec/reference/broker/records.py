"""Journal records: the durable facts of the broker core.

The core emits them (:class:`~.effects.JournalAppend`) and replays them on start
(:meth:`BrokerCore.restore`); :mod:`ackspec.reference.journal` stores them with a CRC.
A committed transaction is ONE record, so a torn write can never half-commit it.

Durable topic subscriptions are durable facts too: their creation and deletion, and the copy of each
persistent message one of them keeps. A copy is journalled under its own id (the message's id plus the
subscription's), so acknowledging it in one subscription removes it from that one only.
"""

from __future__ import annotations

from dataclasses import dataclass

from ackspec.reference.broker.model import Message


@dataclass(frozen=True, slots=True)
class Stored:
    """A persistent message was enqueued."""

    message: Message


@dataclass(frozen=True, slots=True)
class Removed:
    """A persistent message was consumed (acknowledged / settled accepted)."""

    message_id: str


@dataclass(frozen=True, slots=True)
class DeadLettered:
    """A persistent message moved to ``dead_letter_queue`` (atomically: removed + stored)."""

    message_id: str
    dead_letter_queue: str
    reason: str


@dataclass(frozen=True, slots=True)
class DurableSubscribed:
    """A durable subscription ``name`` of client ``client_id`` was created on topic ``destination``,
    keeping only the messages its message ``selector`` matches (``""``: every message), and with
    ``no_local`` none of those published by connections of its own client id."""

    client_id: str
    name: str
    destination: str
    selector: str = ""
    no_local: bool = False


@dataclass(frozen=True, slots=True)
class DurableRemoved:
    """A durable subscription was deleted, with every copy it kept."""

    client_id: str
    name: str


@dataclass(frozen=True, slots=True)
class StoredCopy:
    """A persistent topic message kept by a durable subscription; ``message.message_id`` is the copy's id."""

    client_id: str
    name: str
    message: Message


@dataclass(frozen=True, slots=True)
class Committed:
    """A transaction committed: its persistent sends, the copies durable subscriptions keep of them, and
    its removals, atomically."""

    stored: tuple[Message, ...]
    removed: tuple[str, ...]
    copies: tuple[StoredCopy, ...] = ()


Record = Stored | Removed | DeadLettered | Committed | DurableSubscribed | DurableRemoved | StoredCopy
