"""Jakarta Messaging 3.1 sections 7.2 and 7.3 on the client side.

Receipt gates of the confirmation proxy make every rule deterministic: a test holds the
broker's confirmations, looks at what the client did meanwhile, then releases or
rejects them in the order it wants.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ackspec.adapters.cut import ClientFeature, ClientUnderTest, CutError
from ackspec.conformance.client.conftest import STILL_WAITING_FOR, TIMEOUT, Background, Env
from ackspec.conformance.client.proxies.stomp import Answered, Gate
from ackspec.conformance.config import hypothesis_seed, hypothesis_settings
from ackspec.conformance.markers import requirement
from ackspec.conformance.strategies import drawn, enumerated

MakeCut = Callable[..., ClientUnderTest]


def callbacks(cut: ClientUnderTest, count: int) -> list[tuple[str, str]]:
    events = cut.events.wait_count(("completion", "exception"), count, TIMEOUT)
    return [(e.kind, e["send"]) for e in events]


SESSION, CONTEXT = "session", "context"
"""What a producer belongs to: a session (classic API) or a JMSContext (simplified API; feature ``context``)."""


def _held_producer(cut: ClientUnderTest, env: Env, *features: ClientFeature, transacted: bool = False,
                   queue: str = "q", owner: str = SESSION) -> tuple[str, Gate, str, str]:
    """The client under test (requiring ``features``) with a producer of a new session or context (``owner``) whose
    SENDs to a fresh queue reach the broker but whose confirmations the proxy holds. Returns the queue, the gate,
    the session (or context) and the producer.
    """
    cut.require(*features, *([ClientFeature.CONTEXT] if owner == CONTEXT else []))
    q = env.queue(queue)
    gate = env.proxy.hold("SEND", q)
    s = _opened(cut, owner, transacted=transacted)
    return q, gate, s, cut.producer(s)


def _opened(cut: ClientUnderTest, owner: str, *, transacted: bool = False) -> str:
    """A new session or JMSContext (``owner``) of the client: its handle, which producers and commits take."""
    return cut.context(transacted=transacted) if owner == CONTEXT else cut.session(transacted=transacted)


@dataclass(frozen=True, slots=True)
class IncompleteSends:
    """Asynchronous sends the broker has, whose confirmations the proxy holds: incomplete until released."""

    queue: str
    gate: Gate
    session: str  # or the context, when the producer is a context's
    producer: str
    sends: list[str]


def _incomplete_sends(cut: ClientUnderTest, env: Env, count: int, *features: ClientFeature,
                      transacted: bool = False, on_callback: str | None = None,
                      owner: str = SESSION) -> IncompleteSends:
    """``count`` asynchronous sends of ``b"x"`` (the client needs ASYNC_SEND and ``features``) by a producer of a
    session or context (``owner``), all held; their callbacks perform ``on_callback``."""
    q, gate, s, p = _held_producer(cut, env, ClientFeature.ASYNC_SEND, *features, transacted=transacted, owner=owner)
    sends = [cut.async_send(p, q, b"x", on_callback=on_callback) for _ in range(count)]
    gate.wait_held(count, TIMEOUT)
    return IncompleteSends(q, gate, s, p, sends)


@requirement("JMS-7.2-SYNC-SEND-CONFIRMED")
def test_sync_send_returns_only_after_confirmation(cut: ClientUnderTest, env: Env) -> None:
    q, gate, _s, p = _held_producer(cut, env, ClientFeature.SYNC_SEND_CONFIRMED)
    call = env.background(lambda: cut.sync_send(p, q, b"one", persistent=True))
    assert gate.wait_held(1, TIMEOUT), "the broker should have answered the SEND"
    assert [m.body for m in env.drain(q, 1)] == [b"one"], "the broker has the message..."
    assert not call.done, "...but the send returned before its confirmation"
    gate.release()
    call.wait()


@requirement("JMS-7.3-ASYNC-COMPLETION", "JMS-7.3.1-COMPLETION-CONFIDENCE", "JMS-7.3.1-NO-EARLY-COMPLETION",
             "JMS-7.3.3-PIPELINING")
def test_completion_only_after_confirmation_and_sends_pipeline(cut: ClientUnderTest, env: Env) -> None:
    q, gate, _s, p = _held_producer(cut, env, ClientFeature.ASYNC_SEND)
    sends = [cut.async_send(p, q, f"m{i}".encode()) for i in range(3)]  # none waits for the previous
    assert len(gate.wait_held(3, TIMEOUT)) == 3
    assert [m.body for m in env.drain(q, 3)] == [b"m0", b"m1", b"m2"]
    assert cut.events.of("completion", "exception") == [], "onCompletion before the broker confirmed"
    gate.release_all()
    assert callbacks(cut, 3) == [("completion", s_) for s_ in sends]


@requirement("JMS-7.3.2-EXCEPTION-IN-CALLER", "JMS-7.3.2-NO-CALLBACK-AFTER-THROW")
def test_error_found_in_send_is_raised_and_never_called_back(cut: ClientUnderTest, env: Env) -> None:
    cut.require(ClientFeature.ASYNC_SEND)
    s = cut.session()
    p = cut.producer(s)
    try:
        bad = cut.async_send(p, "no-such-destination-syntax", b"x")
    except CutError:
        bad = None
    else:
        raise AssertionError(f"an invalid destination was accepted ({bad})")
    good = cut.async_send(p, env.queue(), b"barrier")  # callbacks are in order: a barrier
    assert callbacks(cut, 1) == [("completion", good)]
    assert len(cut.events.of("completion", "exception")) == 1


@requirement("JMS-7.3.2-ON-EXCEPTION", "JMS-7.3.2-ONE-CALLBACK-PER-SEND", "JMS-7.3.8-CALLBACK-ORDER")
@pytest.mark.parametrize("sender", enumerated("JMS-7.3.8-CALLBACK-ORDER", "sender"))
def test_rejections_reported_by_on_exception_in_send_order(cut: ClientUnderTest, env: Env, sender: str) -> None:
    """Any number of asynchronous sends, their confirmations answered in any order, any of them rejected:
    exactly one callback per send (onException for the rejected ones), in send order. ``sender``: the sends of
    one MessageProducer, or of one JMSContext (a shim sends each through a JMSProducer of its own, so the order
    is the context's, across its JMSProducers, as 7.3.8 states it)."""
    owner = CONTEXT if sender == CONTEXT else SESSION
    cut.require(ClientFeature.ASYNC_SEND, *([ClientFeature.CONTEXT] if owner == CONTEXT else []))
    s = _opened(cut, owner)  # one for every example: a context is a connection of its own
    sent = 0
    queues = itertools.count()

    @hypothesis_settings()
    @hypothesis_seed()
    @given(data=st.data())
    def answered_in_any_order(data: st.DataObject) -> None:
        nonlocal sent
        n = data.draw(st.integers(1, 8), label="sends")
        answer_order = data.draw(st.permutations(range(n)), label="answer order")
        rejected = data.draw(st.sets(st.integers(0, n - 1)), label="rejected")
        q = env.queue(f"q{next(queues)}")
        gate = env.proxy.hold("SEND", q)
        p = cut.producer(s)
        sends = [cut.async_send(p, q, f"m{i}".encode()) for i in range(n)]
        held = gate.wait_held(n, TIMEOUT)
        assert len(held) == n, f"the broker got {len(held)} of {n} asynchronous sends"
        for i in answer_order:
            (gate.reject if i in rejected else gate.release)(held[i].receipt_id)
        got = callbacks(cut, sent + n)[sent:]
        sent += n
        assert got == [("exception" if i in rejected else "completion", sends[i]) for i in range(n)], (
            f"answers in order {answer_order}, rejected {sorted(rejected)}")

    answered_in_any_order()
    cut.events.wait_count("completion", sent + 1, 0.05)
    assert len(cut.events.of("completion", "exception")) == sent, "one callback per send, never both"


@requirement("JMS-7.3.2-OUTCOME-UNDEFINED")
def test_connection_loss_reports_every_incomplete_send_as_exception(cut: ClientUnderTest, env: Env) -> None:
    held = _incomplete_sends(cut, env, 3)
    cut.crash()
    assert callbacks(cut, 3) == [("exception", x) for x in held.sends]


@requirement("JMS-7.3.8-CALLBACK-ORDER-ACROSS-DESTINATIONS", "JMS-7.3.3-ORDER-MIXED-SYNC-ASYNC")
def test_callback_order_across_destinations_and_mixed_with_sync(cut: ClientUnderTest, env: Env) -> None:
    qa, gate_a, _s, p = _held_producer(cut, env, ClientFeature.ASYNC_SEND, queue="a")
    qb = env.queue("b")  # not held: confirmed at once
    first = cut.async_send(p, qa, b"1")
    sending = env.background(lambda: cut.async_send(p, qb, b"2"))  # confirmed at once, must still wait for the first
    assert sending.returned_within(TIMEOUT), "an asynchronous send waited for an earlier send's confirmation"
    second = sending.wait()
    cut.sync_send(p, qb, b"3", persistent=False)
    third = cut.async_send(p, qb, b"4")
    gate_a.wait_held(1, TIMEOUT)
    assert [m.body for m in env.drain(qb, 3)] == [b"2", b"3", b"4"]
    assert cut.events.of("completion") == [], "a later send's callback overtook an earlier one"
    gate_a.release()
    assert callbacks(cut, 3) == [("completion", first), ("completion", second), ("completion", third)]


MAX_DESTINATIONS = 4
"""Cap on the number of destinations drawn from JMS-7.3.8-CALLBACK-ORDER-ACROSS-DESTINATIONS (2..): each
is a queue with its own confirmation gate, and four already give every send a choice of where to go."""


@dataclass(frozen=True, slots=True)
class _MixedSends:
    """A plan: which destinations hold their confirmations, the sends as (destination, synchronous), the
    order the held confirmations are answered in (send indices) and which of them are rejections."""

    held: list[bool]
    sends: list[tuple[int, bool]]
    answer_order: list[int]
    rejected: set[int]


@st.composite
def _mixed_sends(draw: st.DrawFn) -> _MixedSends:
    """A synchronous send waits for its own confirmation, so it goes to a destination that does not hold
    them; at least one destination holds (else no confirmation could come out of order)."""
    count = draw(drawn("JMS-7.3.8-CALLBACK-ORDER-ACROSS-DESTINATIONS", "destinations", cap=MAX_DESTINATIONS),
                 label="destinations")
    held = draw(st.lists(st.booleans(), min_size=count, max_size=count).filter(any), label="held")
    free = [i for i in range(count) if not held[i]]
    send = st.tuples(st.integers(0, count - 1), st.just(False))
    if free:
        send = st.one_of(send, st.tuples(st.sampled_from(free), st.just(True)))
    sends = draw(st.lists(send, min_size=1, max_size=8), label="sends")
    answered = [n for n, (d, _) in enumerate(sends) if held[d]]
    order = draw(st.permutations(answered), label="answer order")
    rejected = draw(st.sets(st.sampled_from(answered)) if answered else st.just(set[int]()), label="rejected")
    return _MixedSends(held, sends, list(order), rejected)


@requirement("JMS-7.3.8-CALLBACK-ORDER-ACROSS-DESTINATIONS", "JMS-7.3.3-ORDER-MIXED-SYNC-ASYNC")
def test_send_and_callback_order_over_any_destinations_and_mix(cut: ClientUnderTest, env: Env) -> None:
    """One producer, any number of destinations (some holding their confirmations), any sequence of
    synchronous and asynchronous sends among them, the held confirmations answered in any order and any
    of them rejected: each destination has its messages in send order, and the asynchronous sends are
    called back in send order, whatever destination confirmed first."""
    cut.require(ClientFeature.ASYNC_SEND)
    s = cut.session()
    p = cut.producer(s)
    examples = itertools.count()

    @hypothesis_settings()
    @hypothesis_seed()
    @given(plan=_mixed_sends())
    def in_send_order(plan: _MixedSends) -> None:
        before = len(cut.events.of("completion", "exception"))  # a replayed example starts from here too
        example = next(examples)  # fresh queues: a gate sees every answer held for its destination so far
        queues = [env.queue(f"x{example}.d{i}") for i in range(len(plan.held))]
        gates = {i: env.proxy.hold("SEND", q) for i, q in enumerate(queues) if plan.held[i]}
        try:
            handles = _send_all(cut, env, p, queues, plan.sends)
            for i, q in enumerate(queues):
                expected = [f"m{n}".encode() for n, (d, _) in enumerate(plan.sends) if d == i]
                assert [m.body for m in env.drain(q, len(expected))] == expected, (
                    f"destination {i} got its messages out of send order ({plan})")
            # each held confirmation, with the send it answers (a gate holds its destination's in send order)
            answers: dict[int, Answered] = {}
            for i, gate in gates.items():
                mine = [n for n, (d, _) in enumerate(plan.sends) if d == i]
                answers.update(zip(mine, gate.wait_held(len(mine), TIMEOUT), strict=True))
            for n in plan.answer_order:
                gate = gates[plan.sends[n][0]]
                (gate.reject if n in plan.rejected else gate.release)(answers[n].receipt_id)
            expected_calls = [("exception" if n in plan.rejected else "completion", h) for n, h in enumerate(handles)
                              if h is not None]
            got = callbacks(cut, before + len(expected_calls))[before:]
            assert got == expected_calls, f"callbacks out of send order ({plan})"
        finally:  # a failed example must not leave answers held for the next (or its replay)
            for gate in gates.values():
                gate.close()

    in_send_order()


def _send_all(cut: ClientUnderTest, env: Env, producer: str, queues: list[str],
              sends: list[tuple[int, bool]]) -> list[str | None]:
    """Send ``m<n>`` for each planned send; the asynchronous sends' handles (None for a synchronous one).

    Each send runs in the background with a bound: an asynchronous send must return at once, and a
    synchronous one goes to a destination whose confirmations are not held, so neither may wait for
    an earlier send's held confirmation (7.3.3 orders messages, it does not serialise sends)."""
    handles: list[str | None] = []
    for n, (d, sync) in enumerate(sends):
        body = f"m{n}".encode()
        if sync:
            call = env.background(functools.partial(cut.sync_send, producer, queues[d], body, persistent=False))
        else:
            call = env.background(functools.partial(cut.async_send, producer, queues[d], body))
        kind = "synchronous" if sync else "asynchronous"
        assert call.returned_within(TIMEOUT), (
            f"send {n} ({kind}, to destination {d}) waited for an earlier send's confirmation: sends {sends}")
        result = call.wait()
        handles.append(None if sync else result)
    return handles


@requirement("JMS-7.3.8-ONE-CALLBACK-AT-A-TIME", "JMS-7.3.8-NOT-ON-SENDING-THREAD")
@pytest.mark.parametrize("session", enumerated("JMS-7.3.8-ONE-CALLBACK-AT-A-TIME", "session"))
def test_callbacks_serial_per_session_and_never_on_sending_thread(cut: ClientUnderTest, env: Env,
                                                                   session: str) -> None:
    """Two producers of one session (``context``: two JMSProducers of one JMSContext), five sends each, all
    confirmed at once. A client that can hold a callback running (``block``) has every callback held: while
    the first runs, no second may start, which catches callbacks run in parallel whatever the thread timing;
    then all must have run one at a time and never on the sending thread."""
    owner = CONTEXT if session == CONTEXT else SESSION
    q, gate, s, p1 = _held_producer(cut, env, ClientFeature.ASYNC_SEND, owner=owner)
    p2 = cut.producer(s)
    hold = "block" if ClientFeature.CALLBACK_ACTIONS in cut.features else None
    for i in range(5):
        cut.async_send(p1, q, b"a%d" % i, on_callback=hold)
        cut.async_send(p2, q, b"b%d" % i, persistent=False, on_callback=hold)
    gate.wait_held(5, TIMEOUT)
    if hold:
        _only_one_callback_runs(cut, env, gate, session)
    else:
        gate.close()  # releases what is held and stops holding: a client may ask for all ten confirmations
    events = cut.events.wait_count("completion", 10, TIMEOUT)
    assert len(events) == 10
    assert max(e["concurrent"] for e in events) == 1, f"two callbacks of one {session} ran at once"
    assert all(e["thread"] != e.get("sender_thread", threading.get_ident()) for e in events), (
        "a callback ran on the sending thread")


def _only_one_callback_runs(cut: ClientUnderTest, env: Env, gate: Gate, session: str) -> None:
    """Confirm everything while each callback is held running: the first starts, and no second may start
    before the test lets it return (the release runs in the background: a client may need its callback
    thread back before it takes the next answer)."""
    releasing = env.background(gate.close)  # releases what is held and stops holding
    assert cut.events.wait_count("callback-blocked", 1, TIMEOUT), "no callback ran after the confirmations"
    more = cut.events.wait_count("callback-blocked", 2, STILL_WAITING_FOR)
    assert len(more) == 1, f"a second callback of one {session} started while the first was running"
    cut.release_listeners()
    releasing.wait()


@requirement("JMS-7.3.4-CLOSE-WAITS", "JMS-7.3.4-INCOMPLETE-COMPLETE-NORMALLY")
def test_close_waits_for_incomplete_sends_which_complete_normally(cut: ClientUnderTest, env: Env) -> None:
    held = _incomplete_sends(cut, env, 3)
    closing = env.background(lambda: cut.close_producer(held.producer))
    # barrier: the closing thread is parked in a wait (or has returned, which the next line catches)
    assert closing.wait_parked(TIMEOUT), "close neither returned nor waited"
    assert not closing.returned_within(STILL_WAITING_FOR), "close returned while sends were incomplete"
    held.gate.release_all()
    closing.wait()
    assert callbacks(cut, 3) == [("completion", x) for x in held.sends], (
        "close aborted incomplete sends instead of letting them complete")


def _close_wait_cases() -> list[Any]:
    """Producer, session, connection: the objects whose close 7.3.4 makes wait, as the catalogue lists them; and
    ``context``, whose close its javadoc makes wait (JMS-CONTEXT-CLOSE-WAITS)."""
    return [*(pytest.param(what, marks=requirement("JMS-7.3.4-CLOSE-WAITS"), id=what)
              for what in enumerated("JMS-7.3.4-CLOSE-WAITS", "closed_object")),
            pytest.param(CONTEXT, marks=requirement("JMS-CONTEXT-CLOSE-WAITS"), id=CONTEXT)]


def _close(cut: ClientUnderTest, held: IncompleteSends, closed_object: str) -> Callable[[], None]:
    closes: dict[str, Callable[[], None]] = {
        "producer": lambda: cut.close_producer(held.producer),
        "session": lambda: cut.close_session(held.session),
        "context": lambda: cut.close_context(held.session),
        "connection": cut.close,
    }
    return closes[closed_object]


@pytest.mark.parametrize("closed_object", _close_wait_cases())
def test_close_waits_for_a_running_completion_callback(cut: ClientUnderTest, env: Env, closed_object: str) -> None:
    """The rule's second half: close returns only after the callbacks have *returned*, not once the broker
    has confirmed. A callback that keeps running (the ``block`` action) makes that observable; without it
    a client that stops waiting at the confirmation passes whenever its callback thread happens to win.
    ``context``: the sends go through a JMSContext's producer and the context is closed."""
    owner = CONTEXT if closed_object == CONTEXT else SESSION
    held = _incomplete_sends(cut, env, 2, ClientFeature.CALLBACK_ACTIONS, on_callback="block", owner=owner)
    closing = env.background(_close(cut, held, closed_object))
    assert closing.wait_parked(TIMEOUT), "close neither returned nor waited"
    _still_waits_while_a_callback_runs(cut, env, held, closing, f"{closed_object} close")
    got = callbacks(cut, 2)
    assert got == [("completion", x) for x in held.sends], f"callbacks after the {closed_object} close: {got}"


def _still_waits_while_a_callback_runs(cut: ClientUnderTest, env: Env, held: IncompleteSends, call: Background,
                                       name: str) -> None:
    """Release the held confirmations; while the first callback runs (the ``block`` action keeps it
    running), ``call`` must not return; then let the callbacks, and so ``call``, finish.

    The release runs in the background: handing a held answer over may wait for the client, and the client
    for the test (the Artemis client's close can run a callback itself, holding the lock the hand-over of a
    core answer takes, until the test lets that callback return)."""
    releasing = env.background(held.gate.release_all)
    # barrier: the first callback is running now (the confirmations reached the client)
    assert cut.events.wait_count("callback-blocked", 1, TIMEOUT), "no callback ran after the confirmations"
    assert not call.returned_within(STILL_WAITING_FOR), f"{name} returned while a completion callback was running"
    cut.release_listeners()
    call.wait()
    releasing.wait()


def _commit_wait_cases() -> list[Any]:
    """Every case of JMS-7.3.4-COMMIT-WAITS (a session's, ids ``OPERATION``) and of JMS-CONTEXT-COMMIT-WAITS (a
    JMSContext's, ids ``OPERATION-context``), from the catalogue's domains."""
    sessions = [pytest.param(operation, SESSION, marks=requirement("JMS-7.3.4-COMMIT-WAITS"), id=operation)
                for operation in enumerated("JMS-7.3.4-COMMIT-WAITS", "operation")]
    contexts = [pytest.param(operation, CONTEXT, marks=requirement("JMS-CONTEXT-COMMIT-WAITS"),
                             id=f"{operation}-{CONTEXT}")
                for operation in enumerated("JMS-CONTEXT-COMMIT-WAITS", "operation")]
    return sessions + contexts


@pytest.mark.parametrize(("operation", "transacted_object"), _commit_wait_cases())
def test_commit_and_rollback_wait_for_incomplete_sends(cut: ClientUnderTest, env: Env, operation: str,
                                                       transacted_object: str) -> None:
    """First the send completes and its callback returns (held running here, so a client that waits only
    for the confirmation is seen), then the COMMIT or ABORT goes out. ``context``: the send goes through a
    transacted JMSContext's producer and the context commits (rolls back); its javadoc asks only that the call
    not return before the send completed and its callback returned, so the frames' order is not judged."""
    owner = CONTEXT if transacted_object == CONTEXT else SESSION
    held = _incomplete_sends(cut, env, 1, ClientFeature.TRANSACTIONS, ClientFeature.CALLBACK_ACTIONS,
                             transacted=True, on_callback="block", owner=owner)
    end = cut.commit if operation == "commit" else cut.rollback
    ending = env.background(lambda: end(held.session))
    assert ending.wait_parked(TIMEOUT), f"{operation} neither returned nor waited"
    assert env.proxy.settle(TIMEOUT), "the proxy did not catch up with the client's writes"
    pending = held.gate.pending()
    _still_waits_while_a_callback_runs(cut, env, held, ending, operation)
    if owner == SESSION:  # 7.3.4: the wait comes before the commit; ordering evidence, no clock
        command = "COMMIT" if operation == "commit" else "ABORT"
        written_at = env.proxy.first_seen(command)
        released_at = env.proxy.released_after(pending[0].receipt_id)
        assert written_at is not None and released_at is not None and written_at > released_at, (
            f"{command} written while a send was incomplete")
    if operation == "commit":
        assert [m.body for m in env.drain(held.queue, 1)] == [b"x"]


CLOSE_ILLEGAL = requirement("JMS-7.3.4-CALLBACK-CLOSE-ILLEGAL")
COMMIT_ILLEGAL = requirement("JMS-7.3.4-CALLBACK-COMMIT-ILLEGAL")
CONTEXT_COMMIT_ILLEGAL = requirement("JMS-CONTEXT-CALLBACK-COMMIT-ILLEGAL")


def _own_object_cases() -> list[Any]:
    """Every case of the three rules, from the catalogue's domains: a callback closing its own producer, session,
    context or connection (the producer a context's for ``context``, a session's otherwise), and committing or
    rolling back its own session (7.3.4) or its own JMSContext (the context's javadoc). Ids: ``close-OBJECT``,
    ``OPERATION`` (a session's) and ``OPERATION-context``."""
    closes = [pytest.param(f"close-{what}", False, CONTEXT if what == CONTEXT else SESSION, marks=CLOSE_ILLEGAL,
                           id=f"close-{what}")
              for what in enumerated("JMS-7.3.4-CALLBACK-CLOSE-ILLEGAL", "closed_object")]
    ends = [pytest.param(operation, True, SESSION, marks=COMMIT_ILLEGAL, id=operation)
            for operation in enumerated("JMS-7.3.4-CALLBACK-COMMIT-ILLEGAL", "operation")]
    context_ends = [pytest.param(operation, True, CONTEXT, marks=CONTEXT_COMMIT_ILLEGAL, id=f"{operation}-{CONTEXT}")
                    for operation in enumerated("JMS-CONTEXT-CALLBACK-COMMIT-ILLEGAL", "operation")]
    return closes + ends + context_ends


@pytest.mark.parametrize(("action", "transacted", "owner"), _own_object_cases())
def test_callback_acting_on_its_own_objects_gets_illegal_state(make_cut: MakeCut, env: Env, action: str,
                                                               transacted: bool, owner: str) -> None:
    cut = make_cut()
    cut.require(ClientFeature.ASYNC_SEND, ClientFeature.CALLBACK_ACTIONS,
                *([ClientFeature.TRANSACTIONS] if transacted else []),
                *([ClientFeature.CONTEXT] if owner == CONTEXT else []))
    s = _opened(cut, owner, transacted=transacted)
    p = cut.producer(s)
    cut.async_send(p, env.queue(), b"x", on_callback=action)
    [result] = cut.events.wait_count("callback-result", 1, TIMEOUT)
    assert result["outcome"] == "IllegalStateError", f"{action} from its own callback: {result['outcome']}"
    if transacted:  # the refusal was the callback's, not a session (context) that cannot commit at all
        try:
            (cut.commit if action == "commit" else cut.rollback)(s)
        except CutError as exc:
            raise AssertionError(f"{action} failed on the application thread too: {exc}") from exc


@requirement("JMS-7.3.6-HEADERS-AFTER-COMPLETION", "JMS-7.3.9-ACCESS-MAY-THROW")
def test_message_inaccessible_until_completion_then_headers_set(cut: ClientUnderTest, env: Env) -> None:
    held = _incomplete_sends(cut, env, 1, ClientFeature.MESSAGE_ACCESS)
    [send] = held.sends
    before = cut.touch_message(send)
    assert before in ("ok", "MessageNotAccessibleError", "JMSError"), before  # 7.3.9: may throw (UNDEF)
    held.gate.release()
    [_done] = cut.events.wait_count("completion", 1, TIMEOUT)
    assert cut.touch_message(send) == "ok", "the message is still locked after onCompletion"
    message_id = cut.message_id(send)
    assert message_id, "JMSMessageID not set after completion"
    [received] = env.drain(held.queue, 1)
    assert received.message_id == message_id


@requirement("JMS-7.3.6-HEADERS-UNDEFINED-ON-EXCEPTION")
def test_after_on_exception_the_message_is_usable(cut: ClientUnderTest, env: Env) -> None:
    held = _incomplete_sends(cut, env, 1, ClientFeature.MESSAGE_ACCESS)
    [send] = held.sends
    held.gate.reject()
    cut.events.wait_count("exception", 1, TIMEOUT)
    assert cut.touch_message(send) == "ok", "after onException the application owns the message again"
    with contextlib.suppress(CutError):  # the header values are undefined: either outcome is acceptable
        cut.message_id(send)


@requirement("JMS-7.3.7-SESSION-NOT-BOUND-TO-CALLBACK")
def test_application_thread_keeps_using_the_session(cut: ClientUnderTest, env: Env) -> None:
    qa, gate, s, p = _held_producer(cut, env, ClientFeature.ASYNC_SEND, queue="a")
    qb = env.queue("b")  # not held
    cut.async_send(p, qa, b"pending")
    gate.wait_held(1, TIMEOUT)
    p2 = cut.producer(s)
    cut.sync_send(p2, qb, b"meanwhile", persistent=True)
    assert [m.body for m in env.drain(qb, 1)] == [b"meanwhile"]
    gate.release()
    cut.events.wait_count("completion", 1, TIMEOUT)
