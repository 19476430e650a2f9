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


def _receipt_each(endpoint: Endpoint, n: int, body: bytes, *, persistent: bool) -> float:
    client = LeanStompClient(endpoint)
    try:
        dest = _queue("receipt-each")
        t0 = time.perf_counter()
        for i in range(n):
            rid = str(i)
            client.send_raw(send_frame(dest, body, receipt=rid, persistent=persistent))
            client.wait_receipt(rid)
        elapsed = time.perf_counter() - t0
        _drain(client, dest, n)
    finally:
        client.close()
    return n / elapsed


def send_receipt_each(endpoint: Endpoint, n: int, body: bytes) -> float:
    """A receipt on every SEND, each waited for before the next SEND."""
    return _receipt_each(endpoint, n, body, persistent=False)


def send_persistent_1(endpoint: Endpoint, n: int, body: bytes) -> float:
    """persistent:true SENDs with a receipt each, one producer."""
    return _receipt_each(endpoint, n, body, persistent=True)


def send_persistent_8(endpoint: Endpoint, n: int, body: bytes, producers: int = 8) -> float:
    """persistent:true SENDs with a receipt each from 8 producers on separate connections, all at
    once (one outstanding SEND per producer), multiplexed in one thread with a selector."""
    clients = [LeanStompClient(endpoint) for _ in range(producers)]
    dest = _queue("persistent-8")
    quota = [n // producers + (1 if i < n % producers else 0) for i in range(producers)]
    sent = [0] * producers
    done = 0
    selector = selectors.DefaultSelector()
    try:
        t0 = time.perf_counter()
        for i, client in enumerate(clients):
            if quota[i]:
                client.send_raw(send_frame(dest, body, receipt="0", persistent=True))
                sent[i] = 1
                selector.register(client.sock, selectors.EVENT_READ, i)
        while done < n:
            events = selector.select(timeout=endpoint_timeout(clients[0]))
            if not events:
                raise BrokerError("bench: persistent-8 stalled: no receipt within the timeout")
            for key, _ in events:
                i = key.data
                client = clients[i]
                if not client.feed_available():
                    raise BrokerError(f"bench: producer {i} connection closed")
                while client.pending:
                    frame = client.next_frame()
                    if frame.command != "RECEIPT":
                        continue
                    done += 1
                    if sent[i] < quota[i]:
                        client.send_raw(send_frame(dest, body, receipt=str(sent[i]), persistent=True))
                        sent[i] += 1
        elapsed = time.perf_counter() - t0
        selector.close()
        _drain(clients[0], dest, n)
    finally:
        for client in clients:
            client.close()
    return n / elapsed


def endpoint_timeout(client: LeanStompClient) -> float:
    return client.timeout


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


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("send-async", "SEND, no receipts, clock stops at a receipt on the last", send_async),
    Scenario("send-receipt-each", "SEND with a receipt on each, waited one by one", send_receipt_each),
    Scenario("consume-auto", "consume pre-queued, ack:auto", consume_auto),
    Scenario("consume-client-individual", "consume pre-queued, client-individual, ACK each",
             consume_client_individual),
    Scenario("persistent-1", "persistent SEND with receipt, 1 producer", send_persistent_1, 0.25),
    Scenario("persistent-8", "persistent SEND with receipt, 8 producers (8 connections)", send_persistent_8, 0.25),
)
