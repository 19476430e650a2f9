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

A consumer sends one disposition per message, nearly all of them settled: their ``settled`` and ``state``
fields are read from the bytes first (:func:`_may_announce`), and only a disposition that may be
unsettled with a state is decoded in full (proton's codec, several times the cost).
"""

from __future__ import annotations

from typing import Final

from proton import Data, Described

from ackspec.reference.amqp.framing import AMQP_FRAME, HEADER, MIN_DOFF

DISPOSITION_BODY: Final = b"\x00\x53\x15"
"""A described type whose descriptor is the small ulong 0x15: the disposition performative."""
_WIDTHS: Final = {0x40: 1, 0x41: 1, 0x42: 1, 0x43: 1, 0x56: 2, 0x52: 2, 0x70: 5}
"""Encoded size of the values a disposition's role, first and last fields take (1.0 1.6): null, true, false,
uint0, boolean, smalluint, uint."""
_LIST8: Final = 0xC0
_LIST32: Final = 0xD0
_TRUE: Final = 0x41
_BOOLEAN: Final = 0x56
_NULL: Final = 0x40
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
    at = window.find(DISPOSITION_BODY)
    while at >= 0:
        start = at - HEADER.size
        if begun_before and start >= shift:
            break
        if _may_announce(window, at + len(DISPOSITION_BODY)):  # most are settled: no header, no decode
            end = _announcing_frame_end(window, start)
            if end is not None and 0 < end - shift < size:
                found.append(end - shift)
        at = window.find(DISPOSITION_BODY, at + 1)
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


def _may_announce(fields: bytes, pos: int) -> bool:
    """Whether the disposition whose field list starts at ``pos`` (just after its descriptor) may be
    unsettled with a state.

    False only when its encoding says so for sure: no ``state`` field, a null one, or ``settled`` true.
    Any encoding not read here (or bytes that end early) is left to the full decode (True)."""
    try:
        constructor = fields[pos]
        if constructor == _LIST8:
            count, pos = fields[pos + 2], pos + 3
        elif constructor == _LIST32:
            count, pos = int.from_bytes(fields[pos + 5:pos + 9]), pos + 9
        else:
            return constructor != 0x45  # list0: no fields at all
        if count < 5:
            return False
        for _ in range(3):  # role, first, last
            width = _WIDTHS.get(fields[pos])
            if width is None:
                return True
            pos += width
        settled = fields[pos]
        if settled == _TRUE or (settled == _BOOLEAN and fields[pos + 1]):
            return False
        width = _WIDTHS.get(settled)
        return width is None or fields[pos + width] != _NULL
    except IndexError:
        return True
