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

import itertools
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from proton import (
    Collector,
    Condition,
    Connection,
    Described,
    Endpoint,
    Event,
    Link,
    Message,
    Terminus,
    Transport,
    ulong,
)
from proton import Delivery as PnDelivery

from ackspec.reference.amqp.mapping import core_destination, encode_delivery, from_core, to_core
from ackspec.reference.amqp.mutants import FrameRewriter
from ackspec.reference.amqp.pump import EnginePump
from ackspec.reference.amqp.sasl import SaslServer, SaslState
from ackspec.reference.broker import (
    ACCEPT,
    RELEASE,
    AckMode,
    Close,
    Confirm,
    CoreError,
    Deliver,
    Drained,
    Effect,
    Outcome,
    Reject,
    Settlement,
)
from ackspec.reference.broker.auth import Authenticator
from ackspec.reference.broker.hub import Hub

DECLARED = 0x33
TRANSACTIONAL_STATE = 0x34
ACCEPTED = 0x24
REJECTED = 0x25
RELEASED = 0x26
MODIFIED = 0x27

CONTAINER_ID = "ackspec-reference"
RECEIVE_WINDOW = 1000
"""Credit the broker keeps open on every link a client sends on."""

ERR_TRANSFER_LIMIT = "amqp:link:transfer-limit-exceeded"
ERR_NOT_FOUND = "amqp:not-found"
ERR_INVALID_FIELD = "amqp:invalid-field"
ERR_NOT_ALLOWED = "amqp:not-allowed"
ERR_UNKNOWN_TXN = "amqp:transaction:unknown-id"
ERR_TXN_ROLLBACK = "amqp:transaction:rollback"
ERR_FORCED = "amqp:connection:forced"
ERR_DECODE = "amqp:decode-error"
ERR_UNAUTHORIZED = "amqp:unauthorized-access"
ERR_RESOURCE_LIMIT = "amqp:resource-limit-exceeded"


@dataclass(frozen=True, slots=True)
class _Token:
    """What a ``Confirm``/``Reject`` of the core answers: echoed back as ``confirm``."""

    kind: str  # transfer | settle | discharge
    delivery: PnDelivery
    extra: Any = None


@dataclass(eq=False)
class _OutLink:
    """A link on which we send deliveries (the client's receiver): one core subscription."""

    link: Link
    sub: str
    ack: AckMode
    core_credit: int = 0  # credit as the core counts it (decremented per Deliver)
    deliveries: dict[int, PnDelivery] = field(default_factory=dict)
    message_ids: dict[int, str] = field(default_factory=dict)  # unsettled delivery -> core message id


_ANNOTATIONS: weakref.WeakKeyDictionary[Any, dict[str, dict[Any, Any]]] = weakref.WeakKeyDictionary()
"""Per broker core: message id -> message-annotations merged in by ``modified`` outcomes (3.4.5).

The core stores messages immutably and knows nothing of AMQP annotations, so the AMQP layer keeps
them beside it and adds them to later deliveries. Not journalled: they do not survive a restart."""


def _annotations_of(core: Any) -> dict[str, dict[Any, Any]]:
    table = _ANNOTATIONS.get(core)
    if table is None:
        table = _ANNOTATIONS[core] = {}
    return table


try:  # proton's C API: lets _dispatch skip Event wrappers for the events it does not need
    import cproton as _fast  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - proton always ships it
    _fast = None

_WANTED_EVENTS: frozenset[int] = frozenset() if _fast is None else frozenset(
    int(getattr(_fast, f"PN_{name}")) for name in (
        "CONNECTION_REMOTE_OPEN", "SESSION_REMOTE_OPEN", "LINK_REMOTE_OPEN", "LINK_FLOW", "LINK_REMOTE_CLOSE",
        "LINK_REMOTE_DETACH", "SESSION_REMOTE_CLOSE", "CONNECTION_REMOTE_CLOSE"))
"""The event types :meth:`AmqpConnection._on_event` acts on (besides deliveries)."""


@dataclass(eq=False)
class _Txn:
    name: str
    deliveries: list[tuple[PnDelivery, bool]] = field(default_factory=list)  # (delivery, settled by client)
    failed: str | None = None  # a pre-settled transfer of the transaction could not be processed (4.4.4)


