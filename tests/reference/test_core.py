"""Broker core, without sockets: one test per behaviour."""

from __future__ import annotations

import pytest

from ackspec.reference.broker import (
    ACCEPT,
    RELEASE,
    REQUEUE,
    AckMode,
    BrokerCore,
    Committed,
    Confirm,
    CoreConfig,
    CoreError,
    Deliver,
    Drained,
    Effect,
    JournalAppend,
    Outcome,
    Removed,
    Settlement,
    Stored,
)


def delivers(effects: list[Effect]) -> list[Deliver]:
    return [e for e in effects if isinstance(e, Deliver)]


def bodies(effects: list[Effect]) -> list[bytes]:
    return [d.message.body for d in delivers(effects)]


@pytest.fixture
def core() -> BrokerCore:
    c = BrokerCore(CoreConfig(max_redeliveries=2))
    c.open("p")
    c.open("c1")
    c.open("c2")
    return c


def test_queue_round_robin(core: BrokerCore) -> None:
    core.subscribe("c1", "s", "/queue/a")
    core.subscribe("c2", "s", "/queue/a")
    out: list[Effect] = []
    for i in range(4):
        out += core.publish("p", "/queue/a", b"%d" % i)
    assert [(d.conn, d.message.body) for d in delivers(out)] == [
        ("c1", b"0"), ("c2", b"1"), ("c1", b"2"), ("c2", b"3")]


def test_topic_copy_per_subscriber(core: BrokerCore) -> None:
    core.subscribe("c1", "s", "/topic/t")
    core.subscribe("c2", "s", "/topic/t")
    out = core.publish("p", "/topic/t", b"x", persistent=True)
    assert sorted(d.conn for d in delivers(out)) == ["c1", "c2"]
    assert not [e for e in out if isinstance(e, JournalAppend)]


def test_queued_before_subscribe_and_fifo(core: BrokerCore) -> None:
    for i in range(3):
        core.publish("p", "q", b"%d" % i)
    assert core.queue_depth("q") == 3
    assert bodies(core.subscribe("c1", "s", "q")) == [b"0", b"1", b"2"]


def settle_middle_of_three(core: BrokerCore, ack: AckMode) -> list[Deliver]:
    """Three messages delivered to subscription ``s`` of ``c1`` in ``ack`` mode, the middle one then settled."""
    core.subscribe("c1", "s", "/queue/a", ack=ack)
    ds = []
    for i in range(3):
        ds += delivers(core.publish("p", "/queue/a", b"%d" % i))
    core.settle("c1", ds[1].delivery_id)
    return ds


def test_client_ack_cumulative(core: BrokerCore) -> None:
    ds = settle_middle_of_three(core, AckMode.CLIENT)
    assert core.unacked("c1", "s") == [ds[2].delivery_id]


def test_client_individual_not_cumulative(core: BrokerCore) -> None:
    ds = settle_middle_of_three(core, AckMode.CLIENT_INDIVIDUAL)
    assert core.unacked("c1", "s") == [ds[0].delivery_id, ds[2].delivery_id]


def test_unknown_delivery_is_an_error_and_double_ack(core: BrokerCore) -> None:
    core.subscribe("c1", "s", "/queue/a", ack=AckMode.CLIENT_INDIVIDUAL)
    d = delivers(core.publish("p", "/queue/a", b"x"))[0]
    with pytest.raises(CoreError):
        core.settle("c1", 999)
    core.settle("c1", d.delivery_id)
    with pytest.raises(CoreError):
        core.settle("c1", d.delivery_id)
    with pytest.raises(CoreError):
        core.settle("c2", d.delivery_id)


def test_prefetch_bound(core: BrokerCore) -> None:
    core.subscribe("c1", "s", "/queue/a", ack=AckMode.CLIENT_INDIVIDUAL, prefetch=2)
    out: list[Effect] = []
    for i in range(5):
        out += core.publish("p", "/queue/a", b"%d" % i)
    ds = delivers(out)
    assert len(ds) == 2
    more = core.settle("c1", ds[0].delivery_id)
    assert bodies(more) == [b"2"]


