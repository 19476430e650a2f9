"""Delivery states (AMQP 1.0 3.4, 4.5.5) and what the client's dispositions mean to the broker core.

Why a module of its own: the outcome codes a connection writes and reads, and the mapping of the client's
outcomes to core settlements (accepted, released, modified, rejected; inside a transactional state or not),
are one table, read by the connection's disposition and coordinator paths alike.
"""

from __future__ import annotations

from typing import Any, cast

from proton import Delivery as PnDelivery
from proton import Described

from ackspec.reference.amqp.mapping import annotation_headers
from ackspec.reference.broker import ACCEPT, RELEASE, Outcome, Settlement

Ptr = Any
"""A C pointer from proton's API (a cffi ``cdata``): hashable and compared by address."""

DECLARED = 0x33
TRANSACTIONAL_STATE = 0x34
ACCEPTED = 0x24
REJECTED = 0x25
RELEASED = 0x26
MODIFIED = 0x27


def wrap(dlv: Ptr) -> PnDelivery:
    """proton's wrapper of a delivery, for the rare paths that read or write its disposition's fields."""
    return cast(PnDelivery, PnDelivery.wrap(dlv))  # type: ignore[no-untyped-call]


def transaction_id(dlv: Ptr) -> bytes:
    """The transaction id of the peer's ``transactional-state`` on ``dlv`` (empty if it names none)."""
    data = wrap(dlv).remote.data or []
    return bytes(data[0]) if data else b""


def settlement_of(dlv: PnDelivery) -> Settlement:
    """The core settlement a client's (non-transactional) disposition asks for."""
    state = dlv.remote_state
    if state == ACCEPTED:
        return ACCEPT
    if state == RELEASED:
        return RELEASE
    if state == MODIFIED:
        return Settlement(Outcome.MODIFIED, delivery_failed=bool(dlv.remote.failed),
                          undeliverable_here=bool(dlv.remote.undeliverable),
                          headers=annotation_headers(dlv.remote.annotations))
    if state == REJECTED:
        cond = dlv.remote.condition
        reason = (cond.description or str(cond.name)) if cond is not None else "rejected by consumer"
        return Settlement(Outcome.REJECTED, reason=reason)
    # settled without an outcome: the source's default outcome, modified{delivery-failed}
    return Settlement(Outcome.MODIFIED, delivery_failed=True)


def inner_settlement(inner: Any) -> Settlement:
    """The core settlement of the outcome inside a ``transactional-state`` (accepted when it names none)."""
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
        annotations = fields[2] if len(fields) > 2 and isinstance(fields[2], dict) else None
        return Settlement(Outcome.MODIFIED, delivery_failed=bool(fields[0]) if fields else False,
                          undeliverable_here=bool(fields[1]) if len(fields) > 1 else False,
                          headers=annotation_headers(annotations))
    if code == REJECTED:
        return Settlement(Outcome.REJECTED, reason="rejected in transaction")
    return ACCEPT
