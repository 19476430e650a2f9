"""One-off queue names are freed once their queue is empty and unconsumed (issue 20: 100,000 transient
queue names were kept for good, +120 MB), and freeing one never loses a message: a transaction that sent to
it meanwhile still delivers on commit, and a queue holding messages is never freed."""

from __future__ import annotations

from ackspec.reference.broker import BrokerCore
from ackspec.reference.broker.effects import Deliver
from ackspec.reference.broker.model import AckMode


def _queues(core: BrokerCore) -> int:
    return len(core.store.queues)


def test_many_one_off_queues_do_not_accumulate() -> None:
    core = BrokerCore()
    core.open("c")
    for i in range(2000):
        name = f"/queue/reply.{i}"
        core.subscribe("c", "s", name)
        got = core.publish("c", name, b"x")
        assert any(isinstance(e, Deliver) for e in got)
        core.unsubscribe("c", "s")
    assert _queues(core) == 0


def test_a_queue_holding_messages_is_kept() -> None:
    core = BrokerCore()
    core.open("c")
    core.subscribe("c", "s", "/queue/kept", ack=AckMode.CLIENT_INDIVIDUAL, prefetch=1)
    core.publish("c", "/queue/kept", b"1")
    core.publish("c", "/queue/kept", b"2")
    core.unsubscribe("c", "s")  # the unacknowledged one comes back: two stored
    assert core.queue_depth("/queue/kept") == 2
    core.close("c")
    assert core.queue_depth("/queue/kept") == 2


def test_a_transaction_sending_to_a_queue_freed_meanwhile_still_delivers() -> None:
    core = BrokerCore()
    core.open("producer")
    core.open("consumer")
    core.begin("producer", "t")
    core.publish("producer", "/queue/tx.freed", b"in tx", tx="t")  # the queue exists, empty
    core.subscribe("consumer", "s", "/queue/tx.freed")
    core.unsubscribe("consumer", "s")  # empty and unconsumed: freed
    assert "/queue/tx.freed" not in core.store.queues
    core.commit("producer", "t")
    assert core.queue_depth("/queue/tx.freed") == 1
    core.subscribe("consumer", "s2", "/queue/tx.freed")
    assert core.queue_depth("/queue/tx.freed") == 0  # delivered to the new consumer
