"""Message selectors in the broker core (JMS 3.8), without sockets.

The selector parser is tested on its own (tests/reference/test_selector.py); this module checks what the
core does with a parsed one: on a queue a consumer's selector leaves the messages it does not match for
other consumers (parked while no consumer can take them, given back when one subscribes), on a topic a
subscription's selector keeps them out entirely (a durable subscription does not keep them, ActiveMQ's
UNMATCHED ack), and a durable subscription's selector is journalled, restored and compared on resume
(another selector replaces the subscription with a new, empty one, JMS 6.11.1).

The messages carry one string property, ``colour``, as the suite's selector tests do.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ackspec.reference.broker import (
    ACCEPT,
    AckMode,
    BrokerCore,
    CoreConfig,
    Deliver,
    Effect,
    Record,
    Tracer,
)
from ackspec.reference.broker.records import DurableRemoved, DurableSubscribed, StoredCopy
from ackspec.reference.broker.selector import Selector, parse_selector
from ackspec.reference.faults import FaultInjector

from ._req import requirement
from .test_core_durable import journal, restarted  # the same journal helpers

Q = "/queue/colours"
T = "/topic/colours"
KEY = ("client-a", "reds")
RED = "colour = 'red'"
NOT_RED = "colour <> 'red' OR colour IS NULL"
"""The complement of :data:`RED`: a message without ``colour`` makes ``colour = 'red'`` UNKNOWN, so ``NOT``
of it would not match either."""

colours = st.lists(st.sampled_from(["red", "blue", "green", None]), max_size=24)
"""A message's ``colour`` property, or None for a message without one."""


def sel(text: str) -> Selector:
    selector = parse_selector(text)
    assert selector is not None
    return selector


def delivers(effects: list[Effect]) -> list[Deliver]:
    return [e for e in effects if isinstance(e, Deliver)]


def bodies(effects: list[Effect], conn: str | None = None) -> list[bytes]:
    return [d.message.body for d in delivers(effects) if conn is None or d.conn == conn]


def new_core(*, tracer: Tracer | None = None, faults: FaultInjector | None = None) -> BrokerCore:
    c = BrokerCore(CoreConfig(max_redeliveries=5), tracer=tracer, faults=faults)
    for conn in ("p", "c1", "c2"):
        c.open(conn)
    return c


@pytest.fixture
def core() -> BrokerCore:
    return new_core()


def body(i: int, colour: str | None) -> bytes:
    return f"{i}-{colour}".encode()


def publish(core: BrokerCore, destination: str, spec: list[str | None], *, persistent: bool = False,
            start: int = 0) -> list[Effect]:
    """One message per entry, body ``"<i>-<colour>"``, with a ``colour`` property unless it is None."""
    out: list[Effect] = []
    for i, colour in enumerate(spec, start):
        headers = (("colour", colour),) if colour is not None else ()
        out += core.publish("p", destination, body(i, colour), headers, persistent=persistent)
    return out


def expected(spec: list[str | None], wanted: bool, *, start: int = 0) -> list[bytes]:
    """The bodies of the red messages (``wanted``) or of the others, in publication order."""
    return [body(i, c) for i, c in enumerate(spec, start) if (c == "red") is wanted]


# -- queues: what a consumer's selector does not match stays for other consumers ----------------------------


@requirement("JMS-3.8-SELECTOR-FILTERS")
def test_queue_consumer_gets_only_matching_messages_in_order(core: BrokerCore) -> None:
    spec: list[str | None] = ["red", "blue", "red", None, "green", "red"]
    core.subscribe("c1", "s", Q, selector=sel(RED))
    assert bodies(publish(core, Q, spec)) == expected(spec, True)
    assert core.queue_depth(Q) == 3  # the others stay on the queue


