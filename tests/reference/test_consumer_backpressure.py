"""Consumer back-pressure (issue 20): an ``ack:auto`` consumer that reads slowly must not make the broker buffer
its queue's whole backlog. Dispatch to a connection holds while its transport holds about
:data:`~ackspec.reference.flow.WRITE_HIGH_WATER` bytes, the rest stays queued, and nothing is lost or reordered.
The bound is read from the broker's own transport (``get_write_buffer_size``), on the broker thread, while a real
socket consumer falls behind and then drains."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from proton.reactor import AtMostOnce
from proton.utils import BlockingConnection

from ackspec.conformance.rawstomp import RawStompWs, frame
from ackspec.reference.broker.core import BrokerCore
from ackspec.reference.flow import WRITE_HIGH_WATER
from ackspec.reference.server import EmbeddedBroker

from .raw_stomp import Raw

BODY = b"y" * 8000
COUNT = 4000  # 32 MB: far beyond the bound and the kernel's loopback socket buffers
QUEUE = "/queue/backpressure"
SLACK = len(BODY) + 1024  # one message may overshoot the room, plus its frame's headers


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(persistent=False) as b:
        yield b


def _fill(broker: EmbeddedBroker) -> None:
    producer = Raw(broker).connect()
    for i in range(COUNT):
        headers = {"destination": QUEUE, "seq": str(i)}
        if i == COUNT - 1:
            headers["receipt"] = "last"
        producer.send("SEND", BODY, **headers)
    assert dict(producer.recv(60).headers).get("receipt-id") == "last"
    producer.sock.close()


def _buffered(broker: EmbeddedBroker, conn_id: str) -> int:
    """What the broker holds for ``conn_id`` outside its queue: its transport's buffer (read on the broker thread)."""
    server = broker.server
    assert server is not None

    def read(_core: BrokerCore) -> int:
        proto = server.protocols.get(conn_id)
        return 0 if proto is None or proto.transport is None else proto.transport.get_write_buffer_size()

    return broker.call(read)


def _held_output(broker: EmbeddedBroker, conn_id: str) -> int:
    """At one instant on the broker thread: what ``conn_id``'s transport holds if dispatch to it holds, else 0.

    Both in one call: dispatch also holds for a moment after a delivery spent the room and before the host
    wrote it out, with the transport still empty; a test reading on from there can drain the socket before
    a sampling thread (starved on a loaded machine) ever sees the transport hold anything (a peak of 0)."""
    server = broker.server
    assert server is not None

    def read(core: BrokerCore) -> int:
        if conn_id not in core.out_of_room and core._conns[conn_id].writable:
            return 0
        proto = server.protocols.get(conn_id)
        return 0 if proto is None or proto.transport is None else proto.transport.get_write_buffer_size()

    return broker.call(read)


def _watch(broker: EmbeddedBroker, conn_id: str, done: threading.Event, peak: list[int]) -> None:
    while not done.wait(0.005):
        peak[0] = max(peak[0], _buffered(broker, conn_id))


def test_a_slow_auto_ack_consumer_is_not_handed_the_backlog(broker: EmbeddedBroker) -> None:
    _fill(broker)
    consumer = Raw(broker)
    consumer.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    consumer.connect()
    server = broker.server
    assert server is not None
    deadline = time.monotonic() + 10
    while len(ids := broker.call(lambda _core: list(server.protocols))) != 1:  # the producer's close is seen
        assert time.monotonic() < deadline
        time.sleep(0.01)
    conn_id = ids[0]
    done, peak = threading.Event(), [0]
    watcher = threading.Thread(target=_watch, args=(broker, conn_id, done, peak), daemon=True)
    watcher.start()
    consumer.send("SUBSCRIBE", id="s", destination=QUEUE, ack="auto")
    deadline = time.monotonic() + 20
    while not (held := _held_output(broker, conn_id)):  # held, the transport full: the consumer has stalled
        assert time.monotonic() < deadline, "dispatch to the stalled consumer never held with output buffered"
        time.sleep(0.01)
    peak[0] = max(peak[0], held)
    assert broker.call(lambda core: core.queue_depth(QUEUE)) > COUNT // 2  # the backlog stayed queued
    seqs = []
    while len(seqs) < COUNT:
        frame = consumer.recv(20)
        assert frame.command == "MESSAGE" and frame.body == BODY
        seqs.append(int(dict(frame.headers)["seq"]))
    done.set()
    watcher.join(5)
    assert seqs == list(range(COUNT))  # none lost, none reordered, none twice
    assert 0 < peak[0] <= WRITE_HIGH_WATER + SLACK


def test_a_slow_presettled_amqp_consumer_is_not_handed_the_backlog() -> None:
    with EmbeddedBroker(persistent=False, amqp=True) as broker:
        _fill(broker)
        url = broker.amqp_url
        assert url is not None
        conn = BlockingConnection(url.removeprefix("amqp://"), timeout=20)
        try:
            receiver = conn.create_receiver(QUEUE, credit=COUNT, options=AtMostOnce())
            deadline = time.monotonic() + 20
            while not broker.call(lambda core: bool(core.out_of_room)):  # stalled: nobody reads the socket
                assert time.monotonic() < deadline, "dispatch to the stalled AMQP consumer never held"
                time.sleep(0.01)
            assert broker.call(lambda core: core.queue_depth(QUEUE)) > COUNT // 2  # the backlog stayed queued
            seqs = []
            for _ in range(COUNT):
                msg = receiver.receive(timeout=20)
                assert bytes(msg.body) == BODY
                seqs.append(int(msg.properties["seq"]))
            assert seqs == list(range(COUNT))
        finally:
            conn.close()


def test_a_slow_auto_ack_websocket_consumer_is_not_handed_the_backlog() -> None:
    with EmbeddedBroker(persistent=False, ws=True) as broker:
        _fill(broker)
        assert broker.ws is not None
        consumer = RawStompWs(broker.ws[0], broker.ws[1], timeout=20)
        reply = consumer.connect()
        assert reply is not None and reply.command == "CONNECTED"
        consumer.send(frame("SUBSCRIBE", {"id": "s", "destination": QUEUE, "ack": "auto"}))
        deadline = time.monotonic() + 20
        while not broker.call(lambda core: bool(core.out_of_room)):  # stalled: nobody reads the socket
            assert time.monotonic() < deadline, "dispatch to the stalled WebSocket consumer never held"
            time.sleep(0.01)
        assert broker.call(lambda core: core.queue_depth(QUEUE)) > COUNT // 2  # the backlog stayed queued
        seqs = []
        while len(seqs) < COUNT:
            got = consumer.read_frame(20)
            assert got is not None and got.command == "MESSAGE" and got.body == BODY
            seqs.append(int(got.headers["seq"]))
        consumer.close()
        assert seqs == list(range(COUNT))
