"""A queue message that only a blocked consumer wants does not hold up the messages behind it.

Before, the core's dispatch stopped at the first message no consumer with room would take. With
selectors that starves a consumer: a consumer selecting red, with room, waited behind a blue
message that only a full consumer wanted. The property below drives random consumers (some
with selectors, small prefetch), publishes and acknowledgements, and checks after every step that
no queued message waits while a consumer that matches it has room, and that every message is
delivered exactly once, in publication order per consumer.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ackspec.reference.broker import ACCEPT, AckMode, BrokerCore, CoreConfig, Deliver, Effect
from ackspec.reference.broker.selector import parse_selector

COLOURS = ("red", "blue", "green")
SELECTORS = (None, "colour = 'red'", "colour = 'blue'", "colour <> 'green'")
Q = "/queue/pass-over"


def _delivered(effects: list[Effect]) -> list[Deliver]:
    return [e for e in effects if isinstance(e, Deliver)]


def test_a_red_consumer_with_room_is_not_held_up_by_a_blue_message_for_a_full_consumer() -> None:
    core = BrokerCore(CoreConfig())
    core.open("c")
    core.subscribe("c", "plain", Q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=1)
    core.subscribe("c", "red", Q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=5, selector=parse_selector("colour = 'red'"))
    first = _delivered(core.publish("c", Q, b"0", (("colour", "blue"),)))
    assert [(d.sub, d.message.body) for d in first] == [("plain", b"0")]  # the plain consumer is now full
    blue = _delivered(core.publish("c", Q, b"1", (("colour", "blue"),)))
    red = _delivered(core.publish("c", Q, b"2", (("colour", "red"),)))
    assert blue == []  # waits for the plain consumer
    assert [(d.sub, d.message.body) for d in red] == [("red", b"2")]  # not held up behind it
    later = _delivered(core.settle("c", first[0].delivery_id, ACCEPT, cumulative=False))
    assert [(d.sub, d.message.body) for d in later] == [("plain", b"1")]  # the passed-over one, first


Step = tuple[str, int]


@settings(max_examples=150, deadline=None)
@given(consumers=st.lists(st.tuples(st.sampled_from(SELECTORS), st.integers(1, 3)), min_size=2, max_size=3),
       steps=st.lists(st.tuples(st.sampled_from(("publish", "ack")), st.integers(0, 8)), max_size=40))
def test_no_message_waits_while_a_matching_consumer_has_room(
        consumers: list[tuple[str | None, int]], steps: list[Step]) -> None:
    core = BrokerCore(CoreConfig())
    core.open("c")
    selectors = {}
    prefetch = {}
    for i, (text, room) in enumerate(consumers):
        sub = f"s{i}"
        selectors[sub] = parse_selector(text)
        prefetch[sub] = room
        core.subscribe("c", sub, Q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=room, selector=selectors[sub])
    unacked: dict[str, list[int]] = {sub: [] for sub in selectors}
    got: dict[str, list[int]] = {sub: [] for sub in selectors}
    published = 0

    def take(effects: list[Effect]) -> None:
        for d in _delivered(effects):
            unacked[d.sub].append(d.delivery_id)
            got[d.sub].append(int(d.message.body))

    for kind, n in steps:
        if kind == "publish":
            colour = COLOURS[n % len(COLOURS)]
            take(core.publish("c", Q, b"%d" % published, (("colour", colour),)))
            published += 1
        else:
            holders = [sub for sub in unacked if unacked[sub]]
            if not holders:
                continue
            sub = holders[n % len(holders)]
            take(core.settle("c", unacked[sub].pop(0), ACCEPT, cumulative=False))
        for sub, selector in selectors.items():
            if len(unacked[sub]) < prefetch[sub]:
                waiting = [m for m in core.queue_messages(Q) if selector is None or selector.matches(m)]
                assert not waiting, f"{sub} ({selector.text if selector else 'no selector'}) has room, " \
                    f"but {[m.body for m in waiting]} wait on the queue"
    every = [seq for seqs in got.values() for seq in seqs]
    assert len(every) == len(set(every)), f"delivered twice: {got}"
    for sub, seqs in got.items():
        assert seqs == sorted(seqs), f"{sub} got {seqs} out of publication order"
