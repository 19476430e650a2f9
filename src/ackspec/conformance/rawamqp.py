"""A deliberately small raw AMQP 1.0 peer for tests that need frames a client library will not send,
the AMQP twin of :mod:`ackspec.conformance.rawstomp`.

proton's API cannot send a disposition over a range of deliveries, a transfer that asks for a
receiver settle mode the link did not negotiate, a second outcome for a delivery it has settled, a
source's default-outcome it will honour, or a flow that states an arbitrary (stale) delivery-count; and
it hides the broker's own flow frames. So those tests speak performatives: :class:`Performative` is
one frame, encoded and decoded by proton's codec (``proton.Data``, no AMQP type codec here), framed by
:mod:`ackspec.reference.amqp.framing` (the frame-header layout written once). :class:`FrameReader` is
the sans-IO part (bytes in, performatives out); :class:`RawAmqp` is one TCP connection with SASL
(ANONYMOUS, or PLAIN from the target's credentials) and a bounded wait on every read: a peer that
closes or errors ends :meth:`RawAmqp.read` with ``None`` and sets :attr:`RawAmqp.eof`, never a hang.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from proton import UNDESCRIBED, Array, Data, Described, symbol, ubyte, uint, ulong

from ackspec.conformance.rawsocket import recv_before
from ackspec.reference.amqp.framing import AMQP_FRAME, SASL_FRAME, FrameSplitter, performative_frame, read_header

SASL_HEADER: Final = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER: Final = b"AMQP\x00\x01\x00\x00"

# descriptor codes (part 2.7, 3.4, 3.5, 5.3)
OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
ERROR: Final = 0x1D
RECEIVED, ACCEPTED, REJECTED, RELEASED, MODIFIED, SOURCE, TARGET = range(0x23, 0x2A)
SASL_MECHANISMS, SASL_INIT, SASL_CHALLENGE, SASL_RESPONSE, SASL_OUTCOME = range(0x40, 0x45)

NAMES: Final = {OPEN: "open", BEGIN: "begin", ATTACH: "attach", FLOW: "flow", TRANSFER: "transfer",
                DISPOSITION: "disposition", DETACH: "detach", END: "end", CLOSE: "close",
                ACCEPTED: "accepted", REJECTED: "rejected", RELEASED: "released", MODIFIED: "modified",
                RECEIVED: "received"}
OUTCOME_CODES: Final = {"accepted": ACCEPTED, "rejected": REJECTED, "released": RELEASED, "modified": MODIFIED}
SENDER, RECEIVER = False, True
"""A link's role, and the role field of a disposition (whose deliveries it settles: the receiver's
dispositions carry role receiver)."""
FIRST, SECOND = ubyte(0), ubyte(1)
"""Receiver settle modes (2.8.3)."""
UNSETTLED, SETTLED, MIXED = ubyte(0), ubyte(1), ubyte(2)
"""Sender settle modes (2.8.2)."""
SERIAL: Final = 2 ** 32
"""Sequence numbers (delivery-count, delivery-id) are RFC-1982 serial numbers of 32 bits (2.8.8)."""


def descriptor_code(descriptor: Any) -> int | str:
    """A descriptor as a number; a symbolic one (``amqp:flow:list``) is kept as its text."""
    return int(descriptor) if isinstance(descriptor, int) else str(descriptor)


@dataclass(frozen=True, slots=True)
class Performative:
    """One frame: its channel, the performative's code and fields, and the payload behind it."""

    code: int | str
    fields: list[Any]
    channel: int = 0
    payload: bytes = b""
    sasl: bool = False

    def field(self, index: int, default: Any = None) -> Any:
        """The field at ``index`` (0-based, the spec's order), ``default`` when absent or null."""
        value = self.fields[index] if index < len(self.fields) else None
        return default if value is None else value

    @property
    def name(self) -> str:
        return NAMES.get(self.code, str(self.code)) if isinstance(self.code, int) else self.code

    def encode(self) -> bytes:
        descriptor = ulong(self.code) if isinstance(self.code, int) else symbol(self.code)
        return performative_frame(Described(descriptor, self.fields), self.payload, channel=self.channel,
                                  frame_type=SASL_FRAME if self.sasl else AMQP_FRAME)


def outcome(name: str, *fields: Any) -> Described:
    """A delivery state by its name (``accepted``, ``released``, ``modified``, ``rejected``)."""
    return Described(ulong(OUTCOME_CODES[name]), list(fields))


