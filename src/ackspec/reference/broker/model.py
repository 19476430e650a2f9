"""Values shared by the broker core and its hosts: messages, ack modes, outcomes, config.

All immutable: they cross the boundary between the sans-IO core and protocol adapters.
:class:`Message` is a ``NamedTuple`` rather than a frozen dataclass because one is built per
published message: a frozen dataclass pays an ``object.__setattr__`` call per field
(~1.2 us for seven fields), a named tuple ~0.35 us, and it is just as immutable.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, NamedTuple

from ackspec.reference.broker.typed import Typed

Headers = tuple[tuple[str, str], ...]
ConnId = str
"""A connection, named by its host (e.g. ``"stomp-12"``, ``"amqp-3"``)."""


class AckMode(enum.Enum):
    """How a subscription's deliveries are settled."""

    AUTO = "auto"
    """Consumed when sent (STOMP ``ack:auto``, AMQP pre-settled)."""
    CLIENT = "client"
    """Settled by the consumer; a settlement is cumulative over the subscription (STOMP ``client``)."""
    CLIENT_INDIVIDUAL = "client-individual"
    """Settled by the consumer, one delivery at a time (STOMP ``client-individual``, AMQP unsettled)."""


class DestinationKind(enum.Enum):
    QUEUE = "queue"
    TOPIC = "topic"


QUEUE_PREFIX: Final = "/queue/"
TOPIC_PREFIX: Final = "/topic/"


def destination_kind(name: str) -> DestinationKind:
    """``/topic/...`` is a topic; everything else (``/queue/...`` and unprefixed names) is a queue.

    Unprefixed names are queues, as in ActiveMQ; ``"orders"`` and ``"/queue/orders"`` are
    different queues (the name is used verbatim).
    """
    return DestinationKind.TOPIC if name.startswith(TOPIC_PREFIX) else DestinationKind.QUEUE


class Message(NamedTuple):
    """A published message. Immutable; per-delivery state (count, redelivered) lives in the core."""

    message_id: str
    destination: str
    body: bytes
    headers: Headers
    """Application headers/properties, passed through to consumers."""
    persistent: bool
    producer: ConnId
    seq: int
    """Broker-wide publish order (used for per-producer order checks and journal replay)."""
    typed: Typed | None = None
    """What an AMQP message carries beyond body and string headers (typed properties, body kind, ids,
    priority, expiry), kept unchanged; None for a STOMP message."""


class Outcome(enum.Enum):
    """How a consumer settles a delivery (AMQP 1.0 outcomes plus STOMP's NACK)."""

    ACCEPTED = "accepted"
    """Consumed: gone for good (STOMP ACK)."""
    REQUEUE = "requeue"
    """Not consumed: redeliver with delivery-count + 1 (STOMP NACK)."""
    RELEASED = "released"
    """Not processed: redeliver, delivery-count unchanged (AMQP released)."""
    MODIFIED = "modified"
    """Redeliver; +1 if ``delivery_failed``; never to this subscription if ``undeliverable_here``."""
    REJECTED = "rejected"
    """Invalid: to the dead-letter queue with ``reason``."""


@dataclass(frozen=True, slots=True)
class Settlement:
    outcome: Outcome = Outcome.ACCEPTED
    delivery_failed: bool = True
    undeliverable_here: bool = False
    reason: str = ""
    headers: Headers = ()
    """MODIFIED: headers merged into the message for later deliveries (and journalled with a
    persistent one); AMQP's modified{message-annotations} (3.4.5)."""


ACCEPT: Final = Settlement(Outcome.ACCEPTED)
REQUEUE: Final = Settlement(Outcome.REQUEUE)
RELEASE: Final = Settlement(Outcome.RELEASED)


@dataclass(frozen=True)
class CoreConfig:
    """Broker policy. Defaults are safe: bounded memory, both journal syncs on."""

    max_redeliveries: int = 6
    """A message whose delivery-count would exceed this goes to the dead-letter queue (ActiveMQ default 6)."""
    dead_letter_queue: str = "/queue/DLQ"
    sync_transactional: bool = True
    """journal-sync-transactional: a COMMIT is confirmed only after fsync."""
    sync_non_transactional: bool = True
    """journal-sync-non-transactional: a persistent send or ack is confirmed only after fsync."""
    default_prefetch: int = 1000
    """Unacknowledged deliveries per client-ack subscription when the subscriber asks for no bound."""
    max_prefetch: int = 100_000
    """Upper bound on any requested prefetch (memory safety)."""
    max_queue_depth: int = 1_000_000
    """Publishes to a fuller queue are rejected."""
    max_transaction_size: int = 100_000
    """Operations held in one open transaction."""
    output_room: int | None = None
    """Bytes of deliveries a new connection is handed before its host says they went out (None: no bound).
    The servers set it to their transport's write high-water mark (see :meth:`BrokerCore.set_output_room`)."""
