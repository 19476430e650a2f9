"""The reference client: a Jakarta-Messaging-shaped Python API over STOMP 1.2 and AMQP 1.0.

Layout (sans-IO cores, thin threaded I/O):

- :mod:`.options`        connection-factory options and their seed defaults, parsed from a URL
- :mod:`.message`        the message object and its 7.3.6 / 7.3.9 access rules
- :mod:`.send_core`      sans-IO send bookkeeping: confirmations, 7.3 ordering, publish window
- :mod:`.consumer_core`  sans-IO ActiveMQ consumer acknowledgement (prefetch, optimizeAck, ack types)
- :mod:`.dispatch`       one callback thread per session; the "inside a callback" marker
- :mod:`.eventlog`       what the client did and saw, for tests to wait on
- :mod:`.wire`           the wire contract and the STOMP 1.2 mapping
- :mod:`.amqp_wire`      the AMQP 1.0 mapping (proton engine, sans-IO, one I/O thread)
- :mod:`.connection`     ConnectionFactory, Connection
- :mod:`.session`        Session, MessageProducer, MessageConsumer

Example::

    factory = ConnectionFactory("stomp://127.0.0.1:61613?blockOnDurableSend=true")
    with closing(factory.create_connection()) as conn:
        session = conn.create_session(False, AUTO_ACKNOWLEDGE)
        producer = session.create_producer(session.create_queue("orders"))
        producer.send(session.create_message(b"hello"), completion_listener=listener)
"""

from ackspec.reference.client.connection import Connection, ConnectionFactory, PublishEvent
from ackspec.reference.client.consumer_core import AckMode, AckType
from ackspec.reference.client.errors import (
    ConnectionLostError,
    IllegalStateError,
    InvalidDestinationError,
    JMSError,
    MessageNotAccessibleError,
    SendRejectedError,
    SendTimeoutError,
    TransactionRolledBackError,
)
from ackspec.reference.client.eventlog import ClientEvent, EventLog
from ackspec.reference.client.message import DeliveryMode, Message
from ackspec.reference.client.options import AckEventMode, ClientOptions
from ackspec.reference.client.session import (
    AUTO_ACKNOWLEDGE,
    CLIENT_ACKNOWLEDGE,
    DUPS_OK_ACKNOWLEDGE,
    INDIVIDUAL_ACKNOWLEDGE,
    SESSION_TRANSACTED,
    CompletionListener,
    MessageConsumer,
    MessageListener,
    MessageProducer,
    Session,
)

__all__ = [
    "AUTO_ACKNOWLEDGE", "CLIENT_ACKNOWLEDGE", "DUPS_OK_ACKNOWLEDGE", "INDIVIDUAL_ACKNOWLEDGE", "SESSION_TRANSACTED",
    "AckEventMode", "AckMode", "AckType", "ClientEvent", "ClientOptions", "CompletionListener", "Connection",
    "ConnectionFactory", "ConnectionLostError", "DeliveryMode", "EventLog", "IllegalStateError",
    "InvalidDestinationError", "JMSError", "Message", "MessageConsumer", "MessageListener",
    "MessageNotAccessibleError", "MessageProducer", "PublishEvent", "SendRejectedError", "SendTimeoutError",
    "Session", "TransactionRolledBackError",
]
