"""python-qpid-proton driver: the adapter interface over AMQP 1.0.

The driver uses proton's protocol *engine* (``Connection``/``Transport``/
``Collector``) over a plain blocking socket, pumped in the caller's thread.
There is no reactor thread: every verb pumps bytes until the condition it waits
for holds (a disposition, a transfer, a remote attach) or its timeout expires.
That keeps the driver deterministic and lets :meth:`_crash` drop the socket
without any goodbye.

How the adapter verbs map onto AMQP 1.0:

=====================  =========================================================
adapter                AMQP 1.0
=====================  =========================================================
``send(confirm=True)`` unsettled transfer; *confirmed* once the target's outcome
                       is ``accepted`` (``rejected``/``released``/``modified``
                       raise :class:`AdapterError`)
``send(confirm=False)`` pre-settled transfer (at-most-once); recorded as ``info``
``persistent``         header ``durable=true``
seq / producer         application properties ``ackspec-seq``/``ackspec-producer``
``subscribe(AUTO)``    receiver link, ``snd-settle-mode=settled`` (at-most-once)
``subscribe(CLIENT*)`` receiver link, ``snd-settle-mode=unsettled``;
                       ``rcv-settle-mode`` first by default, ``second`` on
                       request (``?rcv-settle=second`` or subscribe header
                       ``amqp-rcv-settle-mode: second``)
``prefetch``           link credit: credit is topped up so that held (received,
                       unsettled or not yet handed to the test) deliveries plus
                       outstanding credit never exceed the prefetch
``ack``, ``nack``      ``accepted`` / the outcome below; in CLIENT mode cumulative
                       over the link (every earlier unsettled delivery of the
                       link too), otherwise the one delivery
``nack(outcome)``      ``released`` / ``modified{delivery-failed}`` /
                       ``modified{delivery-failed, undeliverable-here}`` /
                       ``rejected``; plain ``NACK`` means ``modified{delivery-failed}``
                       (the JMS mapping of a failed delivery)
``begin/commit/abort`` coordinator link: ``declare`` / ``discharge(fail)``;
                       transactional transfers and dispositions carry
                       ``transactional-state``
=====================  =========================================================

Delivery count: AMQP's header ``delivery-count`` counts *prior failed*
attempts (0 on the first delivery), while :attr:`Delivery.delivery_count`
follows JMSXDeliveryCount (1 on the first delivery). The driver reports
``amqp delivery-count + 1``, and ``redelivered`` as ``delivery-count > 0`` (the
Qpid JMS mapping) or ``first-acquirer`` false once the target was seen to set it
true (a released message was acquired before, without a failed attempt). Brokers
that omit the field (Artemis, ActiveMQ) leave it at its default false, which
marks nothing. See docs/amqp-mapping.md.

Addresses: ``/queue/NAME`` and ``/topic/NAME`` are passed through by default
(RabbitMQ and the reference broker understand them). ``?address=capabilities``
strips the prefix and asks for a ``queue``/``topic`` capability on the terminus
(Artemis), ``?address=activemq`` rewrites to ``queue://NAME`` / ``topic://NAME``
(ActiveMQ Classic).

URL: ``amqp://[user:password@]host:port[?options]``. With a user the driver
offers SASL PLAIN (``allow_insecure_mechs`` since there is no TLS), otherwise
ANONYMOUS.
"""

from __future__ import annotations

import contextlib
import itertools
import select
import socket
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from proton import (
    Condition,
    Described,
    Endpoint,
    Event,
    Link,
    Message,
    Session,
    Terminus,
    symbol,
    uint,
    ulong,
)
from proton import Delivery as PnDelivery

from ackspec.adapters.base import (
    HARNESS_CAPABILITIES,
    NO_LOCAL_OPTION,
    SELECTOR_OPTION,
    AckMode,
    Adapter,
    AdapterError,
    Capability,
    Client,
    ConnectionLost,
    Delivery,
    Indeterminate,
    NackOutcome,
    NotSupported,
    SendResult,
    TargetUnreachable,
)
from ackspec.adapters.embedded import EmbeddedBrokerControls
from ackspec.adapters.settings import STOMP_STANDARD_CAPABILITIES, TargetSettings
from ackspec.history import PRODUCER_HEADER, SEQ_HEADER, Recorder
from ackspec.net import connect
from ackspec.reference.amqp.framing import performative_frame
from ackspec.reference.amqp.pump import EnginePump, Fed, client_engine

DECLARED = 0x33
TRANSACTIONAL_STATE = 0x34
ACCEPTED_CODE = 0x24
REJECTED_CODE = 0x25
RELEASED_CODE = 0x26
MODIFIED_CODE = 0x27

_UNTAGGED = itertools.count(1)
_ARRIVALS = itertools.count(1)

DEFAULT_CREDIT = 100
"""Credit granted when the test asks for no particular prefetch."""

ALL_CAPABILITIES = frozenset({
    Capability.QUEUES, Capability.TOPICS, Capability.ACK_AUTO, Capability.ACK_CLIENT,
    Capability.ACK_CLIENT_INDIVIDUAL, Capability.NACK, Capability.NACK_OUTCOMES, Capability.RECEIPTS,
    Capability.TRANSACTIONS, Capability.TRANSACTIONAL_ACK, Capability.PREFETCH, Capability.PERSISTENCE,
    Capability.REDELIVERED_FLAG, Capability.DELIVERY_COUNT, Capability.DEAD_LETTER, Capability.ABRUPT_DISCONNECT,
    Capability.CUSTOM_HEADERS, Capability.BINARY_BODY, Capability.DURABLE_SUBSCRIPTIONS, Capability.SELECTORS,
    Capability.NO_LOCAL, Capability.CLIENT_ID, Capability.PUBLISH_WINDOW,
})
"""Everything the driver can exercise (a publish window through :meth:`ProtonClient.send_burst`); a target
profile narrows it with ``without``."""


SOLE_CONNECTION = symbol("sole-connection-for-container")
"""The AMQP JMS mapping's connection capability for a client id that must be unique (JMS 6.1.2)."""
SELECTOR_KEY = symbol("jms-selector")
SELECTOR_FILTER = symbol("apache.org:selector-filter:string")
SELECTOR_CODE = ulong(0x0000468C00000004)
"""The JMS selector filter of the AMQP filter registry, as qpid-jms sends it (name; the code is the same)."""
NO_LOCAL_KEY = symbol("no-local")
NO_LOCAL_FILTER = symbol("apache.org:no-local-filter:list")
NO_LOCAL_CODE = ulong(0x0000468C00000003)
"""The JMS noLocal filter of the AMQP filter registry, as qpid-jms sends it (an empty list)."""


def _has_filter(source: Terminus, descriptors: tuple[Any, ...]) -> bool:
    """The peer's source names a filter described by one of ``descriptors`` (the registry's name or code)."""
    source.filter.rewind()
    if source.filter.next() is None:
        return False
    found = source.filter.get_object()
    return isinstance(found, dict) and any(
        isinstance(v, Described) and v.descriptor in descriptors for v in found.values())


def _raw_frame(performative: Described, payload: bytes = b"", channel: int = 0) -> bytes:
    """One AMQP frame (doff 2, type 0) encoded by hand, for what proton refuses to send."""
    return performative_frame(performative, payload, channel=channel)


