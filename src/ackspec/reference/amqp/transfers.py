"""Transfers the client sends on its links: read off proton, judged, and handed to the core.

Why a part of its own: a transfer is read once it is complete (by its event, or by walking the one
link a connection sends on), checked against the credit the client could have seen and the size limit,
decoded, routed, and then either batched (a plain message outside any transaction: :class:`.InFlight`)
or handed over on its own (coordinator messages, transactional transfers, typed messages, fault rules).
That is one concept, the receiving side of a link, and all of it runs on proton's C pointers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from proton import Condition

from ackspec.reference.amqp.attach import Attachments
from ackspec.reference.amqp.conditions import (
    ERR_DECODE,
    ERR_INVALID_FIELD,
    ERR_MESSAGE_SIZE,
    ERR_NOT_ALLOWED,
    ERR_NOT_FOUND,
    ERR_TRANSFER_LIMIT,
    ERR_UNAUTHORIZED,
)
from ackspec.reference.amqp.coordinator import Coordinator
from ackspec.reference.amqp.dispositions import REJECTED, TRANSACTIONAL_STATE, Ptr
from ackspec.reference.amqp.inflight import InFlight
from ackspec.reference.amqp.links import InLink, LinkTable, Token
from ackspec.reference.amqp.mapping import core_destination, read_incoming
from ackspec.reference.amqp.proton_c import ffi, lib
from ackspec.reference.amqp.sections import Incoming, read_plain
from ackspec.reference.broker import CoreError
from ackspec.reference.broker.auth import Authenticator

NO_ADDRESS = "message has no destination address"  # why a transfer without a target address is rejected

RECV_BUFFER_START = 4096
"""Bytes of a connection's transfer buffer at first: an idle connection costs little (issue 20: 2,000 idle
AMQP connections took 170 MB, 64 KiB each of it this buffer)."""
RECV_BUFFER_MAX = 1 << 16

_delivery_readable = lib.pn_delivery_readable
_delivery_partial = lib.pn_delivery_partial
_delivery_pending = lib.pn_delivery_pending
_delivery_remote_state = lib.pn_delivery_remote_state
_delivery_settled = lib.pn_delivery_settled
_link_recv = lib.pn_link_recv
_link_advance = lib.pn_link_advance
_link_current = lib.pn_link_current
_unpack = ffi.unpack  # the first bytes of a char array as bytes, in one call (no memoryview slice per transfer)


class Transfers:
    """The receiving side of one connection's links: each complete transfer read once and handed on."""

    def __init__(self, conn_id: str, *, inflight: InFlight, links: LinkTable, attachments: Attachments,
                 coordinator: Coordinator, auth: Authenticator, max_message_size: int,
                 user: Callable[[], str | None]) -> None:
        self.conn_id = conn_id
        self.inflight = inflight
        self.core = inflight.core
        self.links = links
        self.attachments = attachments
        self.coordinator = coordinator
        self.auth = auth
        self.max_message_size = max_message_size
        self._user = user
        self._batch = inflight.publish  # bound once: called per plain transfer
        self._recv_buffer = bytearray(RECV_BUFFER_START)  # grows with the messages, up to RECV_BUFFER_MAX
        self._recv_size = len(self._recv_buffer)
        self._recv_view = ffi.from_buffer(self._recv_buffer)  # what pn_link_recv writes into

    # -- reading -----------------------------------------------------------------------------------

    def on_event(self, dlv: Ptr, state: InLink) -> None:
        """A delivery event on a link we receive on. A delivery is handled once, when complete: it is then
        the link's current one (readable) and advancing past it makes it not current for good."""
        if not _delivery_readable(dlv) or _delivery_partial(dlv):
            self._check_size(dlv, state)
            return
        self._take(dlv, state)

    def walk(self, state: InLink, until: Any) -> None:
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

    def _recv(self, impl: Ptr, got: int) -> bytes:
        """The current (complete) delivery's bytes, of which ``got`` were read into the buffer already
        (straight, without asking ``pn_delivery_pending`` first: one C call less per transfer); a
        message that fills the buffer is read on, and the buffer grown to fit it next time (up to
        :data:`RECV_BUFFER_MAX`: a larger one is read in pieces every time, so one big message does not
        keep megabytes per connection)."""
        size = self._recv_size
        if got < size:
            return _unpack(self._recv_view, got) if got > 0 else b""
        parts = [_unpack(self._recv_view, size)]
        while got == size:  # more: read the rest, then keep a buffer that fits next time
            got = _link_recv(impl, self._recv_view, size)
            if got > 0:
                parts.append(_unpack(self._recv_view, got))
        payload = b"".join(parts)
        if size >= RECV_BUFFER_MAX:
            return payload
        self._recv_buffer = bytearray(min(len(payload) + 1, RECV_BUFFER_MAX))
        self._recv_size = len(self._recv_buffer)
        self._recv_view = ffi.from_buffer(self._recv_buffer)
        return payload

    def _check_size(self, dlv: Any, state: InLink) -> bool:
        """A transfer (complete or still arriving) beyond :attr:`max_message_size` ends its link."""
        if not dlv or _delivery_pending(dlv) <= self.max_message_size:
            return False
        self._too_large(state.impl)
        return True

    def _too_large(self, impl: Ptr) -> None:
        self.inflight.flush()
        self.attachments.close_link(impl, ERR_MESSAGE_SIZE, f"message larger than {self.max_message_size} bytes")

    def _take(self, dlv: Ptr, state: InLink) -> None:
        """A complete transfer, the link's current delivery: read, advanced past, decoded, routed and handed
        on: batched (a plain message outside any transaction, :meth:`.InFlight.publish`) or published on its
        own (:meth:`_publish_one`: coordinator, transactional or typed, or with fault rules on).

        Why one body for every transfer: this is the broker's per-message path (a read brings hundreds of
        transfers); the rare steps are calls of their own (:meth:`_off_path`, the refusals), the common ones
        are inline, so a plain transfer makes no Python call here besides its decoder and the batch's."""
        impl = state.impl
        state.received += 1
        if state.received > state.visible:
            # more transfers than all the credit the client had seen (2.6.7): detach the link
            self.inflight.flush()
            self.attachments.close_link(impl, ERR_TRANSFER_LIMIT, "transfer sent without link credit")
            return
        got = _link_recv(impl, self._recv_view, self._recv_size)  # _recv's usual case, inline
        payload = _unpack(self._recv_view, got) if 0 < got < self._recv_size else self._recv(impl, got)
        _link_advance(impl)
        if len(payload) > self.max_message_size:  # arrived whole in one read (else _check_size saw it)
            self._too_large(impl)
            return
        faults = self.core.faults
        off = (state.coordinator or _delivery_remote_state(dlv) == TRANSACTIONAL_STATE
               or (faults is not None and faults.active))
        tx: str | None = None
        if off:
            self.inflight.hold(dlv)  # to be settled by us: answer or the pre-settled paths
            handled, tx = self._off_path(dlv, state, payload)
            if handled:
                return
        try:
            # the plainest messages by read_message's shortcut, without its two calls around it
            incoming = (read_plain(payload) if len(payload) > 12 else None) or read_incoming(payload)
        except Exception as exc:
            self._reject(dlv, ERR_DECODE, f"undecodable message: {exc}")
            return
        destination = state.destination or core_destination(incoming.to, state.caps)
        if destination is None:
            self._reject(dlv, ERR_NOT_FOUND, NO_ADDRESS)
        elif state.destination is None and self.auth.acl is not None and self._relay_refused(dlv, destination):
            pass
        elif off or incoming.typed is not None:  # a typed one is kept with its types: published on its own
            if not off:
                self.inflight.hold(dlv)
            self._publish_one(dlv, incoming, destination, tx)
        else:  # the common case: batched (see InFlight.flush)
            self._batch(dlv, _delivery_settled(dlv), incoming, destination)  # a bool already (C _Bool)

    # -- off the batched path ---------------------------------------------------------------------

    def _off_path(self, dlv: Ptr, state: InLink, payload: bytes) -> tuple[bool, str | None]:
        """What a transfer off the batched path needs before it is decoded: a coordinator's is its control
        message (handled here); a transactional one names its transaction, rejected here if unknown. Returns
        whether it was handled, and the transaction it is sent in (if any)."""
        if state.coordinator:
            self.coordinator.control(dlv, payload)
            return True, None
        if _delivery_remote_state(dlv) != TRANSACTIONAL_STATE:
            return False, None
        tx, refusal = self.coordinator.named(dlv)
        if refusal is not None:
            self.inflight.answer(dlv, REJECTED, condition=refusal)
            return True, None
        return False, tx

    def _publish_one(self, dlv: Ptr, incoming: Incoming, destination: str, tx: str | None) -> None:
        """One transfer handed to the core on its own (off the batched path), answered when confirmed."""
        settled = bool(_delivery_settled(dlv))
        faults = self.core.faults
        if faults is not None and faults.active and self._rejected_by_fault(dlv, settled, destination, tx):
            return
        confirm = None if settled else dlv if tx is None else Token("transfer", dlv, True)
        try:
            effects = self.core.publish(self.conn_id, destination, incoming.body, incoming.headers,
                                        persistent=incoming.durable, tx=tx, confirm=confirm, typed=incoming.typed)
        except CoreError as exc:
            self.inflight.answer(dlv, REJECTED, condition=Condition(ERR_INVALID_FIELD, exc.message))
            return
        if settled:
            self.inflight.settle_in(dlv)
        self.inflight.run(effects)

    def _relay_refused(self, dlv: Ptr, destination: str) -> bool:
        """A transfer through the anonymous relay to a destination this login may not write: rejected."""
        refusal = self.attachments.unauthorised("write", destination)
        if refusal is None:
            return False
        self._reject(dlv, ERR_UNAUTHORIZED, refusal)
        return True

    def _rejected_by_fault(self, dlv: Ptr, settled: bool, destination: str, tx: str | None) -> bool:
        """Fault rule ``reject_send``: the transfer cannot be processed. Unsettled: rejected. Pre-settled in
        a transaction: nobody can be told now, so the transaction is marked failed and its commit fails (4.4.4)."""
        faults = self.core.faults
        if faults is None:
            return False
        rules = faults.rules_for(destination, self.conn_id, self._user())
        reason = next((r.reject_send for r in rules if r.reject_send is not None), None)
        if reason is None:
            return False
        if not settled:
            self.inflight.answer(dlv, REJECTED, condition=Condition(ERR_NOT_ALLOWED, reason))
            return True
        if tx is not None:
            self.coordinator.txns[tx].failed = reason
        self.inflight.settle_in(dlv)
        return True

    def _reject(self, dlv: Ptr, error: str, description: str) -> None:
        """Reject a transfer the core never sees (undecodable, no address), after what came before it."""
        self.inflight.hold(dlv)
        self.inflight.answer(dlv, REJECTED, condition=Condition(error, description))
