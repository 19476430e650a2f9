"""Producer flow control (issue 20): while the stored messages exceed the bound, producer-only connections
are not read, so a backlog for a slow consumer stays near the bound instead of growing without limit; once
a consumer drains it the producers go on, and nothing is lost. Both protocols, real sockets."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from proton import Message
from proton.utils import BlockingConnection

from ackspec.reference.broker.state import ENTRY_OVERHEAD, stored_bytes
from ackspec.reference.flow import ProducerFlow
from ackspec.reference.server import EmbeddedBroker
from ackspec.reference.stomp.codec import encode
from ackspec.reference.stomp.frames import Frame

from .raw_stomp import Raw

LIMIT = 1024 * 1024
BODY = b"x" * 1000
COUNT = 30_000  # about 42 MB stored: far beyond the bound and the kernel's socket buffers on loopback
AMQP_COUNT = 3000  # each send waits for its outcome: 4 MB, four times the bound


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(persistent=False, amqp=True, flow=ProducerFlow(LIMIT)) as b:
        yield b


def _watch(broker: EmbeddedBroker, done: threading.Event, peak: list[int]) -> None:
    """The largest stored size seen, read on the broker thread every few milliseconds until ``done``."""
    while not done.wait(0.005):
        peak[0] = max(peak[0], broker.call(lambda _core: stored_bytes()))


def _drain(consumer: Raw, count: int) -> list[bytes]:
    bodies = []
    while len(bodies) < count:
        frame = consumer.recv(10)
        if frame.command == "MESSAGE":
            bodies.append(frame.body)
    return bodies


def test_stomp_producer_is_held_back_near_the_bound_and_nothing_is_lost(broker: EmbeddedBroker) -> None:
    producer = Raw(broker).connect()
    frames = b"".join(encode(Frame("SEND", (("destination", "/queue/flow"), ("seq", str(i))), BODY))
                      for i in range(COUNT))
    done, peak = threading.Event(), [0]
    watcher = threading.Thread(target=_watch, args=(broker, done, peak), daemon=True)
    watcher.start()
    sender = threading.Thread(target=producer.sock.sendall, args=(frames,), daemon=True)
    sender.start()
    # the producer is paused: its sendall cannot finish while nothing is consumed
    deadline = time.monotonic() + 10
    while broker.server is not None and broker.server.flow.paused == 0 and time.monotonic() < deadline:
        done.wait(0.01)
    assert broker.server is not None and broker.server.flow.paused > 0
    assert sender.is_alive()
    consumer = Raw(broker).connect()
    consumer.send("SUBSCRIBE", destination="/queue/flow", id="1")
    bodies = _drain(consumer, COUNT)
    sender.join(30)
    done.set()
    watcher.join(5)
    assert not sender.is_alive() and len(bodies) == COUNT and set(bodies) == {BODY}
    one_read = 512 * 1024 + 64 * (len(BODY) + ENTRY_OVERHEAD)  # what one read may add before the pause
    assert peak[0] <= LIMIT + one_read, peak[0]
    producer.send("SEND", b"last", destination="/queue/flow", receipt="r")
    assert producer.recv().get("receipt-id") == "r"


def test_amqp_producer_is_held_back_too(broker: EmbeddedBroker) -> None:
    assert broker.amqp_url is not None
    conn = BlockingConnection(broker.amqp_url, timeout=30)
    sender = conn.create_sender("/queue/flow.amqp")
    done, peak = threading.Event(), [0]
    watcher = threading.Thread(target=_watch, args=(broker, done, peak), daemon=True)
    watcher.start()
    consumer = Raw(broker).connect()

    def consume_later() -> None:  # once the producer has been paused, start draining
        deadline = time.monotonic() + 20
        while broker.server is not None and broker.server.flow.paused == 0 and time.monotonic() < deadline:
            done.wait(0.01)
        consumer.send("SUBSCRIBE", destination="/queue/flow.amqp", id="1")

    starter = threading.Thread(target=consume_later, daemon=True)
    starter.start()
    for _ in range(AMQP_COUNT):
        sender.send(Message(body=BODY), timeout=30)  # unsettled: each waits for its outcome
    bodies = _drain(consumer, AMQP_COUNT)
    done.set()
    watcher.join(5)
    conn.close()
    assert broker.server is not None and broker.server.flow.paused > 0
    assert len(bodies) == AMQP_COUNT
    assert peak[0] <= LIMIT + 512 * 1024, peak[0]
