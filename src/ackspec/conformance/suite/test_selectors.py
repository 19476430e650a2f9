"""Message selection (Jakarta Messaging 3.8): a consumer with a selector gets only what it matches; and
noLocal, the other filter a consumer can ask for: not its own connection's messages.

The messages are told apart by one string property, ``colour``: STOMP carries every property as a
string, so a string comparison means the same on every target. Each test sends its matching messages
last, so the last matching one is a barrier: on one subscription messages arrive in send order, so a
message the selector should have kept out arrives before it or not at all.
"""

from __future__ import annotations

import pytest

from ackspec.adapters.base import AdapterError, Capability, Client, Delivery
from ackspec.conformance.cited import req
from ackspec.conformance.harness import Harness, seqs
from ackspec.conformance.suite.support import DURABLE_NAME, suspended_durable
from ackspec.conformance.verdicts import Checks, check

requirement = pytest.mark.requirement

SELECTOR = "colour = 'red'"
COLOURS = 7
"""Messages sent per test: even seqs red (matched), odd seqs blue; the last one (seq 6) is red."""
RED = [seq for seq in range(COLOURS) if seq % 2 == 0]
BLUE = [seq for seq in range(COLOURS) if seq % 2 == 1]


def _send_colours(client: Client, destination: str, *, persistent: bool = False) -> None:
    for seq in range(COLOURS):
        client.send(destination, f"m{seq}".encode(), seq=seq, producer="p1", persistent=persistent,
                    headers={"colour": "red" if seq % 2 == 0 else "blue"})


def _until_seq(client: Client, subscription: str, last: int) -> list[Delivery]:
    """Deliveries up to the one with seq ``last`` (or fewer, when the target stops sending). Each test
    sends ``last`` after every message it expects to be kept out, each send confirmed before the next, so
    a message let through arrives before it."""
    got: list[Delivery] = []
    while (delivery := client.receive(subscription, None)) is not None:
        got.append(delivery)
        if delivery.seq == last:
            break
    return got


@requirement("JMS-3.8-SELECTOR-FILTERS")
def test_selector_on_a_queue_leaves_the_rest_for_other_consumers(harness: Harness) -> None:
    """A queue consumer selecting ``colour = 'red'`` gets the red messages only; the blue ones stay on
    the queue, and a consumer without a selector, opened after it has gone, gets them."""
    harness.require(Capability.RECEIPTS)
    q = harness.queue("selector")
    selecting = harness.client("selecting")
    sub = selecting.subscribe(q, selector=SELECTOR)
    _send_colours(harness.client("producer"), q)
    got = seqs(_until_seq(selecting, sub, RED[-1]))
    checks = Checks()
    checks.check(got == RED,
                 f"the consumer selecting {SELECTOR} got seqs {got}, expected the red ones {RED}")
    selecting.unsubscribe(sub)  # (on a target that ignored the selector, it would take the drain's barrier)
    rest = seqs(harness.drain(q, returning=len(BLUE)))
    checks.check(sorted(rest) == BLUE,
                 f"a consumer without a selector then got seqs {rest} from the queue, expected the blue ones "
                 f"{BLUE} (the messages a selector does not match stay for other consumers)")
    checks.done()


@requirement("AMQ-ACKTYPE-UNMATCHED", "JMS-3.8-SELECTOR-FILTERS")
def test_durable_subscription_keeps_only_what_its_selector_matches(harness: Harness) -> None:
    """A durable subscription selecting ``colour = 'red'``, without a consumer while red and blue persistent
    messages are published, delivers the red ones when resumed (with the same selector) and never a blue
    one. Whether the broker also dropped the blue ones from its store (ActiveMQ's UNMATCHED ack) is not
    observable over STOMP or AMQP; that they never come is."""
    harness.require(Capability.TOPICS, Capability.DURABLE_SUBSCRIPTIONS, Capability.CUSTOM_HEADERS, Capability.RECEIPTS)
    t, client_id = suspended_durable(harness, DURABLE_NAME, selector=SELECTOR)
    _send_colours(harness.client("producer"), t, persistent=True)
    harness.expect_dropped(t, BLUE, reason=f"not matched by the durable subscription's selector {SELECTOR}")
    second = harness.client("durable-2", client_id=client_id)
    sub = second.subscribe(t, durable=DURABLE_NAME, selector=SELECTOR)
    got = seqs(_until_seq(second, sub, RED[-1]))
    second.unsubscribe(sub)
    second.remove_durable(t, DURABLE_NAME)  # before the check, so a failure leaves nothing on the target
    check(got == RED,
          f"the resumed durable subscription selecting {SELECTOR} delivered seqs {got}, expected the red ones {RED}",
          requirement=req.AMQ_ACKTYPE_UNMATCHED)


