"""The reference broker's AMQP 1.0 listener, driven through real sockets by the proton adapter."""

from __future__ import annotations

import threading

import pytest
from tests.amqp.conftest import RunningBroker

from ackspec.adapters.amqp_proton import ProtonAdapter
from ackspec.adapters.base import AckMode, AdapterError, Indeterminate, NackOutcome
from ackspec.history import Recorder

Q = "/queue/amqp.unit"


def test_unsettled_send_is_accepted_and_received(adapter: ProtonAdapter) -> None:
    c = adapter.client("c1")
    result = c.send(Q, b"hello\x00world", seq=1, producer="p1", persistent=True, headers={"colour": "blue"})
    assert result.confirmed and result.detail["outcome"] == "accepted"
    sub = c.subscribe(Q, ack=AckMode.CLIENT_INDIVIDUAL)
    d = c.receive(sub, 2)
    assert d is not None
    assert (d.body, d.seq, d.producer, d.headers["colour"]) == (b"hello\x00world", 1, "p1", "blue")
    assert d.headers["amqp:durable"] == "true"
    assert (d.delivery_count, d.redelivered) == (1, False)
    c.ack(d)
    assert c.receive(sub, 0.2) is None
    c.disconnect()


def test_presettled_send_arrives(adapter: ProtonAdapter) -> None:
    c = adapter.client("c1")
    for i in range(5):
        assert not c.send(Q, b"x", seq=i, confirm=False).confirmed
    sub = c.subscribe(Q, ack=AckMode.AUTO)
    seqs = [d.seq for d in (c.receive(sub, 2) for _ in range(5)) if d is not None]
    assert seqs == list(range(5))


def test_released_keeps_count_modified_failed_increments(adapter: ProtonAdapter) -> None:
    c = adapter.client("c1")
    c.send(Q, b"m", seq=1)
    sub = c.subscribe(Q, ack=AckMode.CLIENT_INDIVIDUAL)
    d = c.receive(sub, 2)
    assert d is not None and d.headers["amqp:delivery-count"] == "0"
    c.nack(d, outcome=NackOutcome.RELEASED)
    d = c.receive(sub, 2)
    assert d is not None and d.headers["amqp:delivery-count"] == "0" and d.redelivered
    assert d.headers["amqp:first-acquirer"] == "false"
    c.nack(d, outcome=NackOutcome.MODIFIED_FAILED)
    d = c.receive(sub, 2)
    assert d is not None and d.headers["amqp:delivery-count"] == "1" and d.delivery_count == 2
    c.ack(d)


def test_modified_undeliverable_here_goes_to_another_link(adapter: ProtonAdapter) -> None:
    c = adapter.client("c1")
    s1 = c.subscribe(Q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=1)
    c.send(Q, b"m", seq=7)
    d = c.receive(s1, 2)
    assert d is not None
    c.nack(d, outcome=NackOutcome.MODIFIED_UNDELIVERABLE)
    assert c.receive(s1, 0.3) is None  # never again to that link
    s2 = c.subscribe(Q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=1)
    d2 = c.receive(s2, 2)
    assert d2 is not None and d2.seq == 7


def test_rejected_goes_to_dead_letter_queue_with_reason(adapter: ProtonAdapter) -> None:
    c = adapter.client("c1")
    c.send(Q, b"poison", seq=3)
    sub = c.subscribe(Q, ack=AckMode.CLIENT_INDIVIDUAL)
    d = c.receive(sub, 2)
    assert d is not None
    c.nack(d, outcome=NackOutcome.REJECTED)
    dlq = c.subscribe("/queue/DLQ", ack=AckMode.CLIENT_INDIVIDUAL)
    dead = c.receive(dlq, 2)
    assert dead is not None and dead.seq == 3
    assert dead.headers["originalDestination"] == Q
    assert "rejected" in dead.headers["deadLetterReason"]
    assert c.receive(sub, 0.2) is None


def test_credit_bounds_deliveries(adapter: ProtonAdapter, broker: RunningBroker) -> None:
    c = adapter.client("c1")
    for i in range(10):
        c.send(Q, b"x", seq=i)
    sub = c.subscribe(Q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=3)
    got = [c.receive(sub, 2) for _ in range(3)]
    assert all(got)
    assert c.receive(sub, 0.3) is None  # credit 3 used up, nothing settled
    conn = next(iter(broker.listener.connections))
    assert len(broker.call(broker.core.unacked, conn, next(iter(broker.listener.connections[conn]
                                                                  .links.by_sub)))) == 3
    c.ack(got[0])  # one settled: credit topped up by one
    d = c.receive(sub, 2)
    assert d is not None and d.seq == 3


