"""CPU seconds per message of the reference broker's sans-IO paths, optionally against an older checkout.

Why this exists. ``ackspec bench`` measures wall-clock msg/s over sockets; on the project's shared 2-core
machine the same code's runs spread 2x with the other engineers' load, so it cannot tell whether a change
to the broker cost 5%. This script times the paths the bench rows run through, **in process and without
sockets**, in CPU seconds (``time.process_time``): the machine's load then slows the wall clock, not the
figure. With ``--baseline PATH`` (an older checkout) every workload runs alternately on the baseline's
``src`` (A) and this checkout's (B), each run in a fresh child process, so both sides see the same moments
of the machine; the ratio B/A above 1 means this checkout spends more CPU per message.

Workloads (each feeds the broker what a bench row's client sends, as bytes, and reads what it answers):

* ``stomp-parse``, ``stomp-encode``: the STOMP codec alone (SEND frames parsed from 64 KiB reads; MESSAGE
  frames encoded);
* ``stomp-send-async``, ``stomp-receipt-each``, ``stomp-persistent``, ``stomp-consume-auto``,
  ``stomp-consume-client-individual``: a :class:`StompSession` with its hub and core, one per bench row
  (``stomp-persistent`` with the journal on: each record encoded and framed as the journal file would
  write it, then marked synced, which releases the receipt; the write and fsync themselves are I/O and
  not timed);
* ``core-publish-settle``: the core alone, a publish delivered to a client-individual consumer and its
  settlement, per message;
* ``amqp-unsettled-send``, ``amqp-consume``, ``amqp-consume-each``: the AMQP connection with its core and an
  in-memory proton client (the checkout's own ``tests/amqp/inmemory.py``); only the broker's calls are timed,
  not proton's client side. ``amqp-consume`` acknowledges a read's messages in one disposition range (proton
  coalesces them), ``amqp-consume-each`` in one disposition frame each.

Only the broker's calls are inside the clock (the client's frames are built beforehand, its reads parsed
afterwards), and every workload checks it got every answer (receipts, messages, acceptances) outside it.
The collector runs as usual after a ``gc.collect()`` and ``gc.freeze()`` of the set-up.

    python benchmarks/sansio_cpu.py                                # this checkout, median of --rounds
    mkdir -p /tmp/base && git archive 256e034 src tests/amqp | tar -x -C /tmp/base   # an older src, its test pair
    python benchmarks/sansio_cpu.py --baseline /tmp/base --rounds 8 --json sansio.json
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from proton import Delivery, Link, Message

import ackspec
from ackspec.bench.client import send_frame
from ackspec.reference.broker.core import BrokerCore
from ackspec.reference.broker.effects import Deliver
from ackspec.reference.broker.hub import Hub
from ackspec.reference.broker.model import AckMode
from ackspec.reference.journal.codec import encode_record
from ackspec.reference.journal.framing import frame
from ackspec.reference.stomp.codec import FrameParser, encode
from ackspec.reference.stomp.frames import Frame
from ackspec.reference.stomp.session import SessionConfig, StompSession

HERE = Path(__file__).resolve().parent.parent
BODY = b"0123456789" * 10
READ_FRAMES = 256
"""SEND frames per read in the pipelined rows, as the bench client batches them."""
AMQP_BATCH = 200
"""AMQP transfers the client writes between two broker reads."""

Timed = tuple[float, int]
"""(CPU seconds inside the broker's calls, messages)."""


def _session(journaling: bool = False) -> Any:
    """A connected STOMP session on a fresh core, no heart-beats."""
    hub = Hub(BrokerCore())
    hub.journaling = journaling
    session = StompSession("bench-1", hub, config=SessionConfig(heartbeat_send_ms=0, heartbeat_receive_ms=0),
                           clock=lambda: 1000.0)
    session.receive_data(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
    assert session.take_output().startswith(b"CONNECTED"), "no CONNECTED"
    return session


def _frames(n: int, *, receipts: bool, persistent: bool = False) -> list[bytes]:
    return [send_frame("/queue/cpu", BODY, persistent=persistent, receipt=str(i) if receipts else None)
            for i in range(n)]


def stomp_parse(n: int) -> Timed:
    data = b"".join(_frames(n, receipts=True))
    reads = [data[i:i + 65536] for i in range(0, len(data), 65536)]
    parser, got = FrameParser(), 0
    t0 = time.process_time()
    for read in reads:
        got += len(parser.feed(read))
    cpu = time.process_time() - t0
    assert got == n, got
    return cpu, n


def stomp_encode(n: int) -> Timed:
    frames = [Frame("MESSAGE", (("destination", "/queue/cpu"), ("message-id", f"m-{i}"), ("subscription", "s"),
                                ("ack", str(i)), ("content-length", "100")), BODY) for i in range(n)]
    t0 = time.process_time()
    out = [encode(f) for f in frames]
    cpu = time.process_time() - t0
    assert len(out) == n
    return cpu, n


def _count(outputs: list[bytes], command: bytes) -> int:
    return sum(out.count(b"\x00" + command + b"\n") + out.startswith(command + b"\n") for out in outputs)


def stomp_send_async(n: int) -> Timed:
    session = _session()
    frames = _frames(n, receipts=False)
    frames[-1] = _frames(1, receipts=True)[0]
    reads = [b"".join(frames[i:i + READ_FRAMES]) for i in range(0, n, READ_FRAMES)]
    outputs = []
    t0 = time.process_time()
    for read in reads:
        session.receive_data(read)
        outputs.append(session.take_output())
    cpu = time.process_time() - t0
    assert _count(outputs, b"RECEIPT") == 1
    return cpu, n


def stomp_receipt_each(n: int) -> Timed:
    session, frames, outputs = _session(), _frames(n, receipts=True), []
    t0 = time.process_time()
    for data in frames:
        session.receive_data(data)
        outputs.append(session.take_output())
    cpu = time.process_time() - t0
    assert _count(outputs, b"RECEIPT") == n
    return cpu, n


def stomp_persistent(n: int) -> Timed:
    session, frames, outputs, number = _session(journaling=True), _frames(n, receipts=True, persistent=True), [], 1
    hub = session.hub
    t0 = time.process_time()
    for data in frames:
        session.receive_data(data)
        records, seq = hub.take_journal()
        outputs.append(b"".join(frame(encode_record(r), 2, number + i) for i, r in enumerate(records)))
        number += len(records)
        hub.mark_synced(seq)
        outputs.append(session.take_output())
    cpu = time.process_time() - t0
    assert _count(outputs, b"RECEIPT") == n and number == n + 1, number
    return cpu, n


def _filled_session(n: int) -> Any:
    session = _session()
    for start in range(0, n, READ_FRAMES):
        session.receive_data(b"".join(_frames(min(READ_FRAMES, n - start), receipts=False)))
    return session


def stomp_consume_auto(n: int) -> Timed:
    session, outputs = _filled_session(n), []
    t0 = time.process_time()
    session.receive_data(b"SUBSCRIBE\ndestination:/queue/cpu\nid:s\nack:auto\n\n\x00")
    while out := session.take_output():
        outputs.append(out)
    cpu = time.process_time() - t0
    assert _count(outputs, b"MESSAGE") == n
    return cpu, n


def stomp_consume_client_individual(n: int) -> Timed:
    """As the bench row: every MESSAGE ACKed on its own, the ACKs of one read written together."""
    session, parser, got, cpu = _filled_session(n), FrameParser(), 0, 0.0
    t0 = time.process_time()
    session.receive_data(b"SUBSCRIBE\ndestination:/queue/cpu\nid:s\nack:client-individual\n\n\x00")
    out = session.take_output()
    cpu += time.process_time() - t0
    while got < n:
        acks = []
        for message in parser.feed(out):
            assert isinstance(message, Frame), message
            got += 1
            receipt = "receipt:last\n" if got == n else ""
            acks.append(f"ACK\nid:{dict(message.headers)['ack']}\n{receipt}\n\x00".encode())
        assert acks, "the broker stopped delivering"
        t0 = time.process_time()
        session.receive_data(b"".join(acks))
        out = session.take_output()
        cpu += time.process_time() - t0
    assert out.startswith(b"RECEIPT") or b"\x00RECEIPT" in out, out[:80]
    return cpu, n


def core_publish_settle(n: int) -> Timed:
    core = BrokerCore()
    core.open("p")
    core.open("c")
    core.subscribe("c", "s", "/queue/cpu", ack=AckMode.CLIENT_INDIVIDUAL)
    settled = 0
    t0 = time.process_time()
    for i in range(n):
        for effect in core.publish("p", "/queue/cpu", BODY, confirm=i):
            if effect.__class__ is Deliver:
                core.settle("c", effect.delivery_id)
                settled += 1
    cpu = time.process_time() - t0
    assert settled == n and core.queue_depth("/queue/cpu") == 0
    return cpu, n


def _inmemory(root: Path) -> Any:
    """The checkout's own in-memory AMQP pair (tests/amqp/inmemory.py), so each side drives its own listener."""
    spec = importlib.util.spec_from_file_location("inmemory", root / "tests" / "amqp" / "inmemory.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pump(pair: Any) -> float:
    """InMemoryPair.pump with only the broker's two calls timed."""
    cpu = 0.0
    for _ in range(10):
        out = pair.client.take_output()
        t0 = time.process_time()
        if out:
            pair.broker.receive_data(out)
        back = pair.broker.data_to_send()
        cpu += time.process_time() - t0
        pair.client.feed(back)
        pair.client.dispatch()
    return cpu


def amqp_unsettled_send(n: int, root: Path) -> Timed:
    pair = _inmemory(root).InMemoryPair()
    sender = pair.session.sender("s")
    sender.target.address = "/queue/cpu"
    sender.open()
    pair.pump()
    data, deliveries, cpu = bytes(Message(body=BODY).encode()), [], 0.0
    for start in range(0, n, AMQP_BATCH):
        for i in range(start, min(n, start + AMQP_BATCH)):
            deliveries.append(sender.delivery(f"t{i}"))
            sender.send(data)
            sender.advance()
        cpu += _pump(pair)
    accepted = sum(d.remote_state == Delivery.ACCEPTED for d in deliveries)
    assert accepted == n and pair.core.queue_depth("/queue/cpu") == n, accepted
    return cpu, n


def _filled_pair(n: int, root: Path) -> tuple[Any, Any]:
    """A pair whose queue holds ``n`` messages (sent pre-settled, outside the clock) and an unsettled receiver
    on it without credit yet (as ``InMemoryPair.filled_queue_consumer``, for any ``n``: the broker's link
    credit admits only so many transfers per exchange)."""
    pair = _inmemory(root).InMemoryPair()
    sender = pair.session.sender("s")
    sender.target.address = "/queue/cpu"
    sender.open()
    pair.pump()
    data = bytes(Message(body=BODY).encode())
    for i in range(n):
        delivery = sender.delivery(f"t{i}")
        sender.send(data)
        sender.advance()
        delivery.settle()
    for _ in range(n):  # bounded: each round moves at least one credit window
        if pair.core.queue_depth("/queue/cpu") == n:
            break
        pair.pump()
    assert pair.core.queue_depth("/queue/cpu") == n, "the queue was not filled"
    receiver = pair.session.receiver("r")
    receiver.source.address = "/queue/cpu"
    receiver.snd_settle_mode = Link.SND_UNSETTLED
    receiver.open()
    pair.pump()
    return pair, receiver


def amqp_consume(n: int, root: Path) -> Timed:
    pair, receiver = _filled_pair(n, root)
    got, cpu = 0, 0.0
    while got < n:
        receiver.flow(min(1000, n - got))
        cpu += _pump(pair)
        while (current := receiver.current) is not None:
            receiver.recv(current.pending)
            receiver.advance()
            current.update(current.ACCEPTED)
            current.settle()
            got += 1
    cpu += _pump(pair)
    assert pair.core.queue_depth("/queue/cpu") == 0 and got == n
    return cpu, n


def amqp_consume_each(n: int, root: Path) -> Timed:
    """As ``amqp-consume``, but the client frames one disposition per message (it writes after each
    acknowledgement, as a JMS client acknowledging each message does); a read's dispositions still reach
    the broker together."""
    pair, receiver = _filled_pair(n, root)
    got, cpu = 0, 0.0
    while got < n:
        receiver.flow(min(1000, n - got))
        cpu += _pump(pair)
        written = b""
        while (current := receiver.current) is not None:
            receiver.recv(current.pending)
            receiver.advance()
            current.update(current.ACCEPTED)
            current.settle()
            written += pair.client.take_output()  # this message's disposition frame
            got += 1
        t0 = time.process_time()
        pair.broker.receive_data(written)
        cpu += time.process_time() - t0
    cpu += _pump(pair)
    assert pair.core.queue_depth("/queue/cpu") == 0 and got == n
    return cpu, n


WORKLOADS: dict[str, Callable[..., Timed]] = {
    "stomp-parse": stomp_parse,
    "stomp-encode": stomp_encode,
    "stomp-send-async": stomp_send_async,
    "stomp-receipt-each": stomp_receipt_each,
    "stomp-persistent": stomp_persistent,
    "stomp-consume-auto": stomp_consume_auto,
    "stomp-consume-client-individual": stomp_consume_client_individual,
    "core-publish-settle": core_publish_settle,
    "amqp-unsettled-send": amqp_unsettled_send,
    "amqp-consume": amqp_consume,
    "amqp-consume-each": amqp_consume_each,
}
NEEDS_ROOT = {"amqp-unsettled-send", "amqp-consume", "amqp-consume-each"}


def child(workload: str, n: int, root: Path) -> None:
    """In a fresh process whose PYTHONPATH is one side's src: warm up, run once, print the result as JSON."""
    run = WORKLOADS[workload]
    extra = (root,) if workload in NEEDS_ROOT else ()
    run(min(n, 2000), *extra)  # imports and first-call costs out of the clock
    gc.collect()
    gc.freeze()
    cpu, messages = run(n, *extra)
    print(json.dumps({"cpu": cpu, "messages": messages, "ackspec": str(Path(ackspec.__file__).parent)}))


def run_side(root: Path, workload: str, n: int) -> float:
    """CPU microseconds per message of ``workload`` on ``root``'s src, in a child process."""
    src = (root / "src").resolve()
    env = {**os.environ, "PYTHONPATH": str(src)}
    proc = subprocess.run([sys.executable, __file__, "--child", workload, "--messages", str(n), "--root", str(root)],
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"sansio_cpu: {workload} on {root} failed: {tail}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if not result["ackspec"].startswith(str(src)):
        raise SystemExit(f"sansio_cpu: the child imported ackspec from {result['ackspec']}, not {src}")
    return 1e6 * float(result["cpu"]) / int(result["messages"])


def measure(workloads: list[str], n: int, rounds: int, sides: dict[str, Path]) -> dict[str, dict[str, list[float]]]:
    """Every workload ``rounds`` times per side, the sides alternating run by run (A B A B ...)."""
    figures: dict[str, dict[str, list[float]]] = {w: {s: [] for s in sides} for w in workloads}
    for r in range(rounds):
        for workload in workloads:
            for side, root in (sides.items() if r % 2 == 0 else reversed(sides.items())):
                figures[workload][side].append(run_side(root, workload, n))
        print(f"sansio_cpu: round {r + 1}/{rounds} done, load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    return figures


def table(figures: dict[str, dict[str, list[float]]]) -> list[str]:
    """One line per workload: median us/msg per side, and with two sides B/A of the medians and its spread
    (the lowest and highest ratio of one round's B to the same round's A)."""
    lines = []
    for workload, per_side in figures.items():
        medians = {side: statistics.median(values) for side, values in per_side.items()}
        cells = "  ".join(f"{side} {medians[side]:8.2f}" for side in per_side)
        if set(per_side) == {"A", "B"}:
            ratios = [b / a for a, b in zip(per_side["A"], per_side["B"], strict=True)]
            cells += f"  B/A {medians['B'] / medians['A']:.3f} (rounds {min(ratios):.2f}-{max(ratios):.2f})"
        lines.append(f"{workload:<33} {cells}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline", type=Path, help="an older checkout (its src/ and tests/amqp/inmemory.py): side A")
    p.add_argument("--messages", type=int, default=20000, help="messages per run (default 20000)")
    p.add_argument("--rounds", type=int, default=5, help="runs per workload and side; the median is shown")
    p.add_argument("--workloads", default=",".join(WORKLOADS),
                   help="comma-separated subset of: " + ", ".join(WORKLOADS))
    p.add_argument("--json", type=Path, help="also write the figures (us/msg per run) here")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--root", type=Path, default=HERE, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.child, args.messages, args.root)
        return 0
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown or not workloads or args.messages < 1 or args.rounds < 1:
        p.error(f"unknown workload(s) {unknown} or --messages/--rounds below 1")
    if args.baseline is not None and not (args.baseline / "src" / "ackspec").is_dir():
        p.error(f"--baseline {args.baseline}: no src/ackspec there")
    sides = {"A": args.baseline, "B": HERE} if args.baseline is not None else {"this": HERE}
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    figures = measure(workloads, args.messages, args.rounds, sides)
    sides_text = f"; A = {args.baseline}, B = {HERE}" if args.baseline else ""
    print(f"CPU us per message, median of {args.rounds} runs of {args.messages}, started {started}, "
          f"load average now {os.getloadavg()[0]:.1f}{sides_text}")
    print("\n".join(table(figures)))
    if args.json is not None:
        args.json.write_text(json.dumps({"started": started, "messages": args.messages, "rounds": args.rounds,
                                         "sides": {k: str(v) for k, v in sides.items()}, "us_per_msg": figures},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