class AmqpConnection:
    """The broker side of one AMQP connection."""

    def __init__(self, conn_id: str, hub: Hub, auth: Authenticator | None = None, *,
                 on_output: Callable[[], None] | None = None, receive_window: int = RECEIVE_WINDOW) -> None:
        self.conn_id = conn_id
        self.receive_window = receive_window
        self.hub = hub
        self.core = hub.core
        self.auth = auth or Authenticator()
        self.on_output = on_output or (lambda: None)
        self.sasl = SaslServer(lambda user, password: self.auth.check(user, password) is None,
                               allow_anonymous=self.auth.allow_anonymous)
        self._awaiting_sync: list[tuple[int, Confirm]] = []
        self.user: str | None = None
        self.transport = Transport(Transport.SERVER)
        self.connection = Connection()
        self.collector = Collector()
        self.connection.collect(self.collector)
        self.transport.bind(self.connection)
        self._engine = EnginePump(self.transport, self.collector, self._on_event, dispatch=self._dispatch)
        self.opened = False  # registered with the core
        self.finished = False  # core told about the end
        self.error: str | None = None
        self._out_links: dict[Link, _OutLink] = {}
        self._out_by_sub: dict[str, _OutLink] = {}
        self._coordinators: set[Link] = set()
        self._txns: dict[str, _Txn] = {}
        self._txn_ids = itertools.count(1)
        self._sub_ids = itertools.count(1)
        self._handled: set[PnDelivery] = set()
        self._credit: dict[Link, list[int]] = {}  # links we receive on: [credit granted, transfers received]
        faults = self.core.faults
        # frame-level mutants (ignore-prefetch, client-as-individual): see mutants.py; no cost otherwise
        self._rewriter = (FrameRewriter(self._mutant)
                          if faults is not None and faults.any_mutant else None)

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
        if self._rewriter is not None:
            data = self._rewriter.feed(data)
        # proton takes at most capacity() bytes per push: feed large reads in pieces, handling
        # the events of each piece (credit is still topped up only once, after the whole read)
        # closed for input (capacity < 0) stops feeding; a full buffer (0) cannot last since each piece
        # is processed; either way _process() below judges the transport
        self._engine.feed(data)
        self._process()

    def _sasl_step(self, data: bytes) -> SaslState:
        self.sasl.receive(data)
        return self.sasl.state

    def data_to_send(self) -> bytes:
        """Bytes for the peer: SASL frames first, then (once authenticated) proton's AMQP output."""
        chunks = [self.sasl.data_to_send()]
        if self.sasl.state is SaslState.DONE:
            chunks.append(self._engine.take_output())
        return b"".join(chunks)

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

    # -- engine events ---------------------------------------------------------------------------

    def _grant(self, link: Link, credit: int) -> None:
        self._credit.setdefault(link, [0, 0])[0] += credit
        link.flow(credit)

    def _replenish(self) -> None:
        """Top up the credit of links we receive on, once per batch of input.

        Granting only between batches means a transfer is judged against credit the
        client could have seen, so exceeding it is a real violation.
        """
        for link, (granted, received) in list(self._credit.items()):
            if link.state & (Endpoint.LOCAL_CLOSED | Endpoint.REMOTE_CLOSED):
                self._credit.pop(link, None)
                continue
            left = granted - received
            if left <= self.receive_window // 2:
                self._grant(link, self.receive_window - left)

    def _dispatch(self) -> None:
        if _fast is None:
            self._engine.dispatch_events()
            return
        # Fast path (proton's C API through cproton): most events are transfers and dispositions or
        # are of no interest; only the rest pay for proton's Event wrapper (the broker's hottest loop).
        impl = self.collector._impl
        while True:
            raw = _fast.pn_collector_peek(impl)
            if _fast.isnull(raw):
                break
            try:
                kind = _fast.pn_event_type(raw)
                if kind == _fast.PN_DELIVERY:
                    dlv = PnDelivery.wrap(_fast.pn_event_delivery(raw))  # type: ignore[no-untyped-call]
                    if dlv is not None:
                        self._on_delivery(dlv)
                elif kind in _WANTED_EVENTS:
                    event = Event.wrap(raw)  # type: ignore[no-untyped-call]
                    if event is not None:
                        self._on_event(event)
            finally:
                _fast.pn_collector_pop(impl)

    def _on_delivery(self, dlv: PnDelivery) -> None:
        if dlv.link.is_receiver:
            self._transfer(dlv)
        else:
            self._disposition(dlv)

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
        kind = event.type
        if kind == Event.CONNECTION_REMOTE_OPEN:
            self.connection.container = CONTAINER_ID
            self.connection.open()
            if not self.opened:
                self.opened = True
                self._run(self.core.open(self.conn_id, user=self.user))
        elif kind == Event.SESSION_REMOTE_OPEN and event.session is not None:
            event.session.open()
        elif kind == Event.LINK_REMOTE_OPEN and event.link is not None:
            self._attach(event.link)
        elif kind == Event.LINK_FLOW and event.link is not None and event.link.is_sender:
            self._flow(event.link)
        elif kind == Event.DELIVERY and event.delivery is not None:
            self._on_delivery(event.delivery)
        elif kind in (Event.LINK_REMOTE_CLOSE, Event.LINK_REMOTE_DETACH) and event.link is not None:
            self._detach(event.link)
        elif kind == Event.SESSION_REMOTE_CLOSE and event.session is not None:
            for link in list(self._out_links):
                if link.session is event.session:
                    self._detach(link)
            event.session.close()
        elif kind == Event.CONNECTION_REMOTE_CLOSE:
            for link in list(self._out_links):
                self._detach(link)
            self.connection.close()
            self._finish(abrupt=False)

    # -- attach / detach ------------------------------------------------------------------------

    def _refuse(self, link: Link, name: str, description: str) -> None:
        link.open()
        link.condition = Condition(name, description)
        link.close()

    def _attach(self, link: Link) -> None:
        if link.is_sender:
            self._attach_out(link)
            return
        remote = link.remote_target
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.rcv_settle_mode = link.remote_rcv_settle_mode
        if remote.type == Terminus.COORDINATOR:
            link.target.type = Terminus.COORDINATOR
            link.target.copy(remote)
            self._coordinators.add(link)
            link.open()
            self._grant(link, self.receive_window)
            return
        caps = _capabilities(remote)
        if remote.address is not None and core_destination(remote.address, caps) is None:
            self._refuse(link, ERR_NOT_FOUND, f"no such address {remote.address!r}")
            return
        link.target.copy(remote)
        link.source.copy(link.remote_source)
        link.open()
        self._grant(link, self.receive_window)

    def _attach_out(self, link: Link) -> None:
        remote = link.remote_source
        caps = _capabilities(remote)
        if remote.dynamic:
            address = f"/queue/ackspec.dynamic.{self.conn_id}.{next(self._sub_ids)}"
            link.source.address = address
            destination = address
        else:
            found = core_destination(remote.address, caps)
            if found is None:
                self._refuse(link, ERR_NOT_FOUND, f"no such source address {remote.address!r}")
                return
            destination = found
            link.source.copy(remote)
        link.target.copy(link.remote_target)
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.rcv_settle_mode = link.remote_rcv_settle_mode
        ack = AckMode.AUTO if link.remote_snd_settle_mode == Link.SND_SETTLED else AckMode.CLIENT_INDIVIDUAL
        sub = f"{link.name}#{next(self._sub_ids)}"
        out = _OutLink(link=link, sub=sub, ack=ack)
        try:
            effects = self.core.subscribe(self.conn_id, sub, destination, ack=ack, credit=0)
        except CoreError as exc:
            self._refuse(link, ERR_INVALID_FIELD, exc.message)
            return
        self._out_links[link] = out
        self._out_by_sub[sub] = out
        link.open()
        self._run(effects)

    def _detach(self, link: Link) -> None:
        out = self._out_links.pop(link, None)
        if out is not None:
            self._out_by_sub.pop(out.sub, None)
            if self.core.has_subscription(self.conn_id, out.sub):
                self._run(self.core.unsubscribe(self.conn_id, out.sub))
        self._coordinators.discard(link)
        if not link.state & Endpoint.LOCAL_CLOSED:
            link.close()

    # -- flow -----------------------------------------------------------------------------------------

    def _flow(self, link: Link) -> None:
        out = self._out_links.get(link)
        if out is None:
            return
        delta = link.credit - out.core_credit
        drain = bool(link.drain_mode)
        if delta == 0 and not drain:
            return
        out.core_credit += delta
        self._run(self.core.add_credit(self.conn_id, out.sub, delta, drain=drain))

    # -- incoming transfers ------------------------------------------------------------------------

    def _transfer(self, dlv: PnDelivery) -> None:
        link = dlv.link
        if dlv.partial or dlv in self._handled:
            return
        self._handled.add(dlv)
        counts = self._credit.setdefault(link, [0, 0])
        counts[1] += 1
        if counts[1] > counts[0]:
            # more transfers than all the credit we ever granted (2.6.7): detach the link
            link.condition = Condition(ERR_TRANSFER_LIMIT, "transfer sent without link credit")
            link.close()
            self._credit.pop(link, None)
            return
        payload = link.recv(dlv.pending) or b""
        link.advance()
        try:
            msg = Message()
            msg.decode(payload)
        except Exception as exc:
            self._answer(dlv, REJECTED, condition=Condition(ERR_DECODE, f"undecodable message: {exc}"))
            return
        if link in self._coordinators:
            self._control(dlv, msg)
            return
        known, tx = self._transaction_of(dlv)
        if not known:
            return
        caps = _capabilities(link.remote_target)
        destination = core_destination(link.remote_target.address, caps) or core_destination(msg.address, caps)
        if destination is None:
            self._answer(dlv, REJECTED, condition=Condition(ERR_NOT_FOUND, "message has no destination address"))
            return
        if self._rejected_by_fault(dlv, destination, tx):
            return
        body, headers, persistent = to_core(msg)
        confirm = None if dlv.settled else _Token("transfer", dlv, tx is not None)
        try:
            effects = self.core.publish(self.conn_id, destination, body, headers, persistent=persistent,
                                                tx=tx, confirm=confirm)
        except CoreError as exc:
            self._answer(dlv, REJECTED, condition=Condition(ERR_INVALID_FIELD, exc.message))
            return
        if dlv.settled:
            _settle(dlv)
            self._handled.discard(dlv)
        self._run(effects)

    def _rejected_by_fault(self, dlv: PnDelivery, destination: str, tx: str | None) -> bool:
        """Fault rule ``reject_send``: the transfer cannot be processed. Unsettled: rejected. Pre-settled in
        a transaction: nobody can be told now, so the transaction is marked failed and its commit fails (4.4.4)."""
        faults = self.core.faults
        if faults is None:
            return False
        reason = next((r.reject_send for r in faults.rules_for(destination, self.conn_id, self.user)
                       if r.reject_send is not None), None)
        if reason is None:
            return False
        if not dlv.settled:
            self._answer(dlv, REJECTED, condition=Condition(ERR_NOT_ALLOWED, reason))
            return True
        if tx is not None:
            self._txns[tx].failed = reason
        _settle(dlv)
        self._handled.discard(dlv)
        return True

    def _transaction_of(self, dlv: PnDelivery) -> tuple[bool, str | None]:
        """(known, the core transaction a transfer or disposition belongs to); refuses unknown ids."""
        if dlv.remote_state != TRANSACTIONAL_STATE:
            return True, None
        data = dlv.remote.data or []
        txn_id = bytes(data[0]).decode("utf-8", "replace") if data else ""
        if txn_id not in self._txns:
            cond = Condition(ERR_UNKNOWN_TXN, f"unknown transaction {txn_id!r}")
            if dlv.link.is_receiver:
                self._answer(dlv, REJECTED, condition=cond)
            else:
                dlv.link.condition = cond
                dlv.link.close()
            return False, None
        return True, txn_id

    def _answer(self, dlv: PnDelivery, state: int, *, condition: Condition | None = None,
                data: list[Any] | None = None) -> None:
        if _locally_settled(dlv):
            return
        if condition is not None:
            dlv.local.condition = condition
        if data is not None:
            dlv.local.data = data
        dlv.update(state)
        _settle(dlv)
        self._handled.discard(dlv)
        self.on_output()

    # -- transaction coordinator ------------------------------------------------------------------

    def _control(self, dlv: PnDelivery, msg: Message) -> None:
        body = msg.body
        if not isinstance(body, Described):
            self._answer(dlv, REJECTED, condition=Condition(ERR_DECODE, "coordinator expects declare or discharge"))
            return
        raw: Any = body.descriptor
        descriptor = str(raw) if isinstance(raw, str) else int(raw)
        fields = list(cast(Any, body.value) or [])
        if descriptor in ("amqp:declare:list", 0x31):
            name = f"txn-{self.conn_id}-{next(self._txn_ids)}"
            self._run(self.core.begin(self.conn_id, name))
            self._txns[name] = _Txn(name)
            self._answer(dlv, DECLARED, data=[name.encode()])
        elif descriptor in ("amqp:discharge:list", 0x32):
            txn_id = bytes(fields[0]).decode("utf-8", "replace") if fields and fields[0] is not None else ""
            fail = bool(fields[1]) if len(fields) > 1 else False
            txn = self._txns.pop(txn_id, None)
            if txn is None:
                self._answer(dlv, REJECTED, condition=Condition(ERR_UNKNOWN_TXN, f"unknown transaction {txn_id!r}"))
                return
            if not fail and txn.failed is None:
                txn.failed = self._commit_fault()
            if not fail and txn.failed is not None:
                # a pre-settled transfer of it failed (4.4.4), or fault rule fail_commit: roll back instead
                self._run(self.core.abort(self.conn_id, txn_id,
                                          redeliver_settled=any(settled for _, settled in txn.deliveries)))
                for tdlv, client_settled in txn.deliveries:
                    self._handled.discard(tdlv)
                    if client_settled:
                        _settle(tdlv)
                self._answer(dlv, REJECTED, condition=Condition(ERR_TXN_ROLLBACK,
                                                                f"transaction rolled back: {txn.failed}"))
                return
            token = _Token("discharge", dlv, (txn, fail))
            if fail:
                # settled transactional dispositions cannot be re-settled: give those back (STOMP ABORT
                # semantics); unsettled ones stay acquired by the link (AMQP 4.4.2)
                any_settled = any(settled for _, settled in txn.deliveries)
                effects = self.core.abort(self.conn_id, txn_id, redeliver_settled=any_settled,
                                                  confirm=token)
            else:
                effects = self.core.commit(self.conn_id, txn_id, confirm=token)
            self._run(effects)
        else:
            self._answer(dlv, REJECTED, condition=Condition(ERR_DECODE, f"unknown coordinator message {descriptor}"))

    def _commit_fault(self) -> str | None:
        """Fault rule ``fail_commit``: this discharge fails like the STOMP COMMIT does (rolled back instead)."""
        faults = self.core.faults
        if faults is None or not faults.active:
            return None
        return next((r.fail_commit for r in faults.rules_for(None, self.conn_id, self.user)
                     if r.fail_commit is not None), None)

    # -- dispositions from the client -------------------------------------------------------------

    def _disposition(self, dlv: PnDelivery) -> None:
        link = dlv.link
        out = self._out_links.get(link)
        if out is None or dlv in self._handled or _locally_settled(dlv):
            return
        if not dlv.remote_state and not dlv.settled:
            return
        delivery_id = _delivery_id(dlv)
        if delivery_id is None or out.ack is AckMode.AUTO:
            if dlv.settled:
                _settle(dlv)
            return
        state = dlv.remote_state
        tx: str | None = None
        if state == TRANSACTIONAL_STATE:
            known, tx = self._transaction_of(dlv)
            if not known or tx is None:
                return
            data = dlv.remote.data or []
            inner = data[1] if len(data) > 1 else None
            settlement = _inner_settlement(inner)
        else:
            settlement = _settlement(dlv)
            self._merge_annotations(out, delivery_id, dlv, settlement)
        self._handled.add(dlv)
        # a transactional outcome is applied at discharge; the discharge answer confirms it
        confirm = _Token("settle", dlv) if tx is None else None
        try:
            effects = self.core.settle(self.conn_id, delivery_id, settlement, cumulative=False, tx=tx,
                                               confirm=confirm)
        except CoreError as exc:
            link.condition = Condition(ERR_NOT_ALLOWED, exc.message)
            link.close()
            return
        out.deliveries.pop(delivery_id, None)
        out.message_ids.pop(delivery_id, None)
        if tx is not None:
            self._txns[tx].deliveries.append((dlv, bool(dlv.settled)))
        self._run(effects)

    # -- effects ----------------------------------------------------------------------------------

    def _merge_annotations(self, out: _OutLink, delivery_id: int, dlv: PnDelivery, settlement: Settlement) -> None:
        """modified{message-annotations}: merged into the message for later deliveries; gone once it is retired."""
        message_id = out.message_ids.get(delivery_id)
        if message_id is None:
            return
        table = _annotations_of(self.core)
        if settlement.outcome is Outcome.MODIFIED:
            extra = dlv.remote.annotations
            if extra:
                table.setdefault(message_id, {}).update(extra)
        elif settlement.outcome in (Outcome.ACCEPTED, Outcome.REJECTED):
            table.pop(message_id, None)

    def _run(self, effects: list[Effect]) -> None:
        if effects:
            self.hub.apply(effects)

    # ConnectionHandler (the hub calls these)

    def _mutant(self, name: str, destination: str | None = None) -> bool:
        """A protocol-layer mutant (the STOMP session's, in their AMQP form) is on."""
        faults = self.core.faults
        return faults is not None and faults.any_mutant and faults.mutant_active(name, destination)

    def on_confirm(self, effect: Confirm, needs_sync: int) -> None:
        """Answer now, or once the journal is synced up to ``needs_sync`` (durable transfers).

        Mutants: ``no-receipt`` never answers an unsettled transfer; ``early-receipt``
        answers it before the journal sync.
        """
        token = effect.token
        if isinstance(token, _Token) and token.kind == "transfer":
            if self._mutant("no-receipt"):
                return
            if self._mutant("early-receipt"):
                needs_sync = 0
        if needs_sync and needs_sync > self.hub.synced:
            self._awaiting_sync.append((needs_sync, effect))
            return
        self.on_effect(effect)

    def on_synced(self, synced: int) -> None:
        ready = [c for n, c in self._awaiting_sync if n <= synced]
        if not ready:
            return
        self._awaiting_sync = [(n, c) for n, c in self._awaiting_sync if n > synced]
        for effect in ready:
            self.on_effect(effect)

    def on_effect(self, effect: Effect) -> None:
        """Carry out one effect the core addressed to this connection."""
        if isinstance(effect, Deliver):
            self._deliver(effect)
        elif isinstance(effect, Confirm):
            self._confirm(effect.token)
        elif isinstance(effect, Reject):
            self._reject(effect.token, effect.reason)
        elif isinstance(effect, Drained):
            out = self._out_by_sub.get(effect.sub)
            if out is not None:
                out.core_credit = 0
                out.link.drained()
        elif isinstance(effect, Close):
            self.connection.condition = Condition(ERR_FORCED, effect.reason)
            self.connection.close()
        self.on_output()

    def _deliver(self, effect: Deliver) -> None:
        out = self._out_by_sub.get(effect.sub)
        if out is None:
            return
        link = out.link
        merged = _ANNOTATIONS.get(self.core)
        faults = self.core.faults
        if not (faults is not None and faults.any_mutant) and not (merged and effect.message.message_id in merged):
            # the common case: no mutant rewrites it, no annotations merged in
            payload = encode_delivery(effect.message, delivery_count=effect.delivery_count,
                                      redelivered=effect.redelivered)
        else:
            payload = self._slow_encode(effect, merged)
        dlv = link.delivery(str(effect.delivery_id))
        link.send(payload)
        link.advance()
        out.core_credit -= 1
        if out.ack is AckMode.AUTO:
            _settle(dlv)
        else:
            out.deliveries[effect.delivery_id] = dlv
            out.message_ids[effect.delivery_id] = effect.message.message_id

    def _slow_encode(self, effect: Deliver, merged: dict[str, dict[Any, Any]] | None) -> bytes:
        msg = from_core(effect.message, delivery_count=effect.delivery_count, redelivered=effect.redelivered)
        destination = effect.message.destination
        if self._mutant("mangle-body", destination) and effect.message.body:
            body = effect.message.body
            msg.body = bytes([body[0] ^ 0x01]) + body[1:]
        if self._mutant("mangle-header", destination) and msg.properties:
            props = dict(msg.properties)
            name = next(iter(props))
            value = str(props[name])
            props[name] = (value[:-1] + chr(ord(value[-1]) ^ 1)) if value else "x"
            msg.properties = props
        if merged:
            extra = merged.get(effect.message.message_id)
            if extra:
                msg.annotations = {**(msg.annotations or {}), **extra}
        return bytes(msg.encode())

    def _confirm(self, token: object) -> None:
        if not isinstance(token, _Token):
            return
        dlv = token.delivery
        if token.kind == "transfer":
            if token.extra:  # transactional: report the presumptive outcome (4.4.1)
                self._answer(dlv, TRANSACTIONAL_STATE, data=[_txn_of_transfer(dlv), Described(ulong(ACCEPTED), [])])
            else:
                self._answer(dlv, ACCEPTED)
        elif token.kind == "settle":
            self._handled.discard(dlv)
            _settle(dlv)
        elif token.kind == "discharge":
            txn, fail = token.extra
            self._answer(dlv, ACCEPTED)
            for tdlv, client_settled in txn.deliveries:
                self._handled.discard(tdlv)
                if not fail or client_settled:
                    _settle(tdlv)
                # rolled back and unsettled: still acquired by the link, the client may settle it anew

    def _reject(self, token: object, reason: str) -> None:
        if not isinstance(token, _Token):
            return
        dlv = token.delivery
        if token.kind == "settle":
            self._handled.discard(dlv)
            _settle(dlv)
            return
        name = ERR_TXN_ROLLBACK if token.kind == "discharge" else ERR_RESOURCE_LIMIT
        self._answer(dlv, REJECTED, condition=Condition(name, reason))


