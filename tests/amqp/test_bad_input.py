"""Bad input closes one connection with the right AMQP error condition; the broker stays up."""

from __future__ import annotations

import socket
import time

from proton import Described, Endpoint, Link, Message, symbol, uint, ulong
from tests.amqp.conftest import RunningBroker

from ackspec.adapters.amqp_proton import AmqpOptions, ProtonAdapter, Wire
from ackspec.adapters.base import AckMode
from ackspec.history import Recorder
from ackspec.reference.amqp.framing import SASL_FRAME, performative_frame


def _frame(performative: Described, payload: bytes = b"", channel: int = 0) -> bytes:
    return performative_frame(performative, payload, channel=channel)


def _sasl_init() -> bytes:
    return b"AMQP\x03\x01\x00\x00" + performative_frame(Described(ulong(0x41), [symbol("ANONYMOUS")]),
                                                         frame_type=SASL_FRAME)


def _exchange(broker: RunningBroker, payload: bytes) -> bytes:
    with socket.create_connection((broker.host, broker.port), timeout=3) as sock:
        sock.sendall(payload)
        chunks = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def _still_serving(broker: RunningBroker, adapter_url: str) -> None:
    c = ProtonAdapter(adapter_url, Recorder("amqp-unit"), timeout=3).client("after")
    assert c.send("/queue/after.bad.input", b"ok", seq=1).confirmed
    c.disconnect()


def test_wrong_protocol_header_gets_our_header_and_a_close(broker: RunningBroker) -> None:
    reply = _exchange(broker, b"GET / HTTP/1.1\r\n\r\n")
    assert reply == b"AMQP\x03\x01\x00\x00"
    _still_serving(broker, broker.url)


def test_garbage_frame_closes_with_framing_or_decode_error(broker: RunningBroker) -> None:
    reply = _exchange(broker, _sasl_init() + b"AMQP\x00\x01\x00\x00" + b"\x00\x00\x00\x10\x02\x00\x00\x00garbage!")
    assert b"amqp:connection:framing-error" in reply or b"amqp:decode-error" in reply
    _still_serving(broker, broker.url)


def test_transfer_beyond_credit_detaches_with_transfer_limit_exceeded() -> None:
    broker = RunningBroker(receive_window=4)
    try:
        wire = Wire(AmqpOptions.from_url(broker.url), "raw-client", lambda event: None)
        wire.conn.open()
        session = wire.conn.session()
        session.open()
        sender = session.sender("raw-sender")
        sender.target.address = "/queue/credit.limit"
        sender.snd_settle_mode = Link.SND_SETTLED
        sender.open()
        wire.wait(lambda: sender.credit == 4, 3, "credit 4")
        # six pre-settled transfers written at once with credit for four: the fifth exceeds the credit
        frames = b"".join(
            _frame(Described(ulong(0x14), [uint(0), uint(i), f"t{i}".encode(), uint(0), True]),
                   Message(body=f"m{i}".encode()).encode())
            for i in range(6))
        wire.sock.sendall(frames)
        wire.wait(lambda: bool(sender.state & Endpoint.REMOTE_CLOSED), 3, "the detach")
        assert sender.remote_condition is not None
        assert sender.remote_condition.name == "amqp:link:transfer-limit-exceeded"
        # the transfers within credit were accepted, the broker still serves
        c = ProtonAdapter(broker.url, Recorder("amqp-unit"), timeout=3).client("reader")
        sub = c.subscribe("/queue/credit.limit", ack=AckMode.AUTO)
        bodies = [d.body for d in iter(lambda: c.receive(sub, 0.5), None)]
        assert bodies == [b"m0", b"m1", b"m2", b"m3"]
    finally:
        broker.stop()
