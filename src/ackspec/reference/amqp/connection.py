"""One AMQP 1.0 connection of the reference broker: proton's engine in, core calls out. Sans-IO.

Bytes come in through :meth:`AmqpConnection.receive_data` and go out through
:meth:`AmqpConnection.data_to_send`; nothing here touches a socket, a thread or
a clock. The SASL exchange is ours (:mod:`.sasl`); after it, proton's
``Transport``/``Connection``/``Collector`` decode frames and keep the link and
session state, and this class turns collector events into calls on the shared
:class:`~ackspec.reference.broker.BrokerCore` and the core's effects back into
transfers, dispositions and flows.

The mapping (docs/amqp-mapping.md has the full table):

* a link the client *receives* on (our sender) is a core subscription on the
  link's source address; ``snd-settle-mode=settled`` makes it ``AUTO``
  (pre-settled, at-most-once), otherwise ``CLIENT_INDIVIDUAL`` with AMQP credit;
  ``rcv-settle-mode=second`` is granted, and then our settlement of the client's
  disposition is the confirmation that its outcome was applied (and journalled);
* a link the client *sends* on (our receiver) publishes to its target address;
  an unsettled transfer gets its ``accepted`` disposition only from the core's
  ``Confirm``, which for a durable message comes after the journal sync;
* outcomes: accepted -> ACCEPT, released -> RELEASE (no count increment),
  modified -> MODIFIED (count + 1 if delivery-failed; undeliverable-here excludes
  the subscription), rejected -> REJECTED (dead-letter queue, with the error's
  description as the reason);
* a coordinator link handles ``declare``/``discharge``; transactional transfers
  and dispositions carry ``transactional-state``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, cast

from proton import (
    Collector,
    Condition,
    Connection,
    Described,
    Endpoint,
    Event,
    Transport,
    symbol,
    ulong,
)

from ackspec.reference.amqp.announced import AnnouncedOutcomes
from ackspec.reference.amqp.attach import Attachments
from ackspec.reference.amqp.conditions import (
    ERR_DECODE,
    ERR_FORCED,
    ERR_INVALID_FIELD,
    ERR_MESSAGE_SIZE,
    ERR_NOT_ALLOWED,
    ERR_NOT_FOUND,
    ERR_RESOURCE_LIMIT,
    ERR_TRANSFER_LIMIT,
    ERR_TXN_ROLLBACK,
    ERR_UNAUTHORIZED,
    ERR_UNKNOWN_TXN,
)
from ackspec.reference.amqp.coordinator import Coordinator, Txn
from ackspec.reference.amqp.dispositions import (
    ACCEPTED,
    REJECTED,
    TRANSACTIONAL_STATE,
    Ptr,
    inner_settlement,
    settlement_of,
    transaction_id,
    wrap,
)
from ackspec.reference.amqp.links import InLink, LinkTable, OutLink, Token, grant
from ackspec.reference.amqp.mapping import (
    core_destination,
    encode_delivery,
    read_incoming,
)
from ackspec.reference.amqp.proton_c import ffi, lib  # proton's C API (its private cffi module)
from ackspec.reference.amqp.pump import EnginePump
from ackspec.reference.amqp.sasl import SaslServer, SaslState
from ackspec.reference.amqp.sections import Incoming, read_plain
from ackspec.reference.broker import (
    ACCEPT,
    AckMode,
    Close,
    Confirm,
    CoreError,
    Deliver,
    Drained,
    Effect,
    Reject,
)
from ackspec.reference.broker.auth import Authenticator
from ackspec.reference.broker.hub import Hub
from ackspec.reference.broker.model import Headers
from ackspec.reference.limits import AmqpLimits

CONTAINER_ID = "ackspec-reference"
RECEIVE_WINDOW = 1000
"""Credit the broker keeps open on every link a client sends on."""
SEND_CHUNK = 128
"""Credit handed to the core at a time when a client grants more: its deliveries are written before the
next chunk is made (see :meth:`AmqpConnection._flow`)."""

NO_ADDRESS = "message has no destination address"  # why a transfer without a target address is rejected
FLUSH_PIECES = 4
"""Pieces of one read (~8 kB each) whose outcomes may wait before they are written mid-read (see
:meth:`AmqpConnection._piece`)."""

RECV_BUFFER_START = 4096
"""Bytes of a connection's transfer buffer at first: an idle connection costs little (issue 20: 2,000 idle
AMQP connections took 170 MB, 64 KiB each of it this buffer)."""
RECV_BUFFER_MAX = 1 << 16


# the C functions of the hot paths, bound once (a module global is found faster than a ``lib`` attribute)
_collector_peek = lib.pn_collector_peek
_collector_pop = lib.pn_collector_pop
_event_type = lib.pn_event_type
_event_delivery = lib.pn_event_delivery
_event_link = lib.pn_event_link
_delivery_link = lib.pn_delivery_link
_delivery_readable = lib.pn_delivery_readable
_delivery_partial = lib.pn_delivery_partial
_delivery_pending = lib.pn_delivery_pending
_link_recv = lib.pn_link_recv
_link_advance = lib.pn_link_advance
_delivery_remote_state = lib.pn_delivery_remote_state
_delivery_settled = lib.pn_delivery_settled
_delivery_settle = lib.pn_delivery_settle
_delivery_update = lib.pn_delivery_update
_delivery = lib.pn_delivery
_link_send = lib.pn_link_send
_link_credit = lib.pn_link_credit
_link_get_drain = lib.pn_link_get_drain
_link_flow = lib.pn_link_flow
_link_state = lib.pn_link_state
_link_current = lib.pn_link_current

_new_tuple = tuple.__new__  # builds a named tuple without calling its Python-level __new__ (hot path)

_PN_DELIVERY = int(lib.PN_DELIVERY)
_PN_LINK_FLOW = int(lib.PN_LINK_FLOW)
_CLOSED = int(Endpoint.LOCAL_CLOSED | Endpoint.REMOTE_CLOSED)
_WANTED_EVENTS: frozenset[int] = frozenset(
    int(getattr(lib, f"PN_{name}")) for name in (
        "CONNECTION_REMOTE_OPEN", "SESSION_REMOTE_OPEN", "LINK_REMOTE_OPEN", "LINK_REMOTE_CLOSE",
        "LINK_REMOTE_DETACH", "SESSION_REMOTE_CLOSE", "CONNECTION_REMOTE_CLOSE"))
"""The event types :meth:`AmqpConnection._on_event` handles (deliveries and flow have their own fast path)."""


class AmqpConnection:
    """The broker side of one AMQP connection.

    Deliveries are proton's C pointers, never wrapper objects, on the paths every message takes
    (transfer in, delivery out, accepted disposition, flow). A delivery pointer is used only while
    it cannot have been freed: proton keeps a delivery until it is settled locally, so every
    delivery this class still has to settle is in exactly one of ``_open_in`` (transfers
    awaiting our outcome), ``OutLink.ids`` (deliveries awaiting the client's outcome) or
    ``_open_out`` (deliveries whose outcome the core is applying), and is removed from it when
    settled; a pointer in none of them is never touched.
    """

    def __init__(self, conn_id: str, hub: Hub, auth: Authenticator | None = None, *,
                 on_output: Callable[[], None] | None = None, receive_window: int = RECEIVE_WINDOW,
                 flush_now: Callable[[], None] | None = None, limits: AmqpLimits | None = None) -> None:
        """``on_output``: there is output, write it soon. ``flush_now``: called between the pieces of a
        large read, to write :meth:`data_to_send` at once, so the peer gets credit and outcomes while
        the rest is processed instead of after it (without it, output waits for the end of the read)."""
        self.conn_id = conn_id
        self.limits = limits or AmqpLimits()
        self.max_message_size = self.limits.max_message_size
        self.flush_now = flush_now
        self.receive_window = receive_window
        self.hub = hub
        self.core = hub.core
        self.auth = auth or Authenticator()
        self.on_output = on_output or (lambda: None)
        self.sasl = SaslServer(lambda user, password: self.auth.check(user, password) is None,
                               allow_anonymous=self.auth.allow_anonymous)
        self.user: str | None = None
        self.transport = Transport(Transport.SERVER)
        self.connection = Connection()
        self.collector = Collector()
        self.connection.collect(self.collector)
        self.transport.bind(self.connection)
        self._engine = EnginePump(self.transport, self.collector, self._on_event, dispatch=self._piece)
        self.opened = False  # registered with the core
        self._refused = False  # closed at open: never registered (see _on_event)
        self.finished = False  # core told about the end
        self.error: str | None = None
        self.links = LinkTable()
        self._open_in: set[Ptr] = set()
        self._open_out: set[Ptr] = set()
        self._coordinator = Coordinator(conn_id, self.core, self.limits, answer=self._answer, run=self._run,
                                        end=self._end_txn, user=lambda: self.user)
        self.attachments = Attachments(conn_id, self.core, self.auth, self.connection, self.links, run=self._run,
                                       user=lambda: self.user, receive_window=receive_window,
                                       max_message_size=self.max_message_size)
        # transfers and acceptances read but not yet handed to the core (see _flush_batches)
        self._publishes: list[tuple[bytes, Headers, bool, object]] = []
        self._publish_to: str | None = None
        self._accepts: list[int] = []
        self._accepts_on: OutLink | None = None
        self._unflushed = 0  # pieces of this read handled since output was last handed over (see _piece)
        self._announced = AnnouncedOutcomes()  # where to cut a read (see .announced)
        self._recv_buffer = bytearray(RECV_BUFFER_START)  # grows with the messages, up to RECV_BUFFER_MAX
        self._recv_size = len(self._recv_buffer)
        self._recv_view = ffi.from_buffer(self._recv_buffer)  # what pn_link_recv writes into
        self._recv_bytes = memoryview(self._recv_buffer)

    @property
    def producer_only(self) -> bool:
        """It has links it sends messages on and none it receives on (see :mod:`ackspec.reference.flow`)."""
        return bool(self.links.incoming) and not self.links.by_sub

    # -- bytes in/out ------------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Bytes from the peer; ``b""`` means the peer closed its side."""
        if not data:
            self.connection_lost()
            return
        if self.sasl.state is not SaslState.DONE:
            state = self._sasl_step(data)
            if state is SaslState.FAILED:
                self.error = self.sasl.error
                return
            if state is not SaslState.DONE:
                return
            self.user = self.sasl.result.user if self.sasl.result else None
            data = self.sasl.remainder
            if not data:
                return
        data = self._amqp_input(data)
        for in_link in self.links.incoming.values():
            in_link.visible = in_link.granted
        # proton takes at most capacity() bytes per push: feed large reads in pieces, handling
        # the events of each piece (credit is still topped up only once, after the whole read)
        # closed for input (capacity < 0) stops feeding; a full buffer (0) cannot last since each piece
        # is processed; either way _process() below judges the transport
        self._unflushed = 0
        start = 0
        for cut in self._announced.cuts(data):  # an announced outcome is read before what follows it
            self._engine.feed(data[start:cut])
            self._piece()
            start = cut
        self._engine.feed(data[start:] if start else data)
        self._process()


    def _amqp_input(self, data: bytes) -> bytes:
        """The bytes of the AMQP layer (after SASL) as proton is to read them: these, unchanged.

        Why a method: the one seam where a subclass can filter the peer's frames before proton sees
        them (the suite's quality checks build their faulty brokers that way, from outside)."""
        return data
    def _sasl_step(self, data: bytes) -> SaslState:
        self.sasl.receive(data)
        return self.sasl.state

    def data_to_send(self) -> bytes:
        """Bytes for the peer: SASL frames first, then (once authenticated) proton's AMQP output."""
        sasl = self.sasl.data_to_send()
        if self.sasl.state is not SaslState.DONE:
            return sasl
        out = self._engine.take_output()
        return sasl + out if sasl else out

    @property
    def should_close(self) -> bool:
        """The connection is over: flush :meth:`data_to_send` and close the socket."""
        if self.sasl.state is SaslState.FAILED:
            return True
        return self.sasl.state is SaslState.DONE and self.transport.pending() < 0

    def connection_lost(self) -> None:
        """The socket is gone (EOF, error, server shutdown): tell the core, abruptly if not closed."""
        if self.sasl.state is SaslState.DONE:
            self.transport.close_tail()
            self.transport.close_head()
        self._finish(abrupt=not bool(self.connection.state & Endpoint.REMOTE_CLOSED))

    def _finish(self, *, abrupt: bool) -> None:
        if self.opened and not self.finished:
            self.finished = True
            self._run(self.core.close(self.conn_id, abrupt=abrupt))
            # JMS 4.4.3: a temporary destination lives as long as its connection
            for address in self.attachments.temporaries:
                self._run(self.core.delete_queue(address))

    # -- engine events ---------------------------------------------------------------------------

    def _replenish(self) -> bool:
        """Top up the credit of links we receive on, after each piece of input.

        Transfers are judged against the credit granted before the read they arrived in (``visible``),
        the credit the client could have seen, so exceeding it is a real violation even when more
        was granted while the read was being processed.
        """
        window = self.receive_window
        granted = False
        for impl, state in list(self.links.incoming.items()):
            if _link_state(impl) & _CLOSED:
                del self.links.incoming[impl]
                continue
            left = state.granted - state.received
            if left <= window // 2:
                grant(state, window - left)
                granted = True
        return granted

    def _piece(self) -> None:
        """Between the pieces of a large read (proton takes at most ``capacity()`` bytes at a time):
        handle their events, top credit up and hand the output over now (``flush_now``) when it
        granted credit, or when ``FLUSH_PIECES`` pieces' outcomes are waiting.

        Why not after every piece: each write is a socket ``send`` (on loopback it also runs the
        peer's receive path), and a piece is only ~8 kB (~50 small transfers); outcomes of a few
        pieces together still reach a client with a window of hundreds long before it runs dry.
        Credit is never held back: a client sending pre-settled waits for nothing else."""
        self._dispatch()
        if self.flush_now is not None:
            self._unflushed += 1
            if self._replenish() or self._unflushed >= FLUSH_PIECES:
                self._unflushed = 0
                self.flush_now()

    def _dispatch(self) -> None:
        """Handle every collected event, on proton's C API.

        Most events are transfers, dispositions and flow, handled here from the C pointers;
        only the rare rest (opens, closes) pay for proton's ``Event`` wrapper. Every other
        event type is popped unread. This is the broker's hottest loop.

        On a connection whose only deliveries are transfers of one link (see :meth:`.links.LinkTable._changed`),
        delivery events are popped unread: that link's transfers are read by walking it
        (:meth:`_walk`) before the next event that is handled and once the collector is empty. The
        walk stops at the delivery of the last event popped (``until``): proton has already decoded
        the whole piece, so transfers the client sent *after* the handled event are current on the
        link too, and must wait for their own events. So the core still sees every operation in the
        order the client sent it (tests/amqp/test_walked_order.py).
        """
        collector = self.collector._impl
        if self._refused:  # closed at open (client id in use): what the client still sends is not handled
            while _collector_peek(collector):
                _collector_pop(collector)
            return
        table = self.links
        links = table.by_impl
        peek = _collector_peek
        on_delivery = self._on_delivery
        walk: InLink | None = None  # a link whose transfers are read by walking it (see LinkTable._changed)
        until: Any = None  # ... up to this delivery, the one of the last delivery event popped unread
        while True:
            event = peek(collector)
            if not event:
                if walk is not None:
                    self._walk(walk, until)
                    walk = None
                    continue
                if not self._publishes and not self._accepts:
                    return
                self._flush_batches()  # may cause events of its own (our deliveries): look again
                continue
            kind = _event_type(event)
            if kind == _PN_DELIVERY and table.walked is not None:
                # read later, by walking up to this delivery; an update of one already taken (its
                # bytes read, the link moved on) moves nothing
                dlv = _event_delivery(event)
                if _delivery_pending(dlv) or _link_current(_delivery_link(dlv)) == dlv:
                    walk, until = table.walked, dlv
                _collector_pop(collector)
                continue
            try:
                if kind == _PN_DELIVERY:
                    on_delivery(_event_delivery(event))
                elif kind == _PN_LINK_FLOW:
                    state = links.get(_event_link(event))
                    if state is not None and state.__class__ is OutLink:
                        self._walk_first(walk, until)  # the transfers read so far come first
                        walk = None
                        self._flush_batches()
                        self._flow(state)
                elif kind in _WANTED_EVENTS:
                    self._walk_first(walk, until)
                    walk = None
                    self._flush_batches()
                    wrapped = Event.wrap(event)  # type: ignore[no-untyped-call]
                    if wrapped is not None:
                        self._on_event(wrapped)
                        if self._refused:
                            return  # the rest is drained unread by the next call
            finally:
                _collector_pop(collector)


    def _walk_first(self, walk: InLink | None, until: Any) -> None:
        """Read the transfers a pending walk covers (if any) before an event that must come after them."""
        if walk is not None:
            self._walk(walk, until)

    def _on_delivery(self, dlv: Ptr) -> None:
        """A delivery event (the most common): a transfer on one of our receiving links, or the peer's
        disposition of one of our deliveries."""
        # the only link we send on: its own ids tell its deliveries (no pn_delivery_link)
        out = self.links.single_out
        if out is None or (delivery_id := out.ids.get(dlv)) is None:
            owner = self.links.by_impl.get(_delivery_link(dlv))
            if owner is None:
                return  # a link we refused or closed
            if owner.__class__ is InLink:
                self._transfer(dlv, owner)
                return
            out = cast(OutLink, owner)
            delivery_id = out.ids.get(dlv)
            if delivery_id is None:
                return  # pre-settled, or its outcome is already being applied
        if _delivery_remote_state(dlv) == ACCEPTED and _delivery_settled(dlv):
            # the common case, batched (see _flush_batches): a settled acceptance, nobody waits for us
            del out.ids[dlv]
            _delivery_settle(dlv)
            if out is not self._accepts_on or self._publishes:
                self._flush_batches()
                self._accepts_on = out
            self._accepts.append(delivery_id)
            return
        self._disposition(dlv, out, delivery_id)

    def _process(self) -> None:
        self._dispatch()
        self._replenish()
        if (self.transport.capacity() < 0 and self.transport.condition is None
                and not self.connection.state & (Endpoint.REMOTE_CLOSED | Endpoint.LOCAL_CLOSED)):
            # proton stops reading at an undecodable frame body without raising a condition
            self.transport.condition = Condition(ERR_DECODE, "undecodable frame")
            self.transport.close_tail()
            self.error = "undecodable frame"
            self._finish(abrupt=True)
        if self.transport.condition is not None and not self.finished:
            self.error = f"{self.transport.condition.name}: {self.transport.condition.description}"
            self._finish(abrupt=True)

    def _on_event(self, event: Event) -> None:
        """One endpoint event; a name, container id or address that is not valid UTF-8 is answered with an
        AMQP error (the link refused, or the connection closed), not by dropping the connection."""
        try:
            self._endpoint_event(event)
        except UnicodeDecodeError:
            self._invalid_utf8(event)

    def _invalid_utf8(self, event: Event) -> None:
        reason = "invalid UTF-8 in a container id, link name or address"
        if event.link is not None and not event.link.state & Endpoint.LOCAL_CLOSED:
            self.links.remove(event.link._impl)
            self.attachments.refuse(event.link, ERR_INVALID_FIELD, reason)
        elif not self.connection.state & Endpoint.LOCAL_CLOSED:
            self.connection.condition = Condition(ERR_DECODE, reason)
            if self.connection.state & Endpoint.LOCAL_UNINIT:
                self.connection.open()
            self.connection.close()
            self.error = reason
            if not self.opened:
                self._refused = True

    def _endpoint_event(self, event: Event) -> None:
        kind = event.type
        if kind == Event.CONNECTION_REMOTE_OPEN:
            self.connection.container = CONTAINER_ID
            sole = SOLE_CONNECTION in (self.connection.remote_desired_capabilities or ())
            # JMS 2.0 shared subscriptions are always offered (the AMQP JMS mapping's SHARED-SUBS)
            self.connection.offered_capabilities = [SOLE_CONNECTION, SHARED_SUBS] if sole else [SHARED_SUBS]
            self.connection.open()
            if not self.opened:
                refusal = self.auth.client_id_refusal(self.connection.remote_container, self.user)
                if refusal is not None:
                    self._refuse_open(refusal)
                    return
                try:
                    effects = self.core.open(self.conn_id, user=self.user,
                                             client_id=self.connection.remote_container, exclusive=sole)
                except CoreError as exc:  # the AMQP JMS mapping's refusal: open, then close naming the field
                    self.core.tracer.trace("JMS-6.1.2-CLIENT-ID-IN-USE", exc.message)
                    self.connection.condition = Condition(ERR_INVALID_FIELD, exc.message,
                                                          {symbol("invalid-field"): symbol("container-id")})
                    self.connection.close()
                    self.error = exc.message
                    self._refused = True
                    return
                self.opened = True
                self._run(effects)
        elif kind == Event.SESSION_REMOTE_OPEN and event.session is not None:
            event.session.open()
        elif kind == Event.LINK_REMOTE_OPEN and event.link is not None:
            self.attachments.attach(event.link)
        elif kind in (Event.LINK_REMOTE_CLOSE, Event.LINK_REMOTE_DETACH) and event.link is not None:
            self.attachments.detach(event.link, closed=kind == Event.LINK_REMOTE_CLOSE)
        elif kind == Event.SESSION_REMOTE_CLOSE and event.session is not None:
            for out in list(self.links.by_sub.values()):
                if out.link.session == event.session:
                    self.attachments.detach(out.link, closed=False)  # an ended session detaches its links, closes none
            event.session.close()
        elif kind == Event.CONNECTION_REMOTE_CLOSE:
            for out in list(self.links.by_sub.values()):
                self.attachments.detach(out.link, closed=False)
            self.connection.close()
            self._finish(abrupt=False)

    # -- attach / detach ------------------------------------------------------------------------

    def _refuse_open(self, reason: str) -> None:
        """Close the just-opened connection: its container id belongs to another login."""
        self.connection.condition = Condition(ERR_UNAUTHORIZED, reason)
        self.connection.close()
        self.error = reason
        self._refused = True

    # -- flow -----------------------------------------------------------------------------------------

    def _flow(self, out: OutLink) -> None:
        """New credit (or drain) from the client: handed to the core, which delivers what it can.

        A large grant is handed over :data:`SEND_CHUNK` credits at a time, each chunk's deliveries
        written (``flush_now``) before the next is made: the client starts on the first ones while
        the broker makes the rest (benchmarks/amqp_floor.py: the consume row ~15 % faster). The core
        sees the same total credit and hands out the same deliveries in the same order."""
        delta = _link_credit(out.impl) - out.core_credit
        drain = bool(_link_get_drain(out.impl))
        if delta == 0 and not drain:
            return
        flush_now = self.flush_now
        if flush_now is not None and delta > SEND_CHUNK:
            add_credit = self.core.add_credit
            while delta > SEND_CHUNK:
                out.core_credit += SEND_CHUNK
                delta -= SEND_CHUNK
                effects = add_credit(self.conn_id, out.sub, SEND_CHUNK)
                if not effects:
                    break  # nothing to deliver: the rest in one call
                self._run_deliveries(effects, out)
                flush_now()
        out.core_credit += delta
        self._run_deliveries(self.core.add_credit(self.conn_id, out.sub, delta, drain=drain), out)

    def _run_deliveries(self, effects: list[Effect], out: OutLink) -> None:
        """The effects of a credit grant on ``out``: its deliveries written here (:meth:`_send`), one loop
        for all (the hub would call :meth:`on_effect` once per delivery), every other effect applied by the
        hub in its place."""
        if not effects:
            return
        conn_id, sub = self.conn_id, out.sub
        send = self._send
        apply = self.hub.apply
        for effect in effects:
            if type(effect) is Deliver and effect.sub == sub and effect.conn == conn_id:
                send(out, effect)
            else:
                apply([effect])
        self.on_output()

    # -- incoming transfers ------------------------------------------------------------------------

    def _recv(self, impl: Ptr, got: int) -> bytes:
        """The current (complete) delivery's bytes, of which ``got`` were read into the buffer already
        (straight, without asking ``pn_delivery_pending`` first: one C call less per transfer); a
        message that fills the buffer is read on, and the buffer grown to fit it next time (up to
        :data:`RECV_BUFFER_MAX`: a larger one is read in pieces every time, so one big message does not
        keep megabytes per connection)."""
        size = self._recv_size
        if got < size:
            return self._recv_bytes[:got].tobytes() if got > 0 else b""
        parts = [self._recv_bytes.tobytes()]
        while got == size:  # more: read the rest, then keep a buffer that fits next time
            got = _link_recv(impl, self._recv_view, size)
            if got > 0:
                parts.append(self._recv_bytes[:got].tobytes())
        payload = b"".join(parts)
        if size >= RECV_BUFFER_MAX:
            return payload
        self._recv_buffer = bytearray(min(len(payload) + 1, RECV_BUFFER_MAX))
        self._recv_size = len(self._recv_buffer)
        self._recv_view = ffi.from_buffer(self._recv_buffer)
        self._recv_bytes = memoryview(self._recv_buffer)
        return payload

    def _walk(self, state: InLink, until: Any) -> None:
        """The complete transfers of the link, oldest first, up to and including ``until`` (the
        delivery of the last delivery event popped): its current delivery, until one is still
        partial (benchmarks/amqp_floor.py: a third less CPU per message than one event per transfer).
        ``until`` is compared before it is taken, while proton still holds it."""
        impl = state.impl
        links = self.links.by_impl
        dlv = _link_current(impl)
        while dlv and not _delivery_partial(dlv):
            last = dlv == until
            self._take(dlv, state)
            if last or links.get(impl) is not state:
                return  # up to the last event seen; or the link was ended (a transfer beyond its credit)
            dlv = _link_current(impl)
        self._check_size(dlv, state)  # one still arriving

    def _transfer(self, dlv: Ptr, state: InLink) -> None:
        # a delivery is handled once, when complete: it is then the link's current one (readable)
        # and advancing past it makes it not current for good
        if not _delivery_readable(dlv) or _delivery_partial(dlv):
            self._check_size(dlv, state)
            return
        self._take(dlv, state)

    def _check_size(self, dlv: Any, state: InLink) -> bool:
        """A transfer (complete or still arriving) beyond :attr:`max_message_size` ends its link."""
        if not dlv or _delivery_pending(dlv) <= self.max_message_size:
            return False
        self._flush_batches()
        self.attachments.close_link(state.impl, ERR_MESSAGE_SIZE, f"message larger than {self.max_message_size} bytes")
        return True

    def _take(self, dlv: Ptr, state: InLink) -> None:
        """A complete transfer, the link's current delivery: read, advanced past, handed on."""
        impl = state.impl
        state.received += 1
        if state.received > state.visible:
            # more transfers than all the credit the client had seen (2.6.7): detach the link
            self._flush_batches()
            self.attachments.close_link(impl, ERR_TRANSFER_LIMIT, "transfer sent without link credit")
            return
        got = _link_recv(impl, self._recv_view, self._recv_size)  # _recv's usual case, inline
        payload = self._recv_bytes[:got].tobytes() if 0 < got < self._recv_size else self._recv(impl, got)
        _link_advance(impl)
        if len(payload) > self.max_message_size:  # arrived whole in one read (else _check_size saw it)
            self._flush_batches()
            self.attachments.close_link(impl, ERR_MESSAGE_SIZE, f"message larger than {self.max_message_size} bytes")
            return
        faults = self.core.faults
        if (state.coordinator or _delivery_remote_state(dlv) == TRANSACTIONAL_STATE
                or (faults is not None and faults.active)):
            self._flush_batches()
            self._open_in.add(dlv)  # to be settled by us: _answer or the pre-settled paths below
            self._transfer_one(dlv, state, payload)
            return
        # the common case: a plain message outside any transaction, batched (see _flush_batches)
        read = self._incoming(dlv, state, payload)
        if read is None:
            return
        incoming, destination = read
        if incoming.typed is not None:  # kept with its types: published on its own
            self._flush_batches()
            self._open_in.add(dlv)
            self._publish_one(dlv, incoming, destination, None)
            return
        if destination != self._publish_to or self._accepts:
            self._flush_batches()
            self._publish_to = destination
        if _delivery_settled(dlv):
            # pre-settled: the client forgot it, so nothing can be answered; settled (freed) now
            _delivery_settle(dlv)
            self._publishes.append((incoming.body, incoming.headers, incoming.durable, None))
        else:
            self._open_in.add(dlv)
            self._publishes.append((incoming.body, incoming.headers, incoming.durable,
                                    _new_tuple(Token, ("transfer", dlv, False))))

    def _flush_batches(self) -> None:
        """Hand the core what was batched: the plain transfers read so far (one ``publish_many`` for
        a run of transfers to one destination), or the run of acceptances of one link (``accept_many``).

        Why: per message the core and the hub then do only the message's own work (a read brings
        hundreds of transfers or dispositions); effects come back in the order one call per message
        would give. Every other event, and every transfer or disposition off the plain path, first
        flushes, so the core sees all operations in the order the client sent them."""
        if self._publishes:
            batch, self._publishes = self._publishes, []
            destination = self._publish_to
            assert destination is not None
            try:
                effects = self.core.publish_many(self.conn_id, destination, batch)
            except CoreError:  # one by one, each failure answered on its own
                for body, headers, durable, token in batch:
                    try:
                        self._run(self.core.publish(self.conn_id, destination, body, headers,
                                                    persistent=durable, confirm=token))
                    except CoreError as exc:
                        if isinstance(token, Token):
                            self._answer(token.delivery, REJECTED, condition=Condition(ERR_INVALID_FIELD, exc.message))
            else:
                self._run_published(effects)
        if self._accepts:
            ids, self._accepts = self._accepts, []
            out = self._accepts_on
            assert out is not None
            try:
                effects = self.core.accept_many(self.conn_id, ids)
            except CoreError:  # one by one: the first unknown id ends the link, as for a single one
                for delivery_id in ids:
                    try:
                        self._run(self.core.settle(self.conn_id, delivery_id, ACCEPT, cumulative=False))
                    except CoreError as exc:
                        self.attachments.close_link(out.impl, ERR_NOT_ALLOWED, exc.message)
                        return
                return
            self._run(effects)

    def _run_published(self, effects: list[Effect]) -> None:
        """A batch's effects; the acceptances of this connection's non-durable plain transfers
        written here, without the hub.

        Why: in the window row every transfer's ``Confirm`` otherwise costs a hub dispatch and an
        ``on_confirm`` call each. A non-durable ``Confirm`` needs no journal sync and this connection's
        confirms need no order (:attr:`ordered_confirms`), so the hub would hand it over at once:
        answering it here is what :meth:`on_confirm` would do. Every other effect goes to the hub, in
        order: the runs before and after an inlined one are applied around it."""
        if not effects:
            return
        conn_id = self.conn_id
        outcome = self._outcome
        rest: list[Effect] = []
        answered = False
        for e in effects:
            if e.__class__ is Confirm and not e.durable and e.conn == conn_id:
                token = e.token
                if token.__class__ is Token and token.kind == "transfer" and not token.extra:
                    if rest:
                        self.hub.apply(rest)
                        rest = []
                    outcome(token.delivery, ACCEPTED)
                    answered = True
                    continue
            rest.append(e)
        if rest:
            self.hub.apply(rest)
        if answered:
            self.on_output()

    def _transfer_one(self, dlv: Ptr, state: InLink, payload: bytes) -> None:
        """A transfer off the batched path: coordinator, transactional, or with fault rules on."""
        if state.coordinator:
            self._coordinator.control(dlv, payload)
            return
        tx: str | None = None
        if _delivery_remote_state(dlv) == TRANSACTIONAL_STATE:
            known, tx = self._transaction_of(dlv, receiving=True)
            if not known:
                return
        read = self._incoming(dlv, state, payload)
        if read is not None:
            self._publish_one(dlv, read[0], read[1], tx)

    def _incoming(self, dlv: Ptr, state: InLink, payload: bytes) -> tuple[Incoming, str] | None:
        """The message of a complete transfer and the core destination it goes to; None when the transfer
        was rejected instead (undecodable, no address, or through the anonymous relay to a destination
        this login may not write)."""
        try:
            # the plainest messages by read_message's shortcut, without its two calls around it
            incoming = (read_plain(payload) if len(payload) > 12 else None) or read_incoming(payload)
        except Exception as exc:
            self._reject_transfer(dlv, ERR_DECODE, f"undecodable message: {exc}")
            return None
        destination = state.destination or core_destination(incoming.to, state.caps)
        if destination is None:
            self._reject_transfer(dlv, ERR_NOT_FOUND, NO_ADDRESS)
            return None
        if state.destination is None and self.auth.acl is not None and self._relay_refused(dlv, destination):
            return None
        return incoming, destination

    def _publish_one(self, dlv: Ptr, incoming: Incoming, destination: str, tx: str | None) -> None:
        """One transfer handed to the core on its own (off the batched path), answered when confirmed."""
        settled = bool(_delivery_settled(dlv))
        faults = self.core.faults
        if faults is not None and faults.active and self._rejected_by_fault(dlv, settled, destination, tx):
            return
        confirm = None if settled else Token("transfer", dlv, tx is not None)
        try:
            effects = self.core.publish(self.conn_id, destination, incoming.body, incoming.headers,
                                        persistent=incoming.durable, tx=tx, confirm=confirm, typed=incoming.typed)
        except CoreError as exc:
            self._answer(dlv, REJECTED, condition=Condition(ERR_INVALID_FIELD, exc.message))
            return
        if settled:
            self._open_in.discard(dlv)
            _delivery_settle(dlv)
        self._run(effects)

    def _relay_refused(self, dlv: Ptr, destination: str) -> bool:
        """A transfer through the anonymous relay to a destination this login may not write: rejected."""
        refusal = self.attachments.unauthorised("write", destination)
        if refusal is None:
            return False
        self._reject_transfer(dlv, ERR_UNAUTHORIZED, refusal)
        return True

    def _rejected_by_fault(self, dlv: Ptr, settled: bool, destination: str, tx: str | None) -> bool:
        """Fault rule ``reject_send``: the transfer cannot be processed. Unsettled: rejected. Pre-settled in
        a transaction: nobody can be told now, so the transaction is marked failed and its commit fails (4.4.4)."""
        faults = self.core.faults
        if faults is None:
            return False
        rules = faults.rules_for(destination, self.conn_id, self.user)
        if not rules:
            return False
        reason = next((r.reject_send for r in rules if r.reject_send is not None), None)
        if reason is None:
            return False
        if not settled:
            self._answer(dlv, REJECTED, condition=Condition(ERR_NOT_ALLOWED, reason))
            return True
        if tx is not None:
            self._coordinator.txns[tx].failed = reason
        self._open_in.discard(dlv)
        _delivery_settle(dlv)
        return True

    def _transaction_of(self, dlv: Ptr, *, receiving: bool) -> tuple[bool, str | None]:
        """(known, the core transaction a transfer or disposition belongs to); refuses unknown ids."""
        if _delivery_remote_state(dlv) != TRANSACTIONAL_STATE:
            return True, None
        data = wrap(dlv).remote.data or []
        txn_id = bytes(data[0]).decode("utf-8", "replace") if data else ""
        if txn_id not in self._coordinator.txns:
            cond = Condition(ERR_UNKNOWN_TXN, f"unknown transaction {txn_id!r}")
            if receiving:
                self._answer(dlv, REJECTED, condition=cond)
            else:
                self.attachments.close_link(_delivery_link(dlv), cond.name, cond.description or "")
            return False, None
        return True, txn_id

    def _reject_transfer(self, dlv: Ptr, error: str, description: str) -> None:
        """Reject a transfer the core never sees (undecodable, no address), after what came before it."""
        self._flush_batches()
        self._open_in.add(dlv)
        self._answer(dlv, REJECTED, condition=Condition(error, description))

    def _answer(self, dlv: Ptr, state: int, *, condition: Condition | None = None,
                data: list[Any] | None = None) -> None:
        """Our outcome for a transfer, settled (:meth:`_outcome`), and the output handed over."""
        if self._outcome(dlv, state, condition, data):
            self.on_output()

    def _outcome(self, dlv: Ptr, state: int, condition: Condition | None = None,
                 data: list[Any] | None = None) -> bool:
        """Our outcome ``state`` for transfer ``dlv``, settled, once: a delivery we settled already is left
        alone (returns whether it was answered now). Every unsettled transfer comes here."""
        open_in = self._open_in
        if dlv not in open_in:
            return False
        open_in.discard(dlv)
        if condition is None and data is None:
            _delivery_update(dlv, state)
        else:
            wrapper = wrap(dlv)
            if condition is not None:
                wrapper.local.condition = condition
            if data is not None:
                wrapper.local.data = data
            wrapper.update(state)
        _delivery_settle(dlv)
        return True

    def _end_txn(self, txn: Txn, rolled_back: bool) -> None:
        """The transaction is over: settle its dispositions; after a rollback the ones the client left
        unsettled stay acquired by their link, so the client may settle them anew (4.4.2)."""
        for tdlv, client_settled, out, delivery_id in txn.deliveries:
            if not rolled_back or client_settled:
                self._settle_out(tdlv)
            elif tdlv in self._open_out and self.links.by_impl.get(out.impl) is out:
                self._open_out.discard(tdlv)
                out.ids[tdlv] = delivery_id

    # -- dispositions from the client -------------------------------------------------------------

    def _disposition(self, dlv: Ptr, out: OutLink, delivery_id: int) -> None:
        """The client's outcome for our unsettled delivery ``dlv`` (core delivery ``delivery_id``) of ``out``,
        other than a settled acceptance (:meth:`_on_delivery` batches those)."""
        state = _delivery_remote_state(dlv)
        if state == ACCEPTED:
            settlement = ACCEPT
            tx: str | None = None
        elif not state and not _delivery_settled(dlv):
            return  # no outcome yet
        elif state == TRANSACTIONAL_STATE:
            self._flush_batches()
            known, tx = self._transaction_of(dlv, receiving=False)
            if not known or tx is None:
                return
            data = wrap(dlv).remote.data or []
            settlement = inner_settlement(data[1] if len(data) > 1 else None)
        else:
            settlement = settlement_of(wrap(dlv))
            tx = None
        del out.ids[dlv]
        confirm: Token | None = None
        self._flush_batches()
        if settlement is not ACCEPT and (self.connection.state | out.link.state) & Endpoint.REMOTE_CLOSED:
            # the client ends the link (or connection) right after: what goes back must not be sent again
            # on it, to fail a second time when the end is read (JMS: one failed delivery per close)
            self.core.halt(self.conn_id, out.sub)
        if tx is None and _delivery_settled(dlv):
            # the client settled already: it waits for nothing from us, so settle now (once the core
            # has the outcome; nobody needs to hear when it is applied or journalled)
            _delivery_settle(dlv)
        else:
            # our settlement is the confirmation (rcv-settle-mode second, or a client that waits for it);
            # a transactional outcome is applied at discharge, and the discharge answer confirms it
            self._open_out.add(dlv)
            if tx is None:
                confirm = Token("settle", dlv)
        try:
            effects = self.core.settle(self.conn_id, delivery_id, settlement, cumulative=False, tx=tx,
                                       confirm=confirm)
        except CoreError as exc:
            self.attachments.close_link(out.impl, ERR_NOT_ALLOWED, exc.message)
            return
        if tx is not None:
            self._coordinator.txns[tx].deliveries.append((dlv, bool(_delivery_settled(dlv)), out, delivery_id))
        self._run(effects)

    def _settle_out(self, dlv: Ptr) -> None:
        if dlv in self._open_out:
            self._open_out.discard(dlv)
            _delivery_settle(dlv)

    # -- effects ----------------------------------------------------------------------------------

    def _run(self, effects: list[Effect]) -> None:
        if effects:
            self.hub.apply(effects)

    # ConnectionHandler (the hub calls these)

    ordered_confirms = False
    """Each transfer has its own outcome: only a durable one waits for the journal (the hub holds it)."""

    def on_confirm(self, effect: Confirm) -> None:
        """Answer now (the hub held a durable one until the journal synced it)."""
        # a batch's non-durable plain transfers are answered by _run_published, without the hub
        self._confirm(effect.token)
        self.on_output()

    def on_effect(self, effect: Effect) -> None:
        """Carry out one effect the core addressed to this connection."""
        if effect.__class__ is Deliver:  # a credit grant's deliveries are written by _run_deliveries instead
            self._deliver(effect)
        elif isinstance(effect, Confirm):
            self._confirm(effect.token)
        elif isinstance(effect, Reject):
            self._reject(effect.token, effect.reason)
        elif isinstance(effect, Drained):
            out = self.links.by_sub.get(effect.sub)
            if out is not None:
                out.core_credit = 0
                out.link.drained()
        elif isinstance(effect, Close):
            self.connection.condition = Condition(ERR_FORCED, effect.reason)
            self.connection.close()
        self.on_output()

    def _deliver(self, effect: Deliver) -> None:
        out = self.links.by_sub.get(effect.sub)
        if out is not None:
            self._send(out, effect)

    @staticmethod
    def _send(out: OutLink, effect: Deliver) -> None:
        """Write one delivery of the core on ``out``: settled at once on a pre-settled link, else kept in
        ``out.ids`` until the client's outcome."""
        payload = encode_delivery(effect.message, delivery_count=effect.delivery_count,
                                  redelivered=effect.redelivered)
        impl = out.impl
        delivery_id = effect.delivery_id
        tag = b"%d" % delivery_id
        dlv = _delivery(impl, (len(tag), ffi.from_buffer(tag)))
        _link_send(impl, payload, len(payload))  # cffi passes a bytes object's buffer as is
        _link_advance(impl)
        out.core_credit -= 1
        if out.ack is AckMode.AUTO:
            _delivery_settle(dlv)
        else:
            out.ids[dlv] = delivery_id

    def _confirm(self, token: object) -> None:
        if token.__class__ is not Token:
            return
        dlv = token.delivery
        kind = token.kind
        if kind == "transfer":
            if token.extra:  # transactional: report the presumptive outcome (4.4.1)
                self._answer(dlv, TRANSACTIONAL_STATE, data=[transaction_id(dlv), Described(ulong(ACCEPTED), [])])
            else:
                self._outcome(dlv, ACCEPTED)  # the output is handed over by the caller
        elif kind == "settle":
            self._settle_out(dlv)
        elif kind == "discharge":
            txn, fail = token.extra
            self._answer(dlv, ACCEPTED)
            self._end_txn(txn, fail)

    def _reject(self, token: object, reason: str) -> None:
        if not isinstance(token, Token):
            return
        dlv = token.delivery
        if token.kind == "settle":
            self._settle_out(dlv)
            return
        name = ERR_TXN_ROLLBACK if token.kind == "discharge" else ERR_RESOURCE_LIMIT
        self._answer(dlv, REJECTED, condition=Condition(name, reason))


SOLE_CONNECTION: Final = symbol("sole-connection-for-container")
SHARED_SUBS: Final = symbol("SHARED-SUBS")
"""The AMQP JMS mapping's connection capability: a client that set a client id asks to be the only
connection of its container id (JMS 6.1.2); the reference broker offers and enforces it."""
__all__ = ["CONTAINER_ID", "AmqpConnection"]
