"""The asyncio server and EmbeddedBroker over real sockets: stomp.py interop, restart durability,
control API, connection limits. Waits are on receipts/messages with timeouts, never fixed sleeps."""

from __future__ import annotations

import asyncio
import json
import queue
import select
import selectors
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import stomp

from ackspec.errors import AckspecError
from ackspec.reference import server as server_module
from ackspec.reference.server import SYNC_GATHER_MIN, BrokerServer, EmbeddedBroker, new_event_loop, timer_floor
from ackspec.reference.stomp.codec import encode
from ackspec.reference.stomp.frames import Frame

from ._req import requirement
from .raw_stomp import Raw


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(control=True) as b:
        yield b


def test_raw_roundtrip_and_error_isolated(broker: EmbeddedBroker) -> None:
    c = Raw(broker).connect()
    c.send("SUBSCRIBE", destination="/queue/srv1", id="1", ack="client-individual")
    bad = Raw(broker).connect()
    bad.sock.sendall(b"BOGUS\n\n\x00")
    err = bad.recv()
    assert err.command == "ERROR" and "unknown command" in (err.get("message") or "")
    assert bad.closed_by_peer()
    p = Raw(broker).connect()
    p.send("SEND", b"hi", destination="/queue/srv1", receipt="r")
    assert p.recv().get("receipt-id") == "r"
    m = c.recv()
    assert m.body == b"hi"
    c.send("ACK", id=m.get("ack") or "", receipt="a")
    assert c.recv().get("receipt-id") == "a"


@requirement("STOMP-RECEIPT-PERSISTENT-DURABLE", "JMS-9.1-QUEUE-PERSISTENT-RELIABLE")
def test_restart_keeps_persistent_unacked_only() -> None:
    with EmbeddedBroker() as b:
        p = Raw(b).connect()
        for i in range(5):
            p.send("SEND", b"%d" % i, destination="/queue/dur", persistent="true")
        p.send("SEND", b"np", destination="/queue/dur")
        p.send("DISCONNECT", receipt="bye")
        assert p.recv().get("receipt-id") == "bye"
        c = Raw(b).connect()
        c.send("SUBSCRIBE", destination="/queue/dur", id="1", ack="client-individual")
        first = c.recv()
        c.send("ACK", id=first.get("ack") or "", receipt="a")
        while c.recv().command != "RECEIPT":
            pass
        b.restart()
        c2 = Raw(b).connect()
        c2.send("SUBSCRIBE", destination="/queue/dur", id="1")
        got = [c2.recv() for _ in range(4)]
        assert [f.body for f in got] == [b"1", b"2", b"3", b"4"]
        assert all(f.get("redelivered") == "true" for f in got)
        c2.send("SEND", b"marker", destination="/queue/dur")
        assert c2.recv().body == b"marker"  # barrier: nothing else (no acked "0", no non-persistent "np")


def test_stomp_py_interop(broker: EmbeddedBroker) -> None:
    got: queue.Queue[stomp.utils.Frame] = queue.Queue()
    conn = stomp.Connection12([broker.stomp_address], vhost="/")

    class Listener(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: stomp.utils.Frame) -> None:
            got.put(frame)

    conn.set_listener("", Listener())
    conn.connect(wait=True)
    conn.subscribe("/queue/pyinterop", id="1", ack="client-individual")
    for i in range(20):
        conn.send("/queue/pyinterop", body=f"m{i}", headers={"persistent": "true", "x-custom": "a:b"})
    bodies = []
    for _ in range(20):
        f = got.get(timeout=5)
        assert f.headers["x-custom"] == "a:b"
        bodies.append(f.body)
        conn.ack(f.headers["ack"])
    assert bodies == [f"m{i}" for i in range(20)]
    conn.disconnect(receipt="bye")


def test_control_api(broker: EmbeddedBroker) -> None:
    base = broker.control_url
    assert base is not None

    def call(method: str, path: str, body: object = None) -> object:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {broker.control_token}"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())

    rid = call("POST", "/faults/rules", {"destination": "/queue/ctl", "reject_send": "refused by test"})
    assert isinstance(rid, dict)
    p = Raw(broker).connect()
    p.send("SEND", b"x", destination="/queue/ctl", receipt="r")
    err = p.recv()
    assert err.command == "ERROR" and err.get("message") == "refused by test" and err.get("receipt-id") == "r"
    call("DELETE", f"/faults/rules/{rid['id']}")
    call("POST", "/faults/rules", {"destination": "/queue/ctl2", "receipt_delay": 0.5})
    snapshot = call("GET", "/faults")
    assert isinstance(snapshot, dict) and snapshot["rules"][0]["receipt_delay"] == 0.5
    call("DELETE", "/faults")
    assert call("GET", "/faults") == {"rules": []}
    trace = call("GET", "/trace")
    assert isinstance(trace, dict) and trace.get("STOMP-ERROR-CLOSES", 0) >= 1


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", "Basic abc"])
def test_control_api_refuses_requests_without_the_token(broker: EmbeddedBroker, authorization: str | None) -> None:
    """One unauthenticated POST used to turn on message loss (issue 20): now every request needs the token."""
    base = broker.control_url
    assert base is not None
    headers = {"Content-Type": "application/json"}
    if authorization is not None:
        headers["Authorization"] = authorization
    req = urllib.request.Request(base + "/faults/rules", data=json.dumps({"reject_send": "lost"}).encode(),
                                 method="POST", headers=headers)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=5)
    assert refused.value.code == 401
    assert broker.faults.snapshot()["rules"] == []


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.1", "example.org"])
def test_control_api_listens_on_loopback_only(host: str) -> None:
    with pytest.raises(AckspecError, match="loopback only"):
        EmbeddedBroker(persistent=False, control=(host, 0)).start()


