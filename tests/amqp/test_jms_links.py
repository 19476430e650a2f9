"""Link semantics a JMS client over AMQP (Qpid JMS) relies on, sans-IO: refusals with a null terminus,
unsubscribe by reattaching by name, temporary queues (dynamic targets), browsers (distribution-mode
copy), one failed delivery per message when a link closes right after a modified outcome, typed messages
unchanged end to end, and dead-letter properties with JMS names."""

from __future__ import annotations

from typing import Any, cast

from proton import Delivery, Described, Link, Message, Terminus, byte, int32, symbol
from tests.amqp.inmemory import InMemoryPair, accepted_bodies

from ackspec.reference.broker import BrokerCore, CoreConfig
from ackspec.reference.broker.hub import Hub


def _receiver(pair: InMemoryPair, address: str | None, name: str = "r", *, credit: int = 10,
              durable: bool = False, copy: bool = False) -> Link:
    link = pair.session.receiver(name)
    if address is not None:
        link.source.address = address
    else:
        link.source.type = Terminus.UNSPECIFIED
    if durable:
        link.source.durability = Terminus.DELIVERIES
        link.source.expiry_policy = Terminus.EXPIRE_NEVER
    if copy:
        link.source.distribution_mode = Terminus.DIST_MODE_COPY
    link.open()
    if credit:
        link.flow(credit)
    pair.pump()
    return link


def _send(pair: InMemoryPair, address: str, *messages: Message, name: str = "s") -> Link:
    sender = pair.session.sender(name)
    sender.target.address = address
    sender.open()
    pair.pump()
    for i, msg in enumerate(messages):
        dlv = sender.delivery(b"%d" % i)
        sender.send(bytes(msg.encode()))
        sender.advance()
        dlv.settle()
    pair.pump()
    return sender


def _received(link: Link) -> list[tuple[Delivery, Message]]:
    got = []
    while (current := link.current) is not None:
        msg = Message()
        msg.decode(link.recv(current.pending))
        link.advance()
        got.append((current, msg))
    return got


def test_a_refused_attach_is_answered_with_a_null_source_then_a_detach_with_the_error() -> None:
    pair = InMemoryPair()
    link = _receiver(pair, "/queue/x", "bad")
    link.close()
    pair.pump()
    refused = pair.session.receiver("bad2")
    refused.source.address = "/queue/y"
    refused.source.filter.put_dict({symbol("jms-selector"): _selector("a = ")})
    refused.open()
    pair.pump()
    assert refused.remote_source.type == Terminus.UNSPECIFIED
    assert refused.state & Link.REMOTE_CLOSED
    assert refused.remote_condition is not None and refused.remote_condition.name == "amqp:invalid-field"


def _selector(text: str) -> Any:
    return Described(symbol("apache.org:selector-filter:string"), text)


def test_unsubscribe_by_name_deletes_the_durable_subscription_and_an_unknown_name_is_refused() -> None:
    pair = InMemoryPair()
    sub = _receiver(pair, "/topic/t", "subname", durable=True)
    sub.detach()
    pair.pump()
    _send(pair, "/topic/t", Message(body=b"kept"))
    assert pair.core.durable_depth(("client", "subname")) == 1
    again = _receiver(pair, None, "subname", credit=0)
    assert again.remote_source.address == "/topic/t"
    again.close()
    pair.pump()
    assert pair.core.durable_depth(("client", "subname")) is None
    unknown = _receiver(pair, None, "nosuch", credit=0)
    assert unknown.remote_source.type == Terminus.UNSPECIFIED
    assert unknown.remote_condition is not None and unknown.remote_condition.name == "amqp:not-found"


def test_a_dynamic_target_is_a_temporary_queue_deleted_with_its_connection() -> None:
    pair = InMemoryPair()
    sender = pair.session.sender("temp")
    sender.target.dynamic = True
    sender.target.capabilities.put_object(symbol("temporary-queue"))
    sender.open()
    pair.pump()
    address = sender.remote_target.address
    assert address
    dlv = sender.delivery(b"0")
    sender.send(bytes(Message(body=b"to-temp").encode()))
    sender.advance()
    dlv.settle()
    pair.pump()
    assert pair.core.queue_depth(address) == 1
    pair.conn.close()
    pair.pump()
    assert pair.core.queue_depth(address) == 0


def test_a_browser_sees_the_messages_and_leaves_them() -> None:
    pair = InMemoryPair()
    _send(pair, "/queue/b", Message(body=b"one"), Message(body=b"two"))
    browser = _receiver(pair, "/queue/b", "browser", copy=True)
    assert browser.remote_source.distribution_mode == Terminus.DIST_MODE_COPY
    assert accepted_bodies(browser) == [b"one", b"two"]
    pair.pump()
    assert pair.core.queue_depth("/queue/b") == 2


def test_a_modified_outcome_then_a_close_is_one_failed_delivery() -> None:
    pair = InMemoryPair()
    _send(pair, "/queue/c", Message(body=b"once"))
    link = _receiver(pair, "/queue/c", "c")
    [(dlv, _msg)] = _received(link)
    dlv.local.failed = True
    dlv.update(Delivery.MODIFIED)
    dlv.settle()
    pair.conn.close()  # written with the disposition: read by the broker together
    pair.pump()
    other = InMemoryPair(hub=pair.hub, conn_id="amqp-2", container="other")
    [(_, again)] = _received(_receiver(other, "/queue/c", "c2"))
    assert again.delivery_count == 1


def test_a_typed_message_arrives_as_it_was_sent_and_dead_letters_carry_jms_names() -> None:
    pair = InMemoryPair(hub=_hub_with(CoreConfig(max_redeliveries=0)))
    sent = Message(body={"k": "v", "n": int32(5)}, id="ID:typed-1", priority=7, creation_time=1700000000.5,
                   properties={"n": int32(5), "ok": True}, correlation_id="ID:corr")
    sent.annotations = {symbol("x-opt-jms-msg-type"): byte(2)}
    _send(pair, "/queue/typed", sent)
    link = _receiver(pair, "/queue/typed", "t")
    [(dlv, got)] = _received(link)
    assert (got.body, got.id, got.priority, got.creation_time, got.properties, got.annotations,
            got.correlation_id) == (sent.body, sent.id, 7, sent.creation_time, sent.properties,
                                    sent.annotations, "ID:corr")
    assert isinstance(cast(dict[str, Any], got.properties)["n"], int32)
    dlv.update(Delivery.REJECTED)
    dlv.settle()
    pair.pump()
    [(_, dead)] = _received(_receiver(pair, "/queue/DLQ", "dlq"))
    props = cast(dict[str, Any], dead.properties)
    assert props["originalDestination"] == "/queue/typed" and "deadLetterReason" in props
    assert all(str(name).isidentifier() for name in props)
    assert dead.body == sent.body and dead.annotations == sent.annotations


def _hub_with(config: CoreConfig) -> Hub:
    hub = Hub(BrokerCore(config))
    hub.journaling = False
    return hub
