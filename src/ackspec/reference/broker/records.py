"""Journal records: the durable facts of the broker core.

The core emits them (:class:`~.effects.JournalAppend`) and replays them on start
(:meth:`BrokerCore.restore`); :mod:`ackspec.reference.journal` stores them with a CRC.
A committed transaction is ONE record, so a torn write can never half-commit it.
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
class Committed:
    """A transaction committed: its persistent sends and its removals, atomically."""

    stored: tuple[Message, ...]
    removed: tuple[str, ...]


Record = Stored | Removed | DeadLettered | Committed