@requirement("JMS-3.8-SELECTOR-FILTERS")
def test_unmatched_messages_are_parked_then_given_to_a_later_consumer(core: BrokerCore) -> None:
    """A queue's only consumer selects red: the others wait (parked), also behind later red ones, and a
    consumer without a selector that subscribes later gets them, in publication order."""
    core.subscribe("c1", "s", Q, selector=sel(RED))
    first: list[str | None] = ["blue", "red", "green", None]
    assert bodies(publish(core, Q, first)) == [body(1, "red")]
    assert bodies(publish(core, Q, ["red"], start=4)) == [body(4, "red")]  # parked ones hold nothing up
    assert core.queue_depth(Q) == 3
    assert bodies(core.subscribe("c2", "s", Q)) == expected(first, False)
    assert core.queue_depth(Q) == 0


@requirement("JMS-3.8-SELECTOR-FILTERS")
def test_parked_messages_wait_for_a_consumer_that_matches_them(core: BrokerCore) -> None:
    """A new consumer that matches none of the parked messages takes none; they stay until one that does."""
    core.subscribe("c1", "s", Q, selector=sel(RED))
    publish(core, Q, ["blue", "green"])
    assert bodies(core.subscribe("c2", "s", Q, selector=sel("colour = 'yellow'"))) == []
    assert core.queue_depth(Q) == 2
    assert bodies(core.subscribe("c2", "s2", Q, selector=sel("colour = 'green'"))) == [body(1, "green")]
    assert core.queue_depth(Q) == 1


@requirement("JMS-3.8-SELECTOR-FILTERS")
def test_complementary_selectors_split_a_queue(core: BrokerCore) -> None:
    spec: list[str | None] = ["red", "red", "blue", None, "red", "green", "blue"]
    core.subscribe("c1", "s", Q, selector=sel(RED))
    core.subscribe("c2", "s", Q, selector=sel(NOT_RED))
    out = publish(core, Q, spec)
    assert bodies(out, "c1") == expected(spec, True)
    assert bodies(out, "c2") == expected(spec, False)
    assert core.queue_depth(Q) == 0


@requirement("JMS-3.8-SELECTOR-FILTERS")
def test_a_consumer_without_selector_shares_but_never_gives_the_selector_a_mismatch(core: BrokerCore) -> None:
    """Round robin still runs between a selecting consumer and one without a selector; the selecting one
    only ever gets what it matches, and between them they get every message once."""
    spec: list[str | None] = ["red", "blue", "red", "red", "green", "red", "blue", "red"]
    core.subscribe("c1", "s", Q, selector=sel(RED))
    core.subscribe("c2", "s", Q)
    out = publish(core, Q, spec)
    mine = bodies(out, "c1")
    assert mine and all(b.endswith(b"-red") for b in mine)
    assert sorted(bodies(out)) == sorted(body(i, c) for i, c in enumerate(spec))


@requirement("JMS-3.8-SELECTOR-FILTERS")
def test_a_requeued_message_goes_only_to_a_consumer_it_matches(core: BrokerCore) -> None:
    """A red message delivered to the red consumer and returned unsettled (its consumer went) is not handed
    to a consumer selecting blue, but to the next red one, redelivered."""
    core.subscribe("c1", "s", Q, ack=AckMode.CLIENT_INDIVIDUAL, selector=sel(RED))
    publish(core, Q, ["red"])
    core.unsubscribe("c1", "s")
    assert bodies(core.subscribe("c2", "s", Q, selector=sel("colour = 'blue'"))) == []
    again = delivers(core.subscribe("c1", "s2", Q, selector=sel(RED)))
    assert [(d.message.body, d.redelivered) for d in again] == [(body(0, "red"), True)]


@requirement("JMS-3.8-SELECTOR-FILTERS")
@settings(max_examples=60, deadline=None)
@given(spec=colours, late=st.integers(0, 24))
def test_a_selecting_consumer_gets_exactly_the_matching_subsequence(spec: list[str | None], late: int) -> None:
    """Whatever the colours: a red-selecting consumer alone gets the red messages in order; a consumer
    without a selector subscribing after the first ``late`` messages gets the rest, in order (the ones
    parked before it came first)."""
    core = new_core()
    late = min(late, len(spec))
    out = core.subscribe("c1", "s", Q, selector=sel(RED))
    out += publish(core, Q, spec[:late])
    out += core.subscribe("c2", "s", Q, selector=sel(NOT_RED))
    out += publish(core, Q, spec[late:], start=late)
    assert bodies(out, "c1") == expected(spec, True)
    assert bodies(out, "c2") == expected(spec, False)
    assert core.queue_depth(Q) == 0


