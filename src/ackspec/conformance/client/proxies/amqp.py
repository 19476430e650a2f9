"""Confirmation control over AMQP 1.0: the same gates as the STOMP proxy, on dispositions.

:class:`AmqpConfirmationProxy` sits between an AMQP client and the reference broker's
AMQP listener and offers the test API of :class:`~.stomp.ConfirmationProxy`
(``hold``, ``seen``, ``wait_seen``, ``wait``, ``clear``) with the STOMP command names
mapped onto AMQP 1.0 performatives, so the client-side tests read the same for both
protocols:

===============  ==========================================  =====================================
command          client frame counted by ``seen``            answer a gate holds
===============  ==========================================  =====================================
``SEND``         complete transfer on a sender link          the broker's disposition of it
                 (destination = the link's target address)
``BEGIN``        ``declare`` on the coordinator link         its disposition (``declared``)
``COMMIT``       ``discharge(fail=false)``                   its disposition
``ABORT``        ``discharge(fail=true)``                    its disposition
``ACK``          disposition from the client (receiver)      the broker's settling disposition
                                                             (``rcv-settle-mode=second`` only)
``SUBSCRIBE``    attach of a receiver link                   --
``UNSUBSCRIBE``  detach from the client                      --
``DISCONNECT``   ``close`` from the client                   the broker's ``close``
===============  ==========================================  =====================================

``Gate.reject`` answers a held transfer or discharge with ``rejected{amqp:precondition-failed}``
instead. A broker disposition covering a range of deliveries is split so that each
delivery can be held and released on its own (dispositions may arrive in any order in
AMQP, so the client sees nothing unusual). Client bytes are forwarded untouched; broker
frames are forwarded untouched unless a gate takes part of them. SASL frames and
protocol headers pass through.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from proton import Data, Described, Message, symbol, uint, ulong

from ackspec.conformance.client.proxies.stomp import NACK_HEADER, Answered, ConfirmationProxy, _Link
from ackspec.reference.amqp.framing import FrameSplitter, performative_frame, read_header

ATTACH, TRANSFER, DISPOSITION, DETACH, CLOSE, BEGIN = 0x12, 0x14, 0x15, 0x16, 0x18, 0x11
TARGET, COORDINATOR = 0x29, 0x30
REJECTED, ERROR = 0x25, 0x1D
DECLARE, DISCHARGE = "amqp:declare:list", "amqp:discharge:list"
# a descriptor is a symbol or its numeric code (proton-j, so Qpid JMS, sends the codes)
DECLARES: frozenset[int | str] = frozenset({DECLARE, 0x31})
DISCHARGES: frozenset[int | str] = frozenset({DISCHARGE, 0x32})


def _descriptor(value: Any) -> int | str | None:
    if not isinstance(value, Described):
        return None
    d = value.descriptor
    return int(d) if isinstance(d, int) else str(d)


def _field(values: list[Any], index: int) -> Any:
    return values[index] if len(values) > index else None


def _decoded(payload: bytes) -> Message | None:
    try:
        msg = Message()
        msg.decode(payload)
    except Exception:
        return None  # the broker answers an undecodable message itself
    return msg


def _coordinator_command(payload: bytes) -> str:
    """BEGIN for a declare, COMMIT or ABORT for a discharge (by its fail field), else SEND."""
    msg = _decoded(payload)
    body = msg.body if msg is not None else None
    name = _descriptor(body)
    if name in DECLARES:
        return "BEGIN"
    if name in DISCHARGES:
        values = body.value if isinstance(body, Described) and isinstance(body.value, list) else []
        return "ABORT" if _field(values, 1) else "COMMIT"
    return "SEND"


TYPE_PREFIXES = (("queue://", "/queue/"), ("topic://", "/topic/"))
"""Destination-type prefixes a broker asks JMS clients to put on addresses (ActiveMQ Classic's ``queue-prefix``
and ``topic-prefix`` connection properties, which Qpid JMS honours)."""


def _stomp_name(address: str | None) -> str | None:
    """An address as the tests name destinations: ``queue://X`` is ``X`` when X is already STOMP-style
    (``/queue/...``), else ``/queue/X``; every other address as it is."""
    if address is None:
        return None
    for prefix, stomp in TYPE_PREFIXES:
        if address.startswith(prefix):
            rest = address[len(prefix):]
            return rest if rest.startswith("/") else stomp + rest
    return address


def _message_to(payload: bytes) -> str | None:
    """The ``to`` of a message sent on an anonymous-relay link (Qpid JMS uses one where a broker offers it)."""
    msg = _decoded(payload)
    return None if msg is None or not msg.address else _stomp_name(str(msg.address))


def _performative(body: bytes) -> tuple[int | str | None, list[Any], bytes]:
    """(descriptor, fields, payload) of one AMQP frame body."""
    data = Data()
    used = data.decode(body)
    data.rewind()
    data.next()
    value = data.get_object()
    fields = list(value.value) if isinstance(value, Described) and isinstance(value.value, list) else []
    return _descriptor(value), fields, body[used:]


def frame(channel: int, performative: Described) -> bytes:
    return performative_frame(performative, channel=channel)


def disposition(channel: int, role: bool, delivery: int, settled: bool, state: Any, batchable: Any) -> bytes:
    return frame(channel, Described(ulong(DISPOSITION), [role, uint(delivery), uint(delivery), settled, state,
                                                          batchable]))


def rejected(message: str) -> Described:
    error = Described(ulong(ERROR), [symbol("amqp:precondition-failed"), message, None])
    return Described(ulong(REJECTED), [error])


@dataclass
class _AmqpState:
    """What one proxied connection has told us: links, open deliveries, who asked for what."""

    links: dict[tuple[int, int], tuple[bool, str | None, bool]] = field(default_factory=dict)
    """(client channel, handle) -> (client is receiver, address, coordinator)"""
    partial: dict[tuple[int, int], tuple[int, bytearray]] = field(default_factory=dict)
    """(channel, handle) -> (delivery id, payload so far) of a multi-frame transfer"""
    asked: dict[tuple[int, bool, int], Answered] = field(default_factory=dict)
    """(client channel, answering role, delivery id) -> what a broker disposition answers"""
    channels: dict[int, int] = field(default_factory=dict)
    """broker channel -> client channel (from the broker's begin)"""
    closed: Answered | None = None


class AmqpConfirmationProxy(ConfirmationProxy):
    """An AMQP 1.0 proxy with disposition gates (see the module docstring)."""

    @property
    def amqp_url(self) -> str:
        return f"amqp://{self.host}:{self.port}"

    def _count(self, link: _Link, command: str, destination: str | None) -> Answered:
        """Record a client frame; call with the condition held."""
        self._frames_seen.append((command, destination, link.number))
        return Answered(f"{link.number}:{len(self._frames_seen)}", command, destination, link.number,
                        len(self._frames_seen))

    async def _client_to_broker(self, reader: asyncio.StreamReader, link: _Link) -> None:
        splitter = FrameSplitter()
        state = self._state(link)
        while True:
            data = await reader.read(65536)
            if not data:
                return
            self._enqueue(link.to_broker, link.wake_broker, data)
            with self._cond:
                for chunk in splitter.feed(data):
                    self._client_frame(link, state, chunk)
                self._cond.notify_all()

    def _state(self, link: _Link) -> _AmqpState:
        state = getattr(link, "amqp", None)
        if state is None:
            state = _AmqpState()
            link.amqp = state  # type: ignore[attr-defined]
        return state

    def _client_frame(self, link: _Link, state: _AmqpState, chunk: bytes) -> None:
        if len(chunk) <= 8 or chunk[:4] == b"AMQP" or chunk[5] != 0:
            return  # header, empty (heart-beat) frame or SASL
        header = read_header(chunk)
        channel = header.channel
        try:
            kind, fields, payload = _performative(chunk[header.doff * 4:])
        except Exception:
            return  # the broker answers malformed input itself
        if kind == ATTACH:
            receiver = bool(_field(fields, 2))
            terminus = _field(fields, 5 if receiver else 6)
            address: str | None = None
            coordinator = _descriptor(terminus) == COORDINATOR
            if isinstance(terminus, Described) and isinstance(terminus.value, list) and terminus.value:
                first = terminus.value[0]
                address = None if coordinator or first is None else _stomp_name(str(first))
            state.links[channel, int(_field(fields, 1))] = (receiver, address, coordinator)
            if receiver:
                self._count(link, "SUBSCRIBE", address)
        elif kind == TRANSFER:
            self._transfer(link, state, channel, fields, payload)
        elif kind == DISPOSITION and _field(fields, 0):  # from the client as receiver: an ack
            first = int(_field(fields, 1))
            last = int(_field(fields, 2) if _field(fields, 2) is not None else first)
            for delivery in range(first, last + 1):
                answered = self._count(link, "ACK", None)
                if not _field(fields, 3):
                    state.asked[channel, False, delivery] = answered
        elif kind == DETACH:
            self._count(link, "UNSUBSCRIBE", None)
        elif kind == CLOSE:
            state.closed = self._count(link, "DISCONNECT", None)

    def _transfer(self, link: _Link, state: _AmqpState, channel: int, fields: list[Any], payload: bytes) -> None:
        handle = int(_field(fields, 0))
        key = (channel, handle)
        delivery = _field(fields, 1)
        if key in state.partial:
            delivery_id, buf = state.partial[key]
            buf += payload
        else:
            delivery_id, buf = int(delivery or 0), bytearray(payload)
        if _field(fields, 5):  # more
            state.partial[key] = (delivery_id, buf)
            return
        state.partial.pop(key, None)
        receiver, address, coordinator = state.links.get(key, (False, None, False))
        if receiver:
            return
        command = "SEND"
        if coordinator:
            command = _coordinator_command(bytes(buf))
        elif address is None:  # an anonymous-relay link (null target): each message's ``to`` names its destination
            address = _message_to(bytes(buf))
        answered = self._count(link, command, address)
        if not _field(fields, 4):  # unsettled: the broker will answer with a disposition
            state.asked[channel, True, delivery_id] = answered

    async def _broker_to_client(self, reader: asyncio.StreamReader, link: _Link) -> None:
        splitter = FrameSplitter()
        state = self._state(link)
        loop = asyncio.get_running_loop()
        while True:
            data = await reader.read(65536)
            if not data:
                return
            out: list[bytes] = []
            for chunk in splitter.feed(data):
                out.extend(self._broker_frame(link, state, chunk, loop))
            if out:
                self._enqueue(link.to_client, link.wake_client, b"".join(out))

    def _writer(self, link: _Link, loop: asyncio.AbstractEventLoop, data: bytes) -> None:
        loop.call_soon_threadsafe(self._enqueue, link.to_client, link.wake_client, data)

    def _broker_frame(self, link: _Link, state: _AmqpState, chunk: bytes,
                      loop: asyncio.AbstractEventLoop) -> list[bytes]:
        if len(chunk) <= 8 or chunk[:4] == b"AMQP" or chunk[5] != 0:
            return [chunk]
        header = read_header(chunk)
        channel = header.channel
        try:
            kind, fields, _ = _performative(chunk[header.doff * 4:])
        except Exception:
            return [chunk]
        if kind == BEGIN and _field(fields, 0) is not None:
            state.channels[channel] = int(_field(fields, 0))
            return [chunk]
        if kind == CLOSE and state.closed is not None:
            answered, state.closed = state.closed, None
            with self._cond:
                gate = next((g for g in self._gates if g.matches(answered)), None)
                if gate is not None:
                    gate.held.append((answered, lambda a, extra: self._writer(link, loop, chunk)))
                    self._cond.notify_all()
                    return []
            return [chunk]
        if kind != DISPOSITION:
            return [chunk]
        role = bool(_field(fields, 0))
        first = int(_field(fields, 1))
        last = int(_field(fields, 2) if _field(fields, 2) is not None else first)
        client_channel = state.channels.get(channel, channel)
        settled, outcome, batchable = _field(fields, 3), _field(fields, 4), _field(fields, 5)
        held: list[int] = []
        with self._cond:
            for delivery in range(first, last + 1):
                asked = state.asked.pop((client_channel, role, delivery), None)
                if asked is None:
                    continue
                answered = asked
                gate = next((g for g in self._gates if g.matches(answered)), None)
                if gate is None:
                    continue
                held.append(delivery)
                gate.held.append((answered, self._responder(link, loop, channel, role, delivery, settled,
                                                            outcome, batchable)))
            if held:
                self._cond.notify_all()
        if not held:
            return [chunk]
        return [disposition(channel, role, d, bool(settled), outcome, batchable)
                for d in range(first, last + 1) if d not in held]

    def _responder(self, link: _Link, loop: asyncio.AbstractEventLoop, channel: int, role: bool, delivery: int,
                   settled: Any, outcome: Any, batchable: Any) -> Any:
        def respond(answered: Answered, extra: tuple[tuple[str, str], ...]) -> None:
            headers = dict(extra)
            state = rejected(headers.get("message", "rejected")) if headers.get(NACK_HEADER) == "true" else outcome
            self._writer(link, loop, disposition(channel, role, delivery, bool(settled), state, batchable))
        return respond


__all__ = ["AmqpConfirmationProxy", "FrameSplitter"]