def test_connection_limit() -> None:
    with EmbeddedBroker(persistent=False) as b:
        assert isinstance(b.server, BrokerServer)
        b.server.max_connections = 1
        first = Raw(b).connect()
        second = Raw(b)
        f = second.recv()
        assert f.command == "ERROR" and "too many connections" in (f.get("message") or "")
        first.send("DISCONNECT")


@requirement("STOMP-RECEIPT-PERSISTENT-DURABLE")
def test_group_commit_shares_fsyncs() -> None:
    """Many producers with a receipt on every persistent SEND: far fewer fsyncs than receipts."""
    with EmbeddedBroker() as b:
        producers = [Raw(b).connect() for _ in range(8)]
        per = 50
        for i in range(per):
            for k, p in enumerate(producers):
                p.send("SEND", b"x", destination=f"/queue/gc{k}", persistent="true", receipt=f"{k}-{i}")
        for k, p in enumerate(producers):
            got = [p.recv().get("receipt-id") for _ in range(per)]
            assert got == [f"{k}-{i}" for i in range(per)]  # in order, all of them
        server = b.server
        assert isinstance(server, BrokerServer) and server.journal is not None
        assert 0 < server.journal.syncs < len(producers) * per / 2


@requirement("STOMP-RECEIPT-PERSISTENT-DURABLE")
@pytest.mark.parametrize("event_loop", ["asyncio", "uvloop"])
def test_group_commit_with_closed_loop_producers(event_loop: str) -> None:
    """8 producers, each sending its next persistent SEND only when the previous one's receipt
    came back (the benchmark's persistent-8 pattern): they still share fsyncs, on either loop
    (uvloop is ``ackspec broker``'s default)."""
    with EmbeddedBroker(event_loop=event_loop) as b:
        producers = [Raw(b).connect() for _ in range(8)]
        per = 25
        sent = [1] * len(producers)
        sel = selectors.DefaultSelector()
        for k, p in enumerate(producers):
            p.send("SEND", b"x", destination="/queue/gcl", persistent="true", receipt="0")
            sel.register(p.sock, selectors.EVENT_READ, k)
        done = 0
        while done < per * len(producers):
            events = sel.select(timeout=5)
            assert events, "no receipt within 5 s"
            for key, _ in events:
                k = key.data
                f = producers[k].recv()
                assert f.command == "RECEIPT" and f.get("receipt-id") == str(sent[k] - 1)
                done += 1
                if sent[k] < per:
                    producers[k].send("SEND", b"x", destination="/queue/gcl", persistent="true",
                                      receipt=str(sent[k]))
                    sent[k] += 1
        sel.close()
        server = b.server
        assert isinstance(server, BrokerServer) and server.journal is not None
        assert 0 < server.journal.syncs < done / 2
        assert b.call(lambda core: core.queue_depth("/queue/gcl")) == done


@pytest.mark.parametrize("kind", ["asyncio", "uvloop"])
def test_the_shortest_gather_really_waits(kind: str) -> None:
    """The group-commit gather's shortest wait, as the server asks the loop for it, is not cut to nothing:
    uvloop rounds a timer under 0.5 ms to none (the callback runs in the next iteration), which would end
    every gather at once and split closed-loop producers into alternating fsyncs."""
    loop = new_event_loop(kind)
    try:
        async def elapsed() -> float:
            done = loop.create_future()
            t0 = time.perf_counter()
            loop.call_later(max(SYNC_GATHER_MIN, timer_floor(loop)), done.set_result, None)
            await asyncio.wait_for(done, 5)
            return time.perf_counter() - t0

        assert loop.run_until_complete(elapsed()) >= SYNC_GATHER_MIN
    finally:
        loop.close()


def _recorded_syncs(b: EmbeddedBroker) -> list[tuple[str, int]]:
    """Wraps the journal's fsync: records the thread and the synced size of each."""
    assert b.server is not None and b.server.journal is not None
    journal = b.server.journal
    syncs: list[tuple[str, int]] = []
    real_sync = journal.sync

    def sync() -> None:
        real_sync()
        syncs.append((threading.current_thread().name, journal.synced_size))

    journal.sync = sync  # type: ignore[method-assign]
    return syncs


def _on_sync_thread(name: str) -> bool:
    return name.startswith("ackspec-journal-sync")


