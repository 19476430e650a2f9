"""EnginePump without sockets: two proton engines wired back to back through the pump's bytes."""

from __future__ import annotations

import pytest
from proton import Collector, Connection, Endpoint, Event, Transport

from ackspec.reference.amqp.pump import EnginePump, Fed, client_engine


def _server() -> tuple[Connection, Transport, Collector]:
    transport = Transport(Transport.SERVER)
    sasl = transport.sasl()
    sasl.allowed_mechs("ANONYMOUS")
    conn = Connection()
    collector = Collector()
    conn.collect(collector)
    transport.bind(conn)
    return conn, transport, collector


def _shuttle(a: EnginePump, b: EnginePump, rounds: int = 20, chunk: int = 0) -> None:
    """Move bytes both ways until quiet; ``chunk`` > 0 feeds them that many bytes at a time."""
    for _ in range(rounds):
        moved = False
        for src, dst in ((a, b), (b, a)):
            out = src.take_output()
            if out:
                moved = True
                step = chunk or len(out)
                for i in range(0, len(out), step):
                    assert dst.feed(out[i:i + step]) is Fed.ALL
                    dst.dispatch()
            src.dispatch()
        if not moved:
            return


def _pair() -> tuple[tuple[Connection, EnginePump, list[int]], tuple[Connection, EnginePump, list[int]]]:
    c_conn, c_tr, c_col = client_engine("pump-test-client", "localhost", None, None)
    s_conn, s_tr, s_col = _server()
    c_seen: list[int] = []
    s_seen: list[int] = []

    def on_server(event: Event) -> None:
        s_seen.append(event.type.number)
        if event.type == Event.CONNECTION_REMOTE_OPEN:
            s_conn.open()

    client = EnginePump(c_tr, c_col, lambda e: c_seen.append(e.type.number))
    server = EnginePump(s_tr, s_col, on_server)
    return (c_conn, client, c_seen), (s_conn, server, s_seen)


def test_open_handshake_through_the_pump() -> None:
    (c_conn, client, c_seen), (s_conn, server, s_seen) = _pair()
    c_conn.open()
    _shuttle(client, server)
    assert Event.CONNECTION_REMOTE_OPEN.number in s_seen
    assert Event.CONNECTION_REMOTE_OPEN.number in c_seen
    assert c_conn.state & Endpoint.REMOTE_ACTIVE
    assert s_conn.state & Endpoint.REMOTE_ACTIVE
    assert s_conn.remote_container == "pump-test-client"


def test_peek_pop_consume_only_what_was_taken() -> None:
    (c_conn, client, _), _ = _pair()
    c_conn.open()
    total = client.pending()
    assert total > 0
    first = client.peek(total)
    assert len(first) == total
    client.pop(3)
    assert client.pending() == total - 3
    assert client.peek(total - 3) == first[3:]
    assert client.take_output() == first[3:]
    assert client.pending() == 0
    assert client.take_output() == b""


def test_feed_in_single_byte_drips() -> None:
    (c_conn, client, _), (s_conn, server, s_seen) = _pair()
    c_conn.open()
    _shuttle(client, server, chunk=1)
    assert Event.CONNECTION_REMOTE_OPEN.number in s_seen
    assert s_conn.state & Endpoint.LOCAL_ACTIVE
    assert c_conn.state & Endpoint.REMOTE_ACTIVE


def test_feed_reports_closed_transport() -> None:
    _, (_, server, _) = _pair()
    server.transport.close_tail()
    assert server.transport.capacity() < 0
    assert server.feed(b"AMQP\x03\x01\x00\x00") is Fed.CLOSED


def test_feed_reports_stuck_buffer_without_drain() -> None:
    class Full:
        def __init__(self) -> None:
            self.pushed: list[bytes] = []
            self.room = [4, 0, 0]

        def capacity(self) -> int:
            return self.room[0] if self.room else 0

        def push(self, data: bytes) -> None:
            self.pushed.append(data)
            self.room.pop(0)

    fake = Full()
    drained: list[int] = []
    pump = EnginePump(fake, Collector(), lambda _e: None, dispatch=lambda: None)  # type: ignore[arg-type]
    assert pump.feed(b"0123456789") is Fed.STUCK
    assert fake.pushed == [b"0123"]
    fake.room = [0, 0]
    assert pump.feed(b"x", on_full=lambda: drained.append(1)) is Fed.STUCK
    assert drained == [1]


def test_feed_resumes_after_on_full_drains() -> None:
    class Buffer:
        def __init__(self) -> None:
            self.pushed: list[bytes] = []
            self.room = 0

        def capacity(self) -> int:
            return self.room

        def push(self, data: bytes) -> None:
            self.pushed.append(data)
            self.room -= len(data)

    fake = Buffer()
    between: list[int] = []

    def drain() -> None:
        fake.room = 4

    pump = EnginePump(fake, Collector(), lambda _e: None, dispatch=lambda: between.append(1))  # type: ignore[arg-type]
    assert pump.feed(b"0123456789", on_full=drain) is Fed.ALL
    assert fake.pushed == [b"0123", b"4567", b"89"]
    assert between == [1, 1]  # between pieces only, not after the last


def test_dispatch_pops_even_when_the_handler_raises() -> None:
    (c_conn, client, _), _ = _pair()
    seen: list[int] = []

    def boom(event: Event) -> None:
        seen.append(event.type.number)
        raise RuntimeError("handler failed")

    client.on_event = boom
    c_conn.open()
    with pytest.raises(RuntimeError):
        client.dispatch_events()
    first = list(seen)
    with pytest.raises(RuntimeError):
        client.dispatch_events()
    assert seen[0] == first[0]
    assert seen[1] != first[0]  # the failed event was popped, the next one came


def test_client_engine_offers_plain_with_a_user() -> None:
    conn, transport, _ = client_engine("c", "h", "alice", "secret")
    assert conn.user == "alice"
    assert conn.hostname == "h"
    assert conn.container == "c"
    assert transport.sasl() is not None
