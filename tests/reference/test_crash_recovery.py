"""Crash recovery: the broker as a subprocess under load, SIGKILLed repeatedly.

Afterwards every message whose RECEIPT was received is present exactly once, and nothing whose
ACK got a RECEIPT comes back. Messages sent without a receipt before the kill are indeterminate
(may or may not survive) and are not counted either way.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ackspec.reference.stomp.codec import FrameParser, encode
from ackspec.reference.stomp.frames import Frame

from ._req import requirement

pytestmark = pytest.mark.slow


def _start(data: Path) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-m", "ackspec", "broker", "--stomp", "127.0.0.1:0", "--data", str(data)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "ackspec broker: stomp://127.0.0.1:PORT"
    assert line.startswith("ackspec broker: stomp://"), line
    return proc, int(line.rsplit(":", 1)[1])


class Conn:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.parser = FrameParser()
        self.frames: list[Frame] = []
        self.send("CONNECT", **{"accept-version": "1.2"})
        assert self.recv().command == "CONNECTED"

    def send(self, command: str, body: bytes = b"", **headers: str) -> None:
        self.sock.sendall(encode(Frame(command, tuple(headers.items()), body)))

    def recv(self) -> Frame:
        while not self.frames:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError
            self.frames += [f for f in self.parser.feed(data) if isinstance(f, Frame)]
        return self.frames.pop(0)


QUEUE = "/queue/crash"
ROUNDS = 4


@dataclass
class Ledger:
    """What the broker confirmed over every round: sends it gave a RECEIPT for (durable from then on) and
    deliveries whose ACK it gave a RECEIPT for (gone for good). Sends without a receipt of their own count
    only through a later receipt on the same connection."""

    sent: int = 0
    confirmed: set[bytes] = field(default_factory=set)
    acked: set[bytes] = field(default_factory=set)


def _send_batch(producer: Conn, ledger: Ledger, count: int = 300) -> list[bytes]:
    """Pipelined persistent sends, a receipt asked on every 10th; the bodies, in order."""
    batch = []
    for _ in range(count):
        ledger.sent += 1
        body = b"m%d" % ledger.sent
        batch.append(body)
        receipt = {"receipt": body.decode()} if ledger.sent % 10 == 0 else {}
        producer.send("SEND", body, destination=QUEUE, persistent="true", **receipt)
    return batch


def _collect_receipts(producer: Conn, ledger: Ledger, batch: list[bytes]) -> None:
    """Read the producer's receipts until the batch's last one (or 10 s). A receipt is cumulative: every
    earlier SEND of the connection is durable too."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(ledger.confirmed) < ledger.sent // 10 * 10 - 10:
        frame = producer.recv()
        if frame.command != "RECEIPT":
            continue
        receipt = (frame.get("receipt-id") or "").encode()
        ledger.confirmed.update(batch[:batch.index(receipt) + 1])
        if receipt == batch[-1]:
            return


def _ack_some(consumer: Conn, ledger: Ledger, count: int = 20) -> None:
    """Acknowledge ``count`` deliveries, each with a receipt, and wait for the receipts: those are gone."""
    pending: dict[str, bytes] = {}
    for _ in range(count):
        message = consumer.recv()
        if message.command == "MESSAGE" and message.body not in ledger.acked:
            receipt = "ack-" + message.body.decode()
            pending[receipt] = message.body
            consumer.send("ACK", id=message.get("ack") or "", receipt=receipt)
    consumer.sock.settimeout(5)
    while pending:
        frame = consumer.recv()
        if frame.command == "RECEIPT" and (body := pending.pop(frame.get("receipt-id") or "", None)) is not None:
            ledger.acked.add(body)


def _crash_round(data: Path, ledger: Ledger) -> None:
    """Start the broker on ``data``, load it (confirmed sends and acks, then 50 sends in flight with no
    receipt: indeterminate), and SIGKILL it."""
    proc, port = _start(data)
    try:
        producer, consumer = Conn(port), Conn(port)
        consumer.send("SUBSCRIBE", destination=QUEUE, id="s", ack="client-individual",
                      **{"activemq.prefetchSize": "50"})
        _collect_receipts(producer, ledger, _send_batch(producer, ledger))
        _ack_some(consumer, ledger)
        for _ in range(50):
            ledger.sent += 1
            producer.send("SEND", b"m%d" % ledger.sent, destination=QUEUE, persistent="true")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _survivors(data: Path) -> list[bytes]:
    """Restart the broker on ``data`` and read the queue up to a barrier sent after subscribing; stop it
    cleanly."""
    proc, port = _start(data)
    try:
        consumer = Conn(port)
        consumer.send("SUBSCRIBE", destination=QUEUE, id="s")
        consumer.send("SEND", b"barrier", destination=QUEUE)
        seen: list[bytes] = []
        while (message := consumer.recv()).body != b"barrier":
            seen.append(message.body)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    return seen


@requirement("STOMP-RECEIPT-PERSISTENT-DURABLE", "JMS-9.1-QUEUE-PERSISTENT-RELIABLE",
             "JMS-6.2.11-NO-DUPLICATE-AFTER-ACK", "ARTEMIS-JOURNAL-SYNC-NON-TRANSACTIONAL")
def test_sigkill_loses_nothing_confirmed(tmp_path: Path) -> None:
    ledger = Ledger()
    for _ in range(ROUNDS):
        _crash_round(tmp_path, ledger)
    seen = _survivors(tmp_path)
    confirmed, acked = ledger.confirmed, ledger.acked
    assert confirmed, "the test confirmed nothing: it checked nothing"
    assert len(seen) == len(set(seen)), "a message came back twice"
    assert confirmed - acked <= set(seen), f"lost confirmed messages: {sorted(confirmed - acked - set(seen))[:5]}"
    assert not (acked & set(seen)), f"acknowledged messages came back: {sorted(acked & set(seen))[:5]}"