def test_transaction_send_invisible_until_commit_and_rollback_redelivers(adapter: ProtonAdapter) -> None:
    c = adapter.client("c1")
    sub = c.subscribe(Q, ack=AckMode.CLIENT_INDIVIDUAL)
    c.begin("t1")
    c.send(Q, b"tx", seq=1, transaction="t1")
    assert c.receive(sub, 0.3) is None
    c.commit("t1")
    d = c.receive(sub, 2)
    assert d is not None and d.seq == 1
    c.begin("t2")
    c.ack(d, transaction="t2")
    c.abort("t2")
    again = c.receive(sub, 2)
    assert again is not None and again.seq == 1 and again.redelivered and again.delivery_count == 2
    c.begin("t3")
    c.ack(again, transaction="t3")
    c.commit("t3")
    assert c.receive(sub, 0.2) is None


def test_rolled_back_send_is_discarded(adapter: ProtonAdapter) -> None:
    c = adapter.client("c1")
    c.begin("t")
    c.send(Q, b"gone", seq=1, transaction="t")
    c.abort("t")
    c.send(Q, b"marker", seq=2)
    sub = c.subscribe(Q, ack=AckMode.AUTO)
    d = c.receive(sub, 2)
    assert d is not None and d.seq == 2


def test_unsettled_deliveries_return_when_the_connection_drops(adapter: ProtonAdapter) -> None:
    c1 = adapter.client("c1")
    c1.send(Q, b"m", seq=1)
    s1 = c1.subscribe(Q, ack=AckMode.CLIENT_INDIVIDUAL)
    assert c1.receive(s1, 2) is not None
    c1.crash()
    c2 = adapter.client("c2")
    s2 = c2.subscribe(Q, ack=AckMode.CLIENT_INDIVIDUAL)
    d = c2.receive(s2, 2)
    assert d is not None and d.seq == 1 and d.redelivered and d.delivery_count == 2


def test_topic_copies_to_every_link(adapter: ProtonAdapter) -> None:
    c = adapter.client("c1")
    a = c.subscribe("/topic/amqp.unit", ack=AckMode.AUTO)
    b = c.subscribe("/topic/amqp.unit", ack=AckMode.AUTO)
    c.send("/topic/amqp.unit", b"t", seq=1)
    da, db = c.receive(a, 2), c.receive(b, 2)
    assert da is not None and db is not None and da.seq == db.seq == 1


def test_second_settle_mode_confirms_the_outcome(adapter: ProtonAdapter) -> None:
    c = adapter.client("c1")
    c.send(Q, b"m", seq=1)
    sub = c.subscribe(Q, ack=AckMode.CLIENT_INDIVIDUAL, headers={"amqp-rcv-settle-mode": "second"})
    d = c.receive(sub, 2)
    assert d is not None
    c.ack(d, confirm=True)  # waits for the broker's settlement
    assert c.receive(sub, 0.2) is None


def test_plain_authentication(broker: RunningBroker) -> None:
    rec = Recorder("amqp-unit")
    good = ProtonAdapter(broker.url.replace("amqp://", "amqp://alice:secret@"), rec, timeout=3)
    good.client("c1").disconnect()
    bad = ProtonAdapter(broker.url.replace("amqp://", "amqp://alice:wrong@"), rec, timeout=3)
    with pytest.raises(AdapterError, match="unauthorized"):
        bad.client("c2")


def test_anonymous_refused_when_disabled() -> None:
    running = RunningBroker(users={"alice": "secret"}, allow_anonymous=False)
    try:
        rec = Recorder("amqp-unit")
        with pytest.raises(AdapterError):
            ProtonAdapter(running.url, rec, timeout=3).client("c1")
        ProtonAdapter(running.url.replace("amqp://", "amqp://alice:secret@"), rec, timeout=3).client("c2")
    finally:
        running.stop()


def test_durable_transfer_accepted_only_after_journal_sync() -> None:
    running = RunningBroker(journaling=True)
    try:
        c = ProtonAdapter(running.url, Recorder("amqp-unit"), timeout=0.5).client("c1")
        c.send(Q, b"volatile", seq=1, persistent=False)  # nothing journalled: answered at once
        with pytest.raises(Indeterminate):
            c.send(Q, b"durable", seq=2, persistent=True)  # waits for the sync that never comes
        assert running.sync_journal() >= 1
        # the late disposition arrives now; the next durable send completes after its own sync
        timer = threading.Timer(0.2, running.sync_journal)
        timer.start()
        assert c.send(Q, b"durable2", seq=3, persistent=True).confirmed
        timer.join()
    finally:
        running.stop()
