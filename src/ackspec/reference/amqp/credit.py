"""Link credit, both ways: what the client grants on our sending links, and what we grant on its.

Why a part of its own: AMQP flow control (1.0 2.6.7) is the one rule both directions follow. On a link
we send on, the client's credit is handed to the core, which delivers what it can; on a link the client
sends on, we keep a window open, topped up after each piece of a read, and a transfer is judged against
the credit the client could have seen (``InLink.visible``, see :mod:`.transfers`).
"""

from __future__ import annotations

from collections.abc import Callable

from proton import Endpoint

from ackspec.reference.amqp.links import LinkTable, OutLink, grant
from ackspec.reference.amqp.outgoing import Outgoing
from ackspec.reference.amqp.proton_c import lib
from ackspec.reference.broker.core import BrokerCore

SEND_CHUNK = 128
"""Credit handed to the core at a time when a client grants more: its deliveries are written before the
next chunk is made (see :meth:`Credit.flow`)."""

_link_credit = lib.pn_link_credit
_link_get_drain = lib.pn_link_get_drain
_link_state = lib.pn_link_state
_CLOSED = int(Endpoint.LOCAL_CLOSED | Endpoint.REMOTE_CLOSED)


class Credit:
    """The credit of one connection's links."""

    def __init__(self, conn_id: str, core: BrokerCore, links: LinkTable, outgoing: Outgoing, *,
                 receive_window: int, flush_now: Callable[[], None] | None) -> None:
        """``receive_window``: the credit kept open on links the client sends on; ``flush_now``: write the
        output now (between the chunks of a large grant), if the transport can."""
        self.conn_id = conn_id
        self.core = core
        self.links = links
        self.outgoing = outgoing
        self.receive_window = receive_window
        self.flush_now = flush_now

    def flow(self, out: OutLink) -> None:
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
                self.outgoing.run(effects, out)
                flush_now()
        out.core_credit += delta
        self.outgoing.run(self.core.add_credit(self.conn_id, out.sub, delta, drain=drain), out)

    def open_visible(self) -> None:
        """A read begins: transfers in it are judged against the credit granted so far."""
        for in_link in self.links.incoming.values():
            in_link.visible = in_link.granted

    def replenish(self) -> bool:
        """Top up the credit of links we receive on, after each piece of input (whether any was granted).

        Transfers are judged against the credit granted before the read they arrived in (``visible``),
        the credit the client could have seen, so exceeding it is a real violation even when more
        was granted while the read was being processed.
        """
        window = self.receive_window
        incoming = self.links.incoming
        granted = False
        for impl, state in list(incoming.items()):
            if _link_state(impl) & _CLOSED:
                del incoming[impl]
                continue
            left = state.granted - state.received
            if left <= window // 2:
                grant(state, window - left)
                granted = True
        return granted
