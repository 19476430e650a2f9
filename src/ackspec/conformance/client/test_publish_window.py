"""Solace publish window (seed 004): bound, blocking, cumulative acks, rejections, event modes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ackspec.adapters.cut import ClientFeature, ClientUnderTest, CutError
from ackspec.conformance.client.conftest import TIMEOUT, Env
from ackspec.conformance.client.proxies.stomp import Gate
from ackspec.conformance.markers import requirement
from ackspec.reference.faults import ConfirmPolicy, FaultRule

MakeCut = Callable[..., ClientUnderTest]


def windowed(make_cut: MakeCut, size: int, mode: str = "per-message") -> ClientUnderTest:
    cut = make_cut(publish_window_size=size, ack_event_mode=mode)
    cut.require(ClientFeature.PUBLISH_WINDOW)
    cut.set_publish_event_listener()
    return cut


CUMULATIVE = ("a cumulative broker acknowledgement is a STOMP receipt; an AMQP disposition settles only the "
              "deliveries it names")


def _windowed_held(make_cut: MakeCut, env: Env, size: int, mode: str = "per-message", *,
                   cumulative: bool = False) -> tuple[ClientUnderTest, str, Gate, str]:
    """A windowed client (see :func:`windowed`) with a producer whose SENDs to a fresh queue the proxy holds.

    ``cumulative``: the test releases one confirmation for several sends (STOMP receipts only).
    Returns the client, the queue, the gate and the producer.
    """
    cut = windowed(make_cut, size, mode)
    if cumulative:
        env.require_protocol("stomp", CUMULATIVE)
    q = env.queue()
    gate = env.proxy.hold("SEND", q)
    return cut, q, gate, cut.producer(cut.session())


@requirement("SOLACE-WINDOW-BOUND", "SOLACE-WINDOW-BLOCKS-WHEN-FULL", "SOLACE-WINDOW-ACK-REOPENS")
def test_window_bounds_in_flight_and_blocks_sender(make_cut: MakeCut, env: Env) -> None:
    cut, q, gate, p = _windowed_held(make_cut, env, 5)
    for i in range(5):
        cut.sync_send(p, q, b"w%d" % i)  # windowed sends return without waiting
    sixth = env.background(lambda: cut.sync_send(p, q, b"w5"))
    gate.wait_held(5, TIMEOUT)
    assert len(env.drain(q, 5)) == 5
    assert env.proxy.seen("SEND", q) == 5 and not sixth.done, "a sixth send went out with a window of 5"
    gate.release()  # one ack (for the oldest) reopens the window by one
    sixth.wait()
    assert env.proxy.wait_seen(6, "SEND", q) == 6


@requirement("SOLACE-WINDOW-ACK-CUMULATIVE", "SOLACE-ACK-EVENT-PER-MESSAGE")
def test_one_ack_covers_earlier_sends_reported_per_message(make_cut: MakeCut, env: Env) -> None:
    cut, q, gate, p = _windowed_held(make_cut, env, 10, cumulative=True)
    sends = [cut.sync_send(p, q, b"c%d" % i) for i in range(4)]
    held = gate.wait_held(4, TIMEOUT)
    gate.release(held[3].receipt_id)  # only the last: covers all four
    events = cut.events.wait_count("window-ack", 4, TIMEOUT)
    assert [e["last"] for e in events] == sends, "per-message mode: one event per message, in order"


@requirement("SOLACE-ACK-EVENT-WINDOWED")
def test_windowed_mode_one_event_per_broker_ack(make_cut: MakeCut, env: Env) -> None:
    cut = windowed(make_cut, 12, "windowed")
    env.require_protocol("stomp", CUMULATIVE)
    q = env.queue()
    # broker-wide rule: the broker looks batch policies up without a destination when it sends receipts
    env.broker.faults.add(FaultRule(confirm=ConfirmPolicy(mode="batch", window=12, timeout=60)))
    p = cut.producer(cut.session())
    sends = [cut.sync_send(p, q, b"b%d" % i) for i in range(8)]
    events = cut.events.wait_count("window-ack", 2, TIMEOUT)
    assert [e["last"] for e in events] == [sends[3], sends[7]], "a broker ack per third of the window"
    assert [x for e in events for x in e["sends"]] == sends


@requirement("SOLACE-WINDOW-REJECT-PER-MESSAGE", "SOLACE-ACK-EVENT-REJECT-SPLITS-RANGE",
             "SOLACE-WINDOW-REJECT-REOPENS-ONE")
def test_rejection_is_per_message_and_splits_the_range(make_cut: MakeCut, env: Env) -> None:
    cut, q, gate, p = _windowed_held(make_cut, env, 5, "windowed", cumulative=True)
    sends = [cut.sync_send(p, q, b"r%d" % i) for i in range(5)]
    held = gate.wait_held(5, TIMEOUT)
    sixth = env.background(lambda: cut.sync_send(p, q, b"r5"))
    gate.release(held[1].receipt_id)  # ack 1-2
    gate.reject(held[2].receipt_id)  # reject 3
    gate.release(held[4].receipt_id)  # ack 4-5
    sixth.wait()
    events = cut.events.wait_count(("window-ack", "window-reject"), 3, TIMEOUT)
    summary = [(e.kind, e.get("last") or e.get("send")) for e in events[:3]]
    assert summary == [("window-ack", sends[1]), ("window-reject", sends[2]), ("window-ack", sends[4])]
    assert list(events[0]["sends"]) == sends[:2] and list(events[2]["sends"]) == sends[3:5]


@requirement("SOLACE-WINDOW-REJECT-REOPENS-ONE")
def test_rejection_alone_reopens_the_window_by_one(make_cut: MakeCut, env: Env) -> None:
    cut, q, gate, p = _windowed_held(make_cut, env, 2)
    cut.sync_send(p, q, b"1")
    cut.sync_send(p, q, b"2")
    third = env.background(lambda: cut.sync_send(p, q, b"3"))
    fourth_started = gate.wait_held(2, TIMEOUT)
    assert len(fourth_started) == 2 and not third.done
    gate.reject(fourth_started[0].receipt_id)
    third.wait()
    assert env.proxy.wait_seen(3, "SEND", q) == 3
    fourth = env.background(lambda: cut.sync_send(p, q, b"4"))
    gate.wait_held(2, TIMEOUT)
    assert env.proxy.seen("SEND", q) == 3 and not fourth.done, "a rejection reopened more than one slot"
    gate.release_all()
    fourth.wait()


@requirement("SOLACE-WINDOW-SIZE-DOMAIN")
@pytest.mark.parametrize("size", [256, -1])
def test_window_size_outside_1_255_refused(make_cut: MakeCut, size: int) -> None:
    make_cut().require(ClientFeature.PUBLISH_WINDOW)
    with pytest.raises(CutError):
        make_cut(publish_window_size=size)
