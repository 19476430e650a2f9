"""STOMP frames as immutable values, and the command names of STOMP 1.0, 1.1 and 1.2.

A :class:`Frame` keeps its headers as an ordered tuple of ``(name, value)`` pairs because
STOMP allows repeated headers (the first occurrence wins, STOMP 1.2 "Repeated Header
Entries"), and order matters for a faithful round trip. :meth:`Frame.get` looks a header up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, NamedTuple

ACK_TYPE_HEADER: Final = "ackspec-ack-type"
"""ackspec's STOMP extension, between its reference client and broker: on a NACK, the ActiveMQ ack
type the client means (other brokers ignore it and see a plain NACK)."""
POISON_ACK_TYPE: Final = "1"
"""ActiveMQ's POISON ack type: give the message up (the reference broker dead-letters it at once)."""

CONNECT: Final = "CONNECT"
STOMP: Final = "STOMP"
CONNECTED: Final = "CONNECTED"
SEND: Final = "SEND"
SUBSCRIBE: Final = "SUBSCRIBE"
UNSUBSCRIBE: Final = "UNSUBSCRIBE"
ACK: Final = "ACK"
NACK: Final = "NACK"
BEGIN: Final = "BEGIN"
COMMIT: Final = "COMMIT"
ABORT: Final = "ABORT"
DISCONNECT: Final = "DISCONNECT"
MESSAGE: Final = "MESSAGE"
RECEIPT: Final = "RECEIPT"
ERROR: Final = "ERROR"

CLIENT_COMMANDS: Final = frozenset(
    {CONNECT, STOMP, SEND, SUBSCRIBE, UNSUBSCRIBE, ACK, NACK, BEGIN, COMMIT, ABORT, DISCONNECT}
)
"""Commands a client sends."""
SERVER_COMMANDS: Final = frozenset({CONNECTED, MESSAGE, RECEIPT, ERROR})
"""Commands a server sends."""
ALL_COMMANDS: Final = CLIENT_COMMANDS | SERVER_COMMANDS

VERSIONS: Final = ("1.0", "1.1", "1.2")
"""Supported protocol versions, oldest first."""

UNESCAPED_COMMANDS: Final = frozenset({CONNECT, STOMP, CONNECTED})
"""Frames whose headers are never escaped (STOMP 1.2 "Value Encoding")."""

Headers = tuple[tuple[str, str], ...]


class Frame(NamedTuple):
    """One STOMP frame. ``headers`` are decoded (unescaped) text; ``body`` is raw bytes.

    A named tuple, not a frozen dataclass: the parser makes one per frame received, and a frozen dataclass's
    ``__init__`` sets each field through ``object.__setattr__``, where the parser can build a tuple directly
    with :func:`tuple.__new__`."""

    command: str
    headers: Headers = ()
    body: bytes = b""

    def get(self, name: str, default: str | None = None) -> str | None:
        """Value of the first header called ``name`` (first occurrence wins), or ``default``."""
        for n, v in self.headers:  # frames have few headers: a scan beats building an index
            if n == name:
                return v
        return default

    def __contains__(self, name: object) -> bool:
        for n, _ in self.headers:  # noqa: SIM110 - a plain loop: no generator on the hot path
            if n == name:
                return True
        return False

    def with_headers(self, *extra: tuple[str, str]) -> Frame:
        """A copy with ``extra`` headers prepended (so they win over existing ones)."""
        return Frame(self.command, (*extra, *self.headers), self.body)

    @staticmethod
    def make(command: str, body: bytes = b"", **headers: str) -> Frame:
        """Convenience constructor: ``Frame.make("SEND", b"x", destination="/queue/a")``.

        Underscores in keyword names become dashes (``content_type`` -> ``content-type``).
        """
        return Frame(command, tuple((k.replace("_", "-"), v) for k, v in headers.items()), body)


@dataclass(frozen=True)
class HeartBeat:
    """A heart-beat: an end-of-line received between frames (STOMP 1.1+ "Heart-beating")."""

    marker: str = field(default="\n")


HEARTBEAT: Final = HeartBeat()
