"""What an AMQP message carries beyond STOMP's strings: kept with the core message, unchanged.

A STOMP frame is a body and string headers, and the core's :class:`~.model.Message` holds exactly that
(the headers are also what STOMP consumers see). An AMQP 1.0 message carries more, which a JMS client
over AMQP relies on (the AMQP JMS mapping): typed application properties, a body that is a data section,
an amqp-value (a TextMessage's string, a MapMessage's map) or an amqp-sequence, message annotations (the
JMS message type ``x-opt-jms-msg-type``), typed message and correlation ids, priority, time-to-live,
absolute expiry and creation time. :class:`Typed` keeps them so that an AMQP receiver gets the message the
sender sent, the core can honour priority and expiry, and selectors compare typed values (JMS 3.8).

The AMQP sections themselves are kept encoded (``amqp``: every bare-message section, as AMQP encodes
it), so nothing is lost in a round trip through the broker or its journal; the fields the core
decides on are kept decoded beside them. The core never parses ``amqp``: the AMQP host writes and reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

PropertyValue = str | int | float | bool | None
"""A property as a selector sees it: JMS's String, long (every integer type), double (float and
double) and boolean; NULL for what JMS properties cannot hold."""

DEFAULT_PRIORITY: Final = 4
"""JMS 3.4.10: the default priority; 0-4 are normal, 5-9 expedited."""


@dataclass(frozen=True, slots=True)
class Typed:
    """The typed side of a message (see the module docstring). Immutable, like the message."""

    amqp: bytes
    """The bare message's sections as AMQP encodes them (message-annotations up to the body)."""
    properties: tuple[tuple[str, PropertyValue], ...] = ()
    priority: int = DEFAULT_PRIORITY
    ttl: int = 0
    """Time-to-live in milliseconds (0: none), for the header of each delivery."""
    expiry: int = 0
    """Absolute expiry, milliseconds since the epoch (0: never): the message is never delivered after."""
    created: int = 0
    """Creation time, milliseconds since the epoch (0: not given): JMSTimestamp."""
    sender_id: str = ""
    """The sender's message id as text (JMSMessageID), ``""`` when it set none."""
    added: tuple[tuple[str, str], ...] = ()
    """Headers the broker added after the message arrived (dead-letter reason, a ``modified`` outcome's
    annotations): the AMQP host adds them to ``amqp`` when it delivers the message."""

    def value_of(self, name: str) -> PropertyValue:
        """The typed application property ``name``, or None (NULL) when absent."""
        for key, value in self.properties:
            if key == name:
                return value
        return None

    def has_property(self, name: str) -> bool:
        return any(key == name for key, _ in self.properties)

    def expired(self, now_ms: int) -> bool:
        return 0 < self.expiry <= now_ms

    @property
    def expedited(self) -> bool:
        """JMS 3.4.10: priorities 5-9 should be delivered ahead of normal ones (0-4)."""
        return self.priority > DEFAULT_PRIORITY

    def with_added(self, headers: tuple[tuple[str, str], ...]) -> Typed:
        """These headers added (a later one of the same name replacing an earlier one)."""
        names = {name for name, _ in headers}
        return replace(self, added=(*((n, v) for n, v in self.added if n not in names), *headers))
