"""Resource limits of the reference broker's AMQP 1.0 listener (the STOMP ones are in
:class:`~ackspec.reference.stomp.session.SessionConfig`). Each has a default, a flag on ``ackspec broker``
and a test; 0 turns a timeout off.

Why: without them 2,000 idle AMQP connections took memory from 47 to 216 MB, a 64 MB message was accepted,
5,001 open transactions were, and an idle or half-open socket stayed forever (issue 20).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_MESSAGE = 4 * 1024 * 1024
"""Same as STOMP's largest frame."""


@dataclass(frozen=True)
class AmqpLimits:
    max_connections: int = 1000
    """Open AMQP connections; more are closed at once (logged)."""
    max_message_size: int = DEFAULT_MAX_MESSAGE
    """Largest message (encoded sections), advertised on every link the client sends on; a larger transfer
    ends that link with ``amqp:link:message-size-exceeded``."""
    max_transactions: int = 100
    """Open transactions per connection; one more declare is rejected with ``amqp:resource-limit-exceeded``."""
    open_timeout: float = 10.0
    """Seconds from accept to a completed AMQP open (SASL included); then the socket is closed."""
    idle_timeout: float = 600.0
    """Seconds without a byte from the client (AMQP heart-beats, empty frames, count) before it is closed."""
