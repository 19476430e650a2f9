"""The stomp.py driver against the in-process reference broker: verbs, history, dialect, failures.

Waits are on receipts and messages with timeouts; absence is shown with a sentinel behind it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ackspec.adapters.base import AckMode, AdapterError, Capability, ConnectionLost
from ackspec.adapters.reference import REFERENCE_SETTINGS, ReferenceAdapter
from ackspec.adapters.settings import TargetSettings
from ackspec.adapters.stomp_py import StompPyAdapter, StompPyClient
from ackspec.history import Recorder
from ackspec.history.record import Op, RecordType
from ackspec.reference.server import EmbeddedBroker

TIMEOUT = 5.0


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture
def recorder(tmp_path: Path) -> Recorder:
    return Recorder("test-run", target="reference", path=tmp_path / "history.jsonl")


def driver(broker: EmbeddedBroker, recorder: Recorder, **changes: object) -> StompPyAdapter:
    settings = replace(REFERENCE_SETTINGS, **changes)  # type: ignore[arg-type]
    return StompPyAdapter(broker.stomp_url, recorder, timeout=TIMEOUT, settings=settings)


def test_send_receive_ack_are_recorded_with_seq_and_producer(broker: EmbeddedBroker, recorder: Recorder) -> None:
    a = driver(broker, recorder)
    c = a.client("p")
    sub = c.subscribe("/queue/drv.basic", ack=AckMode.CLIENT_INDIVIDUAL)
    result = c.send("/queue/drv.basic", b"hello\x00world", seq=7, producer="p1", persistent=True)
    assert result.confirmed
    d = c.receive(sub)
    assert d is not None and (d.body, d.seq, d.producer) == (b"hello\x00world", 7, "p1")
    assert d.redelivered is False and d.delivery_count == 1 and d.ack_id
    c.ack(d)
    c.disconnect()
    ops = [(r.op, r.type) for r in recorder.records]
    assert (Op.SEND, RecordType.OK) in ops and (Op.ACK, RecordType.OK) in ops
    received = [r for r in recorder.records if r.op is Op.RECEIVE and r.type is RecordType.OK and r.seq == 7]
    assert received and received[0].producer == "p1" and received[0].subscription == sub


def test_nack_redelivers_with_flag_and_count(broker: EmbeddedBroker, recorder: Recorder) -> None:
    c = driver(broker, recorder).client("c")
    sub = c.subscribe("/queue/drv.nack", ack=AckMode.CLIENT_INDIVIDUAL)
    c.send("/queue/drv.nack", b"x", seq=0)
    first = c.receive(sub)
    assert first is not None
    c.nack(first)
    again = c.receive(sub)
    assert again is not None and again.seq == 0
    assert again.redelivered is True and again.delivery_count == 2
    c.ack(again)
    c.disconnect()


def test_transaction_sends_wait_for_commit(broker: EmbeddedBroker, recorder: Recorder) -> None:
    c = driver(broker, recorder).client("c")
    sub = c.subscribe("/queue/drv.tx")
    tx = c.begin("t1")
    c.send("/queue/drv.tx", b"in-tx", seq=1, transaction=tx, confirm=False)
    c.send("/queue/drv.tx", b"sentinel", seq=2)
    d = c.receive(sub)
    assert d is not None and d.seq == 2  # the transactional send is not visible yet
    c.commit(tx)
    d = c.receive(sub)
    assert d is not None and d.seq == 1
    unconfirmed = [r for r in recorder.records if r.op is Op.SEND and r.seq == 1 and r.type is not RecordType.INVOKE]
    assert unconfirmed[0].type is RecordType.INFO  # an unconfirmed send is indeterminate in the history
    c.disconnect()


def test_prefetch_header_only_when_the_profile_claims_prefetch(broker: EmbeddedBroker, recorder: Recorder) -> None:
    for caps, expect_bounded in ((REFERENCE_SETTINGS.capabilities, True),
                                 (REFERENCE_SETTINGS.capabilities - {Capability.PREFETCH}, False)):
        q = f"/queue/drv.prefetch.{expect_bounded}"
        c = driver(broker, recorder, capabilities=caps).client("c")
        sub = c.subscribe(q, ack=AckMode.CLIENT_INDIVIDUAL, prefetch=1)
        for i in range(3):
            c.send(q, b"m", seq=i)
        first = c.receive(sub)
        assert first is not None
        c.send(q, b"sentinel", headers={"x-last": "1"})
        if expect_bounded:  # nothing beyond the one unacknowledged message until it is acked
            assert c.receive(sub, 0.3) is None
            c.ack(first)
            nxt = c.receive(sub)
            assert nxt is not None and nxt.seq == 1
        else:
            seen = []
            while (d := c.receive(sub)) is not None and d.headers.get("x-last") != "1":
                seen.append(d.seq)
            assert seen == [1, 2]
        c.disconnect()


def test_delivery_count_headers_are_normalised() -> None:
    """No socket needed: a client shell with the settings of a profile that claims the redelivered flag."""
    fake = object.__new__(StompPyClient)
    fake.settings = TargetSettings(capabilities=REFERENCE_SETTINGS.capabilities)
    rabbit = fake.to_delivery("s", {"x-delivery-count": "2", "ackspec-seq": "5"}, b"")
    assert (rabbit.seq, rabbit.delivery_count, rabbit.redelivered) == (5, 3, True)
    amq = fake.to_delivery("s", {"message-id": "m1"}, b"")
    assert amq.redelivered is False and amq.delivery_count is None  # flag sent only when true (ActiveMQ)
    assert fake.to_delivery("s", {"ackspec-seq": "oops"}, b"").seq is None


def test_error_for_a_receipted_frame_fails_the_operation(broker: EmbeddedBroker, recorder: Recorder) -> None:
    c = driver(broker, recorder).client("c")
    sub = c.subscribe("/queue/drv.err", ack=AckMode.CLIENT_INDIVIDUAL)
    c.send("/queue/drv.err", b"x", seq=0)
    d = c.receive(sub)
    assert d is not None
    c.ack(d)
    with pytest.raises(AdapterError, match="ERROR for receipt"):
        c.ack(d)  # already acknowledged: the broker answers ERROR and closes
    with pytest.raises(ConnectionLost):
        c.send("/queue/drv.err", b"y")
    failed = [r for r in recorder.records if r.op is Op.ACK and r.type is RecordType.FAIL]
    assert failed and "ERROR" in (failed[0].error or "")


def test_crash_returns_unacked_messages(broker: EmbeddedBroker, recorder: Recorder) -> None:
    a = driver(broker, recorder)
    c1 = a.client("c1")
    sub = c1.subscribe("/queue/drv.crash", ack=AckMode.CLIENT_INDIVIDUAL)
    c1.send("/queue/drv.crash", b"x", seq=0)
    assert c1.receive(sub) is not None
    c1.crash()
    c2 = a.client("c2")
    sub2 = c2.subscribe("/queue/drv.crash", ack=AckMode.AUTO)
    back = c2.receive(sub2)
    assert back is not None and back.seq == 0 and back.redelivered is True
    assert any(r.op is Op.CRASH for r in recorder.records)
    c2.disconnect()


def test_nothing_listening_is_a_clear_error(recorder: Recorder) -> None:
    a = StompPyAdapter("stomp://127.0.0.1:1", recorder, timeout=1.0)
    with pytest.raises(AdapterError, match=r"cannot connect to stomp://127\.0\.0\.1:1"):
        a.client("c")


def test_reference_adapter_restarts_and_keeps_persistent_messages(recorder: Recorder) -> None:
    with EmbeddedBroker() as b:
        a = ReferenceAdapter("reference://embedded", recorder, timeout=TIMEOUT, broker=b)
        assert {Capability.BROKER_RESTART, Capability.FAULT_INJECTION} <= a.capabilities
        c = a.client("p")
        c.send("/queue/drv.restart", b"kept", seq=0, persistent=True)
        a.restart_broker(crash=True)  # a power loss keeps what the receipt promised
        c2 = a.client("after")
        sub = c2.subscribe("/queue/drv.restart")
        d = c2.receive(sub)
        assert d is not None and d.body == b"kept"
        c2.disconnect()


def test_reference_adapter_needs_a_broker(recorder: Recorder) -> None:
    with pytest.raises(ValueError, match="needs a running EmbeddedBroker"):
        ReferenceAdapter("reference://embedded", recorder)


def test_durable_subscription_verbs_are_recorded_and_need_a_client_id(broker: EmbeddedBroker,
                                                                       recorder: Recorder) -> None:
    a = driver(broker, recorder)
    t = "/topic/drv.durable"
    c = a.client("d", client_id="drv-client")
    c.unsubscribe(c.subscribe(t, durable="drv-sub"))
    assert broker.core.durable_depth(("drv-client", "drv-sub")) == 0  # kept after its consumer closed
    c.remove_durable(t, "drv-sub")
    assert broker.core.durable_depth(("drv-client", "drv-sub")) is None
    subscribes = [r for r in recorder.records if r.op is Op.SUBSCRIBE and r.type is RecordType.INVOKE]
    removed = [r for r in recorder.records if r.op is Op.UNSUBSCRIBE and r.value == {"durable": "drv-sub",
                                                                                     "removed": True}]
    assert subscribes[-1].value == {"durable": "drv-sub"} and removed
    anonymous = a.client("no-id")
    with pytest.raises(AdapterError, match="client-id"):
        anonymous.subscribe(t, durable="drv-sub")
