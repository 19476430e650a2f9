"""The broker's state of each link of an AMQP connection, and the token its core calls echo back.

Why a module of its own: the connection's transfer, delivery, disposition, flow and coordinator paths all
read these records; the connection keeps them by proton link pointer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from proton import Link

from ackspec.reference.amqp.dispositions import Ptr
from ackspec.reference.amqp.proton_c import ffi, lib
from ackspec.reference.broker import AckMode
from ackspec.reference.broker.state import DurableKey


class Token(NamedTuple):
    """What a ``Confirm``/``Reject`` of the core answers: echoed back as ``confirm``.

    An unsettled transfer outside a transaction, the most common case by far, has no ``Token``: its
    delivery pointer itself is echoed (:data:`PLAIN_TRANSFER`, one object less per transfer)."""

    kind: str  # transfer (in a transaction) | settle | discharge
    delivery: Ptr
    extra: Any = None


PLAIN_TRANSFER: type = ffi.CData
"""The class of a token that is an unsettled transfer's delivery pointer (outside a transaction)."""


def answers_transfer(token: object) -> bool:
    """Whether a core ``Confirm``/``Reject`` with ``token`` answers a transfer of the client."""
    return token.__class__ is PLAIN_TRANSFER or (token.__class__ is Token and token.kind == "transfer")


@dataclass(eq=False, slots=True)
class InLink:
    """A link on which the client sends (our receiver): publishes, or coordinator control messages."""

    link: Link
    impl: Ptr
    destination: str | None  # from the target address; None: each message's ``to`` decides
    caps: frozenset[str]
    coordinator: bool = False
    granted: int = 0  # credit granted in total
    visible: int = 0  # of which the client could have seen when it sent what is being read now
    received: int = 0  # transfers received in total


@dataclass(eq=False, slots=True)
class OutLink:
    """A link on which we send deliveries (the client's receiver): one core subscription."""

    link: Link
    impl: Ptr
    sub: str
    ack: AckMode
    core_credit: int = 0  # credit as the core counts it (decremented per Deliver)
    ids: dict[Ptr, int] = field(default_factory=dict)  # unsettled, no outcome yet: delivery -> core delivery id
    durable: DurableKey | None = None  # (container id, link name) of the durable subscription it consumes


def grant(state: InLink, credit: int) -> None:
    """Give the client ``credit`` more transfers on a link it sends on."""
    state.granted += credit
    lib.pn_link_flow(state.impl, credit)


class LinkTable:
    """The links of one connection: all by proton pointer, the ones the client sends on, ours by core
    subscription; and what the hot paths derive from them whenever links come or go (:attr:`walked`,
    :attr:`single_out`)."""

    def __init__(self) -> None:
        self.by_impl: dict[Ptr, InLink | OutLink] = {}
        self.incoming: dict[Ptr, InLink] = {}
        self.by_sub: dict[str, OutLink] = {}
        self.walked: InLink | None = None
        """The one link whose transfers may be read by walking it, not per event (see :meth:`_changed`)."""
        self.single_out: OutLink | None = None
        """The one link we send on, if there is only one (see :meth:`_changed`)."""

    def add_in(self, state: InLink) -> None:
        """A link the client sends on was attached."""
        self.by_impl[state.impl] = self.incoming[state.impl] = state
        self._changed()

    def add_out(self, out: OutLink) -> None:
        """A link we send on was attached."""
        self.by_impl[out.impl] = out
        self.by_sub[out.sub] = out
        self._changed()

    def remove(self, impl: Ptr) -> InLink | OutLink | None:
        """The link ``impl`` is gone (its state, if it had one); a link we sent on stays in :attr:`by_sub`
        until its subscription has ended."""
        state = self.by_impl.pop(impl, None)
        self.incoming.pop(impl, None)
        self._changed()
        return state

    def _changed(self) -> None:
        """Links came or went: may this connection's transfers be walked instead of read per event?

        Only when a delivery event can only be a transfer of that one link: one link the client
        sends on (not a coordinator: declares must come before the transfers that use them, whatever
        link those are on), and no link we send unsettled deliveries on (the client's dispositions
        are events to read; deliveries we send pre-settled get none we would look at).

        Also: the one link we send on, if there is only one (:attr:`single_out`): a delivery event whose
        delivery is among its unsettled ones is a disposition of it, told without ``pn_delivery_link``
        (a pointer in its ``ids`` is a live delivery of that link, never a transfer of another)."""
        links = self.by_impl
        outs = [state for state in links.values() if isinstance(state, OutLink)]
        self.single_out = outs[0] if len(outs) == 1 else None
        walked: InLink | None = None
        for state in links.values():
            if isinstance(state, InLink):
                if walked is not None or state.coordinator:
                    walked = None
                    break
                walked = state
            elif state.ack is not AckMode.AUTO:
                walked = None
                break
        else:
            self.walked = walked
            return
        self.walked = None
