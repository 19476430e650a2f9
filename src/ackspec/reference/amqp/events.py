"""Routing proton's collected events of one AMQP connection to the part that owns each: the broker's hottest loop.

Why a part of its own: every transfer, disposition and flow the client sends arrives here as an event, read on
proton's C API from the raw pointers (no ``Event`` wrapper per message); which part it goes to
(:class:`.Transfers`, :class:`.ClientOutcomes`, :class:`.Credit`, :class:`.Endpoints`) and in what order,
relative to what was batched (:class:`.InFlight`), is the one rule that keeps the core seeing every operation in
the order the client sent it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from proton import Collector, Event

from ackspec.reference.amqp.credit import Credit
from ackspec.reference.amqp.dispositions import Ptr
from ackspec.reference.amqp.endpoints import Endpoints
from ackspec.reference.amqp.inflight import InFlight
from ackspec.reference.amqp.links import InLink, LinkTable, OutLink
from ackspec.reference.amqp.outcomes import ClientOutcomes
from ackspec.reference.amqp.proton_c import lib
from ackspec.reference.amqp.transfers import Transfers

# the C functions of the loop, bound once (a module global is found faster than a ``lib`` attribute)
_collector_peek = lib.pn_collector_peek
_collector_pop = lib.pn_collector_pop
_event_type = lib.pn_event_type
_event_delivery = lib.pn_event_delivery
_event_link = lib.pn_event_link
_delivery_link = lib.pn_delivery_link
_delivery_pending = lib.pn_delivery_pending
_link_current = lib.pn_link_current

_PN_DELIVERY = int(lib.PN_DELIVERY)
_PN_LINK_FLOW = int(lib.PN_LINK_FLOW)
_WANTED_EVENTS: frozenset[int] = frozenset(
    int(getattr(lib, f"PN_{name}")) for name in (
        "CONNECTION_REMOTE_OPEN", "SESSION_REMOTE_OPEN", "LINK_REMOTE_OPEN", "LINK_REMOTE_CLOSE",
        "LINK_REMOTE_DETACH", "SESSION_REMOTE_CLOSE", "CONNECTION_REMOTE_CLOSE"))
"""The event types :class:`.Endpoints` handles (deliveries and flow have their own fast path)."""


class EventRouter:
    """Hands each collected event of one connection to its part, in the order they came."""

    def __init__(self, collector: Collector, links: LinkTable, *, inflight: InFlight, transfers: Transfers,
                 outcomes: ClientOutcomes, credit: Credit, endpoints: Endpoints,
                 on_event: Callable[[Event], None]) -> None:
        """``on_event``: an endpoint event, wrapped (the connection's, so a subclass sees them)."""
        self.collector = collector._impl
        self.links = links
        self.inflight = inflight
        self.transfers = transfers
        self.outcomes = outcomes
        self.credit = credit
        self.endpoints = endpoints
        self.on_event = on_event
        self._on_run = outcomes.on_run
        self._on_transfer = transfers.on_event

    def dispatch(self) -> None:
        """Handle every collected event, on proton's C API.

        Most events are transfers, dispositions and flow, handled here from the C pointers;
        only the rare rest (opens, closes) pay for proton's ``Event`` wrapper. Every other
        event type is popped unread. This is the broker's hottest loop.

        Two kinds of delivery event are popped unread and handled as a run, before the next event
        that is handled and once the collector is empty:

        * on a connection whose only deliveries are transfers of one link (see
          :meth:`.links.LinkTable._changed`), that link's transfers are read by walking it
          (:meth:`.Transfers.walk`). The walk stops at the delivery of the last event popped
          (``until``): proton has already decoded the whole piece, so transfers the client sent
          *after* the handled event are current on the link too, and must wait for their own
          events. So the core still sees every operation in the order the client sent it
          (tests/amqp/test_walked_order.py).
        * the client's dispositions of the deliveries of the one link we send on
          (:attr:`.LinkTable.single_out`) are kept, each delivery once with its core delivery id,
          and handed to :meth:`.ClientOutcomes.on_run` together (a consumer acknowledging each
          message sends a read's worth of them). A delivery's remote state is its latest whichever of
          its events is handled, so handling it once, at its first event, is what one call per
          event does.
        """
        collector = self.collector
        if self.endpoints.refused:  # closed at open (client id in use): what the client still sends is not handled
            while _collector_peek(collector):
                _collector_pop(collector)
            return
        table = self.links
        inflight = self.inflight
        peek = _collector_peek
        pop = _collector_pop
        walk: InLink | None = None  # a link whose transfers are read by walking it (see LinkTable._changed)
        until: Any = None  # ... up to this delivery, the one of the last delivery event popped unread
        answered: dict[Ptr, int] = {}  # dispositions of table.single_out's deliveries: delivery -> core id
        while True:
            event = peek(collector)
            if not event:
                if walk is not None or answered:
                    self._run_pending(walk, until, answered)
                    walk, answered = None, {}
                    continue
                if not inflight.publishes and not inflight.accepts:
                    return
                inflight.flush()  # may cause events of its own (our deliveries): look again
                continue
            kind = _event_type(event)
            if kind == _PN_DELIVERY:
                dlv = _event_delivery(event)
                if table.walked is not None:
                    # read later, by walking up to this delivery; an update of one already taken (its
                    # bytes read, the link moved on) moves nothing
                    if _delivery_pending(dlv) or _link_current(_delivery_link(dlv)) == dlv:
                        walk, until = table.walked, dlv
                    pop(collector)
                    continue
                out = table.single_out
                if out is not None and (delivery_id := out.ids.get(dlv)) is not None:
                    answered[dlv] = delivery_id  # handled with the run (see above)
                    pop(collector)
                    continue
            elif kind not in _WANTED_EVENTS and not (kind == _PN_LINK_FLOW and self._out_flow(event)):
                pop(collector)  # nothing to do for it
                continue
            if walk is not None or answered:  # what was popped unread comes first
                self._run_pending(walk, until, answered)
                walk, answered = None, {}
            try:
                if not self._handle(kind, event):
                    return  # refused at open: the rest is drained unread by the next call
            finally:
                pop(collector)

    def _run_pending(self, walk: InLink | None, until: Any, answered: dict[Ptr, int]) -> None:
        """Handle the delivery events popped unread (see :meth:`dispatch`): the transfers a walk covers,
        or a run of dispositions of the one link we send on."""
        if walk is not None:
            self.transfers.walk(walk, until)
        if answered:
            out = self.links.single_out
            assert out is not None  # every other event handles the run first: the link is still the one
            self._on_run(out, answered)

    def _handle(self, kind: int, event: Any) -> bool:
        """An event other than the runs :meth:`dispatch` keeps; whether to go on reading."""
        if kind == _PN_DELIVERY:
            self._on_delivery(_event_delivery(event))
        elif kind == _PN_LINK_FLOW:  # on a link we send on (see _out_flow)
            self.inflight.flush()
            self.credit.flow(cast(OutLink, self.links.by_impl[_event_link(event)]))
        else:
            return self._on_endpoint(event)
        return True

    def _out_flow(self, event: Any) -> bool:
        """Whether a flow event is on a link we send on (the client's credit; on its own links it is ours)."""
        return self.links.by_impl.get(_event_link(event)).__class__ is OutLink

    def _on_endpoint(self, event: Any) -> bool:
        """An endpoint event (open, attach, close...), after what was batched; whether to go on reading."""
        self.inflight.flush()
        wrapped = Event.wrap(event)  # type: ignore[no-untyped-call]
        if wrapped is not None:
            self.on_event(wrapped)
            return not self.endpoints.refused
        return True

    def _on_delivery(self, dlv: Ptr) -> None:
        """A delivery event (the most common): a transfer on one of our receiving links, or the peer's
        disposition of one of our deliveries."""
        owner = self.links.by_impl.get(_delivery_link(dlv))
        if owner is None:
            return  # a link we refused or closed
        if owner.__class__ is InLink:
            self._on_transfer(dlv, owner)
            return
        out = cast(OutLink, owner)
        delivery_id = out.ids.get(dlv)
        if delivery_id is not None:  # else pre-settled, or its outcome is already being applied
            self._on_run(out, {dlv: delivery_id})  # a run of one

