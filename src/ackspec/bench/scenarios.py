"""The benchmark's scenarios (issue 3): each returns messages per second for one repetition.

Every scenario uses a fresh queue, 100-byte bodies (configurable) and leaves the queue empty
(messages sent by a send scenario are drained afterwards, outside the clock), so repetitions
and brokers do not influence each other through leftover messages.
"""

from __future__ import annotations

import selectors
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ackspec.bench.client import BrokerError, Endpoint, LeanStompClient, ack_id, escape_header, send_frame

BATCH_FRAMES = 256
"""SENDs joined into one write when no per-message receipt is awaited."""


def _queue(tag: str) -> str:
    return f"/queue/ackspec-bench-{tag}-{uuid.uuid4().hex[:10]}"


def pipelined_send(client: LeanStompClient, dest: str, body: bytes, n: int, *, persistent: bool = False) -> None:
    """n SENDs, written in batches, a receipt requested on the last only; returns after it."""
    for start in range(0, n, BATCH_FRAMES):
        stop = min(n, start + BATCH_FRAMES)
        frames = [send_frame(dest, body, persistent=persistent) for _ in range(start, stop - 1)]
        frames.append(send_frame(dest, body, persistent=persistent, receipt="last" if stop == n else None))
        client.send_raw(b"".join(frames))
    client.wait_receipt("last")


def _drain(client: LeanStompClient, dest: str, n: int) -> None:
    """Consumes n messages with ack:auto (outside the clock) so the broker is left clean."""
    sub = uuid.uuid4().hex[:8]
    client.send_raw(f"SUBSCRIBE\ndestination:{dest}\nid:{sub}\nack:auto\n\n\x00".encode())
    got = 0
    while got < n:
        if client.next_frame().command == "MESSAGE":
            got += 1
    client.send_raw(f"UNSUBSCRIBE\nid:{sub}\nreceipt:unsub-{sub}\n\n\x00".encode())
    client.wait_receipt(f"unsub-{sub}")


def send_async(endpoint: Endpoint, n: int, body: bytes) -> float:
    """Fire-and-forget SENDs; the clock stops at the receipt of the last one."""
    client = LeanStompClient(endpoint)
    try:
        dest = _queue("send-async")
        t0 = time.perf_counter()
        pipelined_send(client, dest, body, n)
        elapsed = time.perf_counter() - t0
        _drain(client, dest, n)
    finally:
        client.close()
    return n / elapsed


class ReceiptEachProducer:
    """One connection sending to one fresh queue and waiting for the receipt of every SEND before the
    next: the session behind the receipt-each and persistent-1 rows. ``block(n)`` times n SENDs;
    ``close()`` drains what all blocks sent (outside any clock) and disconnects."""

    def __init__(self, endpoint: Endpoint, body: bytes, *, persistent: bool) -> None:
        self.client = LeanStompClient(endpoint)
        self.dest = _queue("receipt-each")
        self.body = body
        self.persistent = persistent
        self.sent = 0

    def block(self, n: int) -> float:
        """Seconds taken by n SENDs, each waited for."""
        client, dest, body, persistent = self.client, self.dest, self.body, self.persistent
        t0 = time.perf_counter()
        for i in range(self.sent, self.sent + n):
            rid = str(i)
            client.send_raw(send_frame(dest, body, receipt=rid, persistent=persistent))
            client.wait_receipt(rid)
        elapsed = time.perf_counter() - t0
        self.sent += n
        return elapsed

    def close(self) -> None:
        try:
            _drain(self.client, self.dest, self.sent)
        finally:
            self.client.close()


class GroupProducers:
    """persistent:true SENDs with a receipt each from several producers on separate connections, all
    at once (one outstanding SEND per producer), multiplexed in one thread with a selector: the
    session behind the persistent-8 row. ``block(n)`` times n receipts in all."""

    def __init__(self, endpoint: Endpoint, body: bytes, producers: int = 8) -> None:
        self.clients: list[LeanStompClient] = []
        try:
            for _ in range(producers):
                self.clients.append(LeanStompClient(endpoint))
        except BaseException:
            self._disconnect()
            raise
        self.dest = _queue("persistent-8")
        self.body = body
        self.sent = 0

    def _send(self, i: int) -> None:
        self.clients[i].send_raw(send_frame(self.dest, self.body, receipt=str(self.sent), persistent=True))
        self.sent += 1

    def block(self, n: int) -> float:
        """Seconds until n SENDs spread over the producers have their receipts."""
        stop = self.sent + n
        done = 0
        with selectors.DefaultSelector() as selector:
            t0 = time.perf_counter()
            for i, client in enumerate(self.clients):
                if self.sent < stop:
                    self._send(i)
                    selector.register(client.sock, selectors.EVENT_READ, i)
            while done < n:
                events = selector.select(timeout=self.clients[0].timeout)
                if not events:
                    raise BrokerError("bench: persistent-8 stalled: no receipt within the timeout")
                for key, _ in events:
                    done += self._receipts(key.data, stop)
            return time.perf_counter() - t0

    def _receipts(self, i: int, stop: int) -> int:
        """Reads producer i's answers; each RECEIPT lets it send its next SEND, up to ``stop`` in all."""
        client = self.clients[i]
        if not client.feed_available():
            raise BrokerError(f"bench: producer {i} connection closed")
        receipts = 0
        while client.pending:
            if client.next_frame().command != "RECEIPT":
                continue
            receipts += 1
            if self.sent < stop:
                self._send(i)
        return receipts

    def close(self) -> None:
        try:
            _drain(self.clients[0], self.dest, self.sent)
        finally:
            self._disconnect()

    def _disconnect(self) -> None:
        for client in self.clients:
            client.close()


