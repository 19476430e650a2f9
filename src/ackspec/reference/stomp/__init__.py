"""STOMP 1.0/1.1/1.2 for the reference broker and client: sans-IO codec and session.

- :mod:`.frames`: the frozen :class:`Frame` value and command constants.
- :mod:`.codec`: :class:`FrameParser` (bytes -> frames, with limits) and :func:`encode`.
- :mod:`.session`: the broker-side per-connection protocol state machine.
"""

from ackspec.reference.stomp.codec import FrameParser, StompProtocolError, encode
from ackspec.reference.stomp.frames import HEARTBEAT, Frame, HeartBeat

__all__ = ["HEARTBEAT", "Frame", "FrameParser", "HeartBeat", "StompProtocolError", "encode"]
