"""Sans-IO consumer acknowledgement logic of ActiveMQ Classic (seed 003).

The core decides *which acknowledgement of which type* a consumer sends and *when*;
the I/O layer maps each :class:`AckRecord` to the wire and appends it to the client's
event log, so tests see exactly the ack types an ActiveMQ client would send:

* AUTO: STANDARD per message when ``receive`` returns / the listener returns; with
  ``optimize_acknowledge`` (effective only in AUTO mode) one STANDARD ack covering the
  batch when 0.65 x prefetch messages are consumed, or when ``optimize_acknowledge_timeout``
  has passed since the last ack;
* DUPS_OK: lazy batches as AUTO + optimizeAcknowledge on queues, at 0.5 x prefetch on topics;
* CLIENT and SESSION_TRANSACTED: nothing until ``acknowledge()`` / ``commit()``; a
  DELIVERED ack (type 0) each time the unacknowledged delivered messages reach
  0.5 x prefetch, so the broker may extend the prefetch window;
* INDIVIDUAL: one INDIVIDUAL ack per ``message.acknowledge()``;
* listener failure in AUTO/DUPS_OK, ``recover()`` and ``rollback()``: REDELIVERED;
* redelivery policy: a listener failure after ``maximum_redeliveries`` redeliveries sends a
  POISON ack instead of a REDELIVERED one (as ActiveMQ's client does), and a message delivered more
  than 1 + ``maximum_redeliveries`` times is not given to the application; a POISON ack sends it
  to the dead-letter queue;
* a topic message not matching the consumer's selector: UNMATCHED.

Prefetch 0 means pull: the consumer asks for one message per ``receive`` and a
MessageListener is refused (listeners need a prefetch of at least 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from ackspec.reference.client.clock import Clock
from ackspec.reference.client.errors import IllegalStateError, JMSError


class AckMode(IntEnum):
    """Session acknowledgement modes with their Jakarta Messaging / ActiveMQ numbers."""

    SESSION_TRANSACTED = 0
    AUTO_ACKNOWLEDGE = 1
    CLIENT_ACKNOWLEDGE = 2
    DUPS_OK_ACKNOWLEDGE = 3
    INDIVIDUAL_ACKNOWLEDGE = 4


class AckType(IntEnum):
    """ActiveMQ ``MessageAck`` types."""

    DELIVERED = 0
    POISON = 1
    STANDARD = 2
    REDELIVERED = 3
    INDIVIDUAL = 4
    UNMATCHED = 5


OPTIMIZE_ACK_FRACTION = 0.65
DELIVERED_ACK_FRACTION = 0.5


@dataclass(frozen=True, slots=True)
class Inbound:
    """What the core needs to know about one delivered message."""

    ack_id: str
    message_id: str | None
    delivery_count: int  # 1 on first delivery


@dataclass(frozen=True, slots=True)
class AckRecord:
    """One acknowledgement the consumer sends (or, for DELIVERED over STOMP, would send)."""

    type: AckType
    consumer: str
    messages: tuple[Inbound, ...]
    reason: str = ""

    @property
    def first(self) -> Inbound:
        return self.messages[0]

    @property
    def last(self) -> Inbound:
        return self.messages[-1]


class ConsumerAckCore:
    """Ack decisions for one consumer. Not thread-safe; the I/O layer serialises calls."""

    def __init__(self, consumer: str, mode: AckMode, *, prefetch: int, optimize_acknowledge: bool,
                 optimize_acknowledge_timeout: float, maximum_redeliveries: int, clock: Clock,
                 listener: bool = False, topic: bool = False) -> None:
        if listener and prefetch == 0:
            raise JMSError("a MessageListener needs a prefetch of at least 1 (prefetch 0 is pull mode)")
        self.consumer = consumer
        self.mode = mode
        self.prefetch = prefetch
        self.optimize = optimize_acknowledge and mode is AckMode.AUTO_ACKNOWLEDGE and prefetch > 0
        self.lazy = self.optimize or (mode is AckMode.DUPS_OK_ACKNOWLEDGE and prefetch > 1)
        self.topic = topic
        self.timeout = optimize_acknowledge_timeout
        self.maximum_redeliveries = maximum_redeliveries
        self.clock = clock
        self._consumed: list[Inbound] = []  # consumed, ack deferred (optimize / DUPS_OK)
        self._delivered: list[Inbound] = []  # delivered to the app, unacknowledged (CLIENT, tx, INDIVIDUAL)
        self._delivered_acked_upto = 0  # how many of _delivered a DELIVERED ack already covered
        self._last_ack_at = clock.now()
        self.closed = False

    # -- thresholds -----------------------------------------------------------------------------

    @property
    def optimize_batch(self) -> int:
        """Batch size of lazy acks: ceil(0.65 x prefetch); DUPS_OK on a topic: ceil(0.5 x prefetch)."""
        dups_on_topic = self.mode is AckMode.DUPS_OK_ACKNOWLEDGE and self.topic and not self.optimize
        fraction = DELIVERED_ACK_FRACTION if dups_on_topic else OPTIMIZE_ACK_FRACTION
        return max(1, math.ceil(self.prefetch * fraction))

    @property
    def delivered_batch(self) -> int:
        """DELIVERED acks go out when unacknowledged delivered messages reach ceil(0.5 x prefetch)."""
        return max(1, math.ceil(self.prefetch * DELIVERED_ACK_FRACTION))

    @property
    def pull(self) -> bool:
        return self.prefetch == 0

    def unacknowledged(self) -> int:
        """Messages delivered to the application that still await acknowledge/commit/rollback."""
        return len(self._delivered)

    def outstanding(self) -> int:
        """Messages delivered to the application and not yet acknowledged in any way."""
        return len(self._delivered) + len(self._consumed)

    # -- events ---------------------------------------------------------------------------------

    def on_arrival(self, message: Inbound, *, matches: bool = True) -> AckRecord | None:
        """A message arrived from the broker. Returns an ack instead of delivering it, or None to deliver."""
        if not matches:
            return AckRecord(AckType.UNMATCHED, self.consumer, (message,), "selector does not match")
        redeliveries = message.delivery_count - 1
        if self.maximum_redeliveries >= 0 and redeliveries > self.maximum_redeliveries:
            return AckRecord(AckType.POISON, self.consumer, (message,),
                             f"redelivered {redeliveries} times, maximumRedeliveries={self.maximum_redeliveries}")
        return None

    def on_delivered(self, message: Inbound) -> list[AckRecord]:
        """The application got the message (``receive`` returns it / the listener is about to run)."""
        if self.mode in (AckMode.AUTO_ACKNOWLEDGE, AckMode.DUPS_OK_ACKNOWLEDGE):
            return []
        self._delivered.append(message)
        if self.mode is AckMode.INDIVIDUAL_ACKNOWLEDGE or self.pull:
            return []
        pending = self._delivered[self._delivered_acked_upto:]
        if len(pending) >= self.delivered_batch:
            self._delivered_acked_upto = len(self._delivered)
            return [AckRecord(AckType.DELIVERED, self.consumer, tuple(pending),
                              f"{len(pending)} unacknowledged >= 0.5 x prefetch {self.prefetch}")]
        return []

    def on_consumed(self, message: Inbound) -> list[AckRecord]:
        """AUTO/DUPS_OK: ``receive`` returned the message or the listener returned normally."""
        if self.mode not in (AckMode.AUTO_ACKNOWLEDGE, AckMode.DUPS_OK_ACKNOWLEDGE):
            return []
        if not self.lazy:
            self._last_ack_at = self.clock.now()
            return [AckRecord(AckType.STANDARD, self.consumer, (message,))]
        self._consumed.append(message)
        if len(self._consumed) >= self.optimize_batch:
            return self._flush_consumed(f"batch of {len(self._consumed)} >= {self.optimize_batch}")
        return []

    def on_listener_failed(self, message: Inbound, error: str) -> list[AckRecord]:
        """AUTO/DUPS_OK listener raised: flush earlier acks, then ask for redelivery (8.7)."""
        if self.mode not in (AckMode.AUTO_ACKNOWLEDGE, AckMode.DUPS_OK_ACKNOWLEDGE):
            return []  # CLIENT/tx/INDIVIDUAL: the next message is delivered; recover()/rollback() redelivers
        out = self._flush_consumed("flush before redelivery")
        redeliveries = message.delivery_count - 1
        if 0 <= self.maximum_redeliveries <= redeliveries:  # no redelivery left: POISON instead of another
            return [*out, AckRecord(AckType.POISON, self.consumer, (message,),
                                    f"listener raised: {error}; redelivered {redeliveries} times, "
                                    f"maximumRedeliveries={self.maximum_redeliveries}")]
        return [*out, AckRecord(AckType.REDELIVERED, self.consumer, (message,), f"listener raised: {error}")]

    def acknowledge(self, message: Inbound | None = None) -> list[AckRecord]:
        """``message.acknowledge()``: CLIENT acks everything delivered; INDIVIDUAL acks ``message``."""
        if self.closed:
            raise IllegalStateError("acknowledge() after the consumer's session was closed")
        if self.mode is AckMode.INDIVIDUAL_ACKNOWLEDGE:
            if message is None or message not in self._delivered:
                return []
            self._delivered.remove(message)
            self._delivered_acked_upto = min(self._delivered_acked_upto, len(self._delivered))
            return [AckRecord(AckType.INDIVIDUAL, self.consumer, (message,))]
        if self.mode is not AckMode.CLIENT_ACKNOWLEDGE:
            return []  # ignored under the automatic modes (3.6)
        return self._take_delivered(AckType.STANDARD, "acknowledge()")

    def commit(self) -> list[AckRecord]:
        return self._take_delivered(AckType.STANDARD, "commit")

    @property
    def delivered_count(self) -> int:
        """How many messages are delivered to the application and not yet acknowledged."""
        return len(self._delivered)

    def delivered_ack_ids(self) -> set[str]:
        """Ack ids of the messages delivered to the application and not yet acknowledged."""
        return {m.ack_id for m in self._delivered}

    def rollback(self, reason: str = "rollback") -> list[AckRecord]:
        """rollback() / recover(): everything delivered and unacknowledged is redelivered."""
        records = self._take_delivered(AckType.REDELIVERED, reason)
        return records

    @property
    def flushes_on_timeout(self) -> bool:
        """optimizeAcknowledgeTimeOut flushes lazy acks, except DUPS_OK's topic batch: that one goes out at
        0.5 x prefetch only (AMQ-DUPS-OK-TOPIC-BATCH), so a slow application never splits it."""
        return not (self.mode is AckMode.DUPS_OK_ACKNOWLEDGE and self.topic and not self.optimize)

    def on_timer(self) -> list[AckRecord]:
        if (self._consumed and self.flushes_on_timeout
                and self.clock.now() - self._last_ack_at >= self.timeout):
            return self._flush_consumed(f"optimizeAcknowledgeTimeOut {self.timeout}s passed")
        return []

    def next_deadline(self) -> float | None:
        if not self._consumed or not self.flushes_on_timeout:
            return None
        return self._last_ack_at + self.timeout

    def flush(self, reason: str = "close") -> list[AckRecord]:
        """Deferred AUTO/DUPS_OK acks go out now (consumer close, session close)."""
        return self._flush_consumed(reason)

    # -- internals -------------------------------------------------------------------------------

    def _flush_consumed(self, reason: str) -> list[AckRecord]:
        if not self._consumed:
            return []
        batch, self._consumed = tuple(self._consumed), []
        self._last_ack_at = self.clock.now()
        return [AckRecord(AckType.STANDARD, self.consumer, batch, reason)]

    def _take_delivered(self, ack_type: AckType, reason: str) -> list[AckRecord]:
        if not self._delivered:
            return []
        batch: Sequence[Inbound] = tuple(self._delivered)
        self._delivered = []
        self._delivered_acked_upto = 0
        return [AckRecord(ack_type, self.consumer, tuple(batch), reason)]
