"""The core with typed messages (an AMQP message's typed side): priority, expiry, typed selectors,
dead letters and the journal keep what was sent."""

from __future__ import annotations

from ackspec.reference.broker import AckMode, BrokerCore, Deliver, Effect, JournalAppend, Settlement
from ackspec.reference.broker.model import Outcome
from ackspec.reference.broker.selector import parse_selector
from ackspec.reference.broker.typed import Typed
from ackspec.reference.journal.codec import decode_record, encode_record


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def delivered(effects: list[Effect]) -> list[bytes]:
    return [e.message.body for e in effects if isinstance(e, Deliver)]


def make(clock: Clock | None = None) -> BrokerCore:
    core = BrokerCore(clock=clock or Clock())
    core.open("p")
    core.open("c")
    return core


def test_expedited_messages_go_first_normal_ones_keep_their_order() -> None:
    core = make()
    for body, priority in ((b"n1", 4), (b"low", 1), (b"hi7", 7), (b"n2", 4), (b"hi9", 9), (b"hi7b", 7)):
        core.publish("p", "/queue/a", body, typed=Typed(b"", priority=priority))
    out = core.subscribe("c", "s", "/queue/a", ack=AckMode.CLIENT_INDIVIDUAL)
    assert delivered(out) == [b"hi9", b"hi7", b"hi7b", b"n1", b"low", b"n2"]


def test_an_expired_message_is_never_delivered_and_leaves_the_journal() -> None:
    clock = Clock()
    core = make(clock)
    core.publish("p", "/queue/a", b"old", persistent=True, typed=Typed(b"", expiry=1500_000))
    core.publish("p", "/queue/a", b"fresh", persistent=True, typed=Typed(b"", expiry=9000_000))
    core.publish("p", "/queue/a", b"forever", typed=Typed(b""))
    clock.now = 2000.0
    out = core.subscribe("c", "s", "/queue/a", ack=AckMode.CLIENT_INDIVIDUAL)
    assert delivered(out) == [b"fresh", b"forever"]
    removed = [e.record for e in out if isinstance(e, JournalAppend)]
    assert len(removed) == 1 and core.queue_depth("/queue/a") == 0


def test_selectors_compare_typed_properties() -> None:
    core = make()
    for n in (1, 3, 5):
        core.publish("p", "/queue/a", b"%d" % n, (("n", str(n)),), typed=Typed(b"", properties=(("n", n),)))
    core.publish("p", "/queue/a", b"text", (("n", "9"),))  # a STOMP message: its header is a string
    out = core.subscribe("c", "s", "/queue/a", selector=parse_selector("n > 2 AND JMSPriority = 4"))
    assert delivered(out) == [b"3", b"5"]


def test_a_typed_message_is_journalled_with_its_types_and_replayed() -> None:
    typed = Typed(b"\x00\x53\x77\xa1\x02hi", properties=(("n", 5), ("f", 1.5), ("ok", True), ("s", "x"),
                                                          ("none", None)),
                  priority=7, ttl=60_000, expiry=123_456, created=99, sender_id="ID:1", added=(("k", "v"),))
    core = make()
    out = core.publish("p", "/queue/a", b"hi", persistent=True, typed=typed)
    record = next(e.record for e in out if isinstance(e, JournalAppend))
    again = decode_record(encode_record(record))
    assert again == record
    restored = BrokerCore(clock=Clock())
    restored.restore([again])
    assert restored.queue_messages("/queue/a")[0].typed == typed


def test_a_dead_letter_keeps_its_types_and_notes_what_was_added() -> None:
    core = make()
    core.publish("p", "/queue/a", b"x", typed=Typed(b"sections", properties=(("n", 1),)))
    out = core.subscribe("c", "s", "/queue/a", ack=AckMode.CLIENT_INDIVIDUAL)
    did = next(e.delivery_id for e in out if isinstance(e, Deliver))
    core.settle("c", did, Settlement(Outcome.REJECTED, reason="bad"))
    dead = core.queue_messages("/queue/DLQ")[0]
    assert dead.typed is not None and dead.typed.amqp == b"sections" and dead.typed.value_of("n") == 1
    assert dead.typed.added == (("original-destination", "/queue/a"), ("dead-letter-reason", "bad"))
