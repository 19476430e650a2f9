"""The capabilities a requirement needs and a target offers: the catalogue's vocabulary.

A requirement names the capabilities its tests need (``capabilities:`` in ``spec/catalogue``), a target
profile the ones its broker has (``features:`` in ``spec/targets``), and a driver the ones it can
exercise (:attr:`ackspec.adapters.base.Adapter.capabilities`). The names are the catalogue's, so the
enumeration lives at the bottom layer with it and the drivers import it from here.
"""

from __future__ import annotations

from enum import StrEnum


class Capability(StrEnum):
    """Features a driver (and the target behind it) can exercise."""

    QUEUES = "queues"
    TOPICS = "topics"
    ACK_AUTO = "ack.auto"
    ACK_CLIENT = "ack.client"
    ACK_CLIENT_INDIVIDUAL = "ack.client-individual"
    NACK = "nack"
    NACK_OUTCOMES = "nack.outcomes"  # released / modified / rejected distinguished (AMQP)
    RECEIPTS = "receipts"  # confirmed sends (STOMP receipt, AMQP unsettled send)
    TRANSACTIONS = "transactions"
    TRANSACTIONAL_ACK = "transactions.ack"
    PREFETCH = "prefetch"  # a bound on unacknowledged deliveries (prefetch or credit)
    PERSISTENCE = "persistence"
    REDELIVERED_FLAG = "redelivered-flag"
    DELIVERY_COUNT = "delivery-count"
    DEAD_LETTER = "dead-letter"
    ABRUPT_DISCONNECT = "abrupt-disconnect"
    HEARTBEAT = "heartbeat"
    CUSTOM_HEADERS = "custom-headers"
    BINARY_BODY = "binary-body"
    BROKER_RESTART = "broker-restart"  # the harness can restart the target (reference broker)
    FAULT_INJECTION = "fault-injection"  # reference broker's fault API is reachable
    ASYNC_SEND = "async-send"  # JMS 7.3 completion listeners (reference client)
    PUBLISH_WINDOW = "publish-window"
    DURABLE_SUBSCRIPTIONS = "durable-subscriptions"  # named topic subscriptions that outlive their consumer
    SELECTORS = "selectors"  # JMS message selectors on consumers (STOMP `selector`, AMQP selector filter)
    NO_LOCAL = "no-local"  # JMS noLocal topic consumers (ActiveMQ's STOMP header, AMQP no-local filter)
    CLIENT_ID = "client-id"  # JMS client identifiers (STOMP client-id, AMQP sole-connection-for-container)
    WEBSOCKET = "websocket"  # the target is reached over WebSocket (ws://, STOMP subprotocols v12.stomp...)
