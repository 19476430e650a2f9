"""AMQP 1.0 listener of the reference broker, on the same sans-IO core as STOMP.

Modules: :mod:`.sasl` (SASL ANONYMOUS/PLAIN server, sans-IO), :mod:`.mapping`
(messages and addresses between AMQP and the core), :mod:`.connection` (one
connection: proton's engine driven by bytes, core calls and effects),
:mod:`.listener` (the thin asyncio server).
"""

from ackspec.reference.amqp.connection import AmqpConnection
from ackspec.reference.amqp.listener import AmqpListener

__all__ = ["AmqpConnection", "AmqpListener"]
