"""Protocol-neutral, sans-IO broker core shared by the STOMP and AMQP 1.0 listeners.

Architecture: a protocol host (``reference.stomp.session`` for STOMP, the AMQP listener)
translates wire frames into method calls on :class:`BrokerCore`; each call returns a list of
frozen effects (:mod:`.effects`) that the host turns into wire frames, journal writes and
closes. The core never does I/O and never reads a clock; it raises :class:`CoreError` for a
caller mistake *before* changing any state.

Neutral API (stable; ``conn`` is a host-chosen connection id string):

=====================================================  ======================================================
``open(conn, user=None)``                              register an authenticated connection
``close(conn, abrupt=False)``                          roll back its transactions; unsettled deliveries are
                                                       requeued ahead of newer messages, ``redelivered=True``,
                                                       delivery-count + 1 (DLQ past ``max_redeliveries``)
``set_writable(conn, bool)``                           transport back-pressure: pause/resume deliveries
``set_output_room(conn, nbytes)``                      consumer back-pressure: deliveries spend the room; at 0
                                                       ``conn`` joins ``out_of_room`` and dispatch to it holds
``subscribe(conn, sub, dest, ack=AckMode.X,``          attach a consumer. ``prefetch``: bound on unsettled
``          prefetch=None, credit=None)``              deliveries (client modes; default 1000). ``credit``:
                                                       AMQP link credit instead (``add_credit``)
``unsubscribe(conn, sub)``                             detach; unsettled deliveries are requeued
``add_credit(conn, sub, n, drain=False)``              AMQP flow; with ``drain`` leftover credit -> ``Drained``
``publish(conn, dest, body, headers=(),``              enqueue (queue) or copy to every subscriber (topic).
``        persistent=False, tx=None, confirm=None)``   ``confirm`` is echoed in ``Confirm``/``Reject``
``publish_many(conn, dest, [(body, headers,``          the same as one ``publish`` per message (no
``             persistent, confirm), ...])``            transaction): one call for a read's worth of sends
``settle(conn, delivery_id, Settlement(...),``         ACK = ``ACCEPT``; NACK = ``REQUEUE`` (count + 1);
``       cumulative=None, tx=None, confirm=None)``     ``RELEASE`` (no count change); ``Settlement(MODIFIED,
                                                       delivery_failed, undeliverable_here)``;
                                                       ``Settlement(REJECTED, reason=...)`` -> DLQ.
                                                       ``cumulative`` defaults to ``ack is AckMode.CLIENT``
``accept_many(conn, [delivery_id, ...])``              ``settle(..., ACCEPT, cumulative=False)`` per id, the
                                                       queue dispatched once; unknown ids change nothing
``begin(conn, tx)`` / ``commit(conn, tx, confirm=)``   transactions: sends and settlements held until commit
``abort(conn, tx, redeliver_settled=True, confirm=)``  roll back (AMQP: ``redeliver_settled=False`` keeps the
                                                       deliveries acquired, per AMQP 4.4.2)
``restore(records)``                                   replay the journal before accepting connections
=====================================================  ======================================================

Effects: ``Deliver(conn, sub, delivery_id, message, redelivered, delivery_count)`` where
``delivery_count`` counts earlier *unsuccessful* deliveries (0 on the first, AMQP header
semantics; STOMP shows ``delivery-count`` = this + 1, the JMSXDeliveryCount);
``Confirm(conn, token, durable)`` (send the receipt/disposition, after fsync of the
preceding journal appends when ``durable``); ``Reject(conn, token, reason)``;
``Drained(conn, sub, credit)``; ``Close(conn, reason)``; ``JournalAppend(record)``.

Destinations: ``/topic/NAME`` is a topic (a copy per current subscriber, non-durable
subscriptions, so topic messages are never journaled); everything else, ``/queue/NAME``
and unprefixed names alike, is a queue (each message to one consumer, round robin).
Dead letters go to ``config.dead_letter_queue`` (``/queue/DLQ``) with the headers
``original-destination`` and ``dead-letter-reason``.

Ordering: per producer and destination, FIFO; redelivered messages go back ahead of newer
ones, in their original order.
"""

from ackspec.reference.broker.core import BrokerCore, CoreError
from ackspec.reference.broker.effects import Close, Confirm, Deliver, Drained, Effect, JournalAppend, Reject
from ackspec.reference.broker.model import (
    ACCEPT,
    RELEASE,
    REQUEUE,
    AckMode,
    CoreConfig,
    DestinationKind,
    Message,
    Outcome,
    Settlement,
    destination_kind,
)
from ackspec.reference.broker.records import Committed, DeadLettered, Record, Removed, Stored
from ackspec.reference.broker.trace import Tracer

__all__ = [
    "ACCEPT",
    "RELEASE",
    "REQUEUE",
    "AckMode",
    "BrokerCore",
    "Close",
    "Committed",
    "Confirm",
    "CoreConfig",
    "CoreError",
    "DeadLettered",
    "Deliver",
    "DestinationKind",
    "Drained",
    "Effect",
    "JournalAppend",
    "Message",
    "Outcome",
    "Record",
    "Reject",
    "Removed",
    "Settlement",
    "Stored",
    "Tracer",
    "destination_kind",
]