class BlockSession(Protocol):
    """A scenario's connections kept open over several timed blocks (``ackspec bench --paired``)."""

    def block(self, n: int) -> float: ...

    def close(self) -> None: ...


def once(session: Callable[[Endpoint, bytes], BlockSession]) -> Callable[[Endpoint, int, bytes], float]:
    """A scenario's ``run`` from its session: one block of n messages on fresh connections, in msg/s."""

    def run(endpoint: Endpoint, n: int, body: bytes) -> float:
        opened = session(endpoint, body)
        try:
            elapsed = opened.block(n)
        finally:
            opened.close()
        return n / elapsed

    return run


def receipt_each_session(endpoint: Endpoint, body: bytes) -> BlockSession:
    """A receipt on every SEND, each waited for before the next SEND."""
    return ReceiptEachProducer(endpoint, body, persistent=False)


def persistent_1_session(endpoint: Endpoint, body: bytes) -> BlockSession:
    """persistent:true SENDs with a receipt each, one producer."""
    return ReceiptEachProducer(endpoint, body, persistent=True)


def persistent_8_session(endpoint: Endpoint, body: bytes) -> BlockSession:
    """persistent:true SENDs with a receipt each, 8 producers on 8 connections."""
    return GroupProducers(endpoint, body)


send_receipt_each = once(receipt_each_session)
send_persistent_1 = once(persistent_1_session)
send_persistent_8 = once(persistent_8_session)


def _prequeue(client: LeanStompClient, n: int, body: bytes, tag: str) -> str:
    dest = _queue(tag)
    pipelined_send(client, dest, body, n)
    return dest


def consume_auto(endpoint: Endpoint, n: int, body: bytes) -> float:
    """Consume n pre-queued messages with ack:auto; the clock runs from SUBSCRIBE to the last MESSAGE."""
    client = LeanStompClient(endpoint)
    try:
        dest = _prequeue(client, n, body, "consume-auto")
        t0 = time.perf_counter()
        client.send_raw(f"SUBSCRIBE\ndestination:{dest}\nid:s\nack:auto\n\n\x00".encode())
        got = 0
        while got < n:
            if client.next_frame().command == "MESSAGE":
                got += 1
        elapsed = time.perf_counter() - t0
    finally:
        client.close()
    return n / elapsed


def consume_client_individual(endpoint: Endpoint, n: int, body: bytes) -> float:
    """Consume n pre-queued messages with ack:client-individual and an ACK for each (the broker's
    default prefetch); the clock stops at the receipt of the last ACK.

    Every MESSAGE gets its own ACK frame, sent before the client blocks for more input: the ACKs
    of the MESSAGEs one read brought are written together (one ``sendall`` per read, not per
    message), as a client that acknowledges what it has processed would, so that the client's
    system calls do not cap the rate it measures."""
    client = LeanStompClient(endpoint)
    try:
        dest = _prequeue(client, n, body, "consume-ci")
        t0 = time.perf_counter()
        client.send_raw(f"SUBSCRIBE\ndestination:{dest}\nid:s\nack:client-individual\n\n\x00".encode())
        got = 0
        acks: list[bytes] = []
        while got < n:
            if not client.pending and acks:
                client.send_raw(b"".join(acks))
                acks.clear()
            frame = client.next_frame()
            if frame.command != "MESSAGE":
                continue
            got += 1
            receipt = "receipt:last-ack\n" if got == n else ""
            acks.append(f"ACK\nid:{escape_header(ack_id(frame))}\n{receipt}\n\x00".encode())
        client.send_raw(b"".join(acks))
        client.wait_receipt("last-ack")
        elapsed = time.perf_counter() - t0
    finally:
        client.close()
    return n / elapsed


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    run: Callable[[Endpoint, int, bytes], float]
    scale: float = 1.0
    """Fraction of --messages this scenario sends (the one-by-one persistent rows are slow)."""
    session: Callable[[Endpoint, bytes], BlockSession] | None = None
    """How to keep the scenario's connections open over several blocks; None if it cannot be paired."""


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("send-async", "SEND, no receipts, clock stops at a receipt on the last", send_async),
    Scenario("send-receipt-each", "SEND with a receipt on each, waited one by one", send_receipt_each,
             session=receipt_each_session),
    Scenario("consume-auto", "consume pre-queued, ack:auto", consume_auto),
    Scenario("consume-client-individual", "consume pre-queued, client-individual, ACK each",
             consume_client_individual),
    Scenario("persistent-1", "persistent SEND with receipt, 1 producer", send_persistent_1, 0.25,
             persistent_1_session),
    Scenario("persistent-8", "persistent SEND with receipt, 8 producers (8 connections)", send_persistent_8, 0.25,
             persistent_8_session),
)