def test_nack_redelivers_with_count_then_dlq(core: BrokerCore) -> None:
    core.subscribe("c1", "s", "/queue/a", ack=AckMode.CLIENT_INDIVIDUAL)
    d = delivers(core.publish("p", "/queue/a", b"x"))[0]
    assert (d.redelivered, d.delivery_count) == (False, 0)
    for n in (1, 2):
        d = delivers(core.settle("c1", d.delivery_id, REQUEUE))[0]
        assert (d.redelivered, d.delivery_count, d.message.body) == (True, n, b"x")
    out = core.settle("c1", d.delivery_id, REQUEUE)
    assert not delivers(out)
    assert core.queue_depth("/queue/DLQ") == 1
    dead = core.queue_messages("/queue/DLQ")[0]
    assert dead.message_id == d.message.message_id
    assert dict(dead.headers)["original-destination"] == "/queue/a"
    assert "max redeliveries" in dict(dead.headers)["dead-letter-reason"]


def test_released_does_not_count_modified_does(core: BrokerCore) -> None:
    core.subscribe("c1", "s", "/queue/a", ack=AckMode.CLIENT_INDIVIDUAL)
    d = delivers(core.publish("p", "/queue/a", b"x"))[0]
    d = delivers(core.settle("c1", d.delivery_id, RELEASE))[0]
    assert (d.redelivered, d.delivery_count) == (True, 0)
    d = delivers(core.settle("c1", d.delivery_id, Settlement(Outcome.MODIFIED, delivery_failed=True)))[0]
    assert d.delivery_count == 1


def test_modified_undeliverable_here_goes_elsewhere(core: BrokerCore) -> None:
    core.subscribe("c1", "s", "/queue/a", ack=AckMode.CLIENT_INDIVIDUAL)
    d = delivers(core.publish("p", "/queue/a", b"x"))[0]
    out = core.settle("c1", d.delivery_id, Settlement(Outcome.MODIFIED, undeliverable_here=True))
    assert not delivers(out)
    out = core.subscribe("c2", "s", "/queue/a", ack=AckMode.CLIENT_INDIVIDUAL)
    assert [(x.conn, x.message.body) for x in delivers(out)] == [("c2", b"x")]


def test_rejected_goes_to_dlq(core: BrokerCore) -> None:
    core.subscribe("c1", "s", "/queue/a", ack=AckMode.CLIENT_INDIVIDUAL)
    d = delivers(core.publish("p", "/queue/a", b"x", persistent=True))[0]
    out = core.settle("c1", d.delivery_id, Settlement(Outcome.REJECTED, reason="bad"))
    assert core.queue_depth("/queue/DLQ") == 1
    assert any(isinstance(e, JournalAppend) for e in out)


def test_close_requeues_ahead_of_newer(core: BrokerCore) -> None:
    core.subscribe("c1", "s", "/queue/a", ack=AckMode.CLIENT)
    for i in range(2):
        core.publish("p", "/queue/a", b"%d" % i)
    core.publish("p", "/queue/a", b"2")  # within prefetch: delivered too
    core.close("c1", abrupt=True)
    core.publish("p", "/queue/a", b"3")
    ds = delivers(core.subscribe("c2", "s", "/queue/a", ack=AckMode.CLIENT))
    assert [(d.message.body, d.redelivered, d.delivery_count) for d in ds] == [
        (b"0", True, 1), (b"1", True, 1), (b"2", True, 1), (b"3", False, 0)]


def test_transaction_sends_invisible_until_commit(core: BrokerCore) -> None:
    core.subscribe("c1", "s", "/queue/a")
    core.begin("p", "t1")
    assert not delivers(core.publish("p", "/queue/a", b"x", tx="t1", persistent=True))
    out = core.commit("p", "t1", confirm="r")
    assert bodies(out) == [b"x"]
    assert isinstance(out[0], JournalAppend) and isinstance(out[0].record, Committed)
    assert Confirm("p", "r", durable=True) in out
    with pytest.raises(CoreError):
        core.commit("p", "t1")


