"""Mutants that live below proton: rewriting the AMQP frames a connection receives.

Proton's engine enforces link credit on the sending side and hides disposition
ranges from the application (it updates each delivery in the range). Four
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
``credit-from-own-count`` (AMQP only)
    a receiver's ``flow`` is read as stating the broker's own delivery-count (:class:`SentCounts`
    watches its output), so a flow whose delivery-count lags behind the transfers already sent grants
    its link-credit afresh: more transfers than delivery-count(rcv) + link-credit(rcv) allow (2.6.7).
``late-transfer-at-detach`` (AMQP only)
    the ``detach`` of a link the broker sends on is read as coming after one more ``flow`` of that link
    granting a single credit beyond what the broker already sent, so with messages still queued the
    broker sends one transfer the receiver never allowed, late: after every earlier barrier, just before
    its own detach answer (2.6.7; the credit bound holds up to the link's end).

:class:`FrameRewriter` is sans-IO: bytes in, bytes out, buffering partial frames
(framing: :mod:`ackspec.reference.amqp.framing`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from proton import Data, Described, uint, ulong

from ackspec.reference.amqp.framing import AMQP_FRAME, HEADER, FrameSplitter, read_header, with_body

ATTACH = 0x12
FLOW = 0x13
TRANSFER = 0x14
DISPOSITION = 0x15
DETACH = 0x16
EXTRA_CREDIT = 1000
"""Credit an ``ignore-prefetch`` broker believes it got on top of what the receiver granted."""



class FrameRewriter:
    """Splits the incoming AMQP byte stream into frames and lets mutants rewrite performatives.

    ``active(name)`` says whether a mutant is on; it is asked per frame, so a mutant
    switched on mid-connection takes effect at the next frame.
    """

    def __init__(self, active: Callable[[str], bool], counts: SentCounts | None = None) -> None:
        self.active = active
        self.counts = counts  # the broker's own output, for credit-from-own-count
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
        if self.counts is not None:
            self.counts.watch_input(frame)
            if code == FLOW and self.active("credit-from-own-count"):
                return self._edit(frame, doff, self._own_count)
            if code == DETACH and self.active("late-transfer-at-detach"):
                return self._one_more_credit_before(frame)
        return frame

    def _one_more_credit_before(self, detach: bytes) -> bytes:
        """``detach`` preceded by the peer's last flow of that link, edited to grant one credit beyond the
        broker's own delivery-count (the session fields stay as the peer last sent them)."""
        assert self.counts is not None  # the caller checked
        found = _performatives([detach])
        handle = int(found[0][1][0]) if found and found[0][1] else None
        flow = None if handle is None else self.counts.last_flow(handle)
        count = None if handle is None else self.counts.sender_count(handle)
        if flow is None or count is None:
            return detach

        def one_more(fields: list[Any]) -> bool:
            fields[5], fields[6] = uint(count % 2 ** 32), uint(1)
            fields[8:10] = [False, False]  # no drain, no echo
            return True

        return self._edit(flow, read_header(flow).doff * 4, one_more) + detach

    def _own_count(self, fields: list[Any]) -> bool:
        """flow: handle (4), delivery-count (5): read as stating the broker's own delivery-count, so the
        link-credit granted is counted from what the broker sent, not from what the receiver had seen."""
        if self.counts is None or len(fields) <= 6 or fields[4] is None or fields[6] is None:
            return False
        count = self.counts.sender_count(int(fields[4]))
        if count is None:
            return False
        fields[5] = uint(count % 2 ** 32)
        return True

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


class SentCounts:
    """What a broker's own output says about the links it sends on: their names, initial delivery-counts
    and the transfers written on them, so a mutant can read a receiver's flow against the broker's count.

    Sans-IO: ``watch_output`` gets the bytes the broker writes, ``watch_input`` the peer's bytes (for
    the names of the peer's handles); ``sender_count(peer_handle)`` is the broker's delivery-count of the
    link the peer calls so."""

    def __init__(self) -> None:
        self._out, self._in = FrameSplitter(), FrameSplitter()
        self._names: dict[int, str] = {}  # broker handle -> link name (links the broker sends on)
        self._counts: dict[str, int] = {}  # link name -> initial delivery-count + transfers written
        self._peer: dict[int, str] = {}  # peer handle -> link name
        self._flows: dict[int, bytes] = {}  # peer handle -> its last flow frame

    def watch_output(self, data: bytes) -> None:
        for code, fields in _performatives(self._out.feed(data)):
            if code == ATTACH and len(fields) > 9 and fields[2] is False:
                self._names[int(fields[1])] = str(fields[0])
                self._counts[str(fields[0])] = int(fields[9] or 0)
            elif code == TRANSFER and len(fields) > 1 and fields[1] is not None:  # a delivery's first frame
                name = self._names.get(int(fields[0]))
                if name is not None:
                    self._counts[name] += 1

    def watch_input(self, frame: bytes) -> None:
        for code, fields in _performatives([frame]):
            if code == ATTACH and len(fields) > 1:
                self._peer[int(fields[1])] = str(fields[0])
            elif code == FLOW and len(fields) > 9 and fields[4] is not None:
                self._flows[int(fields[4])] = frame

    def last_flow(self, peer_handle: int) -> bytes | None:
        """The last flow frame the peer sent for its link ``peer_handle`` (None before any)."""
        return self._flows.get(peer_handle)

    def sender_count(self, peer_handle: int) -> int | None:
        name = self._peer.get(peer_handle)
        return None if name is None else self._counts.get(name)


def _performatives(units: list[bytes]) -> list[tuple[int, list[Any]]]:
    found = []
    for unit in units:
        if unit[:4] == b"AMQP" or len(unit) < HEADER.size:
            continue
        body = unit[read_header(unit).doff * 4:]
        if body[:2] != b"\x00\x53" or len(body) < 3:
            continue
        data = Data()
        data.decode(body)
        data.rewind()
        data.next()
        value = data.get_object()
        if isinstance(value, Described) and isinstance(value.value, list):
            found.append((body[2], list(value.value)))
    return found


__all__ = ["EXTRA_CREDIT", "FrameRewriter", "SentCounts"]
