"""Deliveries the core makes for one connection's sending links, written to proton as transfers.

Why a part of its own: every message a consumer gets passes through :func:`send` (the broker's hottest
write), and a credit grant's deliveries are written in one loop here rather than one hub dispatch each.
What is written stays unsettled in its link's ``ids`` until the client's outcome (:mod:`.outcomes`),
unless the link is pre-settled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import cast

from ackspec.reference.amqp.links import LinkTable, OutLink
from ackspec.reference.amqp.mapping import encode_delivery
from ackspec.reference.amqp.proton_c import ffi, lib
from ackspec.reference.broker import AckMode, Deliver, Effect
from ackspec.reference.broker.hub import Hub

_delivery = lib.pn_delivery
_delivery_settle = lib.pn_delivery_settle
_link_send = lib.pn_link_send
_link_advance = lib.pn_link_advance
_addressee = itemgetter(0, 1)
"""A ``Deliver``'s connection and subscription."""
_DELIVERIES = {Deliver}


def send(out: OutLink, deliveries: Sequence[Deliver]) -> None:
    """Write deliveries of the core on ``out``, in order: settled at once on a pre-settled link, else kept in
    ``out.ids`` until the client's outcome.

    Why a run at a time: a credit grant hands over hundreds of deliveries, and the link's fields are read
    once per run rather than once per message (this loop is the broker's hottest write)."""
    impl = out.impl
    ids = out.ids
    auto = out.ack is AckMode.AUTO
    for effect in deliveries:
        payload = encode_delivery(effect.message, delivery_count=effect.delivery_count,
                                  redelivered=effect.redelivered)
        delivery_id = effect.delivery_id
        tag = b"%d" % delivery_id
        dlv = _delivery(impl, (len(tag), ffi.from_buffer(tag)))
        _link_send(impl, payload, len(payload))  # cffi passes a bytes object's buffer as is
        _link_advance(impl)
        if auto:
            _delivery_settle(dlv)
        else:
            ids[dlv] = delivery_id
    out.core_credit -= len(deliveries)


class Outgoing:
    """Writes the core's deliveries on the links of one connection."""

    def __init__(self, conn_id: str, hub: Hub, links: LinkTable, *, on_output: Callable[[], None]) -> None:
        self.conn_id = conn_id
        self.hub = hub
        self.links = links
        self.on_output = on_output

    def deliver(self, effect: Deliver) -> None:
        """One delivery the hub hands over (not part of a credit grant's run)."""
        out = self.links.by_sub.get(effect.sub)
        if out is not None:
            send(out, (effect,))

    def run(self, effects: list[Effect], out: OutLink) -> None:
        """The effects of a credit grant on ``out``: its deliveries written here (:func:`send`), a run at a
        time (the hub would call the connection's ``on_effect`` once per delivery), every other effect
        applied by the hub in its place."""
        if not effects:
            return
        conn_id, sub = self.conn_id, out.sub
        if set(map(type, effects)) == _DELIVERIES and set(map(_addressee, effects)) == {(conn_id, sub)}:
            # the usual grant: all of them this link's deliveries, one run (told in C, not per effect)
            send(out, cast("list[Deliver]", effects))
            self.on_output()
            return
        apply = self.hub.apply
        run: list[Deliver] = []  # this link's deliveries since the last other effect
        for effect in effects:
            if type(effect) is Deliver and effect.sub == sub and effect.conn == conn_id:
                run.append(effect)
                continue
            if run:  # written before the effect (a Drained zeroes the link's count)
                send(out, run)
                run = []
            apply([effect])
        if run:
            send(out, run)
        self.on_output()

    def drained(self, sub: str) -> None:
        """The core used up a draining link's credit: the link says so to the client."""
        out = self.links.by_sub.get(sub)
        if out is not None:
            out.core_credit = 0
            out.link.drained()
