"""Producer flow control: while the stored messages exceed a bound, stop reading from producers.

Without it a 1 GB backlog for a slow consumer sat entirely in memory (4.15 GB peak, issue 20). The hosts
ask :meth:`ProducerFlow.over` after handling a producer's input and, when it is, stop reading its socket
(``pause_reading``): the producer's sends then wait in TCP's window and its own buffers, a STOMP receipt or
an AMQP disposition comes later, and nothing is refused or lost. The server resumes them all once the
stored bytes are back under the low-water mark (80% of the bound), checked every tick.

Only *producer-only* connections are paused: a connection that also consumes must stay readable, since
its acknowledgements are what drains the backlog. So a client that produces and consumes on one
connection is not slowed (docs/security.md). The measure is :func:`~.broker.state.stored_bytes`, bodies plus
an estimated per-message overhead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ackspec.reference.broker.state import stored_bytes

DEFAULT_MAX_QUEUED_BYTES = 256 * 1024 * 1024
WRITE_HIGH_WATER = 1024 * 1024
"""Consumer side: the bytes of output a connection's transport may hold before the broker stops dispatching to it
(:meth:`~.broker.core.BrokerCore.set_output_room`); a slow ``ack:auto`` consumer's backlog stays in its queue."""
LOW_WATER = 0.8


@dataclass
class ProducerFlow:
    limit: int = DEFAULT_MAX_QUEUED_BYTES
    """Bound on :func:`stored_bytes` (0: no flow control)."""
    measure: Callable[[], int] = field(default=stored_bytes)
    paused: int = 0
    """Producers paused so far (a count for logs and tests)."""
    holding: bool = False
    """Some producer is paused now: the server checks for the low-water mark only then."""

    def pause(self) -> None:
        """A host paused a producer."""
        self.paused += 1
        self.holding = True

    def over(self) -> bool:
        """Whether a producer should stop being read now."""
        return self.limit > 0 and self.measure() > self.limit

    def may_resume(self) -> bool:
        return self.measure() <= self.limit * LOW_WATER
