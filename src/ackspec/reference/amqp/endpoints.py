"""The connection, session and link events of one AMQP connection: opening, attaching, ending.

Why a part of its own: these events are rare (a handful per connection against one per message) and go
through proton's ``Event`` wrapper, unlike the per-message paths; they decide whether the connection is
registered with the core at all (a client id in use refuses it), and hand link events to
:class:`.Attachments`. A name, container id or address that is not valid UTF-8 is answered with an AMQP
error (the link refused, or the connection closed), not by dropping the connection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from proton import Condition, Connection, Endpoint, Event, symbol

from ackspec.reference.amqp.attach import Attachments
from ackspec.reference.amqp.conditions import ERR_DECODE, ERR_INVALID_FIELD, ERR_UNAUTHORIZED
from ackspec.reference.amqp.links import LinkTable
from ackspec.reference.broker import CoreError, Effect
from ackspec.reference.broker.auth import Authenticator
from ackspec.reference.broker.core import BrokerCore

CONTAINER_ID = "ackspec-reference"
SOLE_CONNECTION: Final = symbol("sole-connection-for-container")
SHARED_SUBS: Final = symbol("SHARED-SUBS")
"""The AMQP JMS mapping's connection capability: a client that set a client id asks to be the only
connection of its container id (JMS 6.1.2); the reference broker offers and enforces it."""


class Endpoints:
    """Handles one connection's endpoint events; knows whether it was opened (registered) or refused."""

    def __init__(self, conn_id: str, core: BrokerCore, auth: Authenticator, connection: Connection, *,
                 links: LinkTable, attachments: Attachments, run: Callable[[list[Effect]], None],
                 user: Callable[[], str | None], fail: Callable[[str], None],
                 finish: Callable[[bool], None]) -> None:
        """``fail``: the connection ends with this error; ``finish``: the client closed it (not abruptly)."""
        self.conn_id = conn_id
        self.core = core
        self.auth = auth
        self.connection = connection
        self.links = links
        self.attachments = attachments
        self._run = run
        self._user = user
        self._fail = fail
        self._finish = finish
        self.opened = False  # registered with the core
        self.refused = False  # closed at open: never registered (what the client still sends is not handled)

    def on_event(self, event: Event) -> None:
        """One endpoint event."""
        try:
            self._endpoint_event(event)
        except UnicodeDecodeError:
            self._invalid_utf8(event)

    def _invalid_utf8(self, event: Event) -> None:
        reason = "invalid UTF-8 in a container id, link name or address"
        if event.link is not None and not event.link.state & Endpoint.LOCAL_CLOSED:
            self.links.remove(event.link._impl)
            self.attachments.refuse(event.link, ERR_INVALID_FIELD, reason)
        elif not self.connection.state & Endpoint.LOCAL_CLOSED:
            self.connection.condition = Condition(ERR_DECODE, reason)
            if self.connection.state & Endpoint.LOCAL_UNINIT:
                self.connection.open()
            self.connection.close()
            self._fail(reason)
            if not self.opened:
                self.refused = True

    def _endpoint_event(self, event: Event) -> None:
        kind = event.type
        if kind == Event.CONNECTION_REMOTE_OPEN:
            self._open()
        elif kind == Event.SESSION_REMOTE_OPEN and event.session is not None:
            event.session.open()
        elif kind == Event.LINK_REMOTE_OPEN and event.link is not None:
            self.attachments.attach(event.link)
        elif kind in (Event.LINK_REMOTE_CLOSE, Event.LINK_REMOTE_DETACH) and event.link is not None:
            self.attachments.detach(event.link, closed=kind == Event.LINK_REMOTE_CLOSE)
        elif kind == Event.SESSION_REMOTE_CLOSE and event.session is not None:
            for out in list(self.links.by_sub.values()):
                if out.link.session == event.session:
                    self.attachments.detach(out.link, closed=False)  # an ended session detaches its links, closes none
            event.session.close()
        elif kind == Event.CONNECTION_REMOTE_CLOSE:
            for out in list(self.links.by_sub.values()):
                self.attachments.detach(out.link, closed=False)
            self.connection.close()
            self._finish(False)

    def _open(self) -> None:
        """The client's open: answered, then (once) the connection registered with the core, or refused."""
        connection = self.connection
        connection.container = CONTAINER_ID
        sole = SOLE_CONNECTION in (connection.remote_desired_capabilities or ())
        # JMS 2.0 shared subscriptions are always offered (the AMQP JMS mapping's SHARED-SUBS)
        connection.offered_capabilities = [SOLE_CONNECTION, SHARED_SUBS] if sole else [SHARED_SUBS]
        connection.open()
        if self.opened:
            return
        refusal = self.auth.client_id_refusal(connection.remote_container, self._user())
        if refusal is not None:  # its container id belongs to another login
            self._refuse(Condition(ERR_UNAUTHORIZED, refusal), refusal)
            return
        try:
            effects = self.core.open(self.conn_id, user=self._user(), client_id=connection.remote_container,
                                     exclusive=sole)
        except CoreError as exc:  # the AMQP JMS mapping's refusal: open, then close naming the field
            self.core.tracer.trace("JMS-6.1.2-CLIENT-ID-IN-USE", exc.message)
            self._refuse(Condition(ERR_INVALID_FIELD, exc.message, {symbol("invalid-field"): symbol("container-id")}),
                         exc.message)
            return
        self.opened = True
        self._run(effects)

    def _refuse(self, condition: Condition, reason: str) -> None:
        """Close the just-opened connection with ``condition``: it is never registered."""
        self.connection.condition = condition
        self.connection.close()
        self._fail(reason)
        self.refused = True
