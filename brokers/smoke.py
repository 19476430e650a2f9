#!/usr/bin/env python3
"""Smoke check of running brokers with clients we did not write: stomp.py and python-qpid-proton.

    python brokers/smoke.py [NAME...]      (default: every broker whose STOMP port is open)

For each broker: connect, send 3 persistent messages with receipts, receive them with client-individual
ACK over STOMP; and where the broker has AMQP 1.0, send 3 unsettled transfers (each must be accepted)
and receive them back with credit. Loopback only. Exit 1 if any check fails.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
import uuid

import stomp
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "src"))
from ackspec.brokers import BROKERS, BrokerInfo


class _Collector(stomp.ConnectionListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.messages: list[stomp.utils.Frame] = []
        self.receipts: set[str] = set()
        self.errors: list[str] = []
        self.cond = threading.Condition()

    def on_message(self, frame: stomp.utils.Frame) -> None:
        with self.cond:
            self.messages.append(frame)
            self.cond.notify_all()

    def on_receipt(self, frame: stomp.utils.Frame) -> None:
        with self.cond:
            self.receipts.add(frame.headers["receipt-id"])
            self.cond.notify_all()

    def on_error(self, frame: stomp.utils.Frame) -> None:
        with self.cond:
            self.errors.append(frame.headers.get("message", frame.body))
            self.cond.notify_all()

    def wait(self, pred: object, timeout: float = 10.0) -> bool:
        with self.cond:
            return self.cond.wait_for(pred, timeout)  # type: ignore[arg-type]


def stomp_check(info: BrokerInfo, n: int = 3) -> str:
    conn = stomp.Connection12([("127.0.0.1", info.stomp_port)], vhost=info.vhost, heartbeats=(0, 0))
    listener = _Collector()
    conn.set_listener("c", listener)
    conn.connect(info.login, info.passcode, wait=True)
    dest = f"/queue/ackspec-smoke-{uuid.uuid4().hex[:8]}"
    for i in range(n):
        conn.send(dest, f"m-{i}", headers={"persistent": "true"}, receipt=f"r-{i}")
    if not listener.wait(lambda: len(listener.receipts) == n):
        raise AssertionError(f"receipts: {sorted(listener.receipts)} errors: {listener.errors}")
    conn.subscribe(dest, id="s1", ack="client-individual")
    if not listener.wait(lambda: len(listener.messages) == n):
        raise AssertionError(f"received {len(listener.messages)}/{n}; errors: {listener.errors}")
    bodies = [m.body for m in listener.messages]
    if bodies != [f"m-{i}" for i in range(n)]:
        raise AssertionError(f"bodies {bodies}")
    for m in listener.messages:
        conn.ack(m.headers["ack"] if "ack" in m.headers else m.headers["message-id"], "s1")
    conn.disconnect(receipt="bye")
    return f"STOMP {info.stomp_url}: {n} sent with receipts, {n} received in order, acked"


class _AmqpRoundTrip(MessagingHandler):  # type: ignore[misc]
    def __init__(self, info: BrokerInfo, address: str, n: int) -> None:
        super().__init__(prefetch=0, auto_accept=False)
        self.url, self.address, self.n = str(info.amqp_url), address, n
        self.login, self.passcode = info.login, info.passcode
        self.accepted = 0
        self.received: list[str] = []
        self.error = ""

    def on_start(self, event: object) -> None:
        conn = event.container.connect(  # type: ignore[attr-defined]
            self.url, user=self.login, password=self.passcode,
            allowed_mechs="PLAIN", allow_insecure_mechs=True,
        )
        event.container.create_sender(conn, self.address, name="smoke-sender")  # type: ignore[attr-defined]

    def on_sendable(self, event: object) -> None:
        sender = event.sender  # type: ignore[attr-defined]
        while sender.credit and getattr(self, "sent", 0) < self.n:
            sender.send(Message(body=f"a-{getattr(self, 'sent', 0)}", durable=True))
            self.sent = getattr(self, "sent", 0) + 1

    def on_accepted(self, event: object) -> None:
        self.accepted += 1
        if self.accepted == self.n:
            receiver = event.container.create_receiver(  # type: ignore[attr-defined]
                event.connection, self.address, name="smoke-receiver")  # type: ignore[attr-defined]
            receiver.flow(self.n)

    def on_rejected(self, event: object) -> None:
        self.error = f"rejected: {event.delivery.remote_state}"  # type: ignore[attr-defined]
        event.connection.close()  # type: ignore[attr-defined]

    def on_message(self, event: object) -> None:
        self.received.append(str(event.message.body))  # type: ignore[attr-defined]
        self.accept(event.delivery)  # type: ignore[attr-defined]
        if len(self.received) == self.n:
            event.connection.close()  # type: ignore[attr-defined]

    def on_transport_error(self, event: object) -> None:
        cond = event.transport.condition  # type: ignore[attr-defined]
        self.error = f"transport error: {cond.name if cond else '?'} {cond.description if cond else ''}"


def amqp_check(info: BrokerInfo, n: int = 3) -> str:
    assert info.amqp_url is not None
    address = f"/queue/ackspec-smoke-amqp-{uuid.uuid4().hex[:8]}"
    handler = _AmqpRoundTrip(info, address, n)
    container = Container(handler)
    container.container_id = f"ackspec-smoke-{uuid.uuid4().hex[:6]}"
    done = threading.Event()
    thread = threading.Thread(target=lambda: (container.run(), done.set()), daemon=True)
    thread.start()
    if not done.wait(15):
        container.stop()
        raise AssertionError(f"AMQP timeout: accepted {handler.accepted}/{n}, received {handler.received}")
    if handler.error or handler.received != [f"a-{i}" for i in range(n)]:
        raise AssertionError(f"AMQP: {handler.error or handler.received}")
    return f"AMQP  {info.amqp_url}: {n} durable transfers accepted, {n} received and accepted"


def main(argv: list[str]) -> int:
    names = argv or [
        name for name, info in BROKERS.items()
        if socket.socket().connect_ex(("127.0.0.1", info.stomp_port)) == 0
    ]
    failures = 0
    for name in names:
        info = BROKERS[name]
        checks = [stomp_check] + ([amqp_check] if info.amqp_port else [])
        for check in checks:
            t0 = time.monotonic()
            try:
                print(f"ok   {name:<10} {check(info)} ({(time.monotonic() - t0) * 1000:.0f} ms)")
            except Exception as exc:
                failures += 1
                print(f"FAIL {name:<10} {check.__name__}: {exc.__class__.__name__}: {exc}")
    if not names:
        print("no broker is running (brokers/start.sh NAME)")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