def _txn_of_transfer(dlv: PnDelivery) -> bytes:
    data = dlv.remote.data or []
    return bytes(data[0]) if data else b""


def _locally_settled(dlv: PnDelivery) -> bool:
    return bool(getattr(dlv, "ackspec_settled", False))


def _settle(dlv: PnDelivery) -> None:
    """Settle once: proton frees a delivery settled on both sides, so it must not be touched again."""
    if not _locally_settled(dlv):
        dlv.ackspec_settled = True
        dlv.settle()


def _capabilities(terminus: Terminus) -> frozenset[str]:
    caps = terminus.capabilities
    try:
        caps.rewind()
        found: list[str] = []
        while caps.next():
            value = caps.get_object()
            if isinstance(value, list | tuple):
                found += [str(v) for v in value]
            elif hasattr(value, "elements"):
                found += [str(v) for v in value.elements]
            elif value is not None:
                found.append(str(value))
        return frozenset(found)
    except Exception:
        return frozenset()


def _delivery_id(dlv: PnDelivery) -> int | None:
    tag = dlv.tag
    try:
        return int(tag)
    except (TypeError, ValueError):
        return None


def _settlement(dlv: PnDelivery) -> Settlement:
    state = dlv.remote_state
    if state == ACCEPTED:
        return ACCEPT
    if state == RELEASED:
        return RELEASE
    if state == MODIFIED:
        return Settlement(Outcome.MODIFIED, delivery_failed=bool(dlv.remote.failed),
                          undeliverable_here=bool(dlv.remote.undeliverable))
    if state == REJECTED:
        cond = dlv.remote.condition
        reason = (cond.description or str(cond.name)) if cond is not None else "rejected by consumer"
        return Settlement(Outcome.REJECTED, reason=reason)
    # settled without an outcome: the source's default outcome, modified{delivery-failed}
    return Settlement(Outcome.MODIFIED, delivery_failed=True)


def _inner_settlement(inner: Any) -> Settlement:
    if not isinstance(inner, Described):
        return ACCEPT
    raw: Any = inner.descriptor
    code = int(raw) if not isinstance(raw, str) else {
        "amqp:accepted:list": ACCEPTED, "amqp:rejected:list": REJECTED, "amqp:released:list": RELEASED,
        "amqp:modified:list": MODIFIED}.get(raw, ACCEPTED)
    fields = list(cast(Any, inner.value) or [])
    if code == RELEASED:
        return RELEASE
    if code == MODIFIED:
        return Settlement(Outcome.MODIFIED, delivery_failed=bool(fields[0]) if fields else False,
                          undeliverable_here=bool(fields[1]) if len(fields) > 1 else False)
    if code == REJECTED:
        return Settlement(Outcome.REJECTED, reason="rejected in transaction")
    return ACCEPT


__all__ = ["CONTAINER_ID", "AmqpConnection"]
