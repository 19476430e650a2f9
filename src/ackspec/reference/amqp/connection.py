"""One AMQP 1.0 connection of the reference broker: proton's engine in, core calls out. Sans-IO.

Bytes come in through :meth:`AmqpConnection.receive_data` and go out through :meth:`AmqpConnection.data_to_send`;
nothing here touches a socket, a thread or a clock. The SASL exchange is ours (:mod:`.sasl`); after it, proton's
``Transport``/``Connection``/``Collector`` decode frames and keep the link and session state, and the connection
hands each collector event to the part that owns its concept, which calls the shared
:class:`~ackspec.reference.broker.BrokerCore`; the core's effects come back as transfers, dispositions and flows.

The mapping (docs/amqp-mapping.md has the full table):

* a link the client *receives* on (our sender) is a core subscription on the link's source address
  (:mod:`.attach`); ``snd-settle-mode=settled`` makes it ``AUTO`` (pre-settled, at-most-once), otherwise
  ``CLIENT_INDIVIDUAL`` with AMQP credit (:mod:`.credit`, :mod:`.outgoing`); ``rcv-settle-mode=second`` is
  granted, and then our settlement of the client's disposition is the confirmation that its outcome was applied
  (and journalled) (:mod:`.outcomes`);
* a link the client *sends* on (our receiver) publishes to its target address (:mod:`.transfers`); an unsettled
  transfer gets its ``accepted`` disposition only from the core's ``Confirm``, which for a durable message comes
  after the journal sync (:mod:`.inflight`);
* outcomes (:mod:`.dispositions`): accepted -> ACCEPT, released -> RELEASE (no count increment), modified ->
  MODIFIED (count + 1 if delivery-failed; undeliverable-here excludes the subscription), rejected -> REJECTED
  (dead-letter queue, with the error's description as the reason);
* a coordinator link handles ``declare``/``discharge`` (:mod:`.coordinator`); transactional transfers and
  dispositions carry ``transactional-state``.
"""

from __future__ import annotations

from collections.abc import Callable

from proton import Collector, Condition, Connection, Endpoint, Event, Transport

from ackspec.reference.amqp.announced import AnnouncedOutcomes
from ackspec.reference.amqp.attach import Attachments
from ackspec.reference.amqp.conditions import ERR_DECODE, ERR_FORCED
from ackspec.reference.amqp.coordinator import Coordinator, Txn
from ackspec.reference.amqp.credit import Credit
from ackspec.reference.amqp.endpoints import CONTAINER_ID, Endpoints
from ackspec.reference.amqp.events import EventRouter
from ackspec.reference.amqp.inflight import InFlight
from ackspec.reference.amqp.links import LinkTable
from ackspec.reference.amqp.outcomes import ClientOutcomes
from ackspec.reference.amqp.outgoing import Outgoing
from ackspec.reference.amqp.pump import EnginePump
from ackspec.reference.amqp.sasl import SaslServer, SaslState
from ackspec.reference.amqp.transfers import Transfers
from ackspec.reference.broker import Close, Confirm, Deliver, Drained, Effect, Reject
from ackspec.reference.broker.auth import Authenticator
from ackspec.reference.broker.hub import Hub
from ackspec.reference.limits import AmqpLimits

RECEIVE_WINDOW = 1000
"""Credit the broker keeps open on every link a client sends on."""
FLUSH_PIECES = 4
"""Pieces of one read (~8 kB each) whose outcomes may wait before they are written mid-read (see
:meth:`AmqpConnection._piece`)."""

