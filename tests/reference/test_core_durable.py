"""Durable topic subscriptions in the broker core (JMS-4.2.11-DURABLE-SUBSCRIPTION-RETAINS), without sockets."""

from __future__ import annotations

import pytest

from ackspec.reference.broker import (
    ACCEPT,
    AckMode,
    BrokerCore,
    CoreConfig,
    CoreError,
    Deliver,
    Effect,
    JournalAppend,
    Record,
)

T = "/topic/news"
KEY = ("client-a", "sub-1")


def bodies(effects: list[Effect]) -> list[bytes]:
    return [e.message.body for e in effects if isinstance(e, Deliver)]


@pytest.fixture
def core() -> BrokerCore:
    c = BrokerCore(CoreConfig(max_redeliveries=5))
    for conn in ("p", "c1", "c2"):
        c.open(conn)
    return c


def publish(core: BrokerCore, *payloads: bytes) -> list[Effect]:
    out: list[Effect] = []
    for body in payloads:
        out += core.publish("p", T, body)
    return out


def test_kept_while_no_consumer_and_delivered_in_order_on_resume(core: BrokerCore) -> None:
    core.subscribe("c1", "s", T, durable=KEY)
    core.unsubscribe("c1", "s")
    publish(core, b"1", b"2", b"3")
    assert core.durable_depth(KEY) == 3
    assert bodies(core.subscribe("c2", "s", T, durable=KEY)) == [b"1", b"2", b"3"]


def test_kept_across_the_consumers_connection_ending(core: BrokerCore) -> None:
    core.subscribe("c1", "s", T, durable=KEY)
    core.close("c1", abrupt=True)
    publish(core, b"1")
    assert bodies(core.subscribe("c2", "s", T, durable=KEY)) == [b"1"]


def test_a_nondurable_subscription_keeps_nothing(core: BrokerCore) -> None:
    core.subscribe("c1", "s", T)
    core.unsubscribe("c1", "s")
    publish(core, b"1")
    assert bodies(core.subscribe("c2", "s", T)) == []
    assert core.durable_depth(KEY) is None


def test_unacknowledged_deliveries_come_back_redelivered_first(core: BrokerCore) -> None:
    core.subscribe("c1", "s", T, ack=AckMode.CLIENT_INDIVIDUAL, durable=KEY)
    first = [e for e in publish(core, b"1", b"2") if isinstance(e, Deliver)]
    assert [d.redelivered for d in first] == [False, False]
    core.unsubscribe("c1", "s")
    publish(core, b"3")
    again = [e for e in core.subscribe("c2", "s", T, ack=AckMode.CLIENT_INDIVIDUAL, durable=KEY)
             if isinstance(e, Deliver)]
    assert [(d.message.body, d.redelivered, d.delivery_count) for d in again] == [
        (b"1", True, 1), (b"2", True, 1), (b"3", False, 0)]


def test_removed_subscription_keeps_nothing_more(core: BrokerCore) -> None:
    core.subscribe("c1", "s", T, durable=KEY)
    core.unsubscribe("c1", "s")
    publish(core, b"old")
    core.remove_durable("c1", KEY)
    assert core.durable_depth(KEY) is None
    publish(core, b"unseen")
    assert bodies(core.subscribe("c2", "s", T, durable=KEY)) == []


def test_one_consumer_at_a_time_and_no_removal_while_in_use(core: BrokerCore) -> None:
    core.subscribe("c1", "s", T, durable=KEY)
    with pytest.raises(CoreError, match="already has a consumer"):
        core.subscribe("c2", "s", T, durable=KEY)
    with pytest.raises(CoreError, match="still has a consumer"):
        core.remove_durable("c2", KEY)
    with pytest.raises(CoreError, match="no durable subscription"):
        core.remove_durable("c2", ("client-a", "other"))


def test_names_are_per_client(core: BrokerCore) -> None:
    core.subscribe("c1", "s", T, durable=KEY)
    core.subscribe("c2", "s", T, durable=("client-b", KEY[1]))
    out = publish(core, b"x")
    assert sorted(e.conn for e in out if isinstance(e, Deliver)) == ["c1", "c2"]


def test_resuming_on_another_topic_starts_afresh(core: BrokerCore) -> None:
    core.subscribe("c1", "s", T, durable=KEY)
    core.unsubscribe("c1", "s")
    publish(core, b"on-news")
    assert bodies(core.subscribe("c2", "s", "/topic/other", durable=KEY)) == []
    publish(core, b"after")  # the old topic no longer feeds it
    assert core.durable_depth(KEY) == 0