@requirement("JMS-3.8-SELECTOR-FILTERS")
@settings(max_examples=40, deadline=None)
@given(spec=colours)
def test_a_selecting_consumer_then_one_without(spec: list[str | None]) -> None:
    core = new_core()
    assert bodies(core.subscribe("c1", "s", Q, selector=sel(RED)) + publish(core, Q, spec)) == expected(spec, True)
    assert bodies(core.subscribe("c2", "s", Q)) == expected(spec, False)
    assert core.queue_depth(Q) == 0


# -- topics: a subscription never gets what its selector does not match --------------------------------------


@requirement("JMS-3.8-SELECTOR-FILTERS")
def test_topic_subscription_with_selector_gets_only_matching_and_one_without_gets_all() -> None:
    tracer = Tracer()
    core = new_core(tracer=tracer)
    spec: list[str | None] = ["red", "blue", None, "red"]
    core.subscribe("c1", "s", T, selector=sel(RED))
    core.subscribe("c2", "s", T)
    out = publish(core, T, spec)
    assert bodies(out, "c1") == expected(spec, True)
    assert bodies(out, "c2") == [body(i, c) for i, c in enumerate(spec)]
    assert tracer.counts["JMS-3.8-SELECTOR-FILTERS"] == 2
    assert tracer.counts["AMQ-ACKTYPE-UNMATCHED"] == 0


# -- durable subscriptions: only what the selector matches is kept; the selector is part of the subscription -


@requirement("JMS-4.2.11-DURABLE-SUBSCRIPTION-RETAINS", "AMQ-ACKTYPE-UNMATCHED")
def test_durable_subscription_keeps_only_matching_messages() -> None:
    tracer = Tracer()
    core = new_core(tracer=tracer)
    spec: list[str | None] = ["red", "blue", "red", None, "green", "red"]
    core.subscribe("c1", "s", T, durable=KEY, selector=sel(RED))
    core.unsubscribe("c1", "s")
    out = publish(core, T, spec, persistent=True)
    assert core.durable_depth(KEY) == 3
    assert [r.message.body for r in journal(out) if isinstance(r, StoredCopy)] == expected(spec, True)
    assert tracer.counts["AMQ-ACKTYPE-UNMATCHED"] == 3
    assert bodies(core.subscribe("c2", "s", T, durable=KEY, selector=sel(RED))) == expected(spec, True)


@requirement("JMS-4.2.11-DURABLE-SUBSCRIPTION-RETAINS")
def test_resuming_with_the_same_selector_text_around_whitespace_keeps_the_subscription(core: BrokerCore) -> None:
    core.subscribe("c1", "s", T, durable=KEY, selector=sel(RED))
    core.unsubscribe("c1", "s")
    publish(core, T, ["red"], persistent=True)
    out = core.subscribe("c2", "s", T, durable=KEY, selector=sel(f"  {RED}\t"))
    assert bodies(out) == [body(0, "red")]
    assert not [r for r in journal(out) if isinstance(r, DurableSubscribed | DurableRemoved)]  # not replaced