class AmqpConnection:
    """The broker side of one AMQP connection: bytes and proton's events in, each handed to its part.

    The parts, one concept each: :class:`.Endpoints` (open, sessions, attach and detach through
    :class:`.Attachments`), :class:`.Transfers` (what the client sends), :class:`.ClientOutcomes` (its
    dispositions of our deliveries), :class:`.Outgoing` (our deliveries), :class:`.Credit` (flow, both
    ways), :class:`.Coordinator` (transactions); :class:`.InFlight` owns what they share (the deliveries
    still to settle, the batches for the core). Deliveries are proton's C pointers, never wrapper objects,
    on the paths every message takes (transfer in, delivery out, accepted disposition, flow).
    """

    inflight_class: type[InFlight] = InFlight
    """What owns the connection's unsettled deliveries and batches (a subclass may change how they are answered)."""

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
        self.finished = False  # core told about the end
        self.error: str | None = None
        self._unflushed = 0  # pieces of this read handled since output was last handed over (see _piece)
        self._announced = AnnouncedOutcomes()  # where to cut a read (see .announced)
        self._parts()

    def _parts(self) -> None:
        """Build the parts the connection hands its events to (see the class docstring)."""
        conn_id, user = self.conn_id, lambda: self.user
        self.links = LinkTable()
        self.attachments = Attachments(conn_id, self.core, self.auth, self.connection, self.links, run=self._run,
                                       user=user, receive_window=self.receive_window,
                                       max_message_size=self.max_message_size)
        self.inflight = self.inflight_class(conn_id, self.hub, close_link=self.attachments.close_link,
                                            end_txn=self._end_txn, on_output=self.on_output)
        self.coordinator = Coordinator(conn_id, self.core, self.limits, answer=self.inflight.answer,
                                       run=self._run, end=self._end_txn, user=user)
        self.transfers = Transfers(conn_id, inflight=self.inflight, links=self.links, attachments=self.attachments,
                                   coordinator=self.coordinator, auth=self.auth,
                                   max_message_size=self.max_message_size, user=user)
        self.outcomes = ClientOutcomes(conn_id, inflight=self.inflight, connection=self.connection,
                                       links=self.links, attachments=self.attachments, coordinator=self.coordinator)
        self.outgoing = Outgoing(conn_id, self.hub, self.links, on_output=self.on_output)
        self.credit = Credit(conn_id, self.core, self.links, self.outgoing, receive_window=self.receive_window,
                             flush_now=self.flush_now)
        self.endpoints = Endpoints(conn_id, self.core, self.auth, self.connection, links=self.links,
                                   attachments=self.attachments, run=self._run, user=user, fail=self._fail,
                                   finish=lambda abrupt: self._finish(abrupt=abrupt))
        self.router = EventRouter(self.collector, self.links, inflight=self.inflight, transfers=self.transfers,
                                  outcomes=self.outcomes, credit=self.credit, endpoints=self.endpoints,
                                  on_event=self._on_event)

    @property
    def opened(self) -> bool:
        """Registered with the core (the client's open was accepted)."""
        return self.endpoints.opened

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
        self.credit.open_visible()
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

    def _fail(self, reason: str) -> None:
        self.error = reason

    def _finish(self, *, abrupt: bool) -> None:
        if self.opened and not self.finished:
            self.finished = True
            self._run(self.core.close(self.conn_id, abrupt=abrupt))
            # JMS 4.4.3: a temporary destination lives as long as its connection
            for address in self.attachments.temporaries:
                self._run(self.core.delete_queue(address))

    # -- engine events ---------------------------------------------------------------------------

    def _piece(self) -> None:
        """Between the pieces of a large read (proton takes at most ``capacity()`` bytes at a time):
        handle their events, top credit up and hand the output over now (``flush_now``) when it
        granted credit, or when ``FLUSH_PIECES`` pieces' outcomes are waiting.

        Why not after every piece: each write is a socket ``send`` (on loopback it also runs the
        peer's receive path), and a piece is only ~8 kB (~50 small transfers); outcomes of a few
        pieces together still reach a client with a window of hundreds long before it runs dry.
        Credit is never held back: a client sending pre-settled waits for nothing else."""
        self.router.dispatch()
        if self.flush_now is not None:
            self._unflushed += 1
            if self.credit.replenish() or self._unflushed >= FLUSH_PIECES:
                self._unflushed = 0
                self.flush_now()

    def _process(self) -> None:
        self.router.dispatch()
        self.credit.replenish()
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
        """One endpoint event (the engine pump's callback): :class:`.Endpoints` handles it."""
        self.endpoints.on_event(event)

    # -- effects ----------------------------------------------------------------------------------

    def _run(self, effects: list[Effect]) -> None:
        if effects:
            self.hub.apply(effects)

    def _end_txn(self, txn: Txn, rolled_back: bool) -> None:
        self.outcomes.end_txn(txn, rolled_back)

    # ConnectionHandler (the hub calls these)

    ordered_confirms = False
    """Each transfer has its own outcome: only a durable one waits for the journal (the hub holds it)."""

    def on_confirm(self, effect: Confirm) -> None:
        """Answer now (the hub held a durable one until the journal synced it)."""
        # a batch's non-durable plain transfers are answered by InFlight.run_published, without the hub
        self.inflight.confirm(effect.token)
        self.on_output()

    def on_effect(self, effect: Effect) -> None:
        """Carry out one effect the core addressed to this connection."""
        if effect.__class__ is Deliver:  # a credit grant's deliveries are written by Outgoing.run instead
            self.outgoing.deliver(effect)
        elif isinstance(effect, Confirm):
            self.inflight.confirm(effect.token)
        elif isinstance(effect, Reject):
            self.inflight.reject(effect.token, effect.reason)
        elif isinstance(effect, Drained):
            self.outgoing.drained(effect.sub)
        elif isinstance(effect, Close):
            self.connection.condition = Condition(ERR_FORCED, effect.reason)
            self.connection.close()
        self.on_output()


__all__ = ["CONTAINER_ID", "AmqpConnection"]