def state_name(state: Any) -> str | None:
    """The name of a delivery state as decoded (``None`` for no state)."""
    if not isinstance(state, Described):
        return None
    code = descriptor_code(state.descriptor)
    return NAMES.get(code, str(code)) if isinstance(code, int) else str(code).split(":")[1]


def decode(unit: bytes) -> Performative | bytes:
    """One unit from :class:`FrameSplitter`: a performative, or the bytes of a protocol header (or an
    empty heart-beat frame: ``b""``)."""
    if unit[:4] == b"AMQP":
        return unit
    header = read_header(unit)
    body = unit[header.doff * 4:]
    if not body:
        return b""
    data = Data()
    used = data.decode(body)
    data.rewind()
    data.next()
    value = data.get_object()
    if not isinstance(value, Described):
        raise ValueError(f"frame body is not a described performative: {value!r}")
    fields = list(value.value) if isinstance(value.value, list) else []
    return Performative(descriptor_code(value.descriptor), fields, header.channel, body[used:],
                        header.type == SASL_FRAME)


class FrameReader:
    """Sans-IO: bytes in, protocol headers and performatives out (heart-beats dropped)."""

    def __init__(self) -> None:
        self._splitter = FrameSplitter()

    def feed(self, data: bytes) -> list[Performative | bytes]:
        return [unit for unit in map(decode, self._splitter.feed(data)) if unit != b""]


def plain_response(user: str, password: str) -> bytes:
    return b"\x00" + user.encode() + b"\x00" + password.encode()


