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


@requirement("STOMP-RECEIPT-PERSISTENT-DURABLE", "JMS-9.1-QUEUE-PERSISTENT-RELIABLE",
             "JMS-6.2.11-NO-DUPLICATE-AFTER-ACK", "ARTEMIS-JOURNAL-SYNC-NON-TRANSACTIONAL")
def test_sigkill_loses_nothing_confirmed(tmp_path: Path) -> None:
    confirmed: set[bytes] = set()
    acked: set[bytes] = set()
    n = 0
    for _round in range(4):
        proc, port = _start(tmp_path)
        try:
            p = Conn(port)
            c = Conn(port)
            c.send("SUBSCRIBE", destination="/queue/crash", id="s", ack="client-individual",
                   **{"activemq.prefetchSize": "50"})
            # pipeline persistent sends, a receipt on every 10th; ack some deliveries with receipts
            batch: list[bytes] = []
            for _ in range(300):
                n += 1
                body = b"m%d" % n
                batch.append(body)
                if n % 10 == 0:
                    p.send("SEND", body, destination="/queue/crash", persistent="true", receipt=body.decode())
                else:
                    p.send("SEND", body, destination="/queue/crash", persistent="true")
            deadline = time.monotonic() + 10
            acks_pending: dict[str, bytes] = {}
            while time.monotonic() < deadline and len(confirmed) < n // 10 * 10 - 10:
                f = p.recv()
                if f.command == "RECEIPT":
                    rid = (f.get("receipt-id") or "").encode()
                    # a receipt is cumulative: every earlier SEND of this connection is durable too
                    upto = batch.index(rid) + 1
                    confirmed.update(batch[:upto])
                if f.command == "RECEIPT" and rid == batch[-1]:
                    break
            for _ in range(20):
                m = c.recv()
                if m.command == "MESSAGE" and m.body not in acked:
                    rid = "ack-" + m.body.decode()
                    acks_pending[rid] = m.body
                    c.send("ACK", id=m.get("ack") or "", receipt=rid)
            c.sock.settimeout(5)
            while acks_pending:
                f = c.recv()
                if f.command == "RECEIPT":
                    acked.add(acks_pending.pop(f.get("receipt-id") or "", b""))
            # more in-flight traffic, then kill without warning
            for _ in range(50):
                n += 1
                p.send("SEND", b"m%d" % n, destination="/queue/crash", persistent="true")
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
    acked.discard(b"")
    proc, port = _start(tmp_path)
    try:
        c = Conn(port)
        c.send("SUBSCRIBE", destination="/queue/crash", id="s")
        c.send("SEND", b"barrier", destination="/queue/crash")
        seen: list[bytes] = []
        while True:
            m = c.recv()
            if m.body == b"barrier":
                break
            seen.append(m.body)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    assert len(seen) == len(set(seen)), "a message came back twice"
    assert confirmed - acked <= set(seen), f"lost confirmed messages: {sorted(confirmed - acked - set(seen))[:5]}"
    assert not (acked & set(seen)), f"acknowledged messages came back: {sorted(acked & set(seen))[:5]}"
    assert confirmed, "the test confirmed nothing: it checked nothing"