@requirement("JMS-DURABLE-CHANGED-SELECTOR-REPLACES")
@pytest.mark.parametrize(("before", "after", "kept_after"), [
    (RED, "colour = 'blue'", [b"3-blue"]),
    (RED, "colour IN ('red', 'blue')", [b"2-red", b"3-blue"]),  # wider: also matches what the old one kept
    (RED, None, [b"2-red", b"3-blue"]),
    (None, RED, [b"2-red"]),
])
def test_resuming_with_another_selector_starts_afresh(core: BrokerCore, before: str | None, after: str | None,
                                                      kept_after: list[bytes]) -> None:
    """JMS 6.11.1: a durable subscription resumed with another selector (or none instead of one, or one
    instead of none) is a new one: the kept messages are gone (a subscription kept with its selector swapped
    would deliver them), and the new selector decides from then on."""
    core.subscribe("c1", "s", T, durable=KEY, selector=parse_selector(before))
    core.unsubscribe("c1", "s")
    publish(core, T, ["red", "blue"], persistent=True)
    assert core.durable_depth(KEY) == (1 if before else 2)
    out = core.subscribe("c2", "s", T, ack=AckMode.CLIENT_INDIVIDUAL, durable=KEY, selector=parse_selector(after))
    assert bodies(out) == []
    assert journal(out) == [DurableRemoved(*KEY), DurableSubscribed(*KEY, T, after or "")]
    core.unsubscribe("c2", "s")
    publish(core, T, ["red", "blue"], persistent=True, start=2)
    resumed = core.subscribe("c1", "s2", T, durable=KEY, selector=parse_selector(after))
    assert bodies(resumed) == kept_after


# -- across a restart: the journal keeps the selector ---------------------------------------------------------


def _suspended_with_reds(core: BrokerCore) -> list[Record]:
    """A durable subscription selecting red, suspended, kept two red messages of four; its journal."""
    records = journal(core.subscribe("c1", "s", T, ack=AckMode.CLIENT_INDIVIDUAL, durable=KEY, selector=sel(RED)))
    records += journal(core.unsubscribe("c1", "s"))
    records += journal(publish(core, T, ["red", "blue", "red", "green"], persistent=True))
    return records


@requirement("AMQ-ACKTYPE-UNMATCHED")
def test_the_journal_records_the_selector(core: BrokerCore) -> None:
    records = _suspended_with_reds(core)
    assert records[0] == DurableSubscribed(*KEY, T, RED)
    assert [type(r) for r in records[1:]] == [StoredCopy, StoredCopy]
    assert DurableSubscribed(*KEY, T, RED) in core.live_records()


@requirement("JMS-4.2.11-DURABLE-SUBSCRIPTION-RETAINS", "AMQ-ACKTYPE-UNMATCHED")
@pytest.mark.parametrize("source", ["journal", "live-records"])
def test_a_restored_durable_subscription_keeps_its_selector(core: BrokerCore, source: str) -> None:
    records = _suspended_with_reds(core)
    again = restarted(records if source == "journal" else core.live_records())
    assert again.durable_depth(KEY) == 2
    assert DurableSubscribed(*KEY, T, RED) in again.live_records()
    out = publish(again, T, ["blue", "red", None], persistent=True, start=4)
    assert again.durable_depth(KEY) == 3  # the red one only
    assert [r.message.body for r in journal(out) if isinstance(r, StoredCopy)] == [body(5, "red")]
    resumed = again.subscribe("c1", "s", T, ack=AckMode.CLIENT_INDIVIDUAL, durable=KEY, selector=sel(RED))
    assert journal(resumed) == []  # the same subscription, not a new one
    assert [(d.message.body, d.redelivered) for d in delivers(resumed)] == [
        (body(0, "red"), True), (body(2, "red"), True), (body(5, "red"), False)]


@requirement("JMS-DURABLE-CHANGED-SELECTOR-REPLACES")
def test_a_restored_durable_subscription_resumed_with_another_selector_is_new(core: BrokerCore) -> None:
    again = restarted(_suspended_with_reds(core))
    out = again.subscribe("c1", "s", T, durable=KEY, selector=sel("colour = 'blue'"))
    assert bodies(out) == []
    assert journal(out) == [DurableRemoved(*KEY), DurableSubscribed(*KEY, T, "colour = 'blue'")]
    out = publish(again, T, ["red", "blue"], persistent=True, start=4)
    assert bodies(out) == [body(5, "blue")]


