"""The JMS selector filter on a receiving link (the AMQP JMS mapping), through the listener, sans-IO.

AMQP 1.0 has no selectors: qpid-jms puts one in the source's filter map as a value described by
``apache.org:selector-filter:string`` (code ``0x0000468C:0x00000004``), and the attach that answers names the
filters actually applied (AMQP 3.5.3), which is how a client tells that a broker ignored one. So the
listener must give the link's consumer that selector, echo that entry and no other (an unknown filter is
not applied, so not echoed), and refuse a link whose selector is invalid (JMS 3.8.1: the consumer is not
made) with ``amqp:invalid-field``.

A proton client engine and :class:`AmqpConnection` exchange bytes in memory (tests/amqp/inmemory.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from proton import Described, Endpoint, Link, Message, Terminus, symbol, ulong
from tests.amqp.inmemory import InMemoryPair, accepted_bodies
from tests.reference._req import requirement

from ackspec.reference.broker import Tracer

Q = "/queue/selector-filter"
T = "/topic/selector-filter"
RED = "colour = 'red'"
SELECTOR_KEY = symbol("jms-selector")
BY_NAME = symbol("apache.org:selector-filter:string")
BY_CODE = ulong(0x0000468C00000004)


def _receiver(pair: InMemoryPair, address: str, filters: dict[Any, Any] | None, *, name: str = "r",
              durable: bool = False) -> Link:
    receiver = pair.session.receiver(name)
    receiver.source.address = address
    if filters is not None:
        receiver.source.filter.put_dict(filters)
    if durable:
        receiver.source.durability = Terminus.DELIVERIES
        receiver.source.expiry_policy = Terminus.EXPIRE_NEVER
    receiver.snd_settle_mode = Link.SND_UNSETTLED
    receiver.open()
    receiver.flow(20)
    pair.pump()
    return receiver


def _selecting(selector: str, descriptor: Any = BY_NAME) -> dict[Any, Any]:
    return {SELECTOR_KEY: Described(descriptor, selector)}


def _publish(pair: InMemoryPair, address: str, colours: list[str], *, durable: bool = False) -> None:
    sender = pair.session.sender(f"p-{address}-{len(colours)}-{colours[:1]}")
    sender.target.address = address
    sender.open()
    pair.pump()
    for i, colour in enumerate(colours):
        dlv = sender.delivery(str(i))
        sender.send(bytes(Message(body=f"{i}-{colour}".encode(), properties={"colour": colour},
                                  durable=durable).encode()))
        sender.advance()
        dlv.settle()
    sender.close()
    pair.pump()


def _filters(terminus: Terminus) -> dict[Any, Any] | None:
    """A terminus's filter map (None when it has none)."""
    data = terminus.filter
    data.rewind()
    if data.next() is None:
        return None
    found = data.get_object()
    assert isinstance(found, dict), found
    return found


@requirement("JMS-3.8-SELECTOR-FILTERS")
@pytest.mark.parametrize("descriptor", [BY_NAME, BY_CODE], ids=["by-name", "by-code"])
def test_a_receiver_with_the_selector_filter_gets_only_matching_messages(descriptor: Any) -> None:
    pair = InMemoryPair()
    receiver = _receiver(pair, Q, _selecting(RED, descriptor))
    assert receiver.remote_condition is None
    _publish(pair, Q, ["red", "blue", "red", "green"])
    assert accepted_bodies(receiver) == [b"0-red", b"2-red"]
    pair.pump()
    assert pair.core.queue_depth(Q) == 2  # the others stay for other consumers
    every = _receiver(pair, Q, None, name="every")
    assert accepted_bodies(every) == [b"1-blue", b"3-green"]


@requirement("JMS-3.8-SELECTOR-FILTERS")
def test_a_topic_receiver_with_the_selector_filter_gets_only_matching_messages() -> None:
    pair = InMemoryPair()
    red = _receiver(pair, T, _selecting("colour <> 'blue'"), name="red")
    every = _receiver(pair, T, None, name="every")
    _publish(pair, T, ["red", "blue", "green"])
    assert accepted_bodies(red) == [b"0-red", b"2-green"]
    assert accepted_bodies(every) == [b"0-red", b"1-blue", b"2-green"]


@requirement("JMS-3.8-SELECTOR-FILTERS")
@pytest.mark.parametrize("descriptor", [BY_NAME, BY_CODE], ids=["by-name", "by-code"])
def test_the_attach_echoes_the_selector_filter_only(descriptor: Any) -> None:
    """AMQP 3.5.3: the answering attach names the filters applied: the selector (as the client sent it),
    not the unknown one beside it."""
    pair = InMemoryPair()
    unknown = Described(symbol("x:unknown"), "v")
    receiver = _receiver(pair, Q, {symbol("x-other"): unknown, **_selecting(RED, descriptor)})
    assert receiver.remote_condition is None
    assert _filters(receiver.remote_source) == _selecting(RED, descriptor)
    _publish(pair, Q, ["blue", "red"])
    assert accepted_bodies(receiver) == [b"1-red"]  # and it is applied


