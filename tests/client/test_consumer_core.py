"""Sans-IO tests of the ActiveMQ consumer ack core: ack types, thresholds, timeouts (virtual time)."""

from __future__ import annotations

import pytest

from ackspec.reference.client.clock import ManualClock
from ackspec.reference.client.consumer_core import AckMode, AckType, ConsumerAckCore, Inbound
from ackspec.reference.client.errors import JMSError


def core(mode: AckMode, prefetch: int = 10, optimize: bool = False, clock: ManualClock | None = None,
         max_redeliveries: int = 6, topic: bool = False) -> ConsumerAckCore:
    return ConsumerAckCore("c1", mode, prefetch=prefetch, optimize_acknowledge=optimize,
                           optimize_acknowledge_timeout=0.3, maximum_redeliveries=max_redeliveries,
                           clock=clock or ManualClock(), topic=topic)


def msg(i: int, count: int = 1) -> Inbound:
    return Inbound(f"a{i}", f"m{i}", count)


def test_numeric_values() -> None:
    assert [int(m) for m in AckMode] == [0, 1, 2, 3, 4]
    assert {t.name: int(t) for t in AckType} == {"DELIVERED": 0, "POISON": 1, "STANDARD": 2, "REDELIVERED": 3,
                                                   "INDIVIDUAL": 4, "UNMATCHED": 5}


def test_auto_without_optimize_acks_each_message() -> None:
    c = core(AckMode.AUTO_ACKNOWLEDGE)
    for i in range(3):
        assert c.on_delivered(msg(i)) == []
        [rec] = c.on_consumed(msg(i))
        assert rec.type is AckType.STANDARD and rec.messages == (msg(i),)


def test_optimize_batches_at_065_prefetch() -> None:
    c = core(AckMode.AUTO_ACKNOWLEDGE, prefetch=10, optimize=True)
    out = [r for i in range(7) for r in c.on_consumed(msg(i))]
    assert len(out) == 1 and out[0].type is AckType.STANDARD and len(out[0].messages) == 7  # ceil(6.5)


def test_optimize_timeout_in_virtual_time() -> None:
    clock = ManualClock()
    c = core(AckMode.AUTO_ACKNOWLEDGE, prefetch=100, optimize=True, clock=clock)
    assert c.on_consumed(msg(1)) == []
    clock.advance(0.29)
    assert c.on_timer() == []
    clock.advance(0.02)
    [rec] = c.on_timer()
    assert rec.type is AckType.STANDARD and rec.messages == (msg(1),)


def test_optimize_only_in_auto_mode() -> None:
    for mode in (AckMode.CLIENT_ACKNOWLEDGE, AckMode.SESSION_TRANSACTED, AckMode.INDIVIDUAL_ACKNOWLEDGE):
        assert not core(mode, optimize=True).optimize
    assert core(AckMode.AUTO_ACKNOWLEDGE, optimize=True).optimize


def test_client_mode_delivered_acks_at_half_prefetch_and_standard_on_acknowledge() -> None:
    c = core(AckMode.CLIENT_ACKNOWLEDGE, prefetch=10)
    out = [r for i in range(5) for r in c.on_delivered(msg(i))]
    assert [r.type for r in out] == [AckType.DELIVERED] and len(out[0].messages) == 5
    [std] = c.acknowledge()
    assert std.type is AckType.STANDARD and len(std.messages) == 5


def test_individual_acks_one() -> None:
    c = core(AckMode.INDIVIDUAL_ACKNOWLEDGE)
    c.on_delivered(msg(1))
    c.on_delivered(msg(2))
    [rec] = c.acknowledge(msg(2))
    assert rec.type is AckType.INDIVIDUAL and rec.messages == (msg(2),)


def test_listener_failure_redelivered_and_poison_after_max() -> None:
    c = core(AckMode.AUTO_ACKNOWLEDGE, max_redeliveries=2)
    [rec] = c.on_listener_failed(msg(1), "boom")
    assert rec.type is AckType.REDELIVERED
    assert c.on_arrival(msg(1, count=3)) is None
    poison = c.on_arrival(msg(1, count=4))
    assert poison is not None and poison.type is AckType.POISON


def test_unmatched_and_rollback() -> None:
    c = core(AckMode.SESSION_TRANSACTED)
    rec = c.on_arrival(msg(1), matches=False)
    assert rec is not None and rec.type is AckType.UNMATCHED
    c.on_delivered(msg(2))
    [rb] = c.rollback()
    assert rb.type is AckType.REDELIVERED


def test_listener_needs_prefetch() -> None:
    with pytest.raises(JMSError):
        ConsumerAckCore("c", AckMode.AUTO_ACKNOWLEDGE, prefetch=0, optimize_acknowledge=False,
                        optimize_acknowledge_timeout=1, maximum_redeliveries=1, clock=ManualClock(), listener=True)


def test_dups_ok_topic_batches_at_half() -> None:
    c = core(AckMode.DUPS_OK_ACKNOWLEDGE, prefetch=10, topic=True)
    out = [r for i in range(5) for r in c.on_consumed(msg(i))]
    assert len(out) == 1 and len(out[0].messages) == 5
    q = core(AckMode.DUPS_OK_ACKNOWLEDGE, prefetch=10)
    assert q.optimize_batch == 7


def test_dups_ok_topic_batch_is_not_split_by_a_slow_application() -> None:
    """AMQ-DUPS-OK-TOPIC-BATCH: the batch goes out at 0.5 x prefetch, however long the application takes."""
    clock = ManualClock()
    c = core(AckMode.DUPS_OK_ACKNOWLEDGE, prefetch=10, topic=True, clock=clock)
    out = []
    for i in range(5):
        out += c.on_consumed(msg(i))
        clock.advance(10.0)  # far beyond any optimizeAcknowledgeTimeOut
        assert c.next_deadline() is None
        out += c.on_timer()
    assert [len(r.messages) for r in out] == [5]