def outcome_name(state: int | None) -> str:
    return {ACCEPTED_CODE: "accepted", REJECTED_CODE: "rejected", RELEASED_CODE: "released",
            MODIFIED_CODE: "modified", DECLARED: "declared", TRANSACTIONAL_STATE: "transactional-state",
            None: "none", 0: "none"}.get(state, f"0x{state:x}" if state else "none")


def condition_text(cond: Condition | None) -> str:
    if cond is None:
        return ""
    return f"{cond.name}: {cond.description}" if cond.description else str(cond.name)


def _sequence_number(value: Any) -> int | None:
    """The ``ackspec-seq`` property as sent: a string of digits, or an AMQP integer of any width. The broker
    keeps property types, so rhea's 0 arrives as proton's ``int32(0)``, whose ``str`` is not a number."""
    with contextlib.suppress(ValueError, TypeError):
        return int(value) if value is not None and not isinstance(value, bool) else None
    return None


@dataclass(frozen=True, slots=True)
class AmqpOptions:
    """Driver options parsed from the target URL."""

    host: str
    port: int
    user: str | None = None
    password: str | None = None
    address_style: str = "path"  # path | capabilities | activemq
    rcv_settle: str = "first"
    credit: int = DEFAULT_CREDIT
    nack: str = "modified"  # what a plain NACK sends: modified{delivery-failed} or released
    tls: bool = False  # amqps://: TLS in proton's engine, verifying the broker's certificate and name
    tls_ca: str | None = None  # ?cafile=PATH: the CA certificates to verify it with (default: the system's)

    @classmethod
    def from_url(cls, url: str) -> AmqpOptions:
        parts = urlsplit(url)
        if parts.scheme not in ("amqp", "amqps", ""):
            raise AdapterError(f"not an amqp:// or amqps:// URL: {url}")
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        style = query.get("address", "path")
        if style not in ("path", "capabilities", "activemq"):
            raise AdapterError(f"address={style!r}: expected path, capabilities or activemq")
        rcv = query.get("rcv-settle", "first")
        if rcv not in ("first", "second"):
            raise AdapterError(f"rcv-settle={rcv!r}: expected first or second")
        try:
            port = parts.port or 5672
            credit = int(query.get("credit", DEFAULT_CREDIT))
        except ValueError as exc:
            raise AdapterError(f"bad amqp URL {url!r}: {exc}") from exc
        return cls(host=parts.hostname or "127.0.0.1", port=port,
                   user=unquote(parts.username) if parts.username else None,
                   password=unquote(parts.password) if parts.password else None,
                   address_style=style, rcv_settle=rcv, credit=credit, tls=parts.scheme == "amqps",
                   tls_ca=query.get("cafile"))

    def terminus(self, destination: str) -> tuple[str, str | None]:
        """Map a ``/queue/x`` or ``/topic/x`` destination to (address, capability)."""
        kind, _, name = destination.lstrip("/").partition("/")
        if kind not in ("queue", "topic") or not name:
            return destination, None
        if self.address_style == "capabilities":
            return name, kind
        if self.address_style == "activemq":
            return f"{kind}://{name}", None
        return destination, None


