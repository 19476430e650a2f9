"""Solace publish window (seed 004): bound, blocking, cumulative acks, rejections, event modes."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ackspec.adapters.cut import ClientFeature, ClientUnderTest, CutError
from ackspec.conformance.client.conftest import TIMEOUT, Env
from ackspec.conformance.client.proxies.stomp import Gate
from ackspec.conformance.config import hypothesis_seed, hypothesis_settings
from ackspec.conformance.markers import requirement
from ackspec.conformance.strategies import drawn
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


MAX_WINDOW = 6
"""Cap on the window drawn from SOLACE-WINDOW-BOUND (1..255): a run fills it a few times per example, and
the rules are the same at 6 as at 255 (off-by-one bugs sit at the edges of small windows)."""

WINDOW_STEPS = st.one_of(st.just(("send", 0)), st.just(("send", 0)), st.tuples(st.just("ack"), st.integers(0, 255)),
                         st.tuples(st.just("reject"), st.integers(0, 255)))
"""One step: a send, a broker acknowledgement of the k-th oldest unacknowledged send (cumulative: it covers
every earlier one), or a rejection of the k-th oldest (k taken modulo what is outstanding)."""


@dataclass
class _Window:
    """The client under test's publish window as the rules say it must behave (per-message events)."""

    size: int
    outstanding: list[str] = field(default_factory=list)  # unacknowledged sends, oldest first
    events: list[tuple[str, str]] = field(default_factory=list)  # (window-ack | window-reject, send)

    def ack(self, k: int) -> None:
        self.events += [("window-ack", send) for send in self.outstanding[:k + 1]]
        del self.outstanding[:k + 1]

    def reject(self, k: int) -> None:
        self.events.append(("window-reject", self.outstanding.pop(k)))


@requirement("SOLACE-WINDOW-BOUND", "SOLACE-WINDOW-ACK-CUMULATIVE", "SOLACE-WINDOW-ACK-REOPENS",
             "SOLACE-WINDOW-REJECT-REOPENS-ONE")
def test_window_over_any_sends_acks_and_rejections(make_cut: MakeCut, env: Env) -> None:
    """Any window size (the catalogue's domain, capped) and any sequence of sends, cumulative broker
    acknowledgements and rejections: never more sends out than the window, a send into a full window
    waits until an acknowledgement reopens it by the sends it covers or a rejection by one, and every
    outcome is reported once per message, in order."""
    examples = itertools.count()

    @hypothesis_settings()
    @hypothesis_seed()
    @given(size=drawn("SOLACE-WINDOW-BOUND", "window_size", cap=MAX_WINDOW),
           steps=st.lists(WINDOW_STEPS, min_size=1, max_size=16))
    def as_the_model(size: int, steps: list[tuple[str, int]]) -> None:
        cut = windowed(make_cut, size)
        env.require_protocol("stomp", CUMULATIVE)
        q = env.queue(f"x{next(examples)}")
        gate = env.proxy.hold("SEND", q)
        p = cut.producer(cut.session())
        try:
            _run_window(cut, env, q, gate, p, _Window(size), steps)
        finally:
            gate.close()
            cut.close()

    as_the_model()


def _run_window(cut: ClientUnderTest, env: Env, q: str, gate: Gate, p: str, model: _Window,
                steps: list[tuple[str, int]]) -> None:
    receipts: dict[str, str] = {}  # outstanding send -> its held confirmation
    covered: set[str] = set()  # held confirmations of sends an acknowledgement of a later one covered
    sent = 0
    blocked = None
    for kind, drawn_k in steps:
        if kind == "send" and blocked is None:
            call = env.background(functools.partial(cut.sync_send, p, q, b"w%d" % sent))
            if len(model.outstanding) == model.size:
                assert env.proxy.seen("SEND", q) == sent and not call.done, (
                    f"a send went out with {model.size} of {model.size} in flight (steps {steps})")
                blocked = call
                continue
            assert call.returned_within(TIMEOUT), f"a send waited with room in the window (steps {steps})"
            sent = _sent(env, q, gate, model, (receipts, covered), call.wait(), sent)
        elif kind in ("ack", "reject") and model.outstanding:
            k = drawn_k % len(model.outstanding)
            if kind == "ack":  # covers the earlier ones too: their confirmations stay held, never to be answered
                covered.update(receipts.pop(earlier) for earlier in model.outstanding[:k])
            receipt = receipts.pop(model.outstanding[k])
            (gate.release if kind == "ack" else gate.reject)(receipt)
            (model.ack if kind == "ack" else model.reject)(k)
            if blocked is not None:  # the window has room again: the waiting send goes out
                assert blocked.returned_within(TIMEOUT), f"a {kind} did not reopen the window (steps {steps})"
                sent, blocked = _sent(env, q, gate, model, (receipts, covered), blocked.wait(), sent), None
            events = cut.events.wait_count(("window-ack", "window-reject"), len(model.events), TIMEOUT)
            got = [(e.kind, e.get("last") or e.get("send")) for e in events]
            assert got == model.events, f"window outcomes reported {got}, expected {model.events} (steps {steps})"


def _sent(env: Env, q: str, gate: Gate, model: _Window, held_for: tuple[dict[str, str], set[str]], send: str,
          sent: int) -> int:
    """Note one send that went out: the broker has it, and its confirmation is the one the gate holds that
    no earlier send has (those a cumulative acknowledgement covered stay held, unanswered)."""
    assert env.proxy.wait_seen(sent + 1, "SEND", q) == sent + 1, "a send that returned never reached the broker"
    receipts, covered = held_for
    known = set(receipts.values()) | covered
    held = gate.wait_held(len(known) + 1, TIMEOUT)
    new = [h.receipt_id for h in held if h.receipt_id not in known]
    assert len(new) == 1, f"the broker answered {len(new)} new SENDs for one send"
    receipts[send] = new[0]
    model.outstanding.append(send)
    return sent + 1
