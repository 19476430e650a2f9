"""Soak benchmark of the reference broker (issue 20): memory under a 1 GB backlog with 2,000 idle connections,
receipted messages across SIGKILL cycles, and journal damage.

    python benchmarks/soak.py memory [--backlog-mb 1024] [--idle 2000] [--bound-mb 640] [--ack client|auto]
    python benchmarks/soak.py kill   [--cycles 50]
    python benchmarks/soak.py damage [--records 2000] [--cases 200]
    python benchmarks/soak.py churn                (4 x 2,000 AMQP connections opened and closed)
    python benchmarks/soak.py all    [--json FILE]

Each part prints one line of figures and exits 1 when its claim does not hold:

* ``memory``: a standalone broker (``--max-queued-bytes 256 MiB``, the default) holds ``--idle`` idle
  connections (half STOMP CONNECTed, half AMQP opened) while one producer pushes ``--backlog-mb`` of
  4 KiB non-persistent messages at a queue nobody reads; once the producer is held back, a slow consumer
  (client acknowledgements, cumulative every 500, prefetch 1000) drains the queue and the producer
  finishes. The claim: the broker's peak resident memory (VmHWM) stays under ``--bound-mb``, and every
  message arrives. ``--ack auto``: the consumer subscribes ``ack:auto`` (no prefetch bound, nothing to
  acknowledge), so only the broker's consumer back-pressure keeps the backlog out of its output buffers.
* ``kill``: ``--cycles`` times: start a broker on a data directory, send persistent messages with receipts
  for a random 0.05-0.4 s, SIGKILL the broker mid-stream. Then start it once more and drain the queue. The
  claim: no receipted message is missing (0 lost) and nothing that was never sent appears.
* ``damage``: a journal of ``--records`` records gets a flipped byte or a zeroed 4 KiB block at random
  offsets; the claim: every record the damage did not touch is either kept (``--recover skip-corrupt``)
  or the replay refuses (the default), never silently dropped, for every case.

CI runs ``kill`` with 50 cycles in its slow set (tests/reference/test_soak.py); ``memory`` needs minutes and
a quiet machine, so it is run by hand and its figures go to docs/soak.md with the date and load.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ackspec.reference.stomp.codec import FrameParser, encode
from ackspec.reference.stomp.frames import Frame

MiB = 1024 * 1024


# ------------------------------------------------------------------ a broker process


class Broker:
    """``ackspec broker`` in a subprocess; its URLs are read from its first stdout lines."""

    def __init__(self, *args: str, amqp: bool = False) -> None:
        cmd = [sys.executable, "-m", "ackspec", "broker", "--stomp", "127.0.0.1:0", *args]
        if amqp:
            cmd += ["--amqp", "127.0.0.1:0"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("ackspec broker: stomp://"):
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise SystemExit(f"broker did not start: {line!r} {err[-2000:]}")
        host, port = line.split("//")[1].strip().rsplit(":", 1)
        self.stomp = (host, int(port))
        self.amqp: tuple[str, int] | None = None
        if amqp:
            host, port = self.proc.stdout.readline().split("//")[1].strip().rsplit(":", 1)
            self.amqp = (host, int(port))
        # stderr must be drained or a chatty broker blocks on a full pipe
        threading.Thread(target=lambda: self.proc.stderr and self.proc.stderr.read(), daemon=True).start()

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)


class Stomp:
    """A raw STOMP 1.2 connection with a sans-IO parser; every read has a deadline."""

    def __init__(self, address: tuple[str, int], timeout: float = 30) -> None:
        self.sock = socket.create_connection(address, timeout=timeout)
        self.parser = FrameParser()
        self.pending: list[Frame] = []
        self.send("CONNECT", b"", **{"accept-version": "1.2", "host": "/"})
        assert self.recv().command == "CONNECTED"

    def send(self, command: str, body: bytes = b"", **headers: str) -> None:
        self.sock.sendall(encode(Frame(command, tuple(headers.items()), body)))

    def recv(self) -> Frame:
        while not self.pending:
            data = self.sock.recv(1 << 20)
            if not data:
                raise EOFError("connection closed")
            self.pending += [f for f in self.parser.feed(data) if isinstance(f, Frame)]
        return self.pending.pop(0)


# ------------------------------------------------------------------ memory


class IdleAmqp:
    """An AMQP connection opened (SASL ANONYMOUS, open, nothing else) on a plain blocking socket with
    proton's engine: proton's own blocking client uses select() and stops at 1,024 descriptors."""

    def __init__(self, address: tuple[str, int]) -> None:
        from proton import Endpoint  # noqa: PLC0415 (only this part needs proton)

        from ackspec.reference.amqp.pump import EnginePump, client_engine  # noqa: PLC0415

        self.conn, transport, collector = client_engine("soak-idle", address[0], None, None)
        pump = EnginePump(transport, collector, lambda _event: None)
        self.sock = socket.create_connection(address, timeout=30)
        self.conn.open()
        while not self.conn.state & Endpoint.REMOTE_ACTIVE:
            out = pump.take_output()
            if out:
                self.sock.sendall(out)
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("AMQP connection closed before its open")
            pump.feed(data)
            pump.dispatch()

    def close(self) -> None:
        self.sock.close()


def _idle_connections(broker: Broker, count: int) -> list[Any]:
    """``count`` idle connections: half STOMP (connected), half AMQP (opened)."""
    held: list[Any] = [Stomp(broker.stomp) for _ in range(count // 2)]
    assert broker.amqp is not None
    held += [IdleAmqp(broker.amqp) for _ in range(count - count // 2)]
    return held


def _consume(consumer: Stomp, ack: str) -> int:
    """Read until the ``end`` message; ``ack="client"``: acknowledge cumulatively every 500 messages."""
    received = 0
    while True:
        f = consumer.recv()
        if f.command == "MESSAGE":
            received += 1
            if ack == "client" and (received % 500 == 0 or f.body == b"end"):
                consumer.send("ACK", id=f.get("ack") or "")  # cumulative
            if f.body == b"end":
                return received


def memory(backlog_mb: int, idle: int, bound_mb: float, ack: str = "client") -> dict[str, Any]:
    body = b"m" * 4096
    count = backlog_mb * MiB // len(body)
    broker = Broker("--max-connections", str(idle + 100), amqp=True)
    try:
        base = broker.peak_rss_mb()
        held = _idle_connections(broker, idle)
        with_idle = broker.peak_rss_mb()
        producer = Stomp(broker.stomp)
        frame = encode(Frame("SEND", (("destination", "/queue/soak"),), body))
        chunk = frame * 256

        def produce() -> None:
            for _ in range(count // 256):
                producer.sock.sendall(chunk)
            producer.send("SEND", b"end", destination="/queue/soak", receipt="done")

        started = time.monotonic()
        thread = threading.Thread(target=produce, daemon=True)
        thread.start()
        thread.join(10)  # the producer is held back long before 1 GB: the join times out
        held_back = thread.is_alive()
        consumer = Stomp(broker.stomp)  # a slow consumer: client acks, 1000 unacknowledged at most; or ack:auto
        prefetch = {"activemq.prefetchSize": "1000"} if ack == "client" else {}
        consumer.send("SUBSCRIBE", b"", destination="/queue/soak", id="1", ack=ack, **prefetch)
        received = _consume(consumer, ack)
        thread.join(60)
        seconds = time.monotonic() - started
        peak = broker.peak_rss_mb()
        for c in held:
            c.sock.close()
    finally:
        broker.stop()
    expected = (count // 256) * 256 + 1
    ok = peak < bound_mb and received == expected and held_back
    return {"part": "memory", "ok": ok, "ack": ack, "backlog_mb": backlog_mb, "idle_connections": idle,
            "messages": expected, "received": received, "producer_held_back": held_back,
            "rss_start_mb": round(base, 1), "rss_with_idle_mb": round(with_idle, 1),
            "rss_peak_mb": round(peak, 1), "bound_mb": bound_mb, "seconds": round(seconds, 1)}


# ------------------------------------------------------------------ churn


def churn(connections: int, rounds: int) -> dict[str, Any]:
    """``rounds`` times, open and close ``connections`` AMQP connections one after another; the broker's
    resident memory after each round. The claim: it levels off (the last round adds under 10 MB)."""
    broker = Broker(amqp=True)
    assert broker.amqp is not None

    def rss_mb() -> float:
        for line in Path(f"/proc/{broker.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    after = [round(rss_mb(), 1)]
    try:
        for _ in range(rounds):
            for _ in range(connections):
                IdleAmqp(broker.amqp).close()
            Stomp(broker.stomp).send("DISCONNECT", receipt="x")  # a round trip: the closes were handled
            after.append(round(rss_mb(), 1))
    finally:
        broker.stop()
    return {"part": "churn", "ok": after[-1] - after[-2] < 10, "connections_per_round": connections,
            "rss_mb_after_each_round": after}


# ------------------------------------------------------------------ kill


def _produce_until_killed(broker: Broker, seq0: int, seconds: float) -> tuple[set[int], int]:
    """Send persistent messages with receipts (a window of 32) until SIGKILL lands after ``seconds``;
    returns the receipted sequence numbers and the next unused one."""
    receipted: set[int] = set()
    seq = seq0
    killer = threading.Timer(seconds, broker.kill)
    try:
        c = Stomp(broker.stomp, timeout=10)
    except (OSError, EOFError, AssertionError):
        broker.kill()
        return receipted, seq
    killer.start()
    try:
        while True:
            for _ in range(32):
                c.send("SEND", b"%d" % seq, destination="/queue/kill", persistent="true", receipt=str(seq))
                seq += 1
            for _ in range(32):
                f = c.recv()
                if f.command == "RECEIPT":
                    receipted.add(int(f.get("receipt-id") or -1))
    except (OSError, EOFError):
        pass  # killed mid-stream: what was receipted must survive
    finally:
        killer.join()
        c.sock.close()
    return receipted, seq


def kill(cycles: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    receipted: set[int] = set()
    sent = 0
    with tempfile.TemporaryDirectory(prefix="ackspec-soak-") as data:
        started = time.monotonic()
        for _ in range(cycles):
            broker = Broker("--data", data)
            got, sent = _produce_until_killed(broker, sent, rng.uniform(0.05, 0.4))
            receipted |= got
        broker = Broker("--data", data)
        try:
            c = Stomp(broker.stomp)
            c.send("SUBSCRIBE", destination="/queue/kill", id="1")
            c.send("SEND", b"end", destination="/queue/kill")
            found: set[int] = set()
            while True:
                f = c.recv()
                if f.command == "MESSAGE":
                    if f.body == b"end":
                        break
                    found.add(int(f.body))
        finally:
            broker.stop()
        seconds = time.monotonic() - started
    lost = sorted(receipted - found)
    phantom = sorted(s for s in found if s >= sent)
    return {"part": "kill", "ok": not lost and not phantom, "seed": seed, "cycles": cycles, "sent": sent,
            "receipted": len(receipted), "found": len(found), "lost": len(lost), "first_lost": lost[:10],
            "never_sent": len(phantom), "seconds": round(seconds, 1)}


# ------------------------------------------------------------------ damage


def damage(records: int, cases: int, seed: int) -> dict[str, Any]:
    from ackspec.reference.broker import Message, Removed, Stored  # noqa: PLC0415
    from ackspec.reference.journal import Journal, JournalCorruption, encode_record  # noqa: PLC0415
    from ackspec.reference.journal.framing import MAGIC_V2, frame  # noqa: PLC0415

    logging.getLogger("ackspec.reference.journal").setLevel(logging.ERROR)  # the expected WARNING lines
    rng = random.Random(seed)
    recs: list[Any] = []
    for i in range(records):
        recs.append(Stored(Message(f"m{i}", "/queue/d", b"b" * rng.randrange(10, 400), (), True, "p", i)))
        if i % 4 == 3:
            recs.append(Removed(f"m{i - 2}"))
    data = bytearray(MAGIC_V2)
    spans = []
    for n, r in enumerate(recs, 1):
        start = len(data)
        data += frame(encode_record(r), 2, n)
        spans.append((start, len(data)))
    silent = refused = kept = tail = 0
    with tempfile.TemporaryDirectory(prefix="ackspec-damage-") as tmp:
        path = Path(tmp) / "journal.dat"
        for _ in range(cases):
            bad = bytearray(data)
            offset = rng.randrange(len(MAGIC_V2), len(data))
            if rng.random() < 0.5:
                bad[offset] ^= 1 << rng.randrange(8)
            else:
                bad[offset:offset + 4096] = bytes(len(bad[offset:offset + 4096]))
            touched = {i for i, (s, e) in enumerate(spans) if data[s:e] != bad[s:e]}
            first = min(touched)
            intact_after = [i for i in range(first, len(recs)) if i not in touched]
            path.write_bytes(bytes(bad))
            try:
                got, _ = Journal(tmp).replay()
            except JournalCorruption:
                refused += 1
                path.write_bytes(bytes(bad))
                got, _ = Journal(tmp, recover="skip-corrupt").replay()
                kept += got == [r for i, r in enumerate(recs) if i not in touched]
                for extra in Path(tmp).glob("journal.dat.damaged-*"):
                    extra.unlink()
                continue
            if intact_after:
                silent += 1  # an intact record after the damage was dropped without a refusal
            else:
                tail += got == recs[:first]
    ok = silent == 0 and kept == refused and tail == cases - refused
    return {"part": "damage", "ok": ok, "seed": seed, "records": len(recs), "cases": cases,
            "refused_then_all_intact_kept": kept, "refused": refused, "torn_tail_cut": tail,
            "silently_dropped": silent}


# ------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("part", choices=("memory", "churn", "kill", "damage", "all"))
    p.add_argument("--backlog-mb", type=int, default=1024)
    p.add_argument("--idle", type=int, default=2000)
    p.add_argument("--bound-mb", type=float, default=640.0)
    p.add_argument("--ack", choices=("client", "auto"), default="client", help="memory: the consumer's ack mode")
    p.add_argument("--cycles", type=int, default=50)
    p.add_argument("--records", type=int, default=2000)
    p.add_argument("--cases", type=int, default=200)
    p.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock, printed)")
    p.add_argument("--json", metavar="FILE", help="also write the results here")
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else int(time.time())
    parts: dict[str, Callable[[], dict[str, Any]]] = {
        "damage": lambda: damage(args.records, args.cases, seed),
        "kill": lambda: kill(args.cycles, seed),
        "memory": lambda: memory(args.backlog_mb, args.idle, args.bound_mb, args.ack),
        "churn": lambda: churn(2000, 4),
    }
    results = []
    for name, run in parts.items():
        if args.part in (name, "all"):
            result = run()
            result["load_average"] = round(os.getloadavg()[0], 2)
            print(json.dumps(result), flush=True)
            results.append(result)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