class Wire:
    """One proton engine connection over a blocking socket, pumped on demand.

    Sans-reactor: bytes go out with ``transport.peek/pop`` and come in with
    ``transport.push``; collector events are dispatched to :attr:`on_event`.
    """

    def __init__(self, opts: AmqpOptions, container: str, on_event: Callable[[Event], None]) -> None:
        self.opts = opts
        self.on_event = on_event
        try:
            self.sock = connect(opts.host, opts.port, 5.0, blocking=False)
        except OSError as exc:
            raise TargetUnreachable(f"nothing listening at amqp://{opts.host}:{opts.port}: {exc}") from exc
        self.conn, self.transport, self.collector = client_engine(container, opts.host, opts.user, opts.password,
                                                                  tls=opts.tls, tls_ca=opts.tls_ca)
        self.engine = EnginePump(self.transport, self.collector, on_event)
        self.closed = False  # socket gone (EOF, error or crash)
        self.output_done = False  # proton wrote its last frame (our close): read on until the peer's close
        self.error: str | None = None

    # -- pumping ------------------------------------------------------------------

    def flush(self) -> None:
        while not self.closed:
            pending = self.engine.pending()
            if pending <= 0:
                if pending < 0 and not self.output_done:
                    self.output_done = True
                    if self.transport.condition is not None or self.conn.state & Endpoint.REMOTE_CLOSED:
                        self._lost("transport closed for output")
                    # else: our own close frame is written. The socket stays open for reading until the
                    # peer's close (or EOF): closing it now, with the peer's frames unread, makes the
                    # kernel send a reset, and a broker may then drop frames it had not processed yet
                    # (RabbitMQ 3.10 lost dispositions written just before our close).
                return
            data = self.engine.peek(pending)
            if not data:
                return
            try:
                sent = self.sock.send(data)
            except BlockingIOError:
                select.select([], [self.sock], [], 0.05)
                continue
            except OSError as exc:
                self._lost(f"send failed: {exc}")
                return
            self.engine.pop(sent)

    def pump(self, wait: float) -> None:
        """Write what is pending, read for up to ``wait`` seconds, dispatch events."""
        self.dispatch()
        self.flush()
        if self.closed:
            return
        readable, _, _ = select.select([self.sock], [], [], max(wait, 0.0))
        if readable:
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                data = None
            except OSError as exc:
                self._lost(f"recv failed: {exc}")
                data = None
            if data == b"":
                self._lost("connection closed by the peer")
            elif data:
                self._push(data)
        self.transport.tick(time.monotonic())
        self.dispatch()
        self.flush()

    def _push(self, data: bytes) -> None:
        """Feed received bytes to proton (in ``capacity()`` pieces; a full buffer is drained by writing)."""
        fed = self.engine.feed(data, on_full=self._drain)
        if fed is Fed.CLOSED:
            self._lost("transport closed for input")
        elif fed is Fed.STUCK:
            self._lost("transport input buffer stuck full")

    def _drain(self) -> None:
        self.dispatch()
        self.flush()

    def dispatch(self) -> None:
        self.engine.dispatch()

    def _lost(self, why: str) -> None:
        if not self.closed:
            self.closed = True
            self.error = self.error or why
            with contextlib.suppress(Exception):
                self.transport.close_tail()
            with contextlib.suppress(OSError):
                self.sock.close()

    def wait(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        """Pump until ``done()``; raise :class:`Indeterminate` on timeout, ConnectionLost on loss."""
        deadline = time.monotonic() + timeout
        while True:
            if done():
                return
            self.check()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Indeterminate(f"timed out after {timeout:g}s waiting for {what}")
            self.pump(min(remaining, 0.2))

    def check(self) -> None:
        """Raise if the connection is gone or the peer closed it."""
        if self.conn.state & Endpoint.REMOTE_CLOSED:
            why = condition_text(self.conn.remote_condition) or "no error"
            raise ConnectionLost(f"connection closed by peer: {why}")
        tcond = self.transport.condition
        if tcond is not None and self.closed:
            raise ConnectionLost(f"transport error: {condition_text(tcond)}")
        if self.closed:
            raise ConnectionLost(self.error or "connection lost")

    def crash(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        self._lost("crashed by the test")


@dataclass
class _Subscription:
    sub_id: str
    destination: str
    ack: AckMode
    link: Link
    prefetch: int
    settle_second: bool
    buffered: deque[tuple[PnDelivery, Message]] = field(default_factory=deque)
    unsettled: dict[str, PnDelivery] = field(default_factory=dict)  # ack_id -> delivery, in arrival order
    handed: dict[str, PnDelivery] = field(default_factory=dict)  # unsettled and given to the test, in order
    error: str | None = None
    manual: bool = False  # credit only through flow()/drain(), never topped up by the driver
    granted: int = 0  # credit granted over the link's life
    transfers: int = 0  # transfers received over the link's life (complete deliveries)
    flows: int = 0  # flow frames received from the sender (LINK_FLOW events)
    settled_on_arrival: dict[str, bool] = field(default_factory=dict)  # ack_id -> settled when it arrived
    durable: bool = False  # consumes a durable subscription: ended by a detach (closed=false), not a close


@dataclass(frozen=True, slots=True)
class BurstAnswers:
    """What :meth:`ProtonClient.send_burst` saw, per message in send order: when it was written, when its
    outcome arrived (None: none came in time) and the outcome's name."""

    written: list[float]
    answered: list[float | None]
    outcomes: list[str | None]


@dataclass(frozen=True, slots=True)
class DrainResult:
    """What a drain (AMQP 2.6.7, ``drain=true``) ended with."""

    delivered: list[Delivery]  # transfers that arrived while draining
    credit_before: int  # credit outstanding when the drain was asked for (after ``credit`` was added)
    credit_after: int  # credit left once the sender answered (0 when it honoured the drain)
    echoed: bool  # the sender answered with a flow frame (its flow state)
    transfers: int  # transfers received on the link over its life
    granted: int  # credit granted on the link over its life


@dataclass(frozen=True, slots=True)
class LinkModes:
    """Settle modes of a receiving link as asked for and as the sender's attach stated them (2.7.3)."""

    snd_settle_asked: int
    rcv_settle_asked: int
    snd_settle_remote: int
    rcv_settle_remote: int


@dataclass
class _Transaction:
    name: str
    txn_id: bytes
    acked: list[tuple[_Subscription, str, PnDelivery]] = field(default_factory=list)


class ProtonClient(Client):
    """One AMQP connection with one session; links are created per subscription and destination."""

    def __init__(self, adapter: ProtonAdapter, process: str, opts: AmqpOptions, *,
                 client_id: str | None = None) -> None:
        """``client_id``: the container id, owner of this client's durable subscriptions (unique otherwise)."""
        super().__init__(adapter, process)
        self.opts = opts
        self._names = itertools.count(1)
        self._tags = itertools.count(1)
        self._msg_ids = itertools.count(1)
        self._uid = uuid.uuid4().hex[:8]
        self.wire = Wire(opts, client_id or f"ackspec-{process}-{self._uid}", self._on_event)
        if client_id is not None:  # a JMS client id, as qpid-jms asks for it: the only connection of its container
            self.wire.conn.desired_capabilities = [SOLE_CONNECTION]
        self._subs: dict[str, _Subscription] = {}
        self._ended: dict[str, _Subscription] = {}  # unsubscribed; what they buffered is still receivable
        self._by_link: dict[str, _Subscription] = {}
        self._senders: dict[str, Link] = {}
        self._link_errors: dict[str, str] = {}
        self._coordinator: Link | None = None
        self._side_session_errors: dict[Any, str] = {}  # proton Session -> why the peer ended it
        self.session_error: str | None = None
        self._txns: dict[str, _Transaction] = {}
        self._modify_annotations: dict[str, Any] | None = None  # for the next modified outcome (modify())
        self.raw_deliveries: dict[str, deque[tuple[PnDelivery, Message]]] = {}
        """Per link name: the deliveries of the links :class:`~.amqp_links.JmsLinks` opens, as received."""
        self.wire.conn.open()
        self.session = self.wire.conn.session()
        self.session.open()
        try:
            self.wire.wait(self._remote_open, self.timeout, "the connection to open")
        except ConnectionLost as exc:  # refused (SASL, open/begin error): a known failure, not indeterminate
            self.wire._lost("refused")
            raise AdapterError(f"connection to {opts.host}:{opts.port} refused: {exc}") from exc

    # -- engine ---------------------------------------------------------------------

    def _remote_open(self) -> bool:
        conn = self.wire.conn
        return bool(conn.state & Endpoint.REMOTE_ACTIVE) and bool(self.session.state & Endpoint.REMOTE_ACTIVE)

    def _on_event(self, event: Event) -> None:
        kind = event.type
        if kind == Event.DELIVERY and event.delivery is not None:
            self._on_delivery(event.delivery)
        elif kind in (Event.LINK_REMOTE_CLOSE, Event.LINK_REMOTE_DETACH) and event.link is not None:
            link = event.link
            text = condition_text(link.remote_condition) or "link closed by peer"
            self._link_errors[link.name] = text
            sub = self._by_link.get(link.name)
            if sub is not None:
                sub.error = text
        elif kind == Event.LINK_FLOW and event.link is not None and event.link.is_receiver:
            flowed = self._by_link.get(event.link.name)
            if flowed is not None:
                flowed.flows += 1
        elif kind == Event.SESSION_REMOTE_CLOSE and event.session is not None:
            text = condition_text(event.session.remote_condition) or "session closed by peer"
            if event.session == self.session:  # proton wrappers compare by the C object, not identity
                self.session_error = text
            else:
                self._side_session_errors[event.session] = text

    def _on_delivery(self, dlv: PnDelivery) -> None:
        link = dlv.link
        if not link.is_receiver or dlv.partial or not dlv.readable:
            return
        sub = self._by_link.get(link.name)
        data = link.recv(dlv.pending)
        link.advance()
        if data is None:
            return
        if sub is None:
            held = self.raw_deliveries.get(link.name)
            if held is not None:  # a link of amqp_links.JmsLinks: the test reads the message itself
                raw = Message()
                raw.decode(data)
                held.append((dlv, raw))
            return
        msg = Message()
        msg.decode(data)
        sub.buffered.append((dlv, msg))
        sub.transfers += 1
        sub.settled_on_arrival[self._ack_id(sub, dlv)] = bool(dlv.settled)
        if not dlv.settled:
            sub.unsettled[self._ack_id(sub, dlv)] = dlv

    def _marks_first_acquirer(self) -> bool:
        """The target has set first-acquirer=true at least once, so a false means "acquired before"."""
        return isinstance(self.adapter, ProtonAdapter) and self.adapter.first_acquirer_seen

    @staticmethod
    def _ack_id(sub: _Subscription, dlv: PnDelivery) -> str:
        known = getattr(dlv, "ackspec_id", None)
        if isinstance(known, str):
            return known
        text = ProtonClient._tag_hex(dlv) or f"untagged-{next(_UNTAGGED)}"
        # an arrival number keeps ids unique even when a broker reuses the tag of a delivery we still
        # hold unsettled (Artemis does after a transaction rollback)
        ack_id = f"{sub.sub_id}/{next(_ARRIVALS)}-{text}"
        dlv.ackspec_id = ack_id  # our own attribute on proton's wrapper
        return ack_id

    @staticmethod
    def _tag_hex(dlv: PnDelivery) -> str | None:
        """The delivery tag in hex; None for an empty tag (allowed for pre-settled transfers, Artemis
        sends them) or a non-UTF-8 one, which proton's accessor cannot return."""
        try:
            tag = dlv.tag
            return (tag if isinstance(tag, bytes) else str(tag).encode("utf-8", "surrogateescape")).hex() or None
        except (RuntimeError, UnicodeDecodeError):
            return None

    def _check_link(self, link: Link, what: str) -> None:
        err = self._link_errors.get(link.name)
        if err is not None:
            raise AdapterError(f"{what}: {err}")
        if self.session_error is not None:
            raise AdapterError(f"{what}: session ended by the peer: {self.session_error}")
        self.wire.check()

    def _check_session(self, what: str) -> None:
        if self.session_error is not None:
            raise AdapterError(f"{what}: session ended by the peer: {self.session_error}")
        self.wire.check()

    # -- links ------------------------------------------------------------------------------

    def _sender_link(self, destination: str, kind: str) -> Link:
        """A new sender link (not yet open) to ``destination``, named ``ackspec-...-<kind><n>``."""
        address, capability = self.opts.terminus(destination)
        name = f"ackspec-{self.process}-{self._uid}-{kind}{next(self._names)}"
        link = self.session.sender(name)
        link.target.address = address
        if capability:
            link.target.capabilities.put_object(symbol(capability))
        link.source.address = name
        return link

    def _coordinator_link(self, session: Session, kind: str) -> Link:
        """A new sender link (not yet open) to a transaction coordinator (local transactions) on ``session``."""
        name = f"ackspec-{self.process}-{self._uid}-{kind}{next(self._names)}"
        link = session.sender(name)
        link.source.address = name
        link.target.type = Terminus.COORDINATOR
        link.target.capabilities.put_object(symbol("amqp:local-transactions"))
        return link

    def _attach(self, link: Link, what: str) -> None:
        """Open ``link`` on this client's session and wait for the peer's answering attach (or detach), or the
        end of the session."""
        link.open()
        self.wire.wait(lambda: bool(link.state & (Endpoint.REMOTE_ACTIVE | Endpoint.REMOTE_CLOSED))
                       or self.session_error is not None, self.timeout, f"attach of {what}")

    def _refusal(self, link: Link, what: str, default: str) -> str:
        """Why the peer refused ``link`` (closed it, or answered with no terminus): the error of its detach,
        once that came, else ``default``."""
        self.wire.wait(lambda: link.name in self._link_errors or bool(link.state & Endpoint.REMOTE_CLOSED),
                       self.timeout, f"refusal of {what}")
        return self._link_errors.get(link.name, default)

    def _top_up(self, sub: _Subscription) -> None:
        """Keep held deliveries + outstanding credit == prefetch (credit = prefetch)."""
        if sub.manual:
            return
        held = len(sub.buffered) if sub.ack is AckMode.AUTO else len(sub.unsettled)
        if sub.ack is not AckMode.AUTO:
            # pre-settled deliveries of an unsettled-mode link (should not happen) still occupy the buffer
            held = max(held, len(sub.buffered))
        want = sub.prefetch - held - sub.link.credit
        if want > 0:
            sub.granted += want
            sub.link.flow(want)

    # -- subscriptions -------------------------------------------------------------------

    def _subscribe(self, destination: str, ack: AckMode, prefetch: int | None, headers: dict[str, str]) -> str:
        return self._receiver(destination, ack, prefetch, headers, None)

    def _subscribe_durable(self, destination: str, name: str, ack: AckMode, prefetch: int | None,
                           headers: dict[str, str]) -> str:
        """The AMQP JMS mapping's durable subscriber: a link named ``name`` (this client's container id is
        the client id) from the topic, with a durable source (unsettled-state) that never expires."""
        return self._receiver(destination, ack, prefetch, headers, name)

    def _receiver_link(self, destination: str, name: str, *, durable: bool = False) -> Link:
        """A new receiver link (not yet open) from ``destination``; ``durable``: the one of the durable
        subscription ``name``, its source durable (unsettled-state) and never expiring."""
        address, capability = self.opts.terminus(destination)
        self._link_errors.pop(name, None)  # of an earlier link of this name (a durable subscription's)
        link = self.session.receiver(name)
        link.source.address = address
        if capability:
            link.source.capabilities.put_object(symbol(capability))
        if durable:
            link.source.durability = Terminus.DELIVERIES
            link.source.expiry_policy = Terminus.EXPIRE_NEVER
        link.target.address = address
        return link

    def _remove_durable(self, destination: str, name: str) -> None:
        """JMS unsubscribe as qpid-jms does it: attach to the subscription without credit, then close the
        link (detach with closed=true), which deletes the subscription."""
        link = self._receiver_link(destination, name, durable=True)
        self._attach(link, f"receiver {name}")
        if link.state & Endpoint.REMOTE_CLOSED or link.remote_source.address is None:
            refused = self._refusal(link, f"receiver {name}", "no source")
            raise AdapterError(f"durable subscription {name} on {destination} refused: {refused}")
        link.close()
        self.wire.wait(lambda: bool(link.state & Endpoint.REMOTE_CLOSED) or name in self._link_errors
                       or self.session_error is not None, self.timeout, f"close of {name}")
        self._check_session(f"close of {name}")
        error = self._link_errors.get(name)
        if link.remote_condition is not None and error:
            raise AdapterError(f"removing durable subscription {name}: {error}")

    def _receiver(self, destination: str, ack: AckMode, prefetch: int | None, headers: dict[str, str],
                  durable: str | None) -> str:
        name = durable if durable is not None else f"ackspec-{self.process}-{self._uid}-r{next(self._names)}"
        link = self._receiver_link(destination, name, durable=durable is not None)
        selector = headers.pop(SELECTOR_OPTION, None)
        no_local = headers.pop(NO_LOCAL_OPTION, None) == "true"
        filters: dict[Any, Any] = {}
        if selector is not None:
            filters[SELECTOR_KEY] = Described(SELECTOR_FILTER, selector)
        if no_local:
            filters[NO_LOCAL_KEY] = Described(NO_LOCAL_FILTER, [])
        if filters:
            link.source.filter.put_dict(filters)
        if ack is AckMode.AUTO:
            link.snd_settle_mode = Link.SND_SETTLED
        else:
            link.snd_settle_mode = Link.SND_UNSETTLED
        second = headers.get("amqp-rcv-settle-mode", self.opts.rcv_settle) == "second"
        link.rcv_settle_mode = Link.RCV_SECOND if second else Link.RCV_FIRST
        credit = self.opts.credit if prefetch is None else prefetch
        manual = headers.get("amqp-credit") == "manual"
        if credit <= 0 and not manual:
            raise NotSupported(Capability.PREFETCH, "AMQP credit 0 would deliver nothing; pull is not mapped")
        sub = _Subscription(sub_id=name, destination=destination, ack=ack, link=link, prefetch=credit,
                            settle_second=False, manual=manual, durable=durable is not None)
        self._subs[name] = sub
        self._by_link[name] = sub
        self._attach(link, f"receiver {name}")
        if self.session_error is not None:
            raise AdapterError(f"subscribe to {destination}: session ended by the peer: {self.session_error}")
        if link.state & Endpoint.REMOTE_CLOSED or link.remote_source.address is None:
            refused = self._refusal(link, f"receiver {name}", "no source")
            raise AdapterError(f"subscribe to {destination} refused: {refused}")
        for wanted, descriptors, what in ((selector is not None, (SELECTOR_FILTER, SELECTOR_CODE), "selector"),
                                          (no_local, (NO_LOCAL_FILTER, NO_LOCAL_CODE), "no-local")):
            # the AMQP JMS mapping: a source without the filter in the answer means it is not applied
            if wanted and not _has_filter(link.remote_source, descriptors):
                raise AdapterError(f"subscribe to {destination}: the target did not apply the {what} filter "
                                   "(not in its attach)")
        sub.settle_second = second and link.remote_rcv_settle_mode == Link.RCV_SECOND
        if manual and credit > 0:
            sub.granted += credit
            link.flow(credit)
        self._top_up(sub)
        self.wire.flush()
        return name

    def _unsubscribe(self, subscription: str) -> None:
        sub = self._subs.pop(subscription, None)
        if sub is None:
            raise AdapterError(f"unknown subscription {subscription}")
        if sub.durable:
            sub.link.detach()  # closed=false: the durable subscription stays
        else:
            sub.link.close()
        # the answering detach is the barrier: every transfer sent before it has been read. RabbitMQ 3.10
        # answers our detach(closed=true) with closed=false (a detach, not a close), so either counts.
        self.wire.wait(lambda: bool(sub.link.state & Endpoint.REMOTE_CLOSED) or subscription in self._link_errors
                       or self.session_error is not None, self.timeout, f"detach of {subscription}")
        self._check_session(f"detach of {subscription}")
        self._by_link.pop(subscription, None)
        self._ended[subscription] = sub

    # -- sending ----------------------------------------------------------------------------

    def _sender(self, destination: str) -> Link:
        link = self._senders.get(destination)
        if link is not None and not link.state & Endpoint.REMOTE_CLOSED:
            return link
        link = self._sender_link(destination, "s")
        link.snd_settle_mode = Link.SND_MIXED
        self._senders[destination] = link
        self._attach(link, f"sender {link.name}")
        self._check_link(link, f"attach of sender {link.name}")
        if link.state & Endpoint.REMOTE_CLOSED or link.remote_target.address is None:
            refused = self._refusal(link, f"sender {link.name}", "no target")
            self._senders.pop(destination, None)
            raise AdapterError(f"sending to {destination} refused: {refused}")
        return link

    def _send(self, destination: str, body: bytes, headers: dict[str, str], persistent: bool, confirm: bool,
              transaction: str | None) -> SendResult:
        txn = self._txn(transaction) if transaction is not None else None
        link = self._sender(destination)
        self.wire.wait(lambda: link.credit > 0 or link.name in self._link_errors, self.timeout,
                       f"credit on {destination}")
        self._check_link(link, f"send to {destination}")
        msg = self._message(body, headers, persistent)
        dlv = self._transfer(link, msg)
        if txn is not None:
            dlv.local.data = [txn.txn_id]  # type: ignore[list-item]  # proton's stub says list[int]
            dlv.update(TRANSACTIONAL_STATE)
        message_id = str(msg.id)
        if not confirm:
            dlv.settle()
            self.wire.flush()
            return SendResult(seq=None, confirmed=False, message_id=message_id)
        self.wire.wait(lambda: bool(dlv.remote_state) or dlv.settled or link.name in self._link_errors
                       or self.session_error is not None, self.timeout, f"the outcome of a transfer to {destination}")
        if not dlv.remote_state and not dlv.settled:
            self._check_link(link, f"send to {destination}")
        state = dlv.remote_state
        detail: dict[str, Any] = {"outcome": outcome_name(state)}
        if state == TRANSACTIONAL_STATE:
            data = dlv.remote.data or []
            inner = data[1] if len(data) > 1 else None
            state = int(inner.descriptor) if isinstance(inner, Described) else ACCEPTED_CODE
            detail["outcome"] = outcome_name(state)
            detail["transactional"] = True
        cond = dlv.remote.condition
        dlv.settle()
        self.wire.flush()
        if state == ACCEPTED_CODE:
            return SendResult(seq=None, confirmed=True, message_id=message_id, detail=detail)
        if not state:
            self._check_link(link, f"send to {destination}")
            raise Indeterminate(f"transfer to {destination} settled with no outcome")
        raise AdapterError(f"send to {destination}: outcome {outcome_name(state)}"
                           + (f" ({condition_text(cond)})" if cond else ""))

    def _message(self, body: bytes, headers: Mapping[str, str], persistent: bool) -> Message:
        msg = Message()
        msg.inferred = True
        msg.body = bytes(body)
        msg.durable = persistent
        msg.id = f"ackspec:{self._uid}:{next(self._msg_ids)}"
        props: dict[str, Any] = dict(headers)
        if SEQ_HEADER in props:
            with contextlib.suppress(ValueError):
                props[SEQ_HEADER] = int(props[SEQ_HEADER])
        msg.properties = props  # type: ignore[assignment]  # proton's stub says None
        return msg

    def _transfer(self, link: Link, msg: Message) -> PnDelivery:
        dlv = link.delivery(str(next(self._tags)))
        link.send(msg.encode())
        link.advance()
        return dlv

    def send_burst(self, destination: str, messages: Sequence[tuple[bytes, Mapping[str, str]]], *,
                   persistent: bool, until: float) -> BurstAnswers:
        """Write ``messages`` as unsettled transfers one after the other, without waiting for outcomes (as far as
        the link's credit allows), then read until each has an outcome or the monotonic time ``until`` passed.

        Why: a publish window keeps many sends outstanding, and when the broker answers them is what its rules
        are about; :meth:`send` waits for each outcome in turn. Not recorded: the caller records the sends.
        """
        link = self._sender(destination)
        answers = BurstAnswers([], [], [])
        dlvs: list[PnDelivery] = []
        while True:
            while len(dlvs) < len(messages) and link.credit > 0 and not self.wire.closed:
                body, headers = messages[len(dlvs)]
                answers.written.append(time.monotonic())
                answers.answered.append(None)
                answers.outcomes.append(None)
                dlvs.append(self._transfer(link, self._message(body, headers, persistent)))
            self.wire.flush()
            self._note_outcomes(dlvs, answers)
            remaining = until - time.monotonic()
            if (len(dlvs) == len(messages) and None not in answers.answered) or remaining <= 0:
                return answers
            self.wire.check()
            self.wire.pump(min(remaining, 0.05))

    def _note_outcomes(self, dlvs: list[PnDelivery], answers: BurstAnswers) -> None:
        now = time.monotonic()
        for index, dlv in enumerate(dlvs):
            if answers.answered[index] is None and (dlv.remote_state or dlv.settled):
                answers.answered[index] = now
                answers.outcomes[index] = outcome_name(dlv.remote_state)
                dlv.settle()

    # -- receiving ------------------------------------------------------------------------------

    def _receive(self, subscription: str, timeout: float) -> Delivery | None:
        sub = self._subs.get(subscription)
        if sub is None:
            ended = self._ended.get(subscription)
            if ended is None:
                raise AdapterError(f"unknown subscription {subscription}")
            # deliveries that arrived before the detach (STOMP: before the UNSUBSCRIBE receipt)
            if not ended.buffered:
                return None
            dlv, msg = ended.buffered.popleft()
            return self._delivery(ended, dlv, msg)
        self._top_up(sub)
        try:
            self.wire.wait(lambda: bool(sub.buffered) or sub.error is not None, timeout, "a delivery")
        except Indeterminate:
            self.wire.check()
            return None
        if not sub.buffered and sub.error is not None:
            raise AdapterError(f"subscription {subscription} closed: {sub.error}")
        dlv, msg = sub.buffered.popleft()
        delivery = self._delivery(sub, dlv, msg)
        if sub.ack is AckMode.AUTO:
            self._top_up(sub)
            self.wire.flush()
        elif delivery.ack_id in sub.unsettled:
            sub.handed[delivery.ack_id or ""] = dlv
        return delivery

    def _delivery(self, sub: _Subscription, dlv: PnDelivery, msg: Message) -> Delivery:
        raw_props: dict[Any, Any] = dict(msg.properties or {})
        props = {str(k): str(v) for k, v in raw_props.items()}
        body = msg.body
        if body is None:
            raw = b""
        elif isinstance(body, bytes | bytearray | memoryview):
            raw = bytes(body)
        elif isinstance(body, str):
            raw = body.encode()
        else:
            raw = str(body).encode()
        seq = _sequence_number(raw_props.get(SEQ_HEADER))
        count = int(msg.delivery_count or 0)
        if msg.first_acquirer and isinstance(self.adapter, ProtonAdapter):
            self.adapter.first_acquirer_seen = True
        headers = dict(props)
        headers["amqp:durable"] = "true" if msg.durable else "false"
        headers["amqp:delivery-count"] = str(count)
        headers["amqp:first-acquirer"] = "true" if msg.first_acquirer else "false"
        tag = self._tag_hex(dlv)
        if tag is not None:  # the sender's own tag (the ack_id adds an arrival number, so is always unique)
            headers["amqp:delivery-tag"] = tag
        for key, value in (msg.annotations or {}).items():
            headers[f"amqp:annotation:{key}"] = str(value)
        arrived = sub.settled_on_arrival.pop(self._ack_id(sub, dlv), None)
        if arrived is not None:
            headers["amqp:settled"] = "true" if arrived else "false"
        return Delivery(destination=sub.destination, subscription=sub.sub_id, body=raw, headers=headers,
                        message_id=None if msg.id is None else str(msg.id), ack_id=self._ack_id(sub, dlv),
                        seq=seq, producer=props.get(PRODUCER_HEADER),
                        redelivered=count > 0 or (not msg.first_acquirer and self._marks_first_acquirer()),
                        delivery_count=count + 1)

    # -- settlement ----------------------------------------------------------------------------------

    def _targets(self, delivery: Delivery, cumulative: bool) -> tuple[_Subscription, list[tuple[str, PnDelivery]]]:
        sub = self._subs.get(delivery.subscription)
        if sub is None:
            raise AdapterError(f"unknown subscription {delivery.subscription}")
        if sub.ack is AckMode.AUTO:
            raise AdapterError("delivery of an auto (pre-settled) subscription cannot be settled again")
        ack_id = delivery.ack_id or ""
        if ack_id not in sub.handed:
            raise AdapterError(f"no unsettled delivery {ack_id} on {sub.sub_id}")
        if not cumulative:
            return sub, [(ack_id, sub.handed[ack_id])]
        chosen: list[tuple[str, PnDelivery]] = []
        for key, dlv in sub.handed.items():
            chosen.append((key, dlv))
            if key == ack_id:
                break
        return sub, chosen

    def _settle(self, sub: _Subscription, chosen: list[tuple[str, PnDelivery]], code: int,
                transaction: str | None, confirm: bool, *, failed: bool = False, undeliverable: bool = False) -> None:
        txn = self._txn(transaction) if transaction is not None else None
        for key, dlv in chosen:
            if txn is not None:
                fields: list[Any] = [] if code != MODIFIED_CODE else [failed, undeliverable]
                dlv.local.data = [txn.txn_id, Described(ulong(code), fields)]  # type: ignore[list-item]
                dlv.update(TRANSACTIONAL_STATE)
                txn.acked.append((sub, key, dlv))
                continue
            if code == MODIFIED_CODE:
                dlv.local.failed = failed
                dlv.local.undeliverable = undeliverable
                if self._modify_annotations:
                    dlv.local.annotations = {symbol(k): v for k, v in self._modify_annotations.items()}
            dlv.update(code)
            if not sub.settle_second:
                dlv.settle()
                self._forget(sub, key)
        self.wire.flush()
        if txn is None and sub.settle_second:
            # rcv-settle-mode second: the sender settles after applying our outcome; that is the confirmation
            if confirm:
                self.wire.wait(lambda: all(d.settled for _, d in chosen) or sub.error is not None,
                               self.timeout, "the sender to settle our disposition")
            for key, dlv in chosen:
                if dlv.settled or not confirm:
                    dlv.settle()
                self._forget(sub, key)
            self._check_link(sub.link, "disposition")
        if txn is None:
            self._top_up(sub)
            self.wire.flush()

    @staticmethod
    def _forget(sub: _Subscription, key: str) -> None:
        sub.unsettled.pop(key, None)
        sub.handed.pop(key, None)

    def _ack(self, delivery: Delivery, transaction: str | None, confirm: bool) -> None:
        sub = self._subs.get(delivery.subscription)
        cumulative = sub is not None and sub.ack is AckMode.CLIENT
        sub, chosen = self._targets(delivery, cumulative)
        self._settle(sub, chosen, ACCEPTED_CODE, transaction, confirm)

    def _nack(self, delivery: Delivery, outcome: NackOutcome, transaction: str | None, confirm: bool) -> None:
        known = self._subs.get(delivery.subscription)
        # CLIENT mode is cumulative for negative outcomes too (as STOMP's NACK in ack:client)
        sub, chosen = self._targets(delivery, known is not None and known.ack is AckMode.CLIENT)
        if outcome is NackOutcome.RELEASED or (outcome is NackOutcome.NACK and self.opts.nack == "released"):
            self._settle(sub, chosen, RELEASED_CODE, transaction, confirm)
        elif outcome is NackOutcome.REJECTED:
            self._settle(sub, chosen, REJECTED_CODE, transaction, confirm)
        elif outcome is NackOutcome.MODIFIED_UNDELIVERABLE:
            self._settle(sub, chosen, MODIFIED_CODE, transaction, confirm, failed=True, undeliverable=True)
        else:  # NACK and MODIFIED_FAILED
            self._settle(sub, chosen, MODIFIED_CODE, transaction, confirm, failed=True)

    # -- transactions ------------------------------------------------------------------------------------

    def _txn(self, name: str) -> _Transaction:
        txn = self._txns.get(name)
        if txn is None:
            raise AdapterError(f"unknown transaction {name}")
        return txn

    def _probe_coordinator(self) -> None:
        """Attach a coordinator on a throw-away session first (once per adapter).

        Some brokers (RabbitMQ 3.x) refuse the coordinator by ending the *session*;
        probing on a side session keeps the test's session alive, and the refusal
        becomes :class:`NotSupported` for every later ``begin`` of the run's test.
        """
        adapter = self.adapter
        if not isinstance(adapter, ProtonAdapter) or adapter.coordinator_probe is not None:
            if isinstance(adapter, ProtonAdapter) and adapter.coordinator_probe:
                raise NotSupported(Capability.TRANSACTIONS, f"coordinator refused: {adapter.coordinator_probe}")
            return
        side = self.wire.conn.session()
        side.open()
        probe = self._coordinator_link(side, "txnprobe")
        name = probe.name
        probe.open()
        self.wire.wait(lambda: bool(probe.state & (Endpoint.REMOTE_ACTIVE | Endpoint.REMOTE_CLOSED))
                       or side in self._side_session_errors, self.timeout, "attach of a probe coordinator")
        refused = self._side_session_errors.get(side)
        if refused is None and (probe.state & Endpoint.REMOTE_CLOSED
                                or probe.remote_target.type != Terminus.COORDINATOR):
            self.wire.wait(lambda: name in self._link_errors or side in self._side_session_errors,
                           self.timeout, "coordinator refusal")
            refused = self._link_errors.get(name) or self._side_session_errors.get(side) or "refused"
        adapter.coordinator_probe = refused or ""
        with contextlib.suppress(Exception):
            probe.close()
            side.close()
            self.wire.flush()
        if refused:
            raise NotSupported(Capability.TRANSACTIONS, f"coordinator refused: {refused}")

    def _control(self, body: Described, what: str) -> PnDelivery:
        coord = self._coordinator
        if coord is None or coord.state & Endpoint.REMOTE_CLOSED:
            self._probe_coordinator()
            coord = self._coordinator_link(self.session, "txn")
            name = coord.name
            self._coordinator = coord
            self._attach(coord, "the transaction coordinator")
            if self.session_error is not None:
                self._coordinator = None
                raise NotSupported(Capability.TRANSACTIONS, f"coordinator refused: {self.session_error}")
            if coord.state & Endpoint.REMOTE_CLOSED or coord.remote_target.type != Terminus.COORDINATOR:
                self.wire.wait(lambda: name in self._link_errors, self.timeout, "coordinator refusal")
                self._coordinator = None
                raise NotSupported(Capability.TRANSACTIONS, f"coordinator refused: {self._link_errors.get(name)}")
        self.wire.wait(lambda: coord.credit > 0 or coord.name in self._link_errors, self.timeout,
                       "credit on the coordinator")
        self._check_link(coord, what)
        msg = Message(body=body)
        dlv = coord.delivery(str(next(self._tags)))
        coord.send(msg.encode())
        coord.advance()
        self.wire.wait(lambda: bool(dlv.remote_state) or dlv.settled or coord.name in self._link_errors,
                       self.timeout, f"the coordinator's answer to {what}")
        self._check_link(coord, what)
        return dlv

    def _begin(self, transaction: str) -> None:
        if transaction in self._txns:
            raise AdapterError(f"transaction {transaction} already begun")
        dlv = self._control(Described(symbol("amqp:declare:list"), [None]), "declare")
        data = dlv.remote.data
        state = dlv.remote_state
        cond = dlv.remote.condition
        dlv.settle()
        if state != DECLARED or not data:
            raise AdapterError(f"declare refused: {outcome_name(state)} {condition_text(cond)}".rstrip())
        self._txns[transaction] = _Transaction(transaction, bytes(data[0]))

    def _discharge(self, transaction: str, fail: bool) -> None:
        txn = self._txns.pop(transaction, None)
        if txn is None:
            raise AdapterError(f"unknown transaction {transaction}")
        dlv = self._control(Described(symbol("amqp:discharge:list"), [txn.txn_id, fail]), "discharge")
        state = dlv.remote_state
        cond = dlv.remote.condition
        dlv.settle()
        committed = state == ACCEPTED_CODE and not fail
        for sub, key, pdlv in txn.acked:
            if not committed:
                # the outcome was not applied and the delivery stays acquired: give it back as failed
                # (what Qpid JMS does on rollback), so it is redelivered with delivery-count + 1
                pdlv.local.failed = True
                pdlv.update(MODIFIED_CODE)
            pdlv.settle()
            self._forget(sub, key)
        for sub in {s.sub_id: s for s, _, _ in txn.acked}.values():
            self._top_up(sub)
        self.wire.flush()
        if state != ACCEPTED_CODE:
            raise AdapterError(f"discharge({'rollback' if fail else 'commit'}) of {transaction}: "
                               f"{outcome_name(state)} {condition_text(cond)}".rstrip())

    def _commit(self, transaction: str) -> None:
        self._discharge(transaction, False)

    def _abort(self, transaction: str) -> None:
        self._discharge(transaction, True)

    # -- AMQP-only verbs (credit, drain, settle modes, raw discharge): used by suite/amqp ------------------

    def _live(self, subscription: str) -> _Subscription:
        sub = self._subs.get(subscription)
        if sub is None:
            raise AdapterError(f"unknown subscription {subscription}")
        return sub

    def flow(self, subscription: str, credit: int) -> None:
        """Grant ``credit`` more link credit (a flow frame); for ``amqp-credit: manual`` subscriptions."""
        sub = self._live(subscription)
        if credit > 0:
            sub.granted += credit
            sub.link.flow(credit)
            self.wire.flush()

    def credit(self, subscription: str) -> int:
        """Link credit the receiver still has outstanding (granted minus transfers and drained)."""
        self.wire.pump(0)
        return int(self._live(subscription).link.credit)

    def accounting(self, subscription: str) -> tuple[int, int]:
        """(credit granted, transfers received) over the link's life."""
        self.wire.pump(0)
        sub = self._live(subscription)
        return sub.granted, sub.transfers

    def link_modes(self, subscription: str) -> LinkModes:
        link = self._live(subscription).link
        return LinkModes(int(link.snd_settle_mode), int(link.rcv_settle_mode),
                         int(link.remote_snd_settle_mode), int(link.remote_rcv_settle_mode))

    def round_trip(self, destination: str) -> None:
        """A barrier on this connection: attach a sender to ``destination`` and wait for the broker's attach.

        Frames the broker sent before answering the attach (transfers, flows) have been
        read once this returns. Nothing is published.
        """
        link = self._sender_link(destination, "rt")
        self._attach(link, f"barrier link {link.name}")
        self._check_link(link, "round trip")
        link.close()  # not waited for: RabbitMQ 3.10 does not always answer a detach
        self.wire.flush()

    def drain(self, subscription: str, timeout: float | None = None, *, credit: int = 0) -> DrainResult:
        """Add ``credit`` and set ``drain``; wait for the sender's answering flow (credit used up).

        The sender sends what it has up to the credit, then advances its delivery-count
        over the rest and reports its flow state (2.6.7). Deliveries that arrive meanwhile
        are handed back in :attr:`DrainResult.delivered` (received as by :meth:`receive`).
        """
        sub = self._live(subscription)
        wait = self.timeout if timeout is None else timeout
        already = len(sub.buffered)
        flows = sub.flows
        sub.granted += max(credit, 0)
        sub.link.drain(max(credit, 0))
        before = int(sub.link.credit)
        self.wire.flush()
        try:
            # done when the sender answered with its flow state, or used the credit up with transfers
            self.wire.wait(lambda: sub.error is not None or self.session_error is not None or (not sub.link.draining()
                                                             and (sub.flows > flows or sub.link.credit <= 0)),
                           wait, f"the answer to a drain on {subscription}")
            echoed = sub.flows > flows and sub.error is None
        except Indeterminate:
            echoed = False
        self._check_link(sub.link, f"drain of {subscription}")
        after = int(sub.link.credit)
        sub.link.drain_mode = False
        delivered: list[Delivery] = []
        while len(sub.buffered) > already:
            received = self.receive(subscription, 0)
            if received is None:
                break
            delivered.append(received)
        return DrainResult(delivered=delivered, credit_before=before, credit_after=after, echoed=echoed,
                           transfers=sub.transfers, granted=sub.granted)

    def modify(self, delivery: Delivery, annotations: dict[str, Any], *, undeliverable: bool = False) -> None:
        """Settle with ``modified{delivery-failed}`` carrying ``message-annotations`` (3.4.5); recorded as a NACK.

        The target merges the annotations into the message for later deliveries, where the driver
        shows them as ``amqp:annotation:<key>`` headers.
        """
        self._modify_annotations = dict(annotations)
        try:
            self.nack(delivery, outcome=NackOutcome.MODIFIED_UNDELIVERABLE if undeliverable
                      else NackOutcome.MODIFIED_FAILED)
        finally:
            self._modify_annotations = None

    def overrun_credit(self, destination: str, extra: int = 2) -> tuple[int, str | None]:
        """Write ``credit + extra`` pre-settled transfers at once on a fresh connection's sender link.

        Proton never sends beyond credit, so the transfers are written as raw frames behind its back
        (that connection is unusable afterwards and is dropped). Returns (the credit the target had
        granted, the error condition it ended the link or connection with, or None if it did neither
        within the timeout). Meaningful only where the target cannot top the credit up meanwhile.
        """
        wire = Wire(self.opts, f"ackspec-{self.process}-{self._uid}-overrun", lambda _event: None)
        try:
            wire.conn.open()
            session = wire.conn.session()
            session.open()
            address, capability = self.opts.terminus(destination)
            link = session.sender(f"ackspec-{self.process}-{self._uid}-overrun")
            link.target.address = address
            if capability:
                link.target.capabilities.put_object(symbol(capability))
            link.snd_settle_mode = Link.SND_SETTLED
            link.open()
            wire.wait(lambda: link.credit > 0 or bool(link.state & Endpoint.REMOTE_CLOSED), self.timeout,
                      "credit for the overrun link")
            credit = int(link.credit)
            body = Message(body=b"overrun").encode()
            # first link and first transfers of the session: handle 0, delivery-ids from 0
            frames = b"".join(_raw_frame(Described(ulong(0x14), [uint(0), uint(i), f"o{i}".encode(), uint(0), True]),
                                         body) for i in range(credit + extra))
            wire.sock.setblocking(True)
            wire.sock.sendall(frames)
            wire.sock.setblocking(False)

            def ended() -> bool:
                return bool(link.state & Endpoint.REMOTE_CLOSED or wire.conn.state & Endpoint.REMOTE_CLOSED
                            or wire.closed)

            with contextlib.suppress(Indeterminate, ConnectionLost):
                wire.wait(ended, self.timeout, "the target's answer to transfers beyond credit")
            cond = link.remote_condition or wire.conn.remote_condition or wire.transport.condition
            return credit, (str(cond.name) if cond is not None else ("closed" if ended() else None))
        finally:
            wire.crash()

    def discharge_unknown(self, fail: bool = False) -> str:
        """Discharge a txn-id that was never declared; returns the outcome and error condition seen."""
        dlv = self._control(Described(symbol("amqp:discharge:list"), [b"ackspec-no-such-txn", fail]),
                            "discharge of an unknown transaction")
        state, cond = dlv.remote_state, dlv.remote.condition
        dlv.settle()
        self.wire.flush()
        return f"{outcome_name(state)} {condition_text(cond)}".strip()

    # -- connection end ------------------------------------------------------------------------------------

    def _disconnect(self) -> None:
        if self.wire.closed:
            raise ConnectionLost(self.wire.error or "connection already lost")
        self.wire.conn.close()
        try:
            self.wire.wait(lambda: bool(self.wire.conn.state & Endpoint.REMOTE_CLOSED) or self.wire.closed,
                           self.timeout, "the peer's close")
        finally:
            self.wire.flush()
            self.wire._lost("closed")

    def _crash(self) -> None:
        self.wire.crash()

    def close(self) -> None:
        """Clean-up without recording (the harness's end of test): close politely if still connected."""
        if self.wire.closed:
            return
        with contextlib.suppress(Exception):
            self.wire.conn.close()
            # a short wait for the peer's close: closing the socket on unread frames resets the connection
            self.wire.wait(lambda: bool(self.wire.conn.state & Endpoint.REMOTE_CLOSED) or self.wire.closed,
                           min(self.timeout, 1.0), "the peer's close")
        self.wire._lost("closed by clean-up")


class ProtonAdapter(Adapter):
    """Adapter for ``amqp://`` targets through python-qpid-proton's engine."""

    name = "proton"
    protocol = "amqp"

    def __init__(self, url: str, recorder: Recorder, *, timeout: float = 5.0,
                 settings: TargetSettings | None = None, without: frozenset[Capability] | None = None) -> None:
        super().__init__(url, recorder, timeout=timeout)
        opts = AmqpOptions.from_url(url)
        caps = ALL_CAPABILITIES
        if settings is not None:
            if opts.user is None and settings.login is not None:
                opts = replace(opts, user=settings.login, password=settings.passcode)
            # the profile's AMQP dialect (settings.amqp_address / amqp_rcv_settle), unless the URL says otherwise
            query = parse_qs(urlsplit(url).query)
            style = settings.options.get("amqp_address")
            nack = settings.options.get("amqp_nack")
            if nack in ("modified", "released"):
                opts = replace(opts, nack=str(nack))
            if "address" not in query and style is not None:
                opts = replace(opts, address_style=AmqpOptions.from_url(f"amqp://h:1?address={style}").address_style)
            if settings.capabilities is not STOMP_STANDARD_CAPABILITIES:
                # the profile names what the target has; the driver can do no more than ALL_CAPABILITIES
                caps = caps & settings.capabilities | settings.capabilities & HARNESS_CAPABILITIES
        self.options = opts
        self.settings = settings
        self._caps = caps - (without or frozenset())
        self.first_acquirer_seen = False  # learnt from deliveries: the target sets first-acquirer
        self.coordinator_probe: str | None = None  # None: not probed; "": a coordinator exists; else why refused

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self._caps

    def _open(self, process: str, **options: Any) -> Client:
        return ProtonClient(self, process, self.options, client_id=options.get("client_id"))


class ReferenceProtonAdapter(EmbeddedBrokerControls, ProtonAdapter):
    """The proton driver against the embedded reference broker's AMQP listener (``reference+amqp://``).

    Adds what only an in-process target allows: restarting the broker on its journal
    (:attr:`Capability.BROKER_RESTART`) and its fault injection.
    """

    name = "proton-reference"

    def __init__(self, url: str, recorder: Recorder, *, timeout: float = 5.0,
                 settings: TargetSettings | None = None, broker: Any = None) -> None:
        if broker is None or getattr(broker, "amqp_url", None) is None:
            raise AdapterError("reference+amqp:// needs an embedded reference broker with its AMQP listener")
        if settings is None:
            from ackspec.adapters.reference import REFERENCE_SETTINGS  # noqa: PLC0415

            settings = REFERENCE_SETTINGS
        super().__init__(str(broker.amqp_url), recorder, timeout=timeout, settings=settings)
        self.broker = broker
        self.url = url
        self._caps = self._caps | {Capability.BROKER_RESTART, Capability.FAULT_INJECTION}

    def set_receive_window(self, credit: int) -> int:
        """Credit the broker grants a sender link of a *new* connection (and tops up to); returns the old value."""
        listener = getattr(getattr(self.broker, "server", None), "amqp_listener", None)
        if listener is None:
            raise NotSupported(Capability.FAULT_INJECTION, "the embedded broker has no AMQP listener")
        old = int(listener.receive_window)
        listener.receive_window = credit
        return old


__all__ = ["ALL_CAPABILITIES", "AmqpOptions", "DrainResult", "LinkModes", "ProtonAdapter", "ProtonClient",
           "ReferenceProtonAdapter", "Wire"]
