"""What a driver gains when its target is the reference broker running in this process.

Both drivers of the embedded broker (stomp.py over STOMP, proton over AMQP) reach the same
broker object, so restarting it on its journal (:attr:`Capability.BROKER_RESTART`), its fault
injection (:attr:`Capability.FAULT_INJECTION`) and a slowed journal are one piece of code,
mixed into each driver.
"""

from __future__ import annotations

from typing import Any

from ackspec.adapters.base import Capability, NotSupported


class EmbeddedBrokerControls:
    """Mixin for an adapter whose :attr:`broker` is an in-process ``EmbeddedBroker``."""

    broker: Any

    @property
    def faults(self) -> Any:
        return self.broker.faults

    def restart_broker(self, *, crash: bool = False) -> None:
        """Stop the broker (connections dropped abruptly) and start it again on its journal (same ports).

        ``crash=True`` is a power loss: journal writes no completed fsync covered are lost.
        """
        self.broker.restart(crash=crash)

    def slow_fsync(self, seconds: float) -> None:
        """Make every journal fsync take ``seconds`` longer (a slow disk) until the next restart or 0."""
        journal = getattr(getattr(self.broker, "server", None), "journal", None)
        if journal is None:
            raise NotSupported(Capability.PERSISTENCE, "the embedded broker has no journal")
        journal.sync_delay = seconds


__all__ = ["EmbeddedBrokerControls"]
