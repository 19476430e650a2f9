"""Mutants that live below proton: rewriting the AMQP frames a connection receives.

Proton's engine enforces link credit on the sending side and hides disposition
ranges from the application (it updates each delivery in the range). Three
quality-check mutants need to get past that, so they are done the way a buggy
broker would get them wrong, by misreading the peer's frames before proton sees them:

``ignore-prefetch`` (AMQP form: *ignore credit*)
    every ``flow`` frame of a link is read as granting :data:`EXTRA_CREDIT` more
    credit than it does, so the broker sends transfers the receiver never allowed.
``client-as-individual`` (AMQP form: *a disposition range settles one delivery*)
    a ``disposition`` covering ``first..last`` is read as covering ``last`` only.
    AMQP has no cumulative acknowledgement; a range is how a client settles many
    deliveries at once (the driver's cumulative CLIENT ack is written as one),
    and applying it to one delivery is the same bug as an individual ack.
``announced-not-final`` (AMQP only)
    a ``disposition`` that announces an outcome without settling has its state dropped, so the
    outcome of the disposition that settles the delivery later wins (AMQP 1.0 2.7.5: the announced
    terminal state is final; Artemis and ActiveMQ 6 behave so, see their profiles).

:class:`FrameRewriter` is sans-IO: bytes in, bytes out, buffering partial frames
(framing: :mod:`ackspec.reference.amqp.framing`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from proton import Data, Described, ulong

from ackspec.reference.amqp.framing import AMQP_FRAME, HEADER, FrameSplitter, read_header, with_body

FLOW = 0x13
DISPOSITION = 0x15
EXTRA_CREDIT = 1000
"""Credit an ``ignore-prefetch`` broker believes it got on top of what the receiver granted."""



class FrameRewriter:
    """Splits the incoming AMQP byte stream into frames and lets mutants rewrite performatives.

    ``active(name)`` says whether a mutant is on; it is asked per frame, so a mutant
    switched on mid-connection takes effect at the next frame.
    """

    def __init__(self, active: Callable[[str], bool]) -> None:
        self.active = active
        self._splitter = FrameSplitter()

    def feed(self, data: bytes) -> bytes:
        """Bytes received from the peer -> the bytes proton should see (whole frames only)."""
        return b"".join(unit if unit[:4] == b"AMQP" else self._rewrite(unit) for unit in self._splitter.feed(data))

    def _rewrite(self, frame: bytes) -> bytes:
        if len(frame) < HEADER.size or read_header(frame).size != len(frame):
            return frame  # not AMQP framing: proton reports it
        header = read_header(frame)
        doff = header.doff * 4
        if header.type != AMQP_FRAME or len(frame) <= doff + 3 or frame[doff:doff + 2] != b"\x00\x53":
            return frame  # not an AMQP performative with a small-ulong descriptor
        code = frame[doff + 2]
        if code == FLOW and self.active("ignore-prefetch"):
            return self._edit(frame, doff, _inflate_credit)
        if code == DISPOSITION and self.active("client-as-individual"):
            return self._edit(frame, doff, _last_only)
        if code == DISPOSITION and self.active("announced-not-final"):
            return self._edit(frame, doff, _unannounced)
        return frame

    @staticmethod
    def _edit(frame: bytes, doff: int, edit: Callable[[list[Any]], bool]) -> bytes:
        body = frame[doff:]
        data = Data()
        used = data.decode(body)
        data.rewind()
        data.next()
        performative = data.get_object()
        if not isinstance(performative, Described) or not isinstance(performative.value, list):
            return frame
        fields: list[Any] = list(performative.value)
        if not edit(fields):
            return frame
        encoded = Data()
        encoded.put_object(Described(ulong(int(performative.descriptor)), fields))  # type: ignore[arg-type]
        return with_body(frame, bytes(encoded.encode()) + body[used:])


def _inflate_credit(fields: list[Any]) -> bool:
    """flow: handle (4), link-credit (6): a link's flow grants EXTRA_CREDIT more."""
    if len(fields) <= 6 or fields[4] is None or fields[6] is None:
        return False
    credit = fields[6]
    fields[6] = type(credit)(int(credit) + EXTRA_CREDIT)
    return True


def _last_only(fields: list[Any]) -> bool:
    """disposition: first (1), last (2): a range shrinks to its last delivery."""
    if len(fields) <= 2 or fields[2] is None or fields[2] == fields[1]:
        return False
    fields[1] = fields[2]
    return True


def _unannounced(fields: list[Any]) -> bool:
    """disposition: settled (3), state (4): an unsettled disposition's state is not read, so the state of
    the disposition that settles the delivery later is the one applied."""
    if len(fields) <= 4 or fields[3] or fields[4] is None:
        return False
    fields[4] = None
    return True


__all__ = ["EXTRA_CREDIT", "FrameRewriter"]
