"""Server side of the AMQP 1.0 SASL layer (Part 5.3), sans-IO.

proton's built-in SASL (the PyPI wheel has no Cyrus) cannot check PLAIN
credentials on the server side, and the reference broker must check them
against the same users file as STOMP. So the SASL exchange is done here, before
any byte reaches proton's transport: :class:`SaslServer` consumes the SASL
protocol header and the ``sasl-init`` frame, answers with ``sasl-mechanisms``
and ``sasl-outcome``, and then hands the remaining bytes (which start with the
plain AMQP protocol header) to the AMQP engine.

A client that skips SASL and sends the AMQP header directly is let through only
when anonymous access is allowed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, cast

from proton import UNDESCRIBED, Array, Data, Described, symbol, ubyte, ulong

from ackspec.reference.amqp.framing import SASL_FRAME, performative_frame, read_header

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_MECHANISMS = 0x40
SASL_INIT = 0x41
SASL_OUTCOME = 0x44
MAX_SASL_FRAME = 65536

OUTCOME_OK = 0
OUTCOME_AUTH = 1
OUTCOME_SYS_PERM = 3


class SaslState(StrEnum):
    HEADER = "header"  # waiting for a protocol header
    INIT = "init"  # mechanisms sent, waiting for sasl-init
    DONE = "done"  # authenticated: following bytes are AMQP
    FAILED = "failed"  # outcome sent (or header refused): close after flushing


@dataclass(frozen=True, slots=True)
class SaslResult:
    """What the connection learned from the exchange."""

    user: str | None
    mechanism: str | None  # None when the client skipped SASL


class SaslServer:
    """Feed bytes with :meth:`receive`; send :meth:`data_to_send`; once :attr:`state` is DONE,
    :attr:`remainder` holds the bytes that belong to the AMQP layer."""

    def __init__(self, authenticate: Callable[[str, str], bool], *, allow_anonymous: bool) -> None:
        self._authenticate = authenticate
        self.allow_anonymous = allow_anonymous
        self.state = SaslState.HEADER
        self._buffer = bytearray()
        self._out = bytearray()
        self.remainder = b""
        self.result: SaslResult | None = None
        self.error: str | None = None

    @property
    def mechanisms(self) -> list[str]:
        return ["PLAIN", "ANONYMOUS"] if self.allow_anonymous else ["PLAIN"]

    def data_to_send(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        return out

    def receive(self, data: bytes) -> None:
        if self.state in (SaslState.DONE, SaslState.FAILED):
            return
        self._buffer += data
        if self.state is SaslState.HEADER:
            if len(self._buffer) < 8:
                if not (SASL_HEADER.startswith(self._buffer) or AMQP_HEADER.startswith(self._buffer)):
                    self._refuse_header()
                return
            header = bytes(self._buffer[:8])
            if header == AMQP_HEADER:
                if not self.allow_anonymous:
                    self._refuse_header()
                    return
                self.result = SaslResult(user=None, mechanism=None)
                self._finish()
                return
            if header != SASL_HEADER:
                self._refuse_header()
                return
            del self._buffer[:8]
            self._out += SASL_HEADER
            self._out += _frame(Described(ulong(SASL_MECHANISMS),
                                          [Array(cast(Any, UNDESCRIBED), Data.SYMBOL, *map(symbol, self.mechanisms))]))
            self.state = SaslState.INIT
        if self.state is SaslState.INIT:
            self._read_init()

    def _refuse_header(self) -> None:
        # Part 2.2: answer an unsupported header with the header we do support, then close
        self._out += SASL_HEADER
        self.error = "bad protocol header"
        self.state = SaslState.FAILED

    def _read_init(self) -> None:
        if len(self._buffer) < 8:
            return
        size, doff, ftype, _channel = read_header(self._buffer)
        if size < 8 or size > MAX_SASL_FRAME or doff < 2 or ftype != 1:
            self._fail(OUTCOME_SYS_PERM, "malformed SASL frame")
            return
        if len(self._buffer) < size:
            return
        body = bytes(self._buffer[doff * 4:size])
        rest = bytes(self._buffer[size:])
        self._buffer.clear()
        if not body:  # empty frame (heartbeat): keep waiting
            self._buffer += rest
            self._read_init()
            return
        try:
            data = Data()
            data.decode(body)
            data.rewind()
            data.next()
            performative = data.get_object()
        except Exception:
            self._fail(OUTCOME_SYS_PERM, "undecodable SASL frame")
            return
        if not isinstance(performative, Described) or performative.descriptor != SASL_INIT:
            self._fail(OUTCOME_SYS_PERM, "expected sasl-init")
            return
        fields = list(cast(Any, performative.value) or [])
        mechanism = str(fields[0]) if fields else ""
        response = bytes(fields[1]) if len(fields) > 1 and fields[1] is not None else b""
        if mechanism == "ANONYMOUS" and self.allow_anonymous:
            self.result = SaslResult(user=None, mechanism=mechanism)
        elif mechanism == "PLAIN":
            parts = response.split(b"\x00")
            if len(parts) != 3:
                self._fail(OUTCOME_AUTH, "malformed PLAIN response")
                return
            user, password = parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
            if not self._authenticate(user, password):
                self._fail(OUTCOME_AUTH, f"authentication failed for {user!r}")
                return
            self.result = SaslResult(user=user, mechanism=mechanism)
        else:
            self._fail(OUTCOME_AUTH, f"mechanism {mechanism!r} not offered")
            return
        self._out += _frame(Described(ulong(SASL_OUTCOME), [ubyte(OUTCOME_OK)]))
        self._buffer += rest
        self._finish()

    def _finish(self) -> None:
        self.state = SaslState.DONE
        self.remainder = bytes(self._buffer)
        self._buffer.clear()

    def _fail(self, code: int, why: str) -> None:
        self._out += _frame(Described(ulong(SASL_OUTCOME), [ubyte(code)]))
        self.error = why
        self.state = SaslState.FAILED


def _frame(performative: Described) -> bytes:
    return performative_frame(performative, frame_type=SASL_FRAME)