def test_only_topics_have_durable_subscriptions(core: BrokerCore) -> None:
    with pytest.raises(CoreError, match="needs a topic"):
        core.subscribe("c1", "s", "/queue/q", durable=KEY)


# -- across a restart: the journal keeps durable subscriptions and the persistent copies they hold ----------


def journal(effects: list[Effect]) -> list[Record]:
    return [e.record for e in effects if isinstance(e, JournalAppend)]


def restarted(records: list[Record]) -> BrokerCore:
    again = BrokerCore(CoreConfig(max_redeliveries=5))
    again.restore(records)
    for conn in ("p", "c1", "c2"):
        again.open(conn)
    return again


def test_persistent_copies_survive_a_restart_and_acknowledged_ones_do_not(core: BrokerCore) -> None:
    records = journal(core.subscribe("c1", "s", T, ack=AckMode.CLIENT_INDIVIDUAL, durable=KEY))
    out = core.publish("p", T, b"1", persistent=True) + core.publish("p", T, b"2", persistent=True)
    records += journal(out)
    first = next(e for e in out if isinstance(e, Deliver))
    records += journal(core.settle("c1", first.delivery_id, ACCEPT))
    records += journal(core.unsubscribe("c1", "s"))
    records += journal(publish(core, b"transient"))  # not persistent: gone in a restart
    again = restarted(records)
    assert again.durable_depth(KEY) == 1
    back = [e for e in again.subscribe("c2", "s", T, durable=KEY) if isinstance(e, Deliver)]
    assert [(d.message.body, d.redelivered) for d in back] == [(b"2", True)]


def test_a_copy_is_per_subscription(core: BrokerCore) -> None:
    other = ("client-b", "sub-2")
    records = journal(core.subscribe("c1", "s", T, ack=AckMode.CLIENT_INDIVIDUAL, durable=KEY))
    records += journal(core.subscribe("c2", "s", T, ack=AckMode.CLIENT_INDIVIDUAL, durable=other))
    out = core.publish("p", T, b"x", persistent=True)
    records += journal(out)
    mine = next(e for e in out if isinstance(e, Deliver) and e.conn == "c1")
    records += journal(core.settle("c1", mine.delivery_id, ACCEPT))  # acknowledged in one subscription only
    again = restarted(records)
    assert (again.durable_depth(KEY), again.durable_depth(other)) == (0, 1)


def test_removed_subscriptions_and_transactional_copies_across_a_restart(core: BrokerCore) -> None:
    gone = ("client-a", "gone")
    records = journal(core.subscribe("c1", "s", T, durable=KEY)) + journal(core.unsubscribe("c1", "s"))
    records += journal(core.subscribe("c1", "g", T, durable=gone)) + journal(core.unsubscribe("c1", "g"))
    core.begin("p", "tx")
    core.publish("p", T, b"in-tx", persistent=True, tx="tx")
    records += journal(core.commit("p", "tx"))
    records += journal(core.remove_durable("c1", gone))
    again = restarted(records)
    assert again.durable_depth(gone) is None
    assert [e.message.body for e in again.subscribe("c2", "s", T, durable=KEY) if isinstance(e, Deliver)] == [
        b"in-tx"]


def test_compaction_keeps_subscriptions_and_copies(core: BrokerCore) -> None:
    core.subscribe("c1", "s", T, ack=AckMode.CLIENT_INDIVIDUAL, durable=KEY)
    core.publish("p", T, b"held", persistent=True)  # delivered, unsettled
    core.unsubscribe("c1", "s")
    core.subscribe("c1", "s2", T, ack=AckMode.CLIENT_INDIVIDUAL, durable=("client-a", "idle"))
    core.unsubscribe("c1", "s2")
    core.publish("p", T, b"later", persistent=True)
    core.subscribe("c2", "s3", T, ack=AckMode.CLIENT_INDIVIDUAL, durable=KEY)  # both delivered, unsettled
    again = restarted(core.live_records())
    assert (again.durable_depth(KEY), again.durable_depth(("client-a", "idle"))) == (2, 1)
    assert [e.message.body for e in again.subscribe("c1", "s", T, durable=KEY) if isinstance(e, Deliver)] == [
        b"held", b"later"]
