"""Who reads the reference client's STOMP socket (wire.StompWire, leader/follower): a blocking sender reads
its own receipt, the reader thread stays parked while blocking sends follow each other, and what arrives
for a MessageListener meanwhile is still delivered: by the sender's reads, or by the reader thread once
it resumes (at most READER_LINGER after the last pump)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from ackspec.reference.client import AUTO_ACKNOWLEDGE, ConnectionFactory, Message
from ackspec.reference.client import wire as wire_module
from ackspec.reference.server import EmbeddedBroker

TIMEOUT = 10.0


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(persistent=False) as b:
        yield b


class _Listener:
    def __init__(self) -> None:
        self.got: list[bytes] = []
        self.event = threading.Event()

    def on_message(self, message: Message) -> None:
        self.got.append(message.body)
        self.event.set()


def _reads_by_thread(wire: wire_module.StompWire, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    counts: dict[str, int] = {}
    original = wire._read_once

    def counting(timeout: float) -> None:
        name = "reader" if threading.get_ident() == wire._reader.ident else "other"
        counts[name] = counts.get(name, 0) + 1
        original(timeout)

    monkeypatch.setattr(wire, "_read_once", counting)
    return counts


def test_back_to_back_blocking_sends_are_read_by_the_sender(broker: EmbeddedBroker,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire_module, "READER_LINGER", 30.0)  # the reader thread never resumes during the test
    conn = ConnectionFactory(broker.stomp_url).create_connection()
    try:
        producer = conn.create_session(False, AUTO_ACKNOWLEDGE).create_producer("/queue/wire.leader")
        producer.send(Message(b"first"))  # from here on the reader thread is parked
        wire = conn.wire
        assert isinstance(wire, wire_module.StompWire)
        counts = _reads_by_thread(wire, monkeypatch)
        for i in range(50):
            producer.send(Message(b"%d" % i))
        assert counts.get("reader", 0) == 0, counts
        assert counts.get("other", 0) >= 50, counts
        assert [e["token"] for e in conn.log.events("complete")][-50:] == [
            e["token"] for e in conn.log.events("send")][-50:]
    finally:
        conn.close()


def test_listener_messages_arrive_while_the_reader_thread_is_parked(broker: EmbeddedBroker,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A pumping sender dispatches messages too; after the last pump the reader thread resumes by itself."""
    monkeypatch.setattr(wire_module, "READER_LINGER", 0.2)
    conn = ConnectionFactory(broker.stomp_url).create_connection()
    other = ConnectionFactory(broker.stomp_url).create_connection()
    try:
        session = conn.create_session(False, AUTO_ACKNOWLEDGE)
        listener = _Listener()
        session.create_consumer("/queue/wire.listener").set_message_listener(listener)
        conn.start()
        producer = session.create_producer("/queue/wire.other")
        feeder = other.create_session(False, AUTO_ACKNOWLEDGE).create_producer("/queue/wire.listener")
        feeder.send(Message(b"during"))
        for i in range(20):  # blocking sends on conn: its socket is read by this thread
            producer.send(Message(b"%d" % i))
        assert listener.event.wait(TIMEOUT) and listener.got == [b"during"]
        listener.event.clear()
        feeder.send(Message(b"after"))  # nobody pumps now: the reader thread must pick it up
        assert listener.event.wait(TIMEOUT) and listener.got == [b"during", b"after"]
    finally:
        other.close()
        conn.close()
