"""What one AMQP connection still owes: deliveries to settle, and transfers and acceptances to hand the core.

Why one owner: the transfer path, the disposition path, the coordinator and the hub's confirmations all
add to or take from the same few collections (transfers awaiting our outcome, deliveries whose outcome
the core is applying, the batch of plain transfers, the run of settled acceptances), and each of them
must first hand the core what was batched before it acts. Keeping that state and its rules here means
every path meets them in one place.

A delivery pointer is used only while it cannot have been freed: proton keeps a delivery until it is
settled locally, so every delivery the connection still has to settle is in exactly one of
:attr:`InFlight.open_in` (transfers awaiting our outcome), ``OutLink.ids`` (deliveries awaiting the
client's outcome) or :attr:`InFlight.open_out` (deliveries whose outcome the core is applying), and is
removed from it when settled; a pointer in none of them is never touched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from proton import Condition, Described, ulong

from ackspec.reference.amqp.conditions import ERR_INVALID_FIELD, ERR_NOT_ALLOWED, ERR_RESOURCE_LIMIT, ERR_TXN_ROLLBACK
from ackspec.reference.amqp.coordinator import Txn
from ackspec.reference.amqp.dispositions import ACCEPTED, REJECTED, TRANSACTIONAL_STATE, Ptr, transaction_id, wrap
from ackspec.reference.amqp.links import PLAIN_TRANSFER, OutLink, Token
from ackspec.reference.amqp.proton_c import lib
from ackspec.reference.amqp.sections import Incoming
from ackspec.reference.broker import ACCEPT, Confirm, CoreError, Effect
from ackspec.reference.broker.hub import Hub
from ackspec.reference.broker.model import Headers

_delivery_settle = lib.pn_delivery_settle
_delivery_update = lib.pn_delivery_update

Publish = tuple[bytes, Headers, bool, object]
"""A batched transfer: body, headers, durable, and the token its ``Confirm`` echoes (its delivery pointer;
None: pre-settled)."""


class InFlight:
    """The unsettled deliveries of one connection and the operations batched for the core."""

    def __init__(self, conn_id: str, hub: Hub, *, close_link: Callable[[Ptr, str, str], None],
                 end_txn: Callable[[Txn, bool], None], on_output: Callable[[], None]) -> None:
        """``close_link``: end a link with an error (an acceptance the core refuses); ``end_txn``: a
        transaction is over (rolled back or not), settle its dispositions; ``on_output``: there is output
        to write."""
        self.conn_id = conn_id
        self.hub = hub
        self.core = hub.core
        self.close_link = close_link
        self.end_txn = end_txn
        self.on_output = on_output
        self.open_in: set[Ptr] = set()
        """Transfers awaiting our outcome."""
        self.open_out: set[Ptr] = set()
        """Our deliveries whose outcome the core is applying (or a transaction holds)."""
        self.publishes: list[Publish] = []
        """Plain transfers read but not yet handed to the core, all to :attr:`publish_to`."""
        self.publish_to: str | None = None
        self.accepts: list[int] = []
        """Core delivery ids of settled acceptances not yet handed to the core, all of :attr:`accepts_on`."""
        self.accepts_on: OutLink | None = None

    # -- batching -------------------------------------------------------------------------------

    def publish(self, dlv: Ptr, settled: bool, incoming: Incoming, destination: str) -> None:
        """A plain transfer outside any transaction, batched: a pre-settled one is settled (freed) now,
        since the client forgot it and nothing can be answered; an unsettled one waits for its outcome."""
        if destination != self.publish_to or self.accepts:
            self.flush()
            self.publish_to = destination
        if settled:
            _delivery_settle(dlv)
            self.publishes.append((incoming.body, incoming.headers, incoming.durable, None))
        else:
            self.open_in.add(dlv)
            self.publishes.append((incoming.body, incoming.headers, incoming.durable, dlv))

    def hold(self, dlv: Ptr) -> None:
        """A transfer handled on its own (off the batched path): what was batched goes to the core first, so
        the core sees the client's order; then ``dlv`` is ours to answer (:meth:`answer`, :meth:`settle_in`)."""
        self.flush()
        self.open_in.add(dlv)

    def accept(self, out: OutLink, delivery_ids: list[int]) -> None:
        """Settled acceptances of deliveries ``delivery_ids`` of ``out`` (nobody waits for us), batched."""
        if out is not self.accepts_on or self.publishes:
            self.flush()
            self.accepts_on = out
        self.accepts += delivery_ids

    def flush(self) -> None:
        """Hand the core what was batched: the plain transfers read so far (one ``publish_many`` for
        a run of transfers to one destination), or the run of acceptances of one link (``accept_many``).

        Why: per message the core and the hub then do only the message's own work (a read brings
        hundreds of transfers or dispositions); effects come back in the order one call per message
        would give. Every other event, and every transfer or disposition off the plain path, first
        flushes, so the core sees all operations in the order the client sent them."""
        if self.publishes:
            self._flush_publishes()
        if self.accepts:
            self._flush_accepts()

    def _flush_publishes(self) -> None:
        batch, self.publishes = self.publishes, []
        destination = self.publish_to
        assert destination is not None
        try:
            effects = self.core.publish_many(self.conn_id, destination, batch)
        except CoreError:  # one by one, each failure answered on its own
            for body, headers, durable, token in batch:
                try:
                    self.run(self.core.publish(self.conn_id, destination, body, headers,
                                               persistent=durable, confirm=token))
                except CoreError as exc:
                    if token is not None:
                        self.answer(token, REJECTED, condition=Condition(ERR_INVALID_FIELD, exc.message))
        else:
            self.run_published(effects)

    def _flush_accepts(self) -> None:
        ids, self.accepts = self.accepts, []
        out = self.accepts_on
        assert out is not None
        try:
            effects = self.core.accept_many(self.conn_id, ids)
        except CoreError:  # one by one: the first unknown id ends the link, as for a single one
            for delivery_id in ids:
                try:
                    self.run(self.core.settle(self.conn_id, delivery_id, ACCEPT, cumulative=False))
                except CoreError as exc:
                    self.close_link(out.impl, ERR_NOT_ALLOWED, exc.message)
                    return
            return
        self.run(effects)

    # -- effects and outcomes -------------------------------------------------------------------------

    def run(self, effects: list[Effect]) -> None:
        """Core effects, applied by the hub (which hands this connection's back to it)."""
        if effects:
            self.hub.apply(effects)

    def run_published(self, effects: list[Effect]) -> None:
        """A batch's effects; the acceptances of this connection's non-durable plain transfers
        written here, without the hub.

        Why: in the window row every transfer's ``Confirm`` otherwise costs a hub dispatch and an
        ``on_confirm`` call each. A non-durable ``Confirm`` needs no journal sync and this connection's
        confirms need no order (``ordered_confirms``), so the hub would hand it over at once:
        answering it here is what the connection's ``on_confirm`` would do. Every other effect goes to
        the hub, in order: the runs before and after an inlined one are applied around it."""
        if not effects:
            return
        conn_id = self.conn_id
        rest: list[Effect] = []  # effects for the hub since the last inlined acceptance
        accepted: list[Ptr] = []  # inlined acceptances since the last effect for the hub
        answered = False
        for e in effects:
            if e.__class__ is Confirm and not e.durable and e.conn == conn_id and e.token.__class__ is PLAIN_TRANSFER:
                if rest:
                    self.hub.apply(rest)
                    rest = []
                accepted.append(e.token)
                continue
            if accepted:
                answered = self.outcomes(accepted, ACCEPTED) > 0 or answered
                accepted = []
            rest.append(e)
        if accepted:
            answered = self.outcomes(accepted, ACCEPTED) > 0 or answered
        if rest:
            self.hub.apply(rest)
        if answered:
            self.on_output()

    def confirm(self, token: object) -> None:
        """The core applied what ``token`` stands for (and the journal synced it, if durable): answer it."""
        if token.__class__ is PLAIN_TRANSFER:  # an unsettled transfer outside a transaction
            self.outcome(token, ACCEPTED)  # the output is handed over by the caller
            return
        if token.__class__ is not Token:
            return
        dlv = token.delivery
        kind = token.kind
        if kind == "transfer":  # transactional: report the presumptive outcome (4.4.1)
            self.answer(dlv, TRANSACTIONAL_STATE, data=[transaction_id(dlv), Described(ulong(ACCEPTED), [])])
        elif kind == "settle":
            self.settle_out(dlv)
        elif kind == "discharge":
            txn, fail = token.extra
            self.answer(dlv, ACCEPTED)
            self.end_txn(txn, fail)

    def reject(self, token: object, reason: str) -> None:
        """The core refused what ``token`` stands for: a transfer or discharge is rejected with ``reason``;
        our delivery whose outcome it could not apply is settled all the same (the client's outcome stands)."""
        if token.__class__ is PLAIN_TRANSFER:
            self.answer(token, REJECTED, condition=Condition(ERR_RESOURCE_LIMIT, reason))
            return
        if not isinstance(token, Token):
            return
        dlv = token.delivery
        if token.kind == "settle":
            self.settle_out(dlv)
            return
        name = ERR_TXN_ROLLBACK if token.kind == "discharge" else ERR_RESOURCE_LIMIT
        self.answer(dlv, REJECTED, condition=Condition(name, reason))

    def answer(self, dlv: Ptr, state: int, *, condition: Condition | None = None,
               data: list[Any] | None = None) -> None:
        """Our outcome for a transfer, settled (:meth:`outcome`), and the output handed over."""
        if self.outcome(dlv, state, condition, data):
            self.on_output()

    def outcome(self, dlv: Ptr, state: int, condition: Condition | None = None,
                data: list[Any] | None = None) -> bool:
        """Our outcome ``state`` for transfer ``dlv``, settled, once: a delivery we settled already is left
        alone (returns whether it was answered now). Every unsettled transfer comes here or to :meth:`outcomes`."""
        if condition is not None or data is not None:
            if dlv not in self.open_in:
                return False
            wrapper = wrap(dlv)
            if condition is not None:
                wrapper.local.condition = condition
            if data is not None:
                wrapper.local.data = data
            wrapper.update(state)  # the state's fields written; outcomes() sets the same state again
        return self.outcomes((dlv,), state) == 1

    def outcomes(self, dlvs: Sequence[Ptr], state: int) -> int:
        """Our outcome ``state`` for each transfer of ``dlvs`` not settled yet, settled; returns how many.

        Why a run at a time: a read's plain transfers are answered together (:meth:`run_published`), without
        a call per transfer."""
        open_in = self.open_in
        answered = 0
        for dlv in dlvs:
            if dlv in open_in:
                open_in.discard(dlv)
                _delivery_update(dlv, state)
                _delivery_settle(dlv)
                answered += 1
        return answered

    def settle_in(self, dlv: Ptr) -> None:
        """Settle a transfer nobody can be told about (pre-settled by the client), freeing it."""
        self.open_in.discard(dlv)
        _delivery_settle(dlv)

    def settle_out(self, dlv: Ptr) -> None:
        """Settle our delivery ``dlv`` once the core has applied the client's outcome (if still ours to)."""
        if dlv in self.open_out:
            self.open_out.discard(dlv)
            _delivery_settle(dlv)
