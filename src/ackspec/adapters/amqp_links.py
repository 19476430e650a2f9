"""The links and messages of the AMQP JMS mapping, on a proton driver connection: what Qpid JMS sends
for a typed message, an unsubscribe, a temporary queue, a browser or a shared consumer, and what the
broker answered (the terminus of its attach, the message as it arrived, with its AMQP types).

The suite's AMQP JMS-mapping tests (``conformance/suite/amqp/test_jms_mapping.py``) use it where the
typed interface of :mod:`.base` (string headers, byte bodies) would hide what they check. It drives the
same connection and session as the :class:`~.amqp_proton.ProtonClient` it wraps; every wait is bounded
by the client's timeout.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import deque
from dataclasses import dataclass

from proton import UNDESCRIBED, Array, Data, Described, Endpoint, Link, Message, Terminus, symbol
from proton import Delivery as PnDelivery

from ackspec.adapters.amqp_proton import (
    ACCEPTED_CODE,
    MODIFIED_CODE,
    ProtonClient,
    condition_text,
    outcome_name,
)
from ackspec.adapters.base import AdapterError, Indeterminate

SHARED_SUBS = symbol("SHARED-SUBS")
"""The connection capability a broker offers when it supports JMS 2.0 shared subscriptions."""
SELECTOR_FILTER = symbol("apache.org:selector-filter:string")

_NAMES = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Answer:
    """How the peer answered an attach: the terminus it made (None: a null one) and, if it then detached
    the link, the error it gave."""

    address: str | None
    null: bool
    detached: bool
    error: str | None
    distribution_mode: int = 0


class JmsLinks:
    """AMQP JMS-mapping operations on one proton driver connection."""

    def __init__(self, client: ProtonClient) -> None:
        self.client = client
        self.wire = client.wire
        self.timeout = client.timeout

    # -- attaching -------------------------------------------------------------------------------

    def receiver(self, address: str | None, *, name: str | None = None, credit: int = 10, durable: bool = False,
                 copy: bool = False, capabilities: tuple[str, ...] = (), selector: str | None = None,
                 settled: bool = False) -> tuple[Link, Answer]:
        """Open a receiving link (``address`` None: no source at all, as Qpid JMS reattaches a durable
        subscription to remove it) and wait for the answering attach."""
        name = name or f"ackspec-jms-{self.client.process}-{next(_NAMES)}"
        link = self.client.session.receiver(name)
        self.client.raw_deliveries[name] = deque()
        if address is None:
            link.source.type = Terminus.UNSPECIFIED
        else:
            link.source.address = address
        if durable:
            link.source.durability = Terminus.DELIVERIES
            link.source.expiry_policy = Terminus.EXPIRE_NEVER
        if copy:
            link.source.distribution_mode = Terminus.DIST_MODE_COPY
        _put_capabilities(link.source, capabilities)
        if selector is not None:
            link.source.filter.put_dict({symbol("jms-selector"): Described(SELECTOR_FILTER, selector)})
        link.snd_settle_mode = Link.SND_SETTLED if settled else Link.SND_UNSETTLED
        answer = self._attach(link)
        if credit and not answer.detached:
            link.flow(credit)
            self.wire.flush()
        return link, answer

    def sender(self, address: str | None, *, dynamic: bool = False, capabilities: tuple[str, ...] = ()) -> tuple[
            Link, Answer]:
        """Open a sending link (``dynamic``: ask for a new node, as Qpid JMS makes a temporary queue)."""
        link = self.client.session.sender(f"ackspec-jms-{self.client.process}-{next(_NAMES)}")
        if address is not None:
            link.target.address = address
        link.target.dynamic = dynamic
        _put_capabilities(link.target, capabilities)
        link.snd_settle_mode = Link.SND_UNSETTLED
        return link, self._attach(link)

    def _attach(self, link: Link) -> Answer:
        link.open()
        self.wire.wait(lambda: bool(link.state & (Endpoint.REMOTE_ACTIVE | Endpoint.REMOTE_CLOSED))
                       or self.client.session_error is not None, self.timeout, f"the answer to attach {link.name}")
        if self.client.session_error is not None:
            raise AdapterError(f"attach {link.name}: session ended by the peer: {self.client.session_error}")
        terminus = link.remote_target if link.is_sender else link.remote_source
        if terminus.type == Terminus.UNSPECIFIED:  # refused: the detach with the error follows (2.6.3)
            with contextlib.suppress(Indeterminate):
                self.wire.wait(lambda: bool(link.state & Endpoint.REMOTE_CLOSED), self.timeout,
                               "the detach after a null terminus")
        detached = bool(link.state & Endpoint.REMOTE_CLOSED)
        return Answer(address=terminus.address, null=terminus.type == Terminus.UNSPECIFIED, detached=detached,
                      error=condition_text(link.remote_condition) if detached else None,
                      distribution_mode=int(terminus.distribution_mode))

    def close(self, link: Link) -> str | None:
        """Close the link (detach closed=true) and wait for the answer; returns the error it carried."""
        link.close()
        self.wire.wait(lambda: bool(link.state & Endpoint.REMOTE_CLOSED) or self.client.session_error is not None,
                       self.timeout, f"the answer to closing {link.name}")
        return condition_text(link.remote_condition) or None

    # -- messages ------------------------------------------------------------------------------------

    def send(self, link: Link, message: Message) -> str:
        """Send ``message`` unsettled on ``link``; returns the outcome's name once the peer gave one."""
        self.wire.wait(lambda: link.credit > 0 or bool(link.state & Endpoint.REMOTE_CLOSED), self.timeout,
                       f"credit on {link.name}")
        dlv = link.delivery(f"jms-{next(_NAMES)}")
        link.send(bytes(message.encode()))
        link.advance()
        self.wire.flush()
        self.wire.wait(lambda: bool(dlv.remote_state) or dlv.settled or bool(link.state & Endpoint.REMOTE_CLOSED),
                       self.timeout, f"the outcome of a transfer on {link.name}")
        state = dlv.remote_state
        dlv.settle()
        self.wire.flush()
        if state != ACCEPTED_CODE:
            raise AdapterError(f"send on {link.name}: outcome {outcome_name(state)}")
        return outcome_name(state)

    def take(self, link: Link, n: int, timeout: float | None = None) -> list[tuple[PnDelivery, Message]]:
        """Up to ``n`` deliveries of ``link``, waiting at most ``timeout`` (default: the client's)."""
        held = self.client.raw_deliveries[link.name]
        with contextlib.suppress(Indeterminate):
            self.wire.wait(lambda: len(held) >= n, self.timeout if timeout is None else timeout,
                           f"{n} deliveries on {link.name}")
        return [held.popleft() for _ in range(min(n, len(held)))]

    def until(self, link: Link, last: str, limit: int = 100) -> list[Message]:
        """Every message of ``link`` (each accepted) up to the one whose message-id is ``last``: a barrier
        (the messages sent before ``last`` on the same queue have come by then)."""
        got: list[Message] = []
        while len(got) < limit:
            taken = self.take(link, 1)
            if not taken:
                raise AdapterError(f"the message {last} never came on {link.name} (got {len(got)})")
            dlv, msg = taken[0]
            self.settle(dlv, ACCEPTED_CODE)
            if str(msg.id) == last:
                return got
            got.append(msg)
        raise AdapterError(f"more than {limit} messages on {link.name} before {last}")

    def settle(self, dlv: PnDelivery, outcome: int, *, flush: bool = True) -> None:
        if outcome == MODIFIED_CODE:
            dlv.local.failed = True
        dlv.update(outcome)
        dlv.settle()
        if flush:
            self.wire.flush()

    def give_back_and_close(self, dlv: PnDelivery) -> None:
        """``modified{delivery-failed}`` and the connection's close written together, as a JMS client that
        closes its connection with a message it did not acknowledge."""
        self.settle(dlv, MODIFIED_CODE, flush=False)
        self.client.disconnect()

    def offered(self) -> frozenset[str]:
        """The capabilities the peer offered in its open."""
        caps = self.wire.conn.remote_offered_capabilities
        return frozenset(str(c) for c in (caps or ()))


def _put_capabilities(terminus: Terminus, capabilities: tuple[str, ...]) -> None:
    """The capabilities field holds one symbol or an array of them."""
    if len(capabilities) == 1:
        terminus.capabilities.put_object(symbol(capabilities[0]))
    elif capabilities:
        terminus.capabilities.put_object(
            Array(UNDESCRIBED, Data.SYMBOL, *(symbol(c) for c in capabilities)))  # type: ignore[arg-type]  # stub
