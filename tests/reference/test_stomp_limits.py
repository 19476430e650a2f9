"""STOMP resource limits (issue 20): a deadline for CONNECT, an idle timeout, a cap on input before CONNECT,
the open-transaction limit, strict heart-beat parsing. Sans-IO on a virtual clock (stomp_harness)."""

from __future__ import annotations

import pytest

from ackspec.reference.stomp.session import SessionConfig

from .stomp_harness import Broker


def _broker(**limits: float) -> Broker:
    return Broker(session_config=SessionConfig(heartbeat_send_ms=0, heartbeat_receive_ms=0, **limits))


def test_no_connect_within_the_deadline_is_an_error_and_a_close() -> None:
    b = _broker(connect_timeout=10)
    c = b.client(connect=False)
    c.raw(b"CONN")  # a slowloris trickle does not extend the deadline
    assert c.session.next_deadline() == pytest.approx(b.clock.now + 10)
    b.tick(9.9)
    assert not c.closed
    b.tick(0.2)
    err = c.frames()[-1]
    assert err.command == "ERROR" and "no CONNECT within 10 s" in (err.get("message") or "") and c.closed


def test_a_connection_that_connected_in_time_is_not_closed_by_the_connect_deadline() -> None:
    b = _broker(connect_timeout=10, idle_timeout=0)
    c = b.client()
    b.tick(3600)
    assert not c.closed


def test_idle_timeout_closes_a_silent_client_and_any_frame_resets_it() -> None:
    b = _broker(idle_timeout=60)
    c = b.client()
    b.tick(50)
    c.raw(b"\n")  # a heart-beat EOL is input too
    b.tick(50)
    assert not c.closed
    b.tick(11)
    err = c.frames()[-1]
    assert err.command == "ERROR" and "idle for 60 s" in (err.get("message") or "") and c.closed


def test_heart_beats_replace_the_idle_timeout() -> None:
    b = Broker(session_config=SessionConfig(heartbeat_send_ms=1000, heartbeat_receive_ms=1000, idle_timeout=5))
    c = b.client(**{"heart-beat": "1000,1000"})
    for _ in range(20):  # 10 s of client heart-beats every 0.5 s: alive, although idle longer than 5 s
        b.tick(0.5)
        c.raw(b"\n")
    assert not c.closed


def test_input_before_connect_is_capped() -> None:
    b = _broker(max_frame=1024)
    c = b.client(connect=False)
    for _ in range(10):
        c.raw(b"\n" * 100)
    assert not c.closed
    c.raw(b"\n" * 100)
    err = c.frames()[-1]
    assert err.command == "ERROR" and "bytes before CONNECT" in (err.get("message") or "") and c.closed


def test_open_transactions_are_limited_and_ending_one_frees_its_slot() -> None:
    b = _broker(max_transactions=3)
    c = b.client()
    for i in range(3):
        c.send("BEGIN", transaction=f"t{i}")
    c.send("COMMIT", transaction="t0")
    c.send("BEGIN", transaction="t3", receipt="r")
    assert [f.command for f in c.frames()] == ["RECEIPT"]
    c.send("BEGIN", transaction="t4")
    err = c.frames()[-1]
    assert err.command == "ERROR" and "too many open transactions (limit 3)" in (err.get("message") or "")


@pytest.mark.parametrize("value", ["1_0,0", "\uff11\uff10,0", " 10,0", "10,0,0", "-1,0", "10;0", "1e3,0",
                                   "9999999999,0"])
def test_heart_beat_header_is_parsed_strictly(value: str) -> None:
    b = _broker()
    c = b.client(connect=False)
    c.send("CONNECT", **{"accept-version": "1.2", "host": "/", "heart-beat": value})
    err = c.frames()[-1]
    assert err.command == "ERROR" and "invalid heart-beat" in (err.get("message") or "")


def test_valid_heart_beat_headers_are_accepted() -> None:
    b = _broker()
    for value in ("0,0", "10,20", "000,1"):
        b.client(**{"heart-beat": value})  # the harness asserts CONNECTED