def test_an_unknown_filter_alone_is_not_echoed_nor_applied() -> None:
    pair = InMemoryPair()
    receiver = _receiver(pair, Q, {symbol("x-other"): Described(symbol("x:unknown"), "v")})
    assert receiver.remote_condition is None and not receiver.state & Endpoint.REMOTE_CLOSED
    assert _filters(receiver.remote_source) is None
    _publish(pair, Q, ["blue", "red"])
    assert accepted_bodies(receiver) == [b"0-blue", b"1-red"]


def test_no_filter_no_echo() -> None:
    pair = InMemoryPair()
    receiver = _receiver(pair, Q, None)
    assert _filters(receiver.remote_source) is None


@requirement("JMS-3.8-INVALID-SELECTOR-REFUSED")
@pytest.mark.parametrize("selector", ["colour = ", "colour == 'red'", "(colour = 'red'", "colour = 'red"])
def test_an_invalid_selector_refuses_the_link(selector: str) -> None:
    pair = InMemoryPair()
    pair.core.tracer = Tracer()  # the core's default tracer is shared
    receiver = _receiver(pair, Q, _selecting(selector))
    assert receiver.state & Endpoint.REMOTE_CLOSED
    condition = receiver.remote_condition
    assert condition is not None and condition.name == "amqp:invalid-field"
    description = condition.description or ""
    assert description.startswith("invalid selector:") and "selector: selector:" not in description
    assert " at position " in description
    assert pair.core.tracer.counts["JMS-3.8-INVALID-SELECTOR-REFUSED"] == 1
    receiver.close()
    pair.pump()
    _publish(pair, Q, ["red"])  # no consumer was made: the message stays queued
    assert pair.core.queue_depth(Q) == 1
    again = _receiver(pair, Q, _selecting(RED), name="again")  # the connection goes on
    assert accepted_bodies(again) == [b"0-red"]


@requirement("JMS-3.8-INVALID-SELECTOR-REFUSED")
def test_a_selector_filter_that_is_not_a_string_refuses_the_link() -> None:
    """Echoing it would tell the client a selector was applied when none was."""
    pair = InMemoryPair()
    receiver = _receiver(pair, Q, {SELECTOR_KEY: Described(BY_NAME, 42)})
    assert receiver.state & Endpoint.REMOTE_CLOSED
    condition = receiver.remote_condition
    assert condition is not None and condition.name == "amqp:invalid-field"
    assert condition.description == "invalid selector: not a string but int"


@requirement("JMS-3.8-SELECTOR-FILTERS")
def test_a_blank_selector_is_no_selector_and_is_not_echoed() -> None:
    pair = InMemoryPair()
    receiver = _receiver(pair, Q, _selecting("   "))
    assert not receiver.state & Endpoint.REMOTE_CLOSED
    receiver.remote_source.filter.rewind()
    assert receiver.remote_source.filter.next() is None
    _publish(pair, Q, ["red", "blue"])
    assert accepted_bodies(receiver) == [b"0-red", b"1-blue"]


@requirement("JMS-4.2.11-DURABLE-SUBSCRIPTION-RETAINS", "AMQ-ACKTYPE-UNMATCHED",
             "JMS-DURABLE-CHANGED-SELECTOR-REPLACES")
def test_a_durable_link_with_a_selector_keeps_only_matching_messages() -> None:
    pair = InMemoryPair()
    key = ("client", "reds")  # the client engine's container id and the link's name
    receiver = _receiver(pair, T, _selecting(RED), name="reds", durable=True)
    receiver.detach()  # suspended: the subscription keeps collecting
    pair.pump()
    _publish(pair, T, ["red", "blue", "red"], durable=True)
    assert pair.core.durable_depth(key) == 2
    resumed = _receiver(pair, T, _selecting(RED), name="reds", durable=True)
    assert accepted_bodies(resumed) == [b"0-red", b"2-red"]
    resumed.detach()
    pair.pump()
    _publish(pair, T, ["red"], durable=True)
    other = _receiver(pair, T, _selecting("colour IN ('red', 'blue')"), name="reds", durable=True)  # another
    assert accepted_bodies(other) == []
    assert pair.core.durable_depth(key) == 0


NO_LOCAL = {symbol("no-local"): Described(symbol("apache.org:no-local-filter:list"), [])}


@requirement("JMS-NO-LOCAL-OWN-CONNECTION")
@pytest.mark.parametrize("descriptor", [symbol("apache.org:no-local-filter:list"), ulong(0x0000468C00000003)])
def test_a_no_local_filter_skips_the_links_own_connection_and_is_echoed(descriptor: Any) -> None:
    pair = InMemoryPair()
    filters = {symbol("no-local"): Described(descriptor, []), **_selecting(RED)}
    receiver = _receiver(pair, T, filters)
    assert _filters(receiver.remote_source) == filters  # both applied, both echoed
    _publish(pair, T, ["red"])  # published on the receiver's own connection: not delivered
    assert accepted_bodies(receiver) == []
    pair.core.open("other")  # another connection, straight on the core
    for body, colour in ((b"1-red", "red"), (b"2-blue", "blue")):
        pair.hub.apply(pair.core.publish("other", T, body, (("colour", colour),)))
    pair.pump()
    assert accepted_bodies(receiver) == [b"1-red"]