def test_acknowledged_matching_copies_do_not_survive_a_restart(core: BrokerCore) -> None:
    records = journal(core.subscribe("c1", "s", T, ack=AckMode.CLIENT_INDIVIDUAL, durable=KEY, selector=sel(RED)))
    out = publish(core, T, ["red", "blue", "red"], persistent=True)
    records += journal(out)
    first = delivers(out)[0]
    records += journal(core.settle("c1", first.delivery_id, ACCEPT))
    again = restarted(records)
    assert again.durable_depth(KEY) == 1
    assert bodies(again.subscribe("c2", "s", T, durable=KEY, selector=sel(RED))) == [body(2, "red")]


# -- noLocal ------------------------------------------------------------------------------------------------


@requirement("JMS-NO-LOCAL-OWN-CONNECTION")
def test_a_no_local_topic_subscription_skips_only_its_own_connections_messages(core: BrokerCore) -> None:
    core.subscribe("c1", "mine", T, no_local=True)
    core.subscribe("c2", "every", T)
    own = core.publish("c1", T, b"own", ())
    other = core.publish("p", T, b"other", ())
    assert bodies(own, "c1") == [] and bodies(own, "c2") == [b"own"]
    assert bodies(other, "c1") == [b"other"] and bodies(other, "c2") == [b"other"]


@requirement("JMS-NO-LOCAL-OWN-CONNECTION")
def test_no_local_skips_own_transactional_messages_at_commit(core: BrokerCore) -> None:
    core.subscribe("c1", "mine", T, no_local=True)
    core.begin("c1", "tx")
    core.publish("c1", T, b"own", (), tx="tx")
    assert bodies(core.commit("c1", "tx"), "c1") == []


def test_no_local_has_no_effect_on_a_queue(core: BrokerCore) -> None:
    core.subscribe("c1", "mine", Q, no_local=True)
    assert bodies(core.publish("c1", Q, b"own", ()), "c1") == [b"own"]


@requirement("JMS-NO-LOCAL-DURABLE-SAME-CLIENT-ID")
def test_a_durable_no_local_subscription_skips_every_connection_of_its_client_id() -> None:
    c = new_core()
    c.open("a1", client_id=KEY[0])
    c.open("a2", client_id=KEY[0])  # another connection of the same client, later
    c.subscribe("a1", "d", T, durable=KEY, no_local=True)
    c.unsubscribe("a1", "d")  # suspended: it keeps collecting
    for conn, body in (("a1", b"own"), ("p", b"other"), ("a2", b"same-client")):
        c.publish(conn, T, body, (), persistent=True)
    assert c.durable_depth(KEY) == 1
    assert bodies(c.subscribe("a2", "d2", T, durable=KEY, no_local=True)) == [b"other"]


def test_resuming_a_durable_subscription_with_another_no_local_replaces_it() -> None:
    c = new_core()
    c.open("a1", client_id=KEY[0])
    c.subscribe("a1", "d", T, durable=KEY, no_local=True)
    c.unsubscribe("a1", "d")
    c.publish("p", T, b"kept", (), persistent=True)
    effects = c.subscribe("a1", "d2", T, durable=KEY)  # noLocal false now: a new, empty subscription
    assert bodies(effects) == []
    assert [r for r in journal(effects) if isinstance(r, DurableSubscribed)] == [
        DurableSubscribed(KEY[0], KEY[1], T, "", False)]


def test_a_durable_no_local_subscription_survives_a_restart_with_its_no_local() -> None:
    c = new_core()
    c.open("a1", client_id=KEY[0])
    records = journal(c.subscribe("a1", "d", T, durable=KEY, no_local=True))
    assert records == [DurableSubscribed(KEY[0], KEY[1], T, "", True)]
    again = restarted(records)
    again.open("a2", client_id=KEY[0])
    again.publish("a2", T, b"same-client", (), persistent=True)
    again.publish("p", T, b"other", (), persistent=True)
    assert again.durable_depth(KEY) == 1
    assert again.live_records()[0] == DurableSubscribed(KEY[0], KEY[1], T, "", True)
