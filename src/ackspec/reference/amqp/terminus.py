"""Link termini as AMQP 1.0 (2.6.3, 3.5) and the AMQP JMS mapping use them: refusals, reattaching a
durable subscription by name, temporary destinations, browsers.

A JMS client over AMQP (Qpid JMS) learns whether the broker did what it asked from the terminus of the
attach that answers it, before any detach: a refused link is answered with a null terminus (then a detach
with the error), an unsubscribe is a receiver link with no source named after the subscription (the broker
answers with the subscription's source, or a null one when there is none), a temporary queue is a sender
link with a dynamic target (the broker answers with the address it made), a QueueBrowser a receiver whose
source asks for ``distribution-mode copy``. The listener (:mod:`.connection`) calls these helpers.
"""

from __future__ import annotations

from typing import Any, Final

from proton import Described, Terminus, symbol, ulong

from ackspec.reference.broker.model import QUEUE_PREFIX, TOPIC_PREFIX
from ackspec.reference.broker.selector import Selector, SelectorError, parse_selector

TEMPORARY_TOPIC: Final = "temporary-topic"
"""Terminus capability of a dynamic node that is a JMS TemporaryTopic (else a TemporaryQueue)."""
SELECTOR_FILTER: Final = symbol("apache.org:selector-filter:string")
NO_LOCAL_FILTER: Final = symbol("apache.org:no-local-filter:list")
_SUBSCRIPTION_SUFFIXES: Final = ("|global",)


def refuse(terminus: Terminus) -> None:
    """Make the terminus of a refused attach null (2.6.3: the peer then expects a detach with the error)."""
    terminus.type = Terminus.UNSPECIFIED


def names_no_node(remote: Terminus) -> bool:
    """A terminus with neither an address nor a dynamic node (null, or empty): on a receiver link, the AMQP
    JMS mapping's reattach to a durable subscription known by the link's name only."""
    return remote.type == Terminus.UNSPECIFIED or (remote.address is None and not remote.dynamic)


def subscription_name(link_name: str) -> str:
    """The durable subscription a link named ``link_name`` consumes (Qpid JMS adds ``|global`` to the
    name of a subscription without client id)."""
    for suffix in _SUBSCRIPTION_SUFFIXES:
        if link_name.endswith(suffix):
            return link_name[: -len(suffix)]
    return link_name


def shared_key(link_name: str, capabilities: frozenset[str], container: str, destination: str) -> tuple[
        str, str] | None:
    """The (client id, name) of the JMS 2.0 shared subscription a link with source capability ``shared``
    consumes, or None: Qpid JMS names the links of one shared subscription ``name``, ``name|2``...
    (``name|global``... without a client id, capability ``global``: then the client id is ``""``)."""
    if "shared" not in capabilities or not destination.startswith(TOPIC_PREFIX):
        return None
    return ("" if "global" in capabilities else container, link_name.split("|", 1)[0])


def describe_durable(source: Terminus, topic: str, selector: str, no_local: bool) -> None:
    """Fill the answering source of a reattach with what the durable subscription is: its topic, durable
    and never expiring, with the filters it applies."""
    source.address = topic
    source.durability = Terminus.DELIVERIES
    source.expiry_policy = Terminus.EXPIRE_NEVER
    source.capabilities.put_object(symbol("topic"))
    filters: dict[Any, Any] = {}
    if selector:
        filters[symbol("jms-selector")] = Described(SELECTOR_FILTER, selector)
    if no_local:
        filters[symbol("no-local")] = Described(NO_LOCAL_FILTER, [])
    if filters:
        source.filter.put_dict(filters)


def temporary_address(conn_id: str, number: int, capabilities: frozenset[str]) -> str:
    """A fresh address for a dynamic node of connection ``conn_id``: a topic when the terminus asks for
    a temporary topic, else a queue (deleted with the connection)."""
    prefix = TOPIC_PREFIX if TEMPORARY_TOPIC in capabilities else QUEUE_PREFIX
    return f"{prefix}ackspec.temp.{conn_id}.{number}"


def is_browser(remote: Terminus, destination: str) -> bool:
    """A source asking for ``distribution-mode copy`` on a queue: the messages are shown, not taken."""
    return destination.startswith(QUEUE_PREFIX) and remote.distribution_mode == Terminus.DIST_MODE_COPY


SELECTOR_DESCRIPTORS: Final = (SELECTOR_FILTER, ulong(0x0000468C00000004))
"""The JMS selector filter of the AMQP filter registry, by name or by code (the AMQP JMS mapping)."""
NO_LOCAL_DESCRIPTORS: Final = (NO_LOCAL_FILTER, ulong(0x0000468C00000003))
"""The JMS noLocal filter of the AMQP filter registry, by name or by code."""


def applied_filters(remote: Terminus, local: Terminus) -> tuple[Selector | None, bool]:
    """The message selector and the noLocal flag among the filters of the client's source, and the
    filters echoed in our attach: only those two (AMQP 3.5.3: the attach names the filters actually
    applied, so a client can tell that the others are not). Raises :class:`SelectorError` for an
    invalid selector."""
    filters = remote.filter
    filters.rewind()
    if filters.next() is None:
        return None, False
    found = filters.get_object()
    local.filter.clear()
    if not isinstance(found, dict):
        return None, False
    selector: Selector | None = None
    no_local = False
    applied: dict[Any, Any] = {}
    for key, value in found.items():
        if not isinstance(value, Described):
            continue
        if value.descriptor in SELECTOR_DESCRIPTORS and selector is None:
            if not isinstance(value.value, str):
                raise SelectorError(f"selector: not a string but {type(value.value).__name__}")
            selector = parse_selector(value.value)
            if selector is not None:  # a blank one is no selector (JMS), so there is nothing applied to echo
                applied[key] = value
        elif value.descriptor in NO_LOCAL_DESCRIPTORS and not no_local:
            no_local = True
            applied[key] = value
    if applied:
        local.filter.put_dict(applied)
    return selector, no_local


def capabilities(terminus: Terminus) -> frozenset[str]:
    caps = terminus.capabilities
    try:
        caps.rewind()
        found: list[str] = []
        while caps.next():
            value = caps.get_object()
            if isinstance(value, list | tuple):
                found += [str(v) for v in value]
            elif hasattr(value, "elements"):
                found += [str(v) for v in value.elements]
            elif value is not None:
                found.append(str(value))
        return frozenset(found)
    except Exception:
        return frozenset()
