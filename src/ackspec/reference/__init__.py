"""The bundled reference implementations: broker (STOMP 1.2 + AMQP 1.0 on one core) and client.

Broker layout (sans-IO inside, asyncio only at the edge):

- ``stomp/``: STOMP codec (``FrameParser``, ``encode``, ``Frame``) and the per-connection
  ``StompSession`` state machine.
- ``broker/``: the protocol-neutral core (``BrokerCore``: queues, topics, settlement,
  transactions, dead-lettering), its effects, journal records, the hub that routes effects,
  authentication and requirement tracing.
- ``journal/``: the append-only, CRC-checked journal with group commit and replay.
- ``faults.py``: fault injection for testing clients (``FaultInjector``, ``FaultRule``, ``ConfirmPolicy``).
- ``server.py``: the asyncio server, the JSON control API and ``EmbeddedBroker``.
- ``parts.py``: ``BrokerParts``, the classes a broker is built from (variants are subclasses, built outside).

Quick start::

    from ackspec.reference import EmbeddedBroker, FaultRule
    with EmbeddedBroker() as broker:
        print(broker.stomp_url)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ackspec.reference.faults import ConfirmPolicy, FaultInjector, FaultRule
    from ackspec.reference.server import BrokerServer, EmbeddedBroker

_LAZY = {
    "EmbeddedBroker": "ackspec.reference.server",
    "BrokerServer": "ackspec.reference.server",
    "FaultRule": "ackspec.reference.faults",
    "FaultInjector": "ackspec.reference.faults",
    "ConfirmPolicy": "ackspec.reference.faults",
}


def __getattr__(name: str) -> Any:
    """Lazy exports, so importing a sub-package (e.g. the client) does not start asyncio machinery."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ackspec.reference' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = ["BrokerServer", "ConfirmPolicy", "EmbeddedBroker", "FaultInjector", "FaultRule"]
