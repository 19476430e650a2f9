"""Sans-IO tests of the send tracker: 7.3 ordering, 7.3.2, 7.3.4 counts, publish and confirmation windows."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ackspec.reference.client.options import AckEventMode, ClientOptions
from ackspec.reference.client.send_core import (
    Complete,
    SendAcknowledged,
    SendKind,
    SendState,
    SendTracker,
    WindowAck,
    WindowOpened,
    WindowReject,
    classify,
)


def _submit(t: SendTracker, producer: str = "p1", *, kind: SendKind = SendKind.ASYNC, receipt: bool = True,
            windowed: bool = False, dest: str = "/queue/a", size: int = 10) -> str:
    send = t.submit(producer=producer, session="s1", destination=dest, kind=kind, wants_receipt=receipt,
                    windowed=windowed, size=size)
    t.sent(send.token)
    return send.token


def completed(actions: list) -> list[str]:  # type: ignore[type-arg]
    return [a.send.token for a in actions if isinstance(a, Complete)]


def test_classify_defaults_follow_the_seeds() -> None:
    o = ClientOptions()
    assert classify(o, persistent=True, transacted=False, asynchronous=False, ack_handler=False) == (
        SendKind.BLOCKING, True, False)
    assert classify(o, persistent=False, transacted=False, asynchronous=False, ack_handler=False) == (
        SendKind.FIRE, False, False)
    assert classify(o, persistent=True, transacted=True, asynchronous=False, ack_handler=False) == (
        SendKind.FIRE, False, False)
    assert classify(o, persistent=True, transacted=False, asynchronous=True, ack_handler=False) == (
        SendKind.ASYNC, True, False)
    o2 = o.replace(block_on_non_durable_send=True)
    kind, _, _ = classify(o2, persistent=False, transacted=False, asynchronous=False, ack_handler=False)
    assert kind is SendKind.BLOCKING


def test_out_of_order_receipts_release_in_send_order() -> None:
    t = SendTracker(ClientOptions())
    a, b, c = (_submit(t, dest=d) for d in ("/queue/a", "/queue/b", "/queue/c"))
    assert completed(t.on_receipt(c)) == []
    assert completed(t.on_receipt(b)) == []
    assert completed(t.on_receipt(a)) == [a, b, c]


def test_sync_send_without_receipt_waits_behind_earlier_async() -> None:
    t = SendTracker(ClientOptions())
    a = _submit(t)
    send = t.submit(producer="p1", session="s1", destination="/queue/a", kind=SendKind.FIRE, wants_receipt=False,
                    windowed=False, size=1)
    assert completed(t.sent(send.token)) == []
    assert completed(t.on_receipt(a)) == [a, send.token]


def test_producers_are_independent() -> None:
    t = SendTracker(ClientOptions())
    a = _submit(t, "p1")
    b = _submit(t, "p2")
    assert completed(t.on_receipt(b)) == [b]
    assert completed(t.on_receipt(a)) == [a]


def test_abandoned_send_gets_no_callback_and_unblocks_followers() -> None:
    t = SendTracker(ClientOptions())
    a = _submit(t)
    b = t.submit(producer="p1", session="s1", destination="/queue/a", kind=SendKind.ASYNC, wants_receipt=True,
                 windowed=False, size=1).token
    c = _submit(t)
    assert completed(t.on_receipt(c)) == []
    assert completed(t.on_receipt(a)) == [a]
    assert completed(t.abandon(b)) == [c]


def test_incomplete_counts_until_callback_returned() -> None:
    t = SendTracker(ClientOptions())
    a = _submit(t)
    assert t.incomplete("p1") == t.incomplete("session:s1") == t.incomplete("connection") == 1
    t.on_receipt(a)
    assert t.incomplete("p1") == 1, "released but the callback has not returned"
    t.callback_returned(a)
    assert t.incomplete("p1") == t.incomplete("connection") == 0


def test_connection_lost_fails_every_pending_send_once_in_order() -> None:
    t = SendTracker(ClientOptions())
    tokens = [_submit(t) for _ in range(3)]
    t.on_receipt(tokens[1])
    actions = t.on_connection_lost("gone")
    assert completed(actions) == tokens
    states = [a.send.state for a in actions if isinstance(a, Complete)]
    assert states == [SendState.FAILED, SendState.CONFIRMED, SendState.FAILED]
    assert t.on_connection_lost("again") == []


def test_window_bound_cumulative_ack_and_reject_reopens_one() -> None:
    t = SendTracker(ClientOptions(publish_window_size=3))
    tokens = [_submit(t, windowed=True) for _ in range(3)]
    assert not t.has_room(windowed=True, size=1)
    assert t.has_room(windowed=False, size=1)
    actions = t.on_rejected(tokens[0], "acl")
    assert any(isinstance(a, WindowReject) for a in actions)
    assert t.window_in_flight == 2 and t.has_room(windowed=True, size=1)
    actions = t.on_receipt(tokens[2])
    acks = [a for a in actions if isinstance(a, WindowAck)]
    assert [a.last.token for a in acks] == [tokens[1], tokens[2]], "per-message mode: one event per message"
    assert any(isinstance(a, WindowOpened) for a in actions)
    assert t.window_in_flight == 0


def test_windowed_event_mode_one_event_per_broker_ack() -> None:
    t = SendTracker(ClientOptions(publish_window_size=10, ack_event_mode=AckEventMode.WINDOWED))
    tokens = [_submit(t, windowed=True) for _ in range(4)]
    acks = [a for a in t.on_receipt(tokens[3]) if isinstance(a, WindowAck)]
    assert len(acks) == 1 and acks[0].last.token == tokens[3] and len(acks[0].sends) == 4


def test_confirmation_window_bytes_and_handler() -> None:
    t = SendTracker(ClientOptions(confirmation_window_size=100))
    t.ack_handler_enabled = True
    a = _submit(t, kind=SendKind.FIRE, size=60)
    assert not t.has_room(windowed=False, size=60)
    actions = t.on_receipt(a)
    assert [x.send.token for x in actions if isinstance(x, SendAcknowledged)] == [a]
    assert t.has_room(windowed=False, size=60)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["p1", "p2"]), min_size=1, max_size=12), st.randoms(use_true_random=False),
       st.lists(st.booleans(), min_size=12, max_size=12))
def test_any_confirmation_order_releases_per_producer_send_order(producers: list[str], rnd: object,
                                                                  rejects: list[bool]) -> None:
    t = SendTracker(ClientOptions())
    tokens = [(p, _submit(t, p)) for p in producers]
    order = list(tokens)
    rnd.shuffle(order)  # type: ignore[attr-defined]
    released: list[str] = []
    for i, (_p, tok) in enumerate(order):
        actions = t.on_rejected(tok, "x") if rejects[i] else t.on_receipt(tok)
        released += completed(actions)
    assert sorted(released) == sorted(tok for _, tok in tokens), "exactly one completion per send"
    for p in ("p1", "p2"):
        mine = [tok for q, tok in tokens if q == p]
        assert [tok for tok in released if tok in mine] == mine
