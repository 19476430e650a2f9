"""The client's dispositions of our deliveries: each outcome handed to the core, and our settlement of it.

Why a part of its own: a consumer sends one disposition per message (or per range), and what it means
depends only on the delivery's state and settled flag: a settled acceptance is batched (nobody waits for
us), any other outcome goes to the core on its own and, unless the client settled already, our settlement
then confirms it was applied (receiver settle mode second); a transactional one is applied at discharge.
The codes and their mapping to core settlements are :mod:`.dispositions`.
"""

from __future__ import annotations

from proton import Connection, Endpoint

from ackspec.reference.amqp.attach import Attachments
from ackspec.reference.amqp.conditions import ERR_NOT_ALLOWED
from ackspec.reference.amqp.coordinator import Coordinator, Txn
from ackspec.reference.amqp.dispositions import (
    ACCEPTED,
    TRANSACTIONAL_STATE,
    Ptr,
    inner_settlement,
    settlement_of,
    wrap,
)
from ackspec.reference.amqp.inflight import InFlight
from ackspec.reference.amqp.links import LinkTable, OutLink, Token
from ackspec.reference.amqp.proton_c import lib
from ackspec.reference.broker import ACCEPT, CoreError, Settlement

_delivery_remote_state = lib.pn_delivery_remote_state
_delivery_settled = lib.pn_delivery_settled
_delivery_settle = lib.pn_delivery_settle
_delivery_link = lib.pn_delivery_link


class ClientOutcomes:
    """Applies the client's outcomes for the deliveries of one connection's sending links."""

    def __init__(self, conn_id: str, *, inflight: InFlight, connection: Connection, links: LinkTable,
                 attachments: Attachments, coordinator: Coordinator) -> None:
        self.conn_id = conn_id
        self.inflight = inflight
        self.core = inflight.core
        self.connection = connection
        self.links = links
        self.attachments = attachments
        self.coordinator = coordinator

    def on_run(self, out: OutLink, answered: dict[Ptr, int]) -> None:
        """The client's dispositions of our unsettled deliveries of ``out`` (delivery -> core delivery id),
        in the order it sent them: a read's worth, or a run of one.

        The common case, a settled acceptance (nobody waits for us), is settled here and its id handed
        to :meth:`.InFlight.accept` with the rest of the run's (batched, see ``InFlight.flush``); any other
        outcome is applied on its own, after the acceptances before it."""
        ids = out.ids
        accepted: list[int] = []
        for dlv, delivery_id in answered.items():
            if ids.get(dlv) != delivery_id:
                continue  # settled already (or its link ended): the pointer may be another delivery's now
            if _delivery_remote_state(dlv) == ACCEPTED and _delivery_settled(dlv):
                del ids[dlv]
                _delivery_settle(dlv)
                accepted.append(delivery_id)
                continue
            if accepted:
                self.inflight.accept(out, accepted)
                accepted = []
            self._disposition(dlv, out, delivery_id)
            if self.links.by_impl.get(out.impl) is not out:
                return  # the core refused it and the link was closed: the rest is ignored, as after a close
        if accepted:
            self.inflight.accept(out, accepted)

    def _disposition(self, dlv: Ptr, out: OutLink, delivery_id: int) -> None:
        """The client's outcome for ``dlv``, other than a settled acceptance."""
        state = _delivery_remote_state(dlv)
        if not state and not _delivery_settled(dlv):
            return  # no outcome yet
        self.inflight.flush()
        tx: str | None = None
        if state == TRANSACTIONAL_STATE:
            tx, refusal = self.coordinator.named(dlv)
            if refusal is not None:
                self.attachments.close_link(_delivery_link(dlv), refusal.name, refusal.description or "")
                return
            data = wrap(dlv).remote.data or []
            settlement = inner_settlement(data[1] if len(data) > 1 else None)
        else:
            settlement = ACCEPT if state == ACCEPTED else settlement_of(wrap(dlv))
        del out.ids[dlv]
        self._apply(dlv, out, delivery_id, settlement, tx)

    def _apply(self, dlv: Ptr, out: OutLink, delivery_id: int, settlement: Settlement, tx: str | None) -> None:
        """Hand the core the client's ``settlement`` of ``dlv``, and settle it now or once it is applied."""
        if settlement is not ACCEPT and (self.connection.state | out.link.state) & Endpoint.REMOTE_CLOSED:
            # the client ends the link (or connection) right after: what goes back must not be sent again
            # on it, to fail a second time when the end is read (JMS: one failed delivery per close)
            self.core.halt(self.conn_id, out.sub)
        confirm: Token | None = None
        if tx is None and _delivery_settled(dlv):
            # the client settled already: it waits for nothing from us, so settle now (once the core
            # has the outcome; nobody needs to hear when it is applied or journalled)
            _delivery_settle(dlv)
        else:
            # our settlement is the confirmation (rcv-settle-mode second, or a client that waits for it);
            # a transactional outcome is applied at discharge, and the discharge answer confirms it
            self.inflight.open_out.add(dlv)
            if tx is None:
                confirm = Token("settle", dlv)
        try:
            effects = self.core.settle(self.conn_id, delivery_id, settlement, cumulative=False, tx=tx,
                                       confirm=confirm)
        except CoreError as exc:
            self.attachments.close_link(out.impl, ERR_NOT_ALLOWED, exc.message)
            return
        if tx is not None:
            self.coordinator.txns[tx].deliveries.append((dlv, bool(_delivery_settled(dlv)), out, delivery_id))
        self.inflight.run(effects)

    def end_txn(self, txn: Txn, rolled_back: bool) -> None:
        """The transaction is over: settle its dispositions; after a rollback the ones the client left
        unsettled stay acquired by their link, so the client may settle them anew (4.4.2)."""
        open_out = self.inflight.open_out
        for tdlv, client_settled, out, delivery_id in txn.deliveries:
            if not rolled_back or client_settled:
                self.inflight.settle_out(tdlv)
            elif tdlv in open_out and self.links.by_impl.get(out.impl) is out:
                open_out.discard(tdlv)
                out.ids[tdlv] = delivery_id
