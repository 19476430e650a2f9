"""Where to cut the peer's input so an announced outcome is handled before a later frame can replace it.

A receiver may announce a delivery's outcome in an unsettled disposition and settle it later, with the
same or (illegally) another state; the announced terminal state is final (AMQP 1.0 2.7.5). proton keeps
only a delivery's latest remote state, so when both dispositions arrive in one read the broker would see
just the second. The listener therefore feeds proton up to the end of each unsettled disposition that
carries a state, handles the events, then feeds the rest.

Sans-IO: bytes in, cut offsets out. A cut anywhere is harmless (proton buffers partial frames), so the
scan looks for the disposition descriptor and checks the frame header in front of it instead of tracking
every frame boundary on the broker's hottest path; the last bytes of the previous read are kept so a
disposition split across two reads is found too.

A consumer sends one disposition per message, nearly all of them settled: the scan is one regular expression
(:data:`_CANDIDATE`) that skips, inside the regular expression engine, every disposition whose bytes say it is
settled or carries no state, so those cost no Python step each; only the rest is decoded in full (proton's
codec) to be sure.
"""

from __future__ import annotations

import re
from typing import Final

from proton import Data, Described

from ackspec.reference.amqp.framing import AMQP_FRAME, HEADER, MIN_DOFF

DISPOSITION_BODY: Final = b"\x00\x53\x15"
"""A described type whose descriptor is the small ulong 0x15: the disposition performative."""
_UINT: Final = rb"(?:\x43|\x52.|\x70....)"
"""An encoded uint (1.0 1.6.4): uint0, smalluint or uint."""
_NOT_ANNOUNCING: Final = (
    rb"(?:(?:\xc0.[\x05-\xff]|\xd0....\x00\x00\x00[\x05-\xff])"  # a list8 or list32 of five fields or more
    rb"(?:[\x40-\x42]|\x56.)" + _UINT + rb"(?:\x40|" + _UINT + rb")"  # role, first, last
    rb"(?:\x41|\x56\x01|(?:[\x40\x42]|\x56\x00)\x40)"  # settled true; or not settled and no state
    rb"|\x45|\xc0.[\x00-\x04]|\xd0....\x00\x00\x00[\x00-\x04])"  # an empty list, or under five fields: no state
)
"""The field lists (after the descriptor) of the dispositions that surely announce nothing: settled, or
without a state. The usual one (a consumer's settled disposition: five fields) is the first alternative,
so the regular expression engine tries it first."""
_CANDIDATE: Final = re.compile(re.escape(DISPOSITION_BODY) + rb"(?!" + _NOT_ANNOUNCING + rb")", re.DOTALL)
"""A disposition that may be unsettled with a state: one not surely announcing nothing (any other encoding
too). Found by the regular expression engine, so a consumer's settled dispositions cost no Python step each."""
KEEP: Final = 96
"""Bytes of a read kept for the next one: a disposition with a state is well under this."""


class AnnouncedOutcomes:
    """Finds the ends of unsettled dispositions carrying a delivery state in a stream fed read by read."""

    def __init__(self) -> None:
        self._tail = b""

    def cuts(self, data: bytes) -> list[int]:
        """Offsets in ``data`` just past each unsettled disposition with a state that ends in it (and
        before its last byte: a cut at the end is no cut). A read is searched where it lies; only a frame
        begun in the previous read is looked for in a copy (that read's tail and this read's head)."""
        tail = self._tail
        self._tail = data[-KEEP:] if len(data) >= KEEP else (tail + data)[-KEEP:]
        found = _ends(tail + data[:KEEP], len(tail), len(data), begun_before=True) if tail else []
        return found + _ends(data, 0, len(data), begun_before=False)


def _ends(window: bytes, shift: int, size: int, *, begun_before: bool) -> list[int]:
    """Cuts after the announcing dispositions in ``window``, as offsets into the read (which starts at
    ``shift`` in the window and is ``size`` bytes long); ``begun_before``: only frames whose header
    starts before the read."""
    found: list[int] = []
    for match in _CANDIDATE.finditer(window):
        start = match.start() - HEADER.size
        if begun_before and start >= shift:
            break
        end = _announcing_frame_end(window, start)
        if end is not None and 0 < end - shift < size:
            found.append(end - shift)
    return found


def _announcing_frame_end(window: bytes, start: int) -> int | None:
    """The end of the frame at ``start`` if it is a whole unsettled disposition with a state, else None."""
    if start < 0:
        return None
    size, doff, frame_type, _channel = HEADER.unpack_from(window, start)
    end = start + size
    if doff != MIN_DOFF or frame_type != AMQP_FRAME or size > KEEP or end > len(window):
        return None
    data = Data()
    try:
        data.decode(window[start + HEADER.size:end])
        data.rewind()
        data.next()
        value = data.get_object()
    except Exception:  # not a frame after all (message bytes that look like one): no cut
        return None
    fields = value.value if isinstance(value, Described) and isinstance(value.value, list) else []
    settled = bool(fields[3]) if len(fields) > 3 and fields[3] is not None else False
    has_state = len(fields) > 4 and fields[4] is not None
    return end if has_state and not settled else None

