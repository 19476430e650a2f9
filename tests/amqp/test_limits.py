"""AMQP resource limits (issue 20): connection limit, open deadline, idle timeout, largest message, open
transactions. Real sockets against the embedded broker; waits are bounded reads, never sleeps."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from proton import ConnectionException, Message, Timeout
from proton.utils import BlockingConnection, LinkDetached, SendException

from ackspec.adapters.amqp_proton import ProtonAdapter
from ackspec.adapters.base import AdapterError
from ackspec.history import Recorder
from ackspec.reference.limits import AmqpLimits
from ackspec.reference.server import EmbeddedBroker

LIMITS = AmqpLimits(max_connections=3, max_message_size=64 * 1024, max_transactions=2, open_timeout=0.5,
                    idle_timeout=1.5)


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(amqp=True, persistent=False, amqp_limits=LIMITS) as b:
        yield b


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the broker closes ``sock`` within ``seconds`` (reading and discarding what it sends)."""
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def _address(broker: EmbeddedBroker) -> tuple[str, int]:
    assert broker.amqp is not None
    return broker.amqp


def test_a_socket_that_never_opens_is_closed_after_the_open_timeout(broker: EmbeddedBroker) -> None:
    with socket.create_connection(_address(broker), timeout=5) as idle:
        idle.sendall(b"AMQP\x00\x01")  # half a protocol header, then nothing (slowloris)
        assert _closed_within(idle, 5)


def test_connection_limit(broker: EmbeddedBroker) -> None:
    held = [socket.create_connection(_address(broker), timeout=5) for _ in range(3)]
    try:
        extra = socket.create_connection(_address(broker), timeout=5)
        assert _closed_within(extra, 0.4)  # at once: well before the 0.5 s open deadline of the others
        extra.close()
    finally:
        for sock in held:
            sock.close()


def test_idle_client_is_closed_and_an_active_one_is_not(broker: EmbeddedBroker) -> None:
    assert broker.amqp_url is not None
    busy = BlockingConnection(broker.amqp_url, timeout=5)
    sender = busy.create_sender("/queue/limits.idle")
    idle = BlockingConnection(broker.amqp_url, timeout=5)
    started = time.monotonic()  # the idle client's last byte was sent before this
    sent = 0
    while not idle.disconnected and time.monotonic() - started < 6:
        sender.send(Message(body=b"x"))  # a round trip: ``busy`` is never idle for long
        sent += 1
        try:
            idle.wait(lambda: bool(idle.disconnected), timeout=0.3)
        except Timeout:
            pass
        except ConnectionException:
            break
    elapsed = time.monotonic() - started
    assert idle.disconnected and elapsed + 0.1 >= 1.5 and elapsed < 6
    sender.send(Message(body=b"still open"))
    assert broker.call(lambda core: core.queue_depth("/queue/limits.idle")) == sent + 1
    busy.close()


def test_a_message_over_the_limit_ends_its_link(broker: EmbeddedBroker) -> None:
    assert broker.amqp_url is not None
    conn = BlockingConnection(broker.amqp_url, timeout=5)
    try:
        sender = conn.create_sender("/queue/limits.size")
        assert sender.link.remote_max_message_size == 64 * 1024
        sender.send(Message(body=b"x" * 1000))
        with pytest.raises((LinkDetached, SendException)) as ended:
            sender.send(Message(body=b"x" * (200 * 1024)))
        assert "message-size-exceeded" in str(ended.value) or isinstance(ended.value, SendException)
    finally:
        conn.close()
    assert broker.call(lambda core: core.queue_depth("/queue/limits.size")) == 1


def test_open_transactions_are_limited_and_a_discharge_frees_a_slot(broker: EmbeddedBroker) -> None:
    assert broker.amqp_url is not None
    client = ProtonAdapter(broker.amqp_url, Recorder("limits"), timeout=3).client("tx")
    try:
        client.begin("a")
        client.begin("b")
        with pytest.raises(AdapterError, match=r"declare refused: rejected.*too many open transactions"):
            client.begin("c")
        client.commit("a")
        client.begin("d")
    finally:
        client.disconnect()


def test_messages_larger_than_the_transfer_buffer_arrive_whole() -> None:
    """The per-connection transfer buffer starts small and stops growing at 64 KiB: messages of every size
    up to the limit still arrive byte for byte, one after another on one link."""
    with EmbeddedBroker(amqp=True, persistent=False) as broker:
        assert broker.amqp_url is not None
        conn = BlockingConnection(broker.amqp_url, timeout=10)
        try:
            sender = conn.create_sender("/queue/limits.big")
            sizes = [10, 5000, 70_000, 300, 1_000_000, 65_535, 65_536, 3]
            for size in sizes:
                sender.send(Message(body=bytes([size % 251]) * size))
            receiver = conn.create_receiver("/queue/limits.big", credit=len(sizes))
            for size in sizes:
                got = receiver.receive(timeout=10)
                receiver.accept()
                assert got.body == bytes([size % 251]) * size
        finally:
            conn.close()
