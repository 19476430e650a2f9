"""What a broker is built from: the classes of its core, its hub, its STOMP sessions and its AMQP connections.

Why: whoever starts a broker (a :class:`~ackspec.reference.server.BrokerServer`, an
:class:`~ackspec.reference.server.EmbeddedBroker`) may hand it subclasses of these, so a variant of
the reference broker is built from outside it, without a switch inside it. The suite's own quality
checks (``tests/quality/``) build their deliberately faulty brokers this way: each overrides one
small method of one part.
"""

from __future__ import annotations

from dataclasses import dataclass

from ackspec.reference.amqp.connection import AmqpConnection
from ackspec.reference.broker.core import BrokerCore
from ackspec.reference.broker.hub import Hub
from ackspec.reference.stomp.session import StompSession


@dataclass(frozen=True)
class BrokerParts:
    """The classes one broker builds its pieces from (the reference broker's own by default)."""

    core: type[BrokerCore] = BrokerCore
    hub: type[Hub] = Hub
    stomp_session: type[StompSession] = StompSession
    amqp_connection: type[AmqpConnection] = AmqpConnection


REFERENCE_PARTS = BrokerParts()
"""The reference broker itself."""