@dataclass
class RawAmqp:
    """One TCP connection to an AMQP 1.0 peer; every read takes a deadline.

    :meth:`open` does SASL, open and begin on channel 0; then the test writes performatives with
    :meth:`send` (or the helpers) and reads with :meth:`read` / :meth:`read_until`. Everything read is
    kept in :attr:`seen`, so a test can look back at what the peer sent.
    """

    host: str
    port: int
    timeout: float = 5.0
    user: str | None = None
    password: str | None = None
    sock: socket.socket = field(init=False)
    eof: bool = False
    seen: list[Performative] = field(default_factory=list)
    remote_open: Performative | None = None
    _reader: FrameReader = field(default_factory=FrameReader)
    _queue: list[Performative | bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # -- writing -----------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError:
            self.eof = True

    def send(self, code: int, *fields: Any, channel: int = 0, payload: bytes = b"") -> None:
        self.write(Performative(code, list(fields), channel, payload).encode())

    # -- reading -----------------------------------------------------------------------

    def _fill(self, deadline: float) -> bool:
        """Read more bytes; False on timeout or end of stream."""
        if self.eof:
            return False
        chunk = recv_before(self.sock, deadline)
        if chunk is None:
            return False
        if not chunk:
            self.eof = True
            return False
        try:
            self._queue += self._reader.feed(chunk)
        except ValueError:  # not AMQP framing: report as the end of the stream
            self.eof = True
            return False
        return True

    def read_unit(self, timeout: float | None = None) -> Performative | bytes | None:
        """The next performative or protocol header; None when the stream ended or the timeout passed."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not self._queue:
            if not self._fill(deadline):
                return None
        unit = self._queue.pop(0)
        if isinstance(unit, Performative):
            self.seen.append(unit)
        return unit

    def read(self, timeout: float | None = None) -> Performative | None:
        """The next performative (protocol headers skipped), or None (end of stream, timeout)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            unit = self.read_unit(max(0.0, deadline - time.monotonic()))
            if unit is None or isinstance(unit, Performative):
                return unit

    def read_until(self, wanted: Callable[[Performative], bool], timeout: float | None = None,
                   *, into: list[Performative] | None = None) -> Performative | None:
        """Read until a performative ``wanted`` accepts (returned); the others go to ``into``. None on
        end of stream or timeout; a ``close`` from the peer ends the wait too (it is returned)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            got = self.read(max(0.0, deadline - time.monotonic()))
            if got is None or wanted(got) or got.code == CLOSE:
                return got
            if into is not None:
                into.append(got)

    # -- connection set-up -------------------------------------------------------------

    def open(self, container: str, hostname: str | None = None) -> Performative:
        """SASL, then open and begin on channel 0; returns the peer's begin. Raises ConnectionError with
        the reason when the peer refuses or does not answer in time."""
        self._sasl(hostname)
        self.write(AMQP_HEADER)
        self.send(OPEN, container, hostname or self.host, uint(65536), None, None)
        self.remote_open = self._expect(OPEN, "open")
        self.send(BEGIN, None, uint(0), uint(2048), uint(2048), channel=0)
        return self._expect(BEGIN, "begin")

    def _sasl(self, hostname: str | None) -> None:
        self.write(SASL_HEADER)
        mechanisms = self._expect(SASL_MECHANISMS, "sasl-mechanisms")
        offered = mechanisms.field(0, [])
        offered = {str(m) for m in (offered.elements if isinstance(offered, Array) else [offered])}
        if self.user is not None and "PLAIN" in offered:
            init = Performative(SASL_INIT, [symbol("PLAIN"), plain_response(self.user, self.password or ""),
                                            hostname or self.host], sasl=True)
        else:
            init = Performative(SASL_INIT, [symbol("ANONYMOUS"), b"", hostname or self.host], sasl=True)
        self.write(init.encode())
        answer = self._expect(SASL_OUTCOME, "sasl-outcome")
        if int(answer.field(0, 1)) != 0:
            raise ConnectionError(f"SASL {init.fields[0]} refused (code {answer.field(0)})")

    def _expect(self, code: int, what: str) -> Performative:
        got = self.read()
        if got is None or got.code != code:
            detail = "nothing" if got is None else f"{got.name} {got.fields}"
            raise ConnectionError(f"raw AMQP: expected {what}, got {detail}")
        return got

    # -- links and deliveries ------------------------------------------------------------

    def attach(self, name: str, handle: int, role: bool, source: Described | None, target: Described | None,
               *, snd_settle: ubyte = UNSETTLED, rcv_settle: ubyte = FIRST,
               initial_delivery_count: int = 0, into: list[Performative] | None = None) -> Performative | None:
        """Attach a link on channel 0; returns the peer's attach (or what ended the wait: an end or close;
        the frames read meanwhile go to ``into``). A sender states its ``initial_delivery_count`` (2.7.3:
        it must), a receiver leaves it null."""
        self.send(ATTACH, name, uint(handle), role, snd_settle, rcv_settle, source, target, None, None,
                  None if role is RECEIVER else uint(initial_delivery_count))
        # the answer carries the peer's own handle for the link: it is known by its name
        return self.read_until(lambda p: p.field(0) == name if p.code == ATTACH else p.code == END, into=into)

    def flow(self, handle: int | None, delivery_count: int | None, credit: int | None, *, echo: bool = False,
             drain: bool = False, next_incoming_id: int | None = None) -> None:
        """A flow on channel 0: the session's windows, and the link's state when ``handle`` is given."""
        self.send(FLOW, None if next_incoming_id is None else uint(next_incoming_id), uint(2048), uint(0),
                  uint(2048), None if handle is None else uint(handle),
                  None if delivery_count is None else uint(delivery_count % SERIAL),
                  None if credit is None else uint(credit), None, drain, echo)

    def transfer(self, handle: int, delivery_id: int, tag: bytes, payload: bytes, *, settled: bool = False,
                 rcv_settle: ubyte | None = None) -> None:
        self.send(TRANSFER, uint(handle), uint(delivery_id), tag, uint(0), settled, False, rcv_settle,
                  payload=payload)

    def disposition(self, first: int, last: int | None = None, *, state: Described | None = None,
                    settled: bool = True, role: bool = RECEIVER) -> None:
        self.send(DISPOSITION, role, uint(first), None if last is None else uint(last), settled, state)

    def detach(self, handle: int, *, closed: bool = True) -> None:
        self.send(DETACH, uint(handle), closed)

    def close(self) -> None:
        """Close the connection (a close frame if the socket is still up), then the socket."""
        if not self.eof:
            self.send(CLOSE)
            with contextlib.suppress(OSError):
                self.read_until(lambda p: p.code == CLOSE, min(self.timeout, 1.0))
        with contextlib.suppress(OSError):
            self.sock.close()


def symbols(values: Sequence[str]) -> Array | None:
    """An AMQP array of symbols (None for no values: the field left out)."""
    return Array(UNDESCRIBED, Data.SYMBOL, *map(symbol, values)) if values else None  # type: ignore[arg-type]


def terminus(code: int, address: str | None, *, capabilities: Sequence[str] = (),
             default_outcome: Described | None = None, outcomes: Sequence[str] = ()) -> Described:
    """A source (``code`` :data:`SOURCE`) or target (:data:`TARGET`) for ``address``; ``outcomes`` by name
    (``accepted``...), as their descriptors."""
    caps = symbols(capabilities)
    if code == TARGET:
        return Described(ulong(TARGET), [address, None, None, None, None, None, caps])
    listed = symbols([f"amqp:{name}:list" for name in outcomes])
    return Described(ulong(SOURCE), [address, None, None, None, None, None, None, None, default_outcome, listed,
                                     caps])