@requirement("STOMP-RECEIPT-PERSISTENT-DURABLE")
def test_a_lone_connections_record_is_synced_on_the_loop_before_its_receipt() -> None:
    """With one connection on the broker and one record to sync, the fsync runs on the loop (no hand-over
    to the sync thread): the receipt still comes only once the fsync covering the record has ended."""
    with EmbeddedBroker() as b:
        syncs = _recorded_syncs(b)
        assert b.server is not None and b.server.journal is not None
        journal = b.server.journal
        producer = Raw(b).connect()
        producer.send("SEND", b"kept", destination="/queue/lone", persistent="true", receipt="durable")
        assert producer.recv().get("receipt-id") == "durable"
        size_at_receipt = journal.size
        assert syncs, "a receipt for a persistent SEND came without any fsync"
        thread, synced = syncs[-1]
        assert synced == size_at_receipt
        assert not _on_sync_thread(thread), thread


def test_a_group_of_lone_records_is_synced_on_the_loop_before_their_receipts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Three producers, each sending its next persistent SEND as soon as the last one's receipt came, nobody
    else connected: once the first fsync has released some of them and the others wait, every connection
    awaits the next fsync with one record in it, so that fsync runs on the loop (none of them could be
    stalled by it or join it); and each receipt still comes only once the fsync covering it has ended."""
    # the gather waits (bounded) for every producer an fsync released, however loaded the machine is
    monkeypatch.setattr(server_module, "SYNC_GATHER_MAX", 10.0)
    monkeypatch.setattr(server_module, "SYNC_GATHER_MIN", 10.0)
    with EmbeddedBroker() as b:
        syncs = _recorded_syncs(b)
        assert b.server is not None and b.server.journal is not None
        journal = b.server.journal
        producers = [Raw(b).connect() for _ in range(3)]
        sent = {id(p): 1 for p in producers}
        for n, p in enumerate(producers):
            p.send("SEND", b"x", destination="/queue/group-lone", persistent="true", receipt=f"{n}-1")
        answered: list[str] = []
        open_producers = dict(enumerate(producers))
        while open_producers:
            readable = select.select([p.sock for p in open_producers.values()], [], [], 10)[0]
            assert readable, f"no receipt within 10 s (answered: {answered})"
            for n, p in list(open_producers.items()):
                if p.sock in readable:
                    answered.append(p.recv().get("receipt-id") or "")
                    if sent[id(p)] == 1:
                        sent[id(p)] = 2
                        p.send("SEND", b"y", destination="/queue/group-lone", persistent="true", receipt=f"{n}-2")
                    else:  # done: gone, so that no gather waits for it to send again
                        p.sock.close()
                        del open_producers[n]
        assert sorted(answered) == ["0-1", "0-2", "1-1", "1-2", "2-1", "2-2"]
        assert syncs[-1][1] == journal.size, "the last receipts came before the fsync covering their records"
        assert not all(_on_sync_thread(thread) for thread, _ in syncs), syncs


def test_a_pipelining_or_idle_connection_keeps_the_fsync_on_the_sync_thread() -> None:
    """Two records from one connection in one fsync (a pipelining producer could add more meanwhile), or
    a connection waiting for nothing (it must not be stalled): the fsync runs on the sync thread."""
    with EmbeddedBroker() as b:
        syncs = _recorded_syncs(b)
        producer = Raw(b).connect()
        frames = [Frame("SEND", (("destination", "/queue/pipelined"), ("persistent", "true"), ("receipt", r)), b"x")
                  for r in ("p-1", "p-2")]
        producer.sock.sendall(b"".join(encode(f) for f in frames))
        assert [producer.recv().get("receipt-id") for _ in frames] == ["p-1", "p-2"]
        idle = Raw(b).connect()
        producer.send("SEND", b"y", destination="/queue/pipelined", persistent="true", receipt="p-3")
        assert producer.recv().get("receipt-id") == "p-3"
        assert idle.sock.fileno() >= 0
        assert syncs and all(_on_sync_thread(thread) for thread, _ in syncs), syncs


@requirement("STOMP-RECEIPT-PERSISTENT-DURABLE")
def test_a_slow_fsync_does_not_stall_another_connection() -> None:
    """The fsync runs on the sync thread: another connection is answered while the disk syncs one
    connection's persistent SEND, whose receipt still waits for the fsync."""
    with EmbeddedBroker() as b:
        assert b.server is not None and b.server.journal is not None
        journal = b.server.journal
        journal.sync_delay = 1.0  # a slow disk
        syncing = threading.Event()
        real_sync = journal.sync

        def sync() -> None:
            syncing.set()
            real_sync()

        journal.sync = sync  # type: ignore[method-assign]
        producer, other = Raw(b).connect(), Raw(b).connect()
        producer.send("SEND", b"kept", destination="/queue/slowsync", persistent="true", receipt="durable")
        assert syncing.wait(5), "no fsync started"
        other.send("SEND", b"plain", destination="/queue/slowsync-other", receipt="plain")
        assert other.recv().get("receipt-id") == "plain"
        assert not select.select([producer.sock], [], [], 0)[0], "the durable receipt came before its fsync ended"
        assert producer.recv().get("receipt-id") == "durable"
        assert journal.synced_size == journal.size
