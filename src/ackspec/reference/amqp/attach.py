"""Attaching and detaching the links of one AMQP connection (AMQP 1.0 2.6.3, 2.7.3, 3.5; the AMQP JMS
mapping's termini).

Why a part of its own: what a link is to the broker core is decided when it is attached, and undone when it
is detached or closed: a link the client sends on publishes to its target (or is the transaction
coordinator), a link we send on is one core subscription (a queue's, a topic's, a durable or shared one, or
a browser). The connection hands the client's attaches and detaches here, and ends a link here when the
client breaks a rule on it.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable

from proton import Condition, Connection, Endpoint, Link, Terminus

from ackspec.reference.amqp import terminus
from ackspec.reference.amqp.conditions import ERR_INVALID_FIELD, ERR_NOT_FOUND, ERR_UNAUTHORIZED
from ackspec.reference.amqp.dispositions import Ptr
from ackspec.reference.amqp.links import InLink, LinkTable, OutLink, grant
from ackspec.reference.amqp.mapping import core_destination
from ackspec.reference.broker import AckMode, CoreError, Effect
from ackspec.reference.broker.auth import Authenticator
from ackspec.reference.broker.core import BrokerCore
from ackspec.reference.broker.model import TOPIC_PREFIX
from ackspec.reference.broker.selector import Selector, SelectorError, parse_selector
from ackspec.reference.broker.state import DurableKey


class Attachments:
    """Attaches, detaches and ends the links of one connection, keeping :class:`.links.LinkTable` up to date."""

    def __init__(self, conn_id: str, core: BrokerCore, auth: Authenticator, connection: Connection,
                 table: LinkTable, *, run: Callable[[list[Effect]], None], user: Callable[[], str | None],
                 receive_window: int, max_message_size: int) -> None:
        """``run``: apply core effects; ``user``: the connection's login (known once SASL is done)."""
        self.conn_id = conn_id
        self.core = core
        self.auth = auth
        self.connection = connection
        self.links = table
        self._run = run
        self._user = user
        self.receive_window = receive_window
        self.max_message_size = max_message_size
        self.temporaries: list[str] = []
        """Addresses of the dynamic nodes (temporary destinations) this connection made."""
        self._sub_ids = itertools.count(1)

    def unauthorised(self, permission: str, destination: str) -> str | None:
        """Why this connection's login may not ``permission`` ``destination`` (None: it may)."""
        if self.auth.permits(self._user(), permission, destination):
            return None
        return f"not authorised to {permission} {destination!r}"

    def refuse(self, link: Link, name: str, description: str) -> None:
        """Refuse an attach: answered with a null terminus, then a detach carrying the error (2.6.3)."""
        terminus.refuse(link.source if link.is_sender else link.target)
        link.open()
        link.condition = Condition(name, description)
        link.close()

    def attach(self, link: Link) -> None:
        """The client attached ``link``: answered (or refused, 2.6.3) and, if answered, registered."""
        if link.is_sender:
            self._attach_out(link)
            return
        remote = link.remote_target
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.rcv_settle_mode = link.remote_rcv_settle_mode
        impl = link._impl
        if remote.type == Terminus.COORDINATOR:
            link.target.type = Terminus.COORDINATOR
            link.target.copy(remote)
            state = InLink(link, impl, None, frozenset(), coordinator=True)
        else:
            caps = terminus.capabilities(remote)
            destination = core_destination(remote.address, caps)
            if remote.address is not None and destination is None:
                self.refuse(link, ERR_NOT_FOUND, f"no such address {remote.address!r}")
                return
            refusal = self.unauthorised("write", destination) if destination is not None else None
            if refusal is not None:
                self.refuse(link, ERR_UNAUTHORIZED, refusal)
                return
            link.target.copy(remote)
            link.source.copy(link.remote_source)
            link.max_message_size = self.max_message_size
            if remote.dynamic:  # a temporary queue or topic (the AMQP JMS mapping), deleted with the connection
                destination = self._temporary(caps)
                link.target.address = destination
            state = InLink(link, impl, destination, caps)
        self.links.add_in(state)
        link.open()
        grant(state, self.receive_window)
        state.visible = state.granted

    def _temporary(self, caps: frozenset[str]) -> str:
        """A new temporary destination of this connection (deleted with it: :attr:`temporaries`)."""
        address = terminus.temporary_address(self.conn_id, next(self._sub_ids), caps)
        self.temporaries.append(address)
        return address

    def _attach_out(self, link: Link) -> None:
        remote = link.remote_source
        caps = terminus.capabilities(remote)
        if terminus.names_no_node(remote):
            self._reattach(link)
            return
        if remote.dynamic:
            link.source.copy(remote)
            destination = self._temporary(caps)
            link.source.address = destination
        else:
            found = core_destination(remote.address, caps)
            if found is None:
                self.refuse(link, ERR_NOT_FOUND, f"no such source address {remote.address!r}")
                return
            destination = found
            link.source.copy(remote)
        try:
            selector, no_local = terminus.applied_filters(remote, link.source)
        except SelectorError as exc:
            self.core.tracer.trace("JMS-3.8-INVALID-SELECTOR-REFUSED", destination)
            self.refuse(link, ERR_INVALID_FIELD, f"invalid {exc}")  # "invalid selector: <what> at position N"
            return
        browse = terminus.is_browser(remote, destination)
        shared = terminus.shared_key(link.name, caps, self.connection.remote_container or "", destination)
        durable = None if browse else self._durable_key(link, destination)
        if durable is not None and shared is not None:
            durable = shared
        self._answer_out(link, destination, durable, selector, no_local, browse=browse, shared=shared)

    def _reattach(self, link: Link) -> None:
        """A receiver link with no source node: the AMQP JMS mapping's reattach to the durable subscription
        the link's name names (how Qpid JMS unsubscribes: it then closes the link). Answered with the
        subscription's source, or refused with a null one when there is no such subscription."""
        key = (self.connection.remote_container or "", terminus.subscription_name(link.name))
        found = self.core.durable_subscription(key)
        if found is None:
            self.refuse(link, ERR_NOT_FOUND, f"no durable subscription {key[1]!r} of client {key[0]!r}")
            return
        topic, selector_text, no_local = found
        terminus.describe_durable(link.source, topic, selector_text, no_local)
        self._answer_out(link, topic, key, parse_selector(selector_text), no_local)

    def _answer_out(self, link: Link, destination: str, durable: DurableKey | None, selector: Selector | None,
                    no_local: bool, *, browse: bool = False, shared: DurableKey | None = None) -> None:
        """Answer the attach of a link we send on: its subscription in the core (a browser's when
        ``browse``), its settle modes as the client asked."""
        link.target.copy(link.remote_target)
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.rcv_settle_mode = link.remote_rcv_settle_mode
        ack = AckMode.AUTO if link.remote_snd_settle_mode == Link.SND_SETTLED else AckMode.CLIENT_INDIVIDUAL
        sub = f"{link.name}#{next(self._sub_ids)}"
        refusal = None if destination in self.temporaries else self.unauthorised("read", destination)
        if refusal is None and durable is not None:
            refusal = self.unauthorised("admin", destination)
        if refusal is not None:
            self.refuse(link, ERR_UNAUTHORIZED, refusal)
            return
        if durable is not None:
            self.auth.durable_held(durable[0], self._user())
        out = OutLink(link=link, impl=link._impl, sub=sub, ack=ack, durable=durable)
        try:
            if browse:
                effects = self.core.browse(self.conn_id, sub, destination, ack=ack, selector=selector)
            else:
                effects = self.core.subscribe(self.conn_id, sub, destination, ack=ack, credit=0, durable=durable,
                                              selector=selector, no_local=no_local, shared=shared)
        except CoreError as exc:
            self.refuse(link, ERR_INVALID_FIELD, exc.message)
            return
        self.links.add_out(out)
        link.open()
        self._run(effects)

    def _durable_key(self, link: Link, destination: str) -> DurableKey | None:
        """A link that receives from a topic with a durable source (``configuration`` or
        ``unsettled-state``) consumes the durable subscription named by the client's container id and
        the link's name, as the AMQP JMS mapping does (docs/amqp-mapping.md)."""
        if link.remote_source.durability == Terminus.NONDURABLE or not destination.startswith(TOPIC_PREFIX):
            return None
        return (self.connection.remote_container or "", link.name)

    def detach(self, link: Link, *, closed: bool = True) -> None:
        """The client ended a link: ``closed`` (detach with closed=true) destroys it, and with it the
        durable subscription it consumed; a bare detach (closed=false) suspends it, and is answered
        alike: a durable subscription keeps collecting messages for a later attach."""
        state = self.links.remove(link._impl)
        if isinstance(state, OutLink):
            self.unsubscribe(state)
            if closed and state.durable is not None:
                with contextlib.suppress(CoreError):  # not there any more: nothing to delete
                    self._run(self.core.remove_durable(self.conn_id, state.durable))
        if not link.state & Endpoint.LOCAL_CLOSED:
            if closed:
                link.close()
            else:
                link.detach()

    def unsubscribe(self, out: OutLink) -> None:
        """The link we sent on is gone: its subscription ends in the core, which puts back what is
        still unsettled on it (redelivered), as at a detach."""
        self.links.by_sub.pop(out.sub, None)
        if self.core.has_subscription(self.conn_id, out.sub):
            self._run(self.core.unsubscribe(self.conn_id, out.sub))

    def close_link(self, impl: Ptr, name: str, description: str) -> None:
        """End a link with an error (its state is dropped: later transfers and dispositions are ignored;
        a link we sent on gives its unsettled messages back, since the client's detach that answers our
        close finds no state left)."""
        state = self.links.remove(impl)
        if state is not None:
            state.link.condition = Condition(name, description)
            state.link.close()
            if isinstance(state, OutLink):
                self.unsubscribe(state)