def test_abort_discards_sends_and_redelivers_acks(core: BrokerCore) -> None:
    core.subscribe("c1", "s", "/queue/a", ack=AckMode.CLIENT_INDIVIDUAL)
    d = delivers(core.publish("p", "/queue/a", b"x"))[0]
    core.begin("c1", "t")
    core.publish("c1", "/queue/a", b"y", tx="t")
    assert not delivers(core.settle("c1", d.delivery_id, tx="t"))
    out = core.abort("c1", "t")
    assert [(x.message.body, x.redelivered) for x in delivers(out)] == [(b"x", True)]
    assert core.queue_depth("/queue/a") == 0


def test_transactional_ack_applies_at_commit(core: BrokerCore) -> None:
    core.subscribe("c1", "s", "/queue/a", ack=AckMode.CLIENT_INDIVIDUAL)
    d = delivers(core.publish("p", "/queue/a", b"x", persistent=True))[0]
    core.begin("c1", "t")
    core.settle("c1", d.delivery_id, tx="t")
    assert core.unacked("c1", "s") == [d.delivery_id]
    out = core.commit("c1", "t")
    rec = [e.record for e in out if isinstance(e, JournalAppend)]
    assert rec == [Committed((), (d.message.message_id,))]
    assert core.unacked("c1", "s") == []


def test_close_rolls_back_transactions(core: BrokerCore) -> None:
    core.begin("p", "t")
    core.publish("p", "/queue/a", b"x", tx="t")
    core.close("p")
    assert core.queue_depth("/queue/a") == 0


def test_persistent_send_confirm_durable_and_sync_off() -> None:
    core = BrokerCore(CoreConfig(sync_non_transactional=False))
    core.open("p")
    out = core.publish("p", "/queue/a", b"x", persistent=True, confirm=1)
    assert isinstance(out[0], JournalAppend) and isinstance(out[0].record, Stored)
    assert out[-1] == Confirm("p", 1, durable=False)


def test_auto_ack_removes_persistent_on_delivery(core: BrokerCore) -> None:
    core.publish("p", "/queue/a", b"x", persistent=True)
    out = core.subscribe("c1", "s", "/queue/a")
    assert [e.record for e in out if isinstance(e, JournalAppend)] == [Removed(delivers(out)[0].message.message_id)]


def test_credit_and_drain(core: BrokerCore) -> None:
    core.subscribe("c1", "s", "/queue/a", ack=AckMode.CLIENT_INDIVIDUAL, credit=0)
    assert not delivers(core.publish("p", "/queue/a", b"x"))
    out = core.add_credit("c1", "s", 3, drain=True)
    assert bodies(out) == [b"x"]
    assert Drained("c1", "s", 2) in out


def test_restore_replays_journal() -> None:
    a = BrokerCore()
    a.open("p")
    a.subscribe("p", "s", "/queue/a", ack=AckMode.CLIENT_INDIVIDUAL, prefetch=1)
    records = []
    eff: list[Effect] = []
    for i in range(3):
        eff += a.publish("p", "/queue/a", b"%d" % i, persistent=True)
    d = delivers(eff)[0]
    eff += a.settle("p", d.delivery_id, ACCEPT)
    records = [e.record for e in eff if isinstance(e, JournalAppend)]
    b = BrokerCore()
    b.restore(records)
    assert [m.body for m in b.queue_messages("/queue/a")] == [b"1", b"2"]
    b.open("p")
    ids = {m.message_id for m in b.queue_messages("/queue/a")}
    new = b.publish("p", "/queue/a", b"3", persistent=True)
    assert all(e.record.message.message_id not in ids for e in new if isinstance(e, JournalAppend)
               and isinstance(e.record, Stored))
    # survivors come back marked redelivered, with a count that says so (JMS 3.5.11: >= 2 on the wire)
    again = delivers(b.subscribe("p", "s", "/queue/a", ack=AckMode.CLIENT_INDIVIDUAL))
    assert [(d.message.body, d.redelivered, d.delivery_count) for d in again] == [
        (b"1", True, 1), (b"2", True, 1), (b"3", False, 0)]


def test_duplicate_subscription_id(core: BrokerCore) -> None:
    core.subscribe("c1", "s", "/queue/a")
    with pytest.raises(CoreError):
        core.subscribe("c1", "s", "/queue/b")