@requirement("JMS-3.8-INVALID-SELECTOR-REFUSED")
@pytest.mark.parametrize("selector", ["colour = ", "colour = 'red", "colour == 'red'", "(colour = 'red'"])
def test_invalid_selector_is_refused(harness: Harness, selector: str) -> None:
    """A consumer whose selector is not valid selector syntax is refused (STOMP: an ERROR; AMQP: a refused
    attach), not created with the selector ignored."""
    harness.require(Capability.RECEIPTS)
    client = harness.client("invalid-selector")
    try:
        client.subscribe(harness.queue("selector"), selector=selector)
    except AdapterError:
        return  # refused (NotSupported is an AdapterError too, but require() has ruled it out)
    check(False, f"a consumer with the invalid selector {selector!r} was made")


@requirement("JMS-DURABLE-CHANGED-SELECTOR-REPLACES")
def test_durable_subscription_resumed_with_another_selector_is_a_new_one(harness: Harness) -> None:
    """A durable subscription selecting red keeps three red messages while it has no consumer; resumed with
    a selector that matches red *and* blue, it is a new subscription: the three kept messages are gone with
    the old one, and only what is published afterwards (one blue, one red) arrives."""
    harness.require(Capability.RECEIPTS)
    t, client_id = suspended_durable(harness, DURABLE_NAME, selector=SELECTOR)
    producer = harness.client("producer")
    for seq in range(3):
        producer.send(t, f"m{seq}".encode(), seq=seq, producer="p1", persistent=True, headers={"colour": "red"})
    harness.expect_dropped(t, range(3), reason="kept by a durable subscription that its resumption replaced")
    second = harness.client("durable-2", client_id=client_id)
    wider = "colour = 'red' OR colour = 'blue'"
    sub = second.subscribe(t, durable=DURABLE_NAME, selector=wider)
    for seq, colour in ((3, "blue"), (4, "red")):
        producer.send(t, f"m{seq}".encode(), seq=seq, producer="p1", persistent=True, headers={"colour": colour})
    got = seqs(_until_seq(second, sub, 4))
    second.unsubscribe(sub)
    second.remove_durable(t, DURABLE_NAME)  # before the check, so a failure leaves nothing on the target
    check(got == [3, 4],
          f"resumed with selector {wider!r} (was {SELECTOR!r}), the durable subscription delivered seqs {got}; "
          "expected [3, 4]: only what was published after the resumption")


@requirement("JMS-NO-LOCAL-OWN-CONNECTION")
def test_no_local_consumer_does_not_get_its_own_connections_messages(harness: Harness) -> None:
    """A noLocal topic consumer's connection and another connection publish in turn, each send confirmed
    before the next: only the other connection's messages arrive. Its last message ends the wait, since the
    broker had routed every earlier one before it was sent."""
    harness.require(Capability.RECEIPTS)
    t = harness.topic("no-local")
    own = harness.client("own")
    sub = own.subscribe(t, no_local=True)
    other = harness.client("other")
    for seq in range(6):
        sender, producer = (own, "own") if seq % 2 == 0 else (other, "other")
        sender.send(t, f"m{seq}".encode(), seq=seq, producer=producer)
    harness.expect_dropped(t, [0, 2, 4], producer="own", reason="published by the noLocal consumer's connection")
    got = [(d.producer, d.seq) for d in _until_seq(own, sub, 5)]
    check(got == [("other", 1), ("other", 3), ("other", 5)],
          f"the noLocal consumer got {got}; expected only the other connection's seqs 1, 3, 5")


@requirement("JMS-NO-LOCAL-DURABLE-SAME-CLIENT-ID")
def test_durable_no_local_subscription_keeps_nothing_of_its_own_client_id(harness: Harness) -> None:
    """A durable noLocal subscription, without a consumer, while its creating client's own connection, another
    connection and then a new connection with the same client id publish in turn: resumed, it delivers only
    the other connection's messages (JMS: "or any other connection with the same client identifier")."""
    t = harness.topic("durable")
    client_id = f"ackspec-{t.rsplit('/', 1)[-1]}"
    first = harness.client("durable-1", client_id=client_id)
    first.unsubscribe(first.subscribe(t, durable=DURABLE_NAME, no_local=True))
    other = harness.client("other")
    first.send(t, b"m0", seq=0, producer="own", persistent=True)
    other.send(t, b"m1", seq=1, producer="other", persistent=True)
    first.disconnect()
    second = harness.client("durable-2", client_id=client_id)
    second.send(t, b"m2", seq=2, producer="same-client", persistent=True)
    other.send(t, b"m3", seq=3, producer="other", persistent=True)
    harness.expect_dropped(t, [0], producer="own", reason="published by the durable noLocal subscriber's connection")
    harness.expect_dropped(t, [2], producer="same-client", reason="published by a connection of the same client id")
    sub = second.subscribe(t, durable=DURABLE_NAME, no_local=True)
    got = [(d.producer, d.seq) for d in _until_seq(second, sub, 3)]
    second.unsubscribe(sub)
    second.remove_durable(t, DURABLE_NAME)  # before the check, so a failure leaves nothing on the target
    check(got == [("other", 1), ("other", 3)],
          f"the resumed durable noLocal subscription delivered {got}; expected only the other connection's seqs "
          "1 and 3 (not 0 from its creating connection, nor 2 from another connection of the same client id)")
