"""ActiveMQ consumer acknowledgement behaviour (seed 003) and the JMS ack/session rules on the client side.

The acknowledgement types a client sends (DELIVERED=0, POISON=1, STANDARD=2, REDELIVERED=3,
INDIVIDUAL=4, UNMATCHED=5) are observed as ``ack`` events of the client under test; their
effect is observed at the broker (redelivery, dead-letter queue) on an observer connection.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ackspec.adapters.cut import ClientFeature, ClientUnderTest, CutError, NotApplicable
from ackspec.conformance.client.conftest import TIMEOUT, Env
from ackspec.conformance.config import hypothesis_seed, hypothesis_settings
from ackspec.conformance.markers import requirement
from ackspec.conformance.strategies import drawn

MakeCut = Callable[..., ClientUnderTest]
AUTO, CLIENT, DUPS_OK, INDIVIDUAL = 1, 2, 3, 4
DELIVERED, POISON, STANDARD, REDELIVERED, INDIVIDUAL_ACK, UNMATCHED = range(6)


def fill(make_cut: MakeCut, destination: str, count: int, **props: str) -> None:
    """Put ``count`` messages on ``destination`` with a separate, plain connection."""
    feeder = make_cut()
    p = feeder.producer(feeder.session())
    for i in range(count):
        feeder.sync_send(p, destination, b"%d" % i, persistent=True, properties=props or None)


def acks(cut: ClientUnderTest, kind: int | None = None) -> list[tuple[int, int]]:
    return [(e["ack_type"], len(e["messages"])) for e in cut.events.of("ack")
            if kind is None or e["ack_type"] == kind]


def ack_cut(make_cut: MakeCut, **options: object) -> ClientUnderTest:
    cut = make_cut(**options)
    cut.require(ClientFeature.ACK_MODES, ClientFeature.ACK_TYPES)
    return cut


def _consuming_filled_queue(make_cut: MakeCut, env: Env, count: int, *features: ClientFeature, ack_mode: int = AUTO,
                            transacted: bool = False, **options: object) -> tuple[ClientUnderTest, str, str, str]:
    """``count`` messages put on a fresh queue, then the client under test (opened with ``options``; it
    needs ack modes and types, and ``features``) with a consumer of that queue on a new session.

    Returns the client, the queue, the session and the consumer.
    """
    q = env.queue()
    fill(make_cut, q, count)
    cut = ack_cut(make_cut, **options)
    cut.require(*features)
    s = cut.session(transacted=transacted, ack_mode=ack_mode)
    return cut, q, s, cut.consumer(s, q)


@requirement("AMQ-ACKMODE-VALUES", "AMQ-ACKMODE-PER-SESSION")
def test_ack_mode_values(cut: ClientUnderTest) -> None:
    cut.require(ClientFeature.ACK_MODES)
    for mode in (1, 2, 3, 4):
        cut.session(ack_mode=mode)
    accepted = []
    for bad in (0, 5, -1):
        try:
            cut.session(ack_mode=bad)
        except CutError:
            continue
        accepted.append(bad)
    assert accepted == [], f"a non-transacted session was created with acknowledgement mode(s) {accepted}"
    cut.session(transacted=True, ack_mode=2)  # a transacted session ignores the mode


@requirement("AMQ-SYNC-RECEIVE-ACK-BEFORE-RETURN", "JMS-6.2.10-AUTO-ACK")
def test_auto_receive_acks_before_returning(make_cut: MakeCut, env: Env) -> None:
    cut, _q, _s, c = _consuming_filled_queue(make_cut, env, 2, ack_mode=AUTO)
    for expected in (1, 2):
        assert cut.receive(c, TIMEOUT) is not None
        assert acks(cut) == [(STANDARD, 1)] * expected, "receive() returned before the message was acked"


@requirement("AMQ-LISTENER-ACK-AFTER-RETURN")
def test_listener_message_acked_after_on_message(make_cut: MakeCut, env: Env) -> None:
    cut = ack_cut(make_cut)
    cut.require(ClientFeature.LISTENER)
    q = env.queue()
    cut.consumer(cut.session(ack_mode=AUTO), q, listener=True)
    fill(make_cut, q, 1)
    events = cut.events.wait_count("ack", 1, TIMEOUT)
    [message] = cut.events.of("message")
    assert events[0]["ack_type"] == STANDARD and events[0].index > message.index


@requirement("AMQ-LISTENER-EXCEPTION-REDELIVERED-ACK", "JMS-8.7-LISTENER-THROWS-AUTO-REDELIVERS")
def test_listener_exception_sends_redelivered_ack_and_message_returns(make_cut: MakeCut, env: Env) -> None:
    cut = ack_cut(make_cut)
    cut.require(ClientFeature.LISTENER)
    q = env.queue()
    cut.consumer(cut.session(ack_mode=AUTO), q, listener=True, fail_first=1)
    fill(make_cut, q, 1)
    messages = cut.events.wait_count("message", 2, TIMEOUT)
    assert [(m["redelivered"], m["delivery_count"]) for m in messages[:2]] == [(False, 1), (True, 2)]
    cut.events.wait_count("ack", 2, TIMEOUT)
    assert [a[0] for a in acks(cut)][:2] == [REDELIVERED, STANDARD]


@requirement("AMQ-RECEIVE-AND-LISTENER-EXCLUSIVE")
def test_receive_on_listener_consumer_is_illegal(cut: ClientUnderTest, env: Env) -> None:
    cut.require(ClientFeature.LISTENER)
    c = cut.consumer(cut.session(), env.queue(), listener=True)
    with pytest.raises(CutError) as info:
        cut.receive(c, 0.1)
    assert info.value.kind == "IllegalStateError"


@requirement("AMQ-OPTIMIZE-ACK-BATCH-FACTOR", "AMQ-DUPS-OK-QUEUE-AS-OPTIMIZED-AUTO")
@pytest.mark.parametrize(("mode", "optimize"), [(AUTO, True), (DUPS_OK, True)])
def test_lazy_acks_batch_at_065_prefetch(make_cut: MakeCut, env: Env, mode: int, optimize: bool) -> None:
    cut, _q, _s, c = _consuming_filled_queue(make_cut, env, 7, ack_mode=mode, prefetch=10,
                                             optimize_acknowledge=optimize, optimize_acknowledge_timeout=60)
    for _ in range(6):
        assert cut.receive(c, TIMEOUT) is not None
    assert acks(cut) == [], f"acked before 0.65 x prefetch messages were consumed: {acks(cut)} (type, count)"
    assert cut.receive(c, TIMEOUT) is not None
    assert acks(cut) == [(STANDARD, 7)]


@requirement("AMQ-DUPS-OK-TOPIC-BATCH")
def test_dups_ok_on_topic_batches_at_half_prefetch(make_cut: MakeCut, env: Env) -> None:
    t = env.topic()
    cut = ack_cut(make_cut, prefetch=10)
    c = cut.consumer(cut.session(ack_mode=DUPS_OK), t)
    fill(make_cut, t, 5)
    for _ in range(5):
        assert cut.receive(c, TIMEOUT) is not None
    assert acks(cut) == [(STANDARD, 5)]
    assert acks(cut, DELIVERED) == []


@requirement("AMQ-OPTIMIZE-ACK-TIMEOUT")
def test_optimized_acks_flushed_after_timeout(make_cut: MakeCut, env: Env) -> None:
    """Far below 0.65 x prefetch, consumed messages are acked once the timeout has passed since the
    previous ack. The rule does not say whether a timer flushes the batch alone
    (the reference client does) or the next consumption does (ActiveMQ's client checks the clock there):
    both are allowed; never acking below the batch size is not."""
    cut, _q, _s, c = _consuming_filled_queue(make_cut, env, 2, ack_mode=AUTO, prefetch=100,
                                             optimize_acknowledge=True, optimize_acknowledge_timeout=0.2)
    assert cut.receive(c, TIMEOUT) is not None
    cut.events.wait_count("ack", 1, 0.5)  # bounded: lets the 0.2 s timeout pass, or sees a timer's flush
    assert cut.receive(c, TIMEOUT) is not None
    cut.events.wait_for(lambda evs: sum(len(e["messages"]) for e in evs if e.kind == "ack") >= 2, TIMEOUT)
    observed = acks(cut)
    assert observed and {kind for kind, _ in observed} == {STANDARD}, f"acks after the timeout: {observed}"
    assert sum(count for _, count in observed) == 2, f"not every consumed message was acked: {observed}"


@requirement("AMQ-OPTIMIZE-ACK-AUTO-ONLY", "AMQ-TX-NO-OPTIMIZE-ACK")
@pytest.mark.parametrize("transacted", [False, True])
def test_optimize_ack_ignored_outside_auto(make_cut: MakeCut, env: Env, transacted: bool) -> None:
    cut, _q, s, c = _consuming_filled_queue(make_cut, env, 3, ack_mode=CLIENT, transacted=transacted, prefetch=4,
                                            optimize_acknowledge=True, optimize_acknowledge_timeout=0.05)
    last = None
    for _ in range(3):
        last = cut.receive(c, TIMEOUT)
        assert last is not None
    assert acks(cut, STANDARD) == [], "a STANDARD ack before acknowledge()/commit()"
    if transacted:
        cut.commit(s)
    else:
        assert last is not None
        cut.acknowledge(last.handle)
    assert acks(cut, STANDARD) == [(STANDARD, 3)]


@requirement("AMQ-OPTIMIZE-ACK-NEEDS-PREFETCH")
def test_optimize_ack_with_prefetch_zero_refused(make_cut: MakeCut) -> None:
    make_cut().require(ClientFeature.ACK_TYPES)
    try:
        make_cut(prefetch=0, optimize_acknowledge=True)
    except CutError:
        return
    raise AssertionError("a connection with optimizeAcknowledge on and prefetch 0 was opened without an error")


@requirement("AMQ-CLIENT-DELIVERED-ACK-HALF-PREFETCH")
def test_client_mode_delivered_ack_at_half_prefetch(make_cut: MakeCut, env: Env) -> None:
    cut, _q, _s, c = _consuming_filled_queue(make_cut, env, 6, ack_mode=CLIENT, prefetch=10)
    for _ in range(4):
        assert cut.receive(c, TIMEOUT) is not None
    assert acks(cut) == []
    message = cut.receive(c, TIMEOUT)
    assert acks(cut) == [(DELIVERED, 5)]
    assert message is not None
    cut.acknowledge(message.handle)
    assert acks(cut) == [(DELIVERED, 5), (STANDARD, 5)]


@requirement("AMQ-CLIENT-ACK-SESSION-WIDE", "JMS-6.2.10-CLIENT-ACK-CUMULATIVE")
def test_client_acknowledge_covers_every_consumer_of_the_session(make_cut: MakeCut, env: Env) -> None:
    qa, qb = env.queue("a"), env.queue("b")
    fill(make_cut, qa, 2)
    fill(make_cut, qb, 1)
    cut = ack_cut(make_cut)
    s = cut.session(ack_mode=CLIENT)
    ca, cb = cut.consumer(s, qa), cut.consumer(s, qb)
    assert cut.receive(ca, TIMEOUT) is not None
    first_b = cut.receive(cb, TIMEOUT)
    assert cut.receive(ca, TIMEOUT) is not None
    assert first_b is not None
    cut.acknowledge(first_b.handle)
    assert sorted(acks(cut)) == [(STANDARD, 1), (STANDARD, 2)]
    cut.close()
    assert env.contents(qa) == [] and env.contents(qb) == []


MAX_QUEUES, MAX_FILL = 3, 4
"""A session's consumers (one queue each) and the messages put on each queue, per example."""

_RECEIVE = st.tuples(st.just("receive"), st.integers(0, MAX_QUEUES - 1))
SESSION_STEPS = st.one_of(_RECEIVE, _RECEIVE, st.just(("acknowledge", 0)), st.just(("recover", 0)))
"""One step on a CLIENT_ACKNOWLEDGE session: receive on a consumer (drawn twice as often: acknowledges and
recovers only matter once several messages are out), acknowledge, or recover."""


def _filled_queues(env: Env, feeder: ClientUnderTest, producer: str, tag: str, fills: list[int]) -> list[str]:
    """One fresh queue per entry of ``fills``, holding that many persistent messages with bodies b"0", b"1", ..."""
    queues = [env.queue(f"{tag}.c{i}") for i in range(len(fills))]
    for q, count in zip(queues, fills, strict=True):
        for i in range(count):
            feeder.sync_send(producer, q, b"%d" % i, persistent=True)
    return queues


@dataclass
class _SessionModel:
    """What a CLIENT_ACKNOWLEDGE session must do: acknowledge() consumes everything the session delivered so
    far, on every consumer; recover() puts every delivered, unacknowledged message back in front of its
    queue, to be delivered again in order, after the last acknowledged one."""

    pending: list[list[bytes]]
    delivered: list[tuple[int, bytes]] = field(default_factory=list)
    handles: list[str] = field(default_factory=list)
    given_back: set[tuple[int, bytes]] = field(default_factory=set)  # recovered at least once: redelivered

    def returned(self, consumer: int) -> bool:
        """Whether the message the next receive of ``consumer`` gets was given back by a recover."""
        return (consumer, self.pending[consumer][0]) in self.given_back

    def receive(self, consumer: int) -> bytes:
        body = self.pending[consumer].pop(0)
        self.delivered.append((consumer, body))
        return body

    def acknowledge(self) -> None:
        self.delivered.clear()
        self.handles.clear()

    def recover(self) -> None:
        self.given_back.update(self.delivered)
        for consumer in range(len(self.pending)):
            mine = [body for c, body in self.delivered if c == consumer]
            self.pending[consumer][:0] = mine
        self.acknowledge()

    def left(self, consumer: int) -> list[bytes]:
        return sorted(self.pending[consumer] + [body for c, body in self.delivered if c == consumer])


@requirement("JMS-6.2.10-CLIENT-ACK-CUMULATIVE", "JMS-6.2.10-RECOVER-RESTARTS", "AMQ-CLIENT-ACK-SESSION-WIDE")
def test_client_ack_session_over_any_receives_acknowledges_and_recovers(make_cut: MakeCut, env: Env) -> None:
    """A CLIENT_ACKNOWLEDGE session (the catalogue's ack mode) with one to three consumers, and any
    sequence of receives, acknowledges and recovers: each receive gets the message the model says (a
    recover restarts after the last acknowledged message), and once the session closes, exactly what it
    delivered after its last acknowledge is back on the queues, with what it never delivered."""
    cut = make_cut()
    cut.require(ClientFeature.ACK_MODES, ClientFeature.RECOVER)
    feeder = make_cut()  # one plain connection fills every example's queues
    fp = feeder.producer(feeder.session())
    examples = itertools.count()

    @hypothesis_settings(examples=10)
    @hypothesis_seed()
    @given(ack_mode=drawn("JMS-6.2.10-CLIENT-ACK-CUMULATIVE", "ack_mode"),
           fills=st.lists(st.integers(1, MAX_FILL), min_size=1, max_size=MAX_QUEUES),
           steps=st.lists(SESSION_STEPS, min_size=1, max_size=12))
    def as_the_model(ack_mode: int, fills: list[int], steps: list[tuple[str, int]]) -> None:
        example = next(examples)
        queues = _filled_queues(env, feeder, fp, f"x{example}", fills)
        s = cut.session(ack_mode=ack_mode)
        consumers = [cut.consumer(s, q) for q in queues]
        model = _SessionModel([[b"%d" % i for i in range(count)] for count in fills])
        done: list[str] = []
        try:
            for step, index in steps:
                _session_step(cut, s, consumers, model, (step, index % len(fills)), done)
        finally:
            cut.close_session(s)
        for i, q in enumerate(queues):
            assert sorted(env.contents(q)) == model.left(i), (
                f"queue {i} after the session closed: steps {done} left the wrong messages unconsumed")

    as_the_model()


def _session_step(cut: ClientUnderTest, session: str, consumers: list[str], model: _SessionModel,
                  step: tuple[str, int], done: list[str]) -> None:
    """Apply one step to the client and the model; a receive with nothing left in the model is skipped
    (absence would cost a timeout and is not what these rules are about)."""
    kind, consumer = step
    if kind == "receive":
        if not model.pending[consumer]:
            return
        expected = model.receive(consumer)
        got = cut.receive(consumers[consumer], TIMEOUT)
        done.append(f"receive c{consumer}")
        assert got is not None and got.body == expected, (
            f"after {done}: consumer {consumer} got {got.body if got else None!r}, expected {expected!r}")
        model.handles.append(got.handle)
    elif kind == "acknowledge" and model.handles:
        cut.acknowledge(model.handles[-1])  # any delivered message's acknowledge() covers the whole session
        model.acknowledge()
        done.append("acknowledge")
    elif kind == "recover":
        cut.recover(session)
        model.recover()
        done.append("recover")


@requirement("AMQ-ACKMODE-INDIVIDUAL", "AMQ-ACKTYPE-INDIVIDUAL")
def test_individual_acknowledge_acks_one(make_cut: MakeCut, env: Env) -> None:
    cut, q, _s, c = _consuming_filled_queue(make_cut, env, 2, ack_mode=INDIVIDUAL)
    m0, m1 = cut.receive(c, TIMEOUT), cut.receive(c, TIMEOUT)
    assert m0 is not None and m1 is not None
    cut.acknowledge(m1.handle)
    assert acks(cut) == [(INDIVIDUAL_ACK, 1)]
    cut.close()
    assert env.contents(q) == [m0.body]


@requirement("JMS-3.6-ACKNOWLEDGE-IGNORED-WHEN-AUTOMATIC")
def test_acknowledge_ignored_in_auto_mode(make_cut: MakeCut, env: Env) -> None:
    cut, _q, _s, c = _consuming_filled_queue(make_cut, env, 1, ack_mode=AUTO)
    message = cut.receive(c, TIMEOUT)
    assert message is not None
    cut.acknowledge(message.handle)
    assert acks(cut) == [(STANDARD, 1)]


@requirement("AMQ-TX-COMMIT-ACKS-ALL", "JMS-6.2.7-CHAINED-TRANSACTIONS")
def test_commit_acks_everything_and_starts_next_transaction(make_cut: MakeCut, env: Env) -> None:
    cut, _q, s, c = _consuming_filled_queue(make_cut, env, 3, ClientFeature.TRANSACTIONS, transacted=True)
    for _ in range(3):
        assert cut.receive(c, TIMEOUT) is not None
    cut.commit(s)
    assert acks(cut) == [(STANDARD, 3)]
    p = cut.producer(s)
    out = env.queue("out")
    cut.sync_send(p, out, b"next")  # the next transaction exists without any begin
    cut.commit(s)
    assert env.contents(out) == [b"next"]


@requirement("AMQ-TX-ROLLBACK-INCREMENTS-COUNTER", "JMS-8.7-LISTENER-THROWS-TRANSACTED-NEXT", "AMQ-ACKTYPE-REDELIVERED")
def test_rollback_sends_redelivered_and_count_grows(make_cut: MakeCut, env: Env) -> None:
    cut, _q, s, c = _consuming_filled_queue(make_cut, env, 1, ClientFeature.TRANSACTIONS, transacted=True)
    first = cut.receive(c, TIMEOUT)
    assert first is not None and first.delivery_count == 1
    cut.rollback(s)
    # a STANDARD ack inside the transaction (ActiveMQ's client writes one as rollback starts) is undone by it
    kept = [(e["ack_type"], len(e["messages"])) for e in cut.events.of("ack")
            if not (e["ack_type"] == STANDARD and e.get("transaction"))]
    assert kept == [(REDELIVERED, 1)], f"acks: {acks(cut)}"
    again = cut.receive(c, TIMEOUT)
    assert again is not None and again.redelivered and again.delivery_count == 2
    cut.commit(s)


@requirement("AMQ-REDELIVERY-MAX")
def test_poison_ack_after_maximum_redeliveries(make_cut: MakeCut, env: Env) -> None:
    q = env.queue()
    fill(make_cut, q, 1)
    cut = ack_cut(make_cut, maximum_redeliveries=1)
    cut.require(ClientFeature.LISTENER)
    cut.consumer(cut.session(ack_mode=AUTO), q, listener=True, fail_first=99)
    cut.events.wait_for(lambda evs: any(e.kind == "ack" and e["ack_type"] == POISON for e in evs), TIMEOUT)
    kinds = [a[0] for a in acks(cut)]
    assert POISON in kinds, f"no poison ack after maximumRedeliveries: {kinds}"
    # up to the poison ack: what follows it depends on the broker (one that redelivers a poisoned
    # message gets it poisoned again, and the listener must not see it)
    # delivery 1 fails: REDELIVERED; delivery 2 (the one redelivery allowed) fails: POISON
    assert kinds[:kinds.index(POISON) + 1] == [REDELIVERED, POISON]
    assert len(cut.events.of("message")) == 2, "delivered to the application beyond 1 + maximumRedeliveries"


@requirement("AMQ-PREFETCH-LISTENER-MIN-ONE")
def test_listener_needs_prefetch_one(make_cut: MakeCut, env: Env) -> None:
    cut = make_cut(prefetch=0)
    cut.require(ClientFeature.PREFETCH, ClientFeature.LISTENER)
    try:
        cut.consumer(cut.session(), env.queue(), listener=True)
    except CutError:
        return
    raise AssertionError("a MessageListener was accepted at prefetch 0")


@requirement("AMQ-PREFETCH-ZERO-PULL")
def test_prefetch_zero_pulls_per_receive(make_cut: MakeCut, env: Env) -> None:
    q = env.queue()
    fill(make_cut, q, 2)
    cut = make_cut(prefetch=0)
    cut.require(ClientFeature.PREFETCH, ClientFeature.ACK_TYPES)
    c = cut.consumer(cut.session(), q)
    assert cut.receive(c, TIMEOUT) is not None
    assert cut.receive(c, TIMEOUT) is not None
    assert len(cut.events.of("pull")) == 2


@requirement("AMQ-ACKTYPE-UNMATCHED")
def test_selector_mismatch_acked_unmatched(make_cut: MakeCut, env: Env) -> None:
    t = env.topic()
    cut = ack_cut(make_cut)
    cut.require(ClientFeature.SELECTOR)
    c = cut.consumer(cut.session(), t, selector="colour = 'red'")
    feeder = make_cut()
    p = feeder.producer(feeder.session())
    feeder.sync_send(p, t, b"blue", properties={"colour": "blue"})
    feeder.sync_send(p, t, b"red", properties={"colour": "red"})
    message = cut.receive(c, TIMEOUT)
    assert message is not None and message.body == b"red"
    # the rule: the broker does not forward it and settles it itself; a client that gets it anyway (the
    # reference client filters locally) must ack it UNMATCHED, never consume it
    observed = acks(cut)
    assert [a for a in observed if a[0] != UNMATCHED] == [(STANDARD, 1)], f"acks: {observed}"
    assert all(count == 1 for _, count in observed)
    assert cut.receive(c, 0.2) is None, "the unmatched message was delivered to the application"


@requirement("JMS-6.2.10-RECOVER-RESTARTS", "JMS-6.2.10-RECOVER-MARKS-REDELIVERED",
             "JMS-8.7-LISTENER-THROWS-CLIENT-NEXT")
def test_recover_redelivers_unacknowledged(make_cut: MakeCut, env: Env) -> None:
    cut, _q, s, c = _consuming_filled_queue(make_cut, env, 2, ClientFeature.RECOVER, ack_mode=CLIENT)
    first = [cut.receive(c, TIMEOUT) for _ in range(2)]
    assert all(m is not None for m in first)
    cut.recover(s)
    assert acks(cut) == [(REDELIVERED, 2)]
    again = [cut.receive(c, TIMEOUT) for _ in range(2)]
    assert [(m.body, m.redelivered, m.delivery_count) for m in again if m] == [
        (m.body, True, 2) for m in first if m]


@requirement("JMS-6.1.8-ACK-AFTER-CLOSE-ILLEGAL", "JMS-6.2.15-CLOSE-DOES-NOT-ACK")
def test_acknowledge_after_close_is_illegal_and_close_does_not_ack(make_cut: MakeCut, env: Env) -> None:
    cut, q, s, c = _consuming_filled_queue(make_cut, env, 1, ack_mode=CLIENT)
    message = cut.receive(c, TIMEOUT)
    assert message is not None
    cut.close_session(s)
    with pytest.raises(CutError) as info:
        cut.acknowledge(message.handle)
    assert info.value.kind == "IllegalStateError"
    assert acks(cut, STANDARD) == []
    cut.close()
    assert env.contents(q) == [message.body]


@requirement("JMS-6.2.15-USE-AFTER-CLOSE-ILLEGAL", "JMS-6.2.15-DOUBLE-CLOSE-HARMLESS")
def test_closed_session_refuses_use_and_closes_twice(cut: ClientUnderTest, env: Env) -> None:
    cut.require(ClientFeature.ACK_MODES)
    s = cut.session()
    p = cut.producer(s)
    cut.close_session(s)
    cut.close_session(s)
    with pytest.raises(CutError) as info:
        cut.sync_send(p, env.queue(), b"x")
    assert info.value.kind == "IllegalStateError"


@requirement("JMS-6.2.13-SERIAL-LISTENER-DELIVERY")
def test_listeners_of_a_session_run_one_at_a_time(make_cut: MakeCut, env: Env) -> None:
    cut = make_cut()
    cut.require(ClientFeature.LISTENER)
    qa, qb = env.queue("a"), env.queue("b")
    s = cut.session()
    cut.consumer(s, qa, listener=True)
    cut.consumer(s, qb, listener=True)
    fill(make_cut, qa, 5)
    fill(make_cut, qb, 5)
    events = cut.events.wait_count("message", 10, TIMEOUT)
    assert len(events) == 10 and max(e["concurrent"] for e in events) == 1


# -- what the broker does with each acknowledgement type (the client under test is the witness that sent it) --

def _unique_bodies(make_cut: MakeCut, env: Env, destination: str, count: int) -> list[bytes]:
    """Put ``count`` messages with bodies unique to this test on ``destination``; returns the bodies."""
    bodies = [f"{env.tag}-{i}".encode() for i in range(count)]
    feeder = make_cut()
    p = feeder.producer(feeder.session())
    for body in bodies:
        feeder.sync_send(p, destination, body, persistent=True)
    return bodies


@requirement("AMQ-ACKTYPE-DELIVERED")
def test_delivered_acks_never_remove_messages(make_cut: MakeCut, env: Env) -> None:
    """A CLIENT_ACKNOWLEDGE consumer with any prefetch of the rule's domain receives any number of the
    messages on its queue (up to the prefetch, so every broker lets it hold them) and never acknowledges:
    whatever DELIVERED acks its client sent, once it closes the broker still holds every message."""
    cut = ack_cut(make_cut)
    cut.require(ClientFeature.PREFETCH)
    feeder = make_cut()
    fp = feeder.producer(feeder.session())
    examples = itertools.count()
    exercised: list[int] = []  # the DELIVERED acks of each example

    @hypothesis_settings()
    @hypothesis_seed()
    @given(prefetch=drawn("AMQ-ACKTYPE-DELIVERED", "prefetch", cap=PROPERTY_PREFETCH_CAP), data=st.data())
    def kept(prefetch: int, data: st.DataObject) -> None:
        count = data.draw(st.integers(1, prefetch + MAX_FILL), label="messages on the queue")
        receives = data.draw(st.integers(1, min(count, prefetch)), label="received, never acknowledged")
        q = env.queue(f"d{next(examples)}")
        bodies = [f"{env.tag}-{i}".encode() for i in range(count)]
        for body in bodies:
            feeder.sync_send(fp, q, body, persistent=True)
        before = len(cut.events.of("ack"))
        s = cut.session(ack_mode=CLIENT)
        c = cut.consumer(s, q, prefetch=prefetch)
        try:
            for i in range(receives):
                assert cut.receive(c, TIMEOUT) is not None, f"receive {i + 1} of {count} queued got nothing"
        finally:
            cut.close_session(s)  # never acknowledged: a DELIVERED ack is not a consumption
        sent = acks(cut)[before:]
        assert all(kind == DELIVERED for kind, _ in sent), f"the client sent acks other than DELIVERED: {sent}"
        exercised.append(len(sent))
        left = _held_once_returned(env, q, count)
        assert left == sorted(bodies), (
            f"after {receives} receives at prefetch {prefetch} and the DELIVERED acks {sent}, the broker holds "
            f"{len(left)} of the {count} messages: it removed {sorted(set(bodies) - set(left))}")

    kept()
    assert any(exercised), "no example got a DELIVERED ack from the client: the rule was not exercised"


@requirement("AMQ-ACKTYPE-STANDARD")
def test_standard_ack_removes_exactly_the_acked_messages(make_cut: MakeCut, env: Env) -> None:
    q = env.queue()
    bodies = _unique_bodies(make_cut, env, q, 3)
    cut = ack_cut(make_cut, prefetch=1)
    c = cut.consumer(cut.session(ack_mode=AUTO), q)
    for _ in range(2):
        assert cut.receive(c, TIMEOUT) is not None
    assert acks(cut) == [(STANDARD, 1), (STANDARD, 1)]
    cut.close()
    assert env.contents(q) == bodies[2:], "a STANDARD-acked message came back, or an unacked one was removed"


def _held_once_returned(env: Env, queue: str, expected: int) -> list[bytes]:
    """The bodies on ``queue`` once a closed session's messages are back, sorted (reading consumes them).

    A session close may return before the broker has put back what the session held (the reference client
    over AMQP ends its session without waiting for the broker's answer; the messages came back a moment
    later), so a read up to a fresh marker that finds fewer than ``expected`` waits, by receiving with
    the timeout, for the missing ones: a message a broker really removed costs one timeout, never a pass.
    """
    left = env.contents(queue)
    if len(left) < expected:
        left += [m.body for m in env.drain(queue, expected - len(left))]
    return sorted(left)


RANGE_STEPS = st.lists(st.sampled_from(["receive", "receive", "acknowledge"]), min_size=2, max_size=12)
"""A CLIENT session's steps: receive (twice as often: a range needs messages in it) or acknowledge."""


@requirement("AMQ-ACKTYPE-RANGE")
def test_one_ack_over_a_range_settles_exactly_the_messages_in_it(make_cut: MakeCut, env: Env) -> None:
    """A CLIENT_ACKNOWLEDGE consumer with any prefetch of the rule's domain, and any sequence of receives
    and acknowledges: each acknowledge sends one ack whose range covers exactly the messages delivered since
    the last one, and once the consumer closes the broker holds exactly the messages no range covered."""
    cut = ack_cut(make_cut)
    cut.require(ClientFeature.PREFETCH)
    feeder = make_cut()
    fp = feeder.producer(feeder.session())
    examples = itertools.count()

    @hypothesis_settings()
    @hypothesis_seed()
    @given(prefetch=drawn("AMQ-ACKTYPE-RANGE", "prefetch", cap=PROPERTY_PREFETCH_CAP),
           count=st.integers(1, 2 * MAX_FILL), steps=RANGE_STEPS)
    def settled(prefetch: int, count: int, steps: list[str]) -> None:
        q = env.queue(f"r{next(examples)}")
        bodies = [f"{env.tag}-{i}".encode() for i in range(count)]
        for body in bodies:
            feeder.sync_send(fp, q, body, persistent=True)
        s = cut.session(ack_mode=CLIENT)
        c = cut.consumer(s, q, prefetch=prefetch)
        ranges = _RangeModel(prefetch, bodies)
        try:
            for step in steps:
                ranges.apply(cut, c, step)
        finally:
            cut.close_session(s)
        left = _held_once_returned(env, q, len(ranges.left()))
        assert left == ranges.left(), (
            f"steps {ranges.done} at prefetch {prefetch}: the broker holds {left}, the acks covered "
            f"{ranges.acked}, so it should hold {ranges.left()}")

    settled()


@dataclass
class _RangeModel:
    """What one CLIENT consumer's acknowledges must settle: each covers what was received since the last."""

    prefetch: int
    bodies: list[bytes]
    received: int = 0
    since_ack: list[str] = field(default_factory=list)  # handles received since the last acknowledge
    acked: list[bytes] = field(default_factory=list)
    done: list[str] = field(default_factory=list)

    def apply(self, cut: ClientUnderTest, consumer: str, step: str) -> None:
        """One step; a receive with nothing left, or beyond what the prefetch lets the consumer hold
        unacknowledged (pull mode, 0, holds one), is skipped: a broker rightly withholds it."""
        if step == "receive" and self.received < len(self.bodies) and len(self.since_ack) < max(self.prefetch, 1):
            got = cut.receive(consumer, TIMEOUT)
            self.done.append("receive")
            expected = self.bodies[self.received]
            assert got is not None and got.body == expected, (
                f"after {self.done}: got {got.body if got else None!r}, expected {expected!r}")
            self.received += 1
            self.since_ack.append(got.handle)
        elif step == "acknowledge" and self.since_ack:
            before = len(acks(cut, STANDARD))
            cut.acknowledge(self.since_ack[-1])
            self.done.append("acknowledge")
            sent = acks(cut, STANDARD)[before:]
            assert sent == [(STANDARD, len(self.since_ack))], (
                f"after {self.done}: one acknowledge over {len(self.since_ack)} messages sent the acks {sent}")
            self.acked += self.bodies[self.received - len(self.since_ack):self.received]
            self.since_ack = []

    def left(self) -> list[bytes]:
        return sorted(set(self.bodies) - set(self.acked))


@requirement("AMQ-ACKTYPE-POISON")
def test_poison_ack_dead_letters_the_message(make_cut: MakeCut, env: Env) -> None:
    q = env.queue()
    [body] = _unique_bodies(make_cut, env, q, 1)
    cut = ack_cut(make_cut, maximum_redeliveries=0)
    cut.require(ClientFeature.LISTENER)
    cut.consumer(cut.session(ack_mode=AUTO), q, listener=True, fail_first=99)
    assert cut.events.wait_for(lambda evs: any(e.kind == "ack" and e["ack_type"] == POISON for e in evs), TIMEOUT), (
        "the client sent no POISON ack")
    cut.close()
    assert body in env.contents(env.dead_letter_queue), "the poisoned message is not on the dead-letter queue"
    assert env.contents(q) == [], "the poisoned message is still on its queue"
    assert len(cut.events.of("message")) == 1, "the poisoned message was delivered to its consumer again"


@requirement("AMQ-ACKMODE-INDIVIDUAL", "AMQ-ACKTYPE-INDIVIDUAL")
def test_individual_acknowledge_over_any_receives_and_acks(make_cut: MakeCut, env: Env) -> None:
    """An INDIVIDUAL_ACKNOWLEDGE session (the catalogue's mode) on any number of messages, any of the
    received ones acknowledged in any order: each acknowledge() sends one INDIVIDUAL ack for exactly that
    message, and once the session closes exactly the unacknowledged ones are back on the queue."""
    cut = make_cut()
    cut.require(ClientFeature.ACK_MODES, ClientFeature.ACK_TYPES)
    feeder = make_cut()
    fp = feeder.producer(feeder.session())
    examples = itertools.count()

    @hypothesis_settings()
    @hypothesis_seed()
    @given(ack_mode=drawn("AMQ-ACKMODE-INDIVIDUAL", "ack_mode"), data=st.data(),
           count=st.integers(1, MAX_FILL * 2))
    def exactly_one(ack_mode: int, data: st.DataObject, count: int) -> None:
        q = env.queue(f"i{next(examples)}")
        for i in range(count):
            feeder.sync_send(fp, q, b"%d" % i, persistent=True)
        s = cut.session(ack_mode=ack_mode)
        c = cut.consumer(s, q)
        before = len(cut.events.of("ack"))
        received = [cut.receive(c, TIMEOUT) for _ in range(count)]
        assert all(m is not None for m in received), "fewer messages than were put on the queue"
        chosen = data.draw(st.permutations(range(count)).flatmap(
            lambda order: st.integers(0, count).map(lambda k: order[:k])), label="acknowledged, in order")
        for i in chosen:
            message = received[i]
            assert message is not None
            cut.acknowledge(message.handle)
        cut.close_session(s)
        sent_acks = [(e["ack_type"], len(e["messages"])) for e in cut.events.of("ack")[before:]
                     if e["ack_type"] == INDIVIDUAL_ACK]
        assert sent_acks == [(INDIVIDUAL_ACK, 1)] * len(chosen), f"acks for {chosen}: {sent_acks}"
        left = sorted(b"%d" % i for i in range(count) if i not in chosen)
        assert sorted(env.contents(q)) == left, f"acknowledged {chosen} of {count}: the wrong ones are left"

    exactly_one()


@requirement("AMQ-TX-ROLLBACK-INCREMENTS-COUNTER")
def test_every_rollback_increments_the_counter(make_cut: MakeCut, env: Env) -> None:
    """Any number of rollbacks (one to four) of a transacted session holding any number of messages: after
    each, every message comes back with a delivery count one higher than before."""
    cut = make_cut()
    cut.require(ClientFeature.ACK_MODES, ClientFeature.TRANSACTIONS)
    feeder = make_cut()
    fp = feeder.producer(feeder.session())
    examples = itertools.count()

    @hypothesis_settings(examples=5)  # ActiveMQ's client waits its redelivery delay after each rollback
    @hypothesis_seed()
    @given(count=st.integers(1, MAX_FILL), rollbacks=st.integers(1, 4))
    def counted(count: int, rollbacks: int) -> None:
        q = env.queue(f"r{next(examples)}")
        for i in range(count):
            feeder.sync_send(fp, q, b"%d" % i, persistent=True)
        s = cut.session(transacted=True)
        c = cut.consumer(s, q)
        try:
            for attempt in range(1, rollbacks + 2):
                got = [cut.receive(c, TIMEOUT) for _ in range(count)]
                counts = {m.body: m.delivery_count for m in got if m is not None}
                assert counts == {b"%d" % i: attempt for i in range(count)}, (
                    f"delivery counts after {attempt - 1} rollbacks: {counts}")
                if attempt <= rollbacks:
                    cut.rollback(s)
            cut.commit(s)
        finally:
            cut.close_session(s)

    counted()


MAX_ROLLBACKS = 3
"""Rollbacks per example that reach the client: ActiveMQ's client waits its redelivery delay (a second) after
each, and stays below its default maximumRedeliveries (6), past which the message would be poisoned."""

PROPERTY_PREFETCH_CAP = 16
"""Largest prefetch drawn (the domain is unbounded): past the small bounds where off-by-one bugs hide, while
each example opens one connection with it through the client under test."""

TX_QUEUES = 2
"""Consumers of a transacted session per example: two show that a rollback recovers every consumer's
messages, and fewer spread the receives less thinly than the CLIENT_ACKNOWLEDGE property's three."""

_TX_RECEIVE = st.tuples(st.just("receive"), st.integers(0, TX_QUEUES - 1))
TX_STEPS = st.one_of(_TX_RECEIVE, _TX_RECEIVE, st.just(("commit", 0)), st.just(("rollback", 0)))
"""One step on a transacted session: receive on a consumer (twice as often), commit, or roll back."""


@requirement("JMS-6.2.7-ROLLBACK-REDELIVERS")
def test_rollback_redelivers_oldest_first_over_any_prefetch(make_cut: MakeCut, env: Env) -> None:
    """A transacted session with one to three consumers, any prefetch of the rule's domain, and any sequence
    of receives, commits and rollbacks: each receive gets the message the model says (a rollback recovers
    what the transaction received, oldest first, ahead of whatever the consumer prefetched, 6.2.7 with
    6.2.10), marked redelivered exactly when a rollback gave it back, and once the session closes exactly
    what was not committed is back on the queues."""
    cut = make_cut()
    cut.require(ClientFeature.ACK_MODES, ClientFeature.TRANSACTIONS)
    own_prefetch = _takes_a_prefetch_per_consumer(cut, env)
    feeder = make_cut()
    fp = feeder.producer(feeder.session())
    examples = itertools.count()

    @hypothesis_settings(examples=6)  # ActiveMQ's client waits its redelivery delay after each rollback
    @hypothesis_seed()
    @given(prefetch=drawn("JMS-6.2.7-ROLLBACK-REDELIVERS", "prefetch", cap=PROPERTY_PREFETCH_CAP),
           fills=st.lists(st.integers(1, MAX_FILL), min_size=1, max_size=TX_QUEUES),
           steps=st.lists(TX_STEPS, min_size=3, max_size=12))
    def as_the_model(prefetch: int, fills: list[int], steps: list[tuple[str, int]]) -> None:
        example = next(examples)
        queues = _filled_queues(env, feeder, fp, f"tx{example}", fills)
        s = cut.session(transacted=True)
        consumers = [cut.consumer(s, q, prefetch=prefetch if own_prefetch else None) for q in queues]
        model = _SessionModel([[b"%d" % i for i in range(count)] for count in fills])
        done: list[str] = [f"prefetch {prefetch}" if own_prefetch else "the client's own prefetch"]
        held = prefetch if own_prefetch else sum(fills)  # a connection-wide prefetch: the library's default
        try:
            for step, index in steps:
                _transacted_step(cut, s, consumers, model, (step, index % len(fills)), done, held)
        finally:
            cut.close_session(s)
        for i, q in enumerate(queues):
            assert _held_once_returned(env, q, len(model.left(i))) == model.left(i), (
                f"queue {i} after the session closed: steps {done} left the wrong messages uncommitted")

    as_the_model()


def _takes_a_prefetch_per_consumer(cut: ClientUnderTest, env: Env) -> bool:
    """Whether the client takes a consumer's own prefetch (ActiveMQ's and the reference client do; Qpid JMS
    takes only the connection's, which the properties then leave at the library's default rather than open
    a client, a JVM for the Java shim, per drawn value)."""
    if ClientFeature.PREFETCH not in cut.features:
        return False
    s = cut.session()
    try:
        cut.consumer(s, env.queue("probe"), prefetch=1)
    except NotApplicable:
        return False
    finally:
        cut.close_session(s)
    return True


def _transacted_step(cut: ClientUnderTest, session: str, consumers: list[str], model: _SessionModel,
                     step: tuple[str, int], done: list[str], prefetch: int) -> None:
    """Apply one step to the client and the model (commit is the model's acknowledge, rollback its recover).
    Skipped: a receive with nothing left in the model, one beyond the ``prefetch`` messages a consumer may
    hold uncommitted (a broker counting them against the prefetch rightly withholds the next; pull mode, 0,
    may hold one: the reference client pulls over STOMP with a window of one), and rollbacks past
    :data:`MAX_ROLLBACKS`."""
    kind, consumer = step
    if kind == "receive":
        held = sum(1 for c, _ in model.delivered if c == consumer)
        if not model.pending[consumer] or max(prefetch, 1) <= held:
            return
        redelivered = model.returned(consumer)
        expected = model.receive(consumer)
        got = cut.receive(consumers[consumer], TIMEOUT)
        done.append(f"receive c{consumer}")
        assert got is not None and (got.body, got.redelivered) == (expected, redelivered), (
            f"after {done}: consumer {consumer} got {(got.body, got.redelivered) if got else None!r}, "
            f"expected {(expected, redelivered)!r} (body, redelivered)")
    elif kind == "commit":
        cut.commit(session)
        model.acknowledge()
        done.append("commit")
    elif kind == "rollback" and done.count("rollback") < MAX_ROLLBACKS:
        cut.rollback(session)
        model.recover()
        done.append("rollback")


def _held_history(cut: ClientUnderTest) -> list[tuple[int, int]]:
    """For each message the broker pushed: (messages the consumer held then, messages the DELIVERED acks written
    before it covered; ActiveMQ's each cover the range delivered since the last). An ack written before a
    dispatch arrived may not have reached the broker when it sent it, so the pairs can only overstate the
    extension the broker had granted, never understate it. The history ends at the first ack of another
    type: the application acknowledged nothing, so that is the close."""
    held, covered, history = 0, set[str](), []
    for event in cut.events.of("ack", "dispatch"):
        if event.kind == "dispatch":
            held += 1
            history.append((held, len(covered)))
        elif event["ack_type"] == DELIVERED:
            covered.update(event["messages"])
        else:
            break
    return history


@requirement("AMQ-PREFETCH-HELD-BOUND")
def test_consumer_holds_at_most_prefetch_plus_its_delivered_extension(make_cut: MakeCut, env: Env) -> None:
    prefetch = 10
    cut, _q, _s, c = _consuming_filled_queue(make_cut, env, 3 * prefetch, ClientFeature.DISPATCH_EVENTS,
                                             ack_mode=CLIENT, prefetch=prefetch)
    received = 0
    while received < 2 * prefetch and cut.receive(c, TIMEOUT) is not None:  # never acknowledged
        received += 1
    cut.close()  # every dispatch the client read is an event by now: the history is complete
    history = _held_history(cut)
    assert received >= prefetch, f"only {received} of 30 queued messages reached a consumer with prefetch {prefetch}"
    assert len(history) >= received, "fewer dispatch events than messages received"
    assert any(covered for _, covered in history), "no DELIVERED ack was written: the extension was not exercised"
    over = [(held, covered) for held, covered in history if held > prefetch + covered]
    assert not over, f"held more than prefetch {prefetch} + the DELIVERED acks' count: (held, covered) {over[:3]}"
    cap = prefetch + prefetch // 2
    beyond = [(held, covered) for held, covered in history if held > cap]
    assert not beyond, (f"held {beyond[0][0]} unacknowledged messages with prefetch {prefetch} once DELIVERED acks "
                        f"covered {beyond[0][1]}: the extension went beyond half the prefetch ({cap}); in all "
                        f"{history[-1][0]} pushed, {received} received, none acknowledged")
