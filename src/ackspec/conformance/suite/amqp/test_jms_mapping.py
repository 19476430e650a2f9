"""The AMQP JMS mapping as a JMS client over AMQP (Qpid JMS) uses it: messages kept as sent (body section,
JMS message type, typed properties, header fields), selectors on typed values, expiry and priority, and
the links of JMS operations (unsubscribe, temporary queues, browsers, shared subscriptions), refusals with
a null terminus, one failed delivery per close, and dead-letter properties JMS can read.

Each test sends and reads AMQP messages and termini through :class:`~ackspec.adapters.amqp_links.JmsLinks`
on a proton driver connection; messages are identified by their message-id, and absence is proved by a
barrier message sent after them (never by waiting)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from proton import Message, byte, char, float32, int32, short, symbol, ulong

from ackspec.adapters.amqp_links import SHARED_SUBS, JmsLinks
from ackspec.adapters.amqp_proton import ACCEPTED_CODE, ProtonClient
from ackspec.adapters.base import AdapterError, Capability, NotSupported
from ackspec.conformance.cited import req
from ackspec.conformance.harness import Harness
from ackspec.conformance.suite.amqp.support import amqp_client
from ackspec.conformance.verdicts import Checks, check

requirement = pytest.mark.requirement

MSG_TYPE = symbol("x-opt-jms-msg-type")
TEXT, MAP, STREAM, BYTES = byte(5), byte(2), byte(4), byte(3)


def _links(harness: Harness, process: str | None = None, *, client_id: str | None = None) -> JmsLinks:
    client = amqp_client(harness, process) if client_id is None else harness.client(process, client_id=client_id)
    if not isinstance(client, ProtonClient):
        raise NotSupported("amqp", "not the proton driver")
    return JmsLinks(client)


def _address(links: JmsLinks, destination: str) -> tuple[str, tuple[str, ...]]:
    address, capability = links.client.opts.terminus(destination)
    return address, (capability,) if capability else ()


def _message(body: Any = b"", **fields: Any) -> Message:
    msg = Message(body=body, id=f"ID:ackspec-{uuid.uuid4().hex[:16]}", **fields)
    return msg


def _barrier(links: JmsLinks, sender: Any, receiver: Any) -> list[Message]:
    """Every message the receiver gets before a barrier message sent now on ``sender`` (accepted)."""
    last = _message(b"barrier")
    links.send(sender, last)
    return links.until(receiver, str(last.id))


def _queue_pair(harness: Harness, links: JmsLinks, *, credit: int = 20, **receiver: Any) -> tuple[Any, Any, str]:
    q = harness.queue()
    address, caps = _address(links, q)
    sender, _ = links.sender(address, capabilities=caps)
    recv, answer = links.receiver(address, capabilities=caps, credit=credit, **receiver)
    if answer.detached:
        raise AdapterError(f"receiver on {q} refused: {answer.error}")
    return sender, recv, q


# -- messages kept as sent ---------------------------------------------------------------------------

@requirement("AMQP-JMS-MESSAGE-TYPE-KEPT")
def test_body_section_and_jms_message_type_arrive_as_sent(harness: Harness) -> None:
    """A TextMessage (amqp-value string), MapMessage (amqp-value map), StreamMessage (amqp-sequence) and
    BytesMessage (data) as Qpid JMS writes them, each with its x-opt-jms-msg-type annotation."""
    links = _links(harness)
    sender, recv, _q = _queue_pair(harness, links)
    sent = [_message("hello", inferred=False), _message({"k": "v", "n": int32(5)}, inferred=False),
            _message([int32(1), "two"], inferred=True), _message(b"\x00\x01bytes", inferred=True)]
    for msg, kind in zip(sent, (TEXT, MAP, STREAM, BYTES), strict=True):
        msg.annotations = {MSG_TYPE: kind}
        links.send(sender, msg)
    got = {str(m.id): m for m in _barrier(links, sender, recv)}
    checks = Checks()
    for msg in sent:
        arrived = got.get(str(msg.id))
        what = type(msg.body).__name__
        checks.check(arrived is not None, f"the {what} message never arrived")
        if arrived is None:
            continue
        body = _body(arrived)
        checks.check(body == msg.body and type(body) is type(msg.body),
                     f"a {what} body arrived as {type(body).__name__} {body!r:.60}")
        sent_kind = _annotations(arrived).get(MSG_TYPE)
        checks.check(sent_kind == _annotations(msg)[MSG_TYPE],
                     f"x-opt-jms-msg-type of the {what} message: {sent_kind!r}")
    checks.done()


TYPED = {"i": int32(5), "l": 7, "b": True, "d": 1.25, "f": float32(0.5), "s": short(-3), "y": byte(9),
         "t": "text", "c": char("x"), "u": ulong(11)}


@requirement("AMQP-JMS-TYPED-PROPERTIES")
def test_application_properties_keep_their_types(harness: Harness) -> None:
    harness.require(Capability.QUEUES)
    links = _links(harness)
    sender, recv, _q = _queue_pair(harness, links)
    msg = _message(b"typed", properties=dict(TYPED))
    links.send(sender, msg)
    [arrived] = _barrier(links, sender, recv)
    props = _props(arrived)
    wrong = {k: f"{type(props.get(k)).__name__} {props.get(k)!r}" for k, v in TYPED.items()
             if props.get(k) != v or type(props.get(k)) is not type(v)}
    check(not wrong,
          f"properties changed type or value (sent {', '.join(f'{k}={type(v).__name__}' for k, v in TYPED.items())}): "
          f"{wrong}")


@requirement("AMQP-JMS-HEADER-FIELDS-KEPT")
def test_priority_ttl_times_and_ids_arrive_as_sent(harness: Harness) -> None:
    links = _links(harness)
    sender, recv, _q = _queue_pair(harness, links)
    created = round(time.time(), 3)
    msg = _message(b"fields", priority=7, ttl=600.0, creation_time=created, correlation_id="ID:ackspec-corr")
    links.send(sender, msg)
    [arrived] = _barrier(links, sender, recv)
    checks = Checks()
    seen = {"message-id": arrived.id, "correlation-id": arrived.correlation_id, "priority": arrived.priority,
            "creation-time": arrived.creation_time}
    expected = {"message-id": msg.id, "correlation-id": msg.correlation_id, "priority": 7, "creation-time": created}
    for name, value in expected.items():
        checks.check(seen[name] == value,
                     f"{name} sent {value!r}, arrived {seen[name]!r}")
    ttl = arrived.ttl or 0
    expiry = arrived.expiry_time or 0
    checks.check(0 < ttl <= 600 or expiry > created,
                 f"the time-to-live was lost: ttl {ttl!r}, absolute-expiry-time {expiry!r}")
    checks.done()


@requirement("JMS-3.8-SELECTOR-TYPED")
def test_selector_compares_typed_properties(harness: Harness) -> None:
    harness.require(Capability.QUEUES)
    links = _links(harness)
    sender, recv, _q = _queue_pair(harness, links, selector="n > 2 OR last = TRUE")
    for n in (1, 3, 5):
        links.send(sender, _message(b"%d" % n, properties={"n": int32(n)}))
    got = [int(_props(m).get("n", -1)) for m in _barrier_with(links, sender, recv, {"last": True})]
    check(got == [3, 5],
          f"selector 'n > 2' over int properties n = 1, 3, 5 delivered n = {got}, expected [3, 5]")


def _barrier_with(links: JmsLinks, sender: Any, receiver: Any, properties: dict[str, Any]) -> list[Message]:
    last = _message(b"barrier", properties=properties)
    links.send(sender, last)
    return links.until(receiver, str(last.id))


@requirement("AMQP-JMS-EXPIRED-NOT-DELIVERED")
def test_an_expired_message_is_not_delivered(harness: Harness) -> None:
    """A message whose absolute expiry time has passed (one second before it was sent) waits in a queue
    with no consumer; a consumer attached afterwards must not get it."""
    links = _links(harness)
    q = harness.queue()
    address, caps = _address(links, q)
    sender, _ = links.sender(address, capabilities=caps)
    now = time.time()
    expired = _message(b"expired", ttl=0.001, creation_time=now - 2, expiry_time=now - 1)
    links.send(sender, expired)
    recv, _answer = links.receiver(address, capabilities=caps)
    got = [str(m.id) for m in _barrier(links, sender, recv)]
    check(str(expired.id) not in got,
          "a message delivered after its absolute-expiry-time had passed")


@requirement("JMS-3.4.10-PRIORITY-EXPEDITED")
def test_expedited_messages_go_ahead_of_normal_ones(harness: Harness) -> None:
    links = _links(harness)
    q = harness.queue()
    address, caps = _address(links, q)
    sender, _ = links.sender(address, capabilities=caps)
    priorities = [4, 1, 7, 4, 9, 0, 5, 4]
    for p in priorities:
        links.send(sender, _message(b"p%d" % p, priority=p))
    recv, _answer = links.receiver(address, capabilities=caps, credit=len(priorities))
    got = [_priority_of(m) for _dlv, m in links.take(recv, len(priorities))]
    first_normal = next((i for i, p in enumerate(got) if p is not None and p <= 4), len(got))
    late = [p for p in got[first_normal:] if p is not None and p >= 5]
    check(len(got) == len(priorities) and not late,
          f"priorities {priorities} waiting in a queue were delivered as {got}: expedited after normal")


# -- links --------------------------------------------------------------------------------------------

@requirement("AMQP-2.6.3-REFUSED-NULL-TERMINUS")
def test_a_refused_link_has_a_null_source_and_a_detach_with_the_error(harness: Harness) -> None:
    """An invalid JMS selector (Qpid JMS's case: the error must show at createConsumer, not at receive)."""
    harness.require(Capability.QUEUES)
    links = _links(harness)
    address, caps = _address(links, harness.queue())
    _link, answer = links.receiver(address, capabilities=caps, selector="n >", credit=0)
    if not answer.detached and not answer.null:
        raise NotSupported(Capability.SELECTORS, "the target accepted a link with an invalid selector")
    checks = Checks()
    checks.check(answer.null,
                 f"the refused link was answered with a source (address {answer.address!r}), not a null one")
    checks.check(answer.detached and bool(answer.error),
                 "no detach with an error followed the refusal")
    checks.done()


@requirement("AMQP-JMS-UNSUBSCRIBE-DELETES")
def test_unsubscribe_by_name_deletes_the_durable_subscription(harness: Harness) -> None:
    harness.require(Capability.TOPICS)
    t = harness.topic("unsub")
    client_id = f"ackspec-{t.rsplit('/', 1)[-1]}"
    name = "unsub"
    first = harness.client("durable-1", client_id=client_id)
    first.unsubscribe(first.subscribe(t, durable=name))
    harness.send_seq(harness.client("producer"), t, [0], persistent=True)  # kept by the subscription
    harness.expect_dropped(t, [0], reason="kept by the durable subscription the test unsubscribes")
    first.disconnect()
    owner = _links(harness, "durable-2", client_id=client_id)
    link, answer = owner.receiver(None, name=name, credit=0)
    checks = Checks()
    checks.check(not answer.null and not answer.detached,
                 f"reattaching to durable subscription {name!r} by name was refused: {answer.error}")
    if not answer.detached:
        error = owner.close(link)
        checks.check(error is None, f"closing the reattached link: {error}")
    owner.client.disconnect()
    again = harness.client("durable-3", client_id=client_id)
    sub = again.subscribe(t, durable=name)
    left = harness.barrier(harness.client("producer-2"), t, again, sub)
    checks.check(not left,
                 f"the unsubscribed durable subscription kept its message: seqs {[d.seq for d in left]}")
    again.unsubscribe(sub)
    again.remove_durable(t, name)
    checks.done()


@requirement("AMQP-JMS-UNSUBSCRIBE-UNKNOWN-REFUSED")
def test_unsubscribing_an_unknown_name_is_refused(harness: Harness) -> None:
    harness.require(Capability.TOPICS)
    links = _links(harness, "unsub-unknown", client_id=f"ackspec-unknown-{uuid.uuid4().hex[:8]}")
    _link, answer = links.receiver(None, name="no-such-subscription", credit=0)
    check(answer.null and answer.detached,
          f"unsubscribing an unknown name was answered with source {answer.address!r}"
          f"{' and no detach' if not answer.detached else ''} (Qpid JMS expects a null source, then the error)")


@requirement("AMQP-JMS-TEMPORARY-QUEUE", "AMQP-JMS-TEMPORARY-DELETED-WITH-CONNECTION")
def test_a_temporary_queue_works_and_ends_with_its_connection(harness: Harness) -> None:
    owner = _links(harness, "temp-owner")
    sender, answer = owner.sender(None, dynamic=True, capabilities=("temporary-queue",))
    checks = Checks()
    checks.check(bool(answer.address) and not answer.detached,
                 f"a dynamic target (temporary queue) was answered with address {answer.address!r}"
                 f"{f', then detached: {answer.error}' if answer.detached else ''}",
                 requirement=req.AMQP_JMS_TEMPORARY_QUEUE)
    if not answer.address or answer.detached:
        checks.done()
        return
    recv, _ = owner.receiver(answer.address)
    request = _message(b"request", reply_to=answer.address)
    owner.send(sender, request)
    got = [str(m.id) for m in _barrier(owner, sender, recv)]
    checks.check(got == [str(request.id)],
                 f"a message sent to the temporary queue was not received from it: {got}",
                 requirement=req.AMQP_JMS_TEMPORARY_QUEUE)
    owner.close(recv)
    owner.send(sender, _message(b"left behind"))
    owner.client.disconnect()
    other = _links(harness, "temp-other")
    late, after = other.receiver(answer.address)
    if not after.detached:
        probe, probed = other.sender(answer.address)
        left = [] if probed.detached else [m.body for m in _barrier(other, probe, late)]
        checks.check(not left,
                     f"the temporary queue outlived its connection with its messages: {left}",
                     requirement=req.AMQP_JMS_TEMPORARY_DELETED_WITH_CONNECTION)
    checks.done()


@requirement("AMQP-JMS-BROWSE-LEAVES-MESSAGES")
def test_a_browser_leaves_the_messages(harness: Harness) -> None:
    links = _links(harness)
    q = harness.queue()
    address, caps = _address(links, q)
    sender, _ = links.sender(address, capabilities=caps)
    sent = [_message(b"browse-%d" % i) for i in range(2)]
    for msg in sent:
        links.send(sender, msg)
    browser, answer = links.receiver(address, capabilities=caps, copy=True, credit=2)
    seen = links.take(browser, 2)
    for dlv, _msg in seen:
        links.settle(dlv, ACCEPTED_CODE)
    browser.close()  # not waited for: RabbitMQ 3.10 does not always answer a detach
    consumer, _ = links.receiver(address, capabilities=caps)
    got = [str(m.id) for m in _barrier(links, sender, consumer)]
    checks = Checks()
    checks.check(len(seen) == 2,
                 f"the browser saw {len(seen)} of 2 messages (distribution-mode answered: {answer.distribution_mode})")
    checks.check(got == [str(m.id) for m in sent],
                 f"after a browser saw them, a consumer got {len(got)} of the 2 messages")
    checks.done()


@requirement("AMQP-JMS-CLOSE-ONE-FAILURE")
def test_a_message_given_back_at_close_fails_once(harness: Harness) -> None:
    harness.require(Capability.QUEUES)
    links = _links(harness, "closer")
    q = harness.queue()
    address, caps = _address(links, q)
    sender, _ = links.sender(address, capabilities=caps)
    msg = _message(b"once")
    links.send(sender, msg)
    recv, _ = links.receiver(address, capabilities=caps)
    [(dlv, _first)] = links.take(recv, 1)
    links.give_back_and_close(dlv)
    after = _links(harness, "after-close")
    again_sender, _ = after.sender(address, capabilities=caps)
    again, _ = after.receiver(address, capabilities=caps)
    got = [m for m in _barrier(after, again_sender, again) if str(m.id) == str(msg.id)]
    counts = [m.delivery_count for m in got]
    check(counts == [1],
          f"a message given back (modified, delivery-failed) as its connection closed came back with "
          f"delivery-count {counts} (expected [1]: one failed delivery)")


@requirement("AMQP-JMS-SHARED-SUBSCRIPTION")
def test_a_shared_subscription_is_shared(harness: Harness) -> None:
    """Two links of one connection on the shared subscription ``name`` of a topic (Qpid JMS's
    createSharedConsumer: source capabilities topic and shared, link names ``name`` and ``name|2``):
    each of four messages reaches exactly one of them."""
    harness.require(Capability.TOPICS)
    links = _links(harness, "shared", client_id=f"ackspec-shared-{uuid.uuid4().hex[:8]}")
    checks = Checks()
    checks.check(SHARED_SUBS in links.offered(),
                 f"the target does not offer {SHARED_SUBS} (offered: {sorted(links.offered())})")
    t = harness.topic("shared")
    address, caps = _address(links, t)
    shared = (*caps, "shared") if "topic" in caps else (*caps, "topic", "shared")
    one, a = links.receiver(address, name="sub", capabilities=shared)
    two, b = links.receiver(address, name="sub|2", capabilities=shared)
    checks.check(not a.detached and not b.detached,
                 f"a shared consumer was refused: {a.error or b.error}")
    if not a.detached and not b.detached:
        sender, _ = links.sender(address, capabilities=caps)
        sent = [_message(b"s%d" % i) for i in range(4)]
        for msg in sent:
            links.send(sender, msg)
        got = [str(m.id) for _d, m in links.take(one, 4, 1.0) + links.take(two, 4, 1.0)]
        checks.check(sorted(got) == sorted(str(m.id) for m in sent),
                     f"the shared subscription's two consumers got {len(got)} messages between them, not each "
                     "of the 4 once")
    checks.done()


@requirement("AMQP-JMS-DEAD-LETTER-JMS-NAMES")
def test_dead_letter_properties_have_jms_names(harness: Harness) -> None:
    harness.require(Capability.QUEUES)
    pattern = harness.settings.dead_letter_queue
    if not pattern:
        raise NotSupported(Capability.DEAD_LETTER, "the profile names no dead-letter queue")
    links = _links(harness)
    q = harness.queue()
    address, caps = _address(links, q)
    dlq_address, dlq_caps = _address(links, pattern.replace("{destination}", q.rsplit("/", 1)[-1]))
    watcher, _ = links.receiver(dlq_address, capabilities=dlq_caps)
    sender, _ = links.sender(address, capabilities=caps)
    msg = _message(b"poison", durable=True, properties={"kept": "yes"})
    links.send(sender, msg)
    recv, _ = links.receiver(address, capabilities=caps)
    [(dlv, _m)] = links.take(recv, 1)
    links.settle(dlv, 0x25)  # rejected
    dead = None
    for _ in range(50):
        taken = links.take(watcher, 1)
        if not taken:
            break
        d, m = taken[0]
        links.settle(d, ACCEPTED_CODE)
        if str(m.id) == str(msg.id):
            dead = m
            break
    if dead is None:
        raise AdapterError(f"the rejected message never reached {dlq_address}")
    names = [str(k) for k in _props(dead)]
    bad = [n for n in names if not _jms_identifier(n)]
    check(not bad,
          f"the dead letter's application properties {bad} are not JMS identifiers (JMS 3.5.1)")


def _priority_of(msg: Message) -> int | None:
    """The priority a message was sent with, read from its body ``p<N>`` (not from its header, which a
    target may drop)."""
    body = _body(msg)
    return int(body[1:]) if isinstance(body, bytes) and body[:1] == b"p" and body[1:].isdigit() else None


def _body(msg: Message) -> Any:
    """The body as sent: proton decodes a binary (a data section) as a memoryview."""
    return bytes(msg.body) if isinstance(msg.body, memoryview) else msg.body


def _annotations(msg: Message) -> dict[Any, Any]:
    return dict(msg.annotations or {})


def _props(msg: Message) -> dict[str, Any]:
    found: dict[Any, Any] = dict(msg.properties or {})
    return {str(k): v for k, v in found.items()}


def _jms_identifier(name: str) -> bool:
    """JMS 3.5.1: a Java identifier that is not NULL, TRUE, FALSE, NOT, AND, OR, BETWEEN, LIKE, IN, IS or
    ESCAPE."""
    reserved = {"NULL", "TRUE", "FALSE", "NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "ESCAPE"}
    return bool(name) and (name[0].isalpha() or name[0] in "_$") and all(
        ch.isalnum() or ch in "_$" for ch in name) and name.upper() not in reserved
