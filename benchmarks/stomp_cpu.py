"""The broker's CPU per message on the STOMP bench rows, per event loop, beside a broker with no logic at all.

Why this exists. The STOMP rows that stayed under parity with ActiveMQ 5.17 (a receipt on every SEND, and
persistent SENDs from one producer) are round trips: the broker's latency per message is their rate. On the
project's shared 2-core machine the wall clock of one run spreads 2x with the others' load, but the CPU the
broker process spends per message moves much less, and it says where a round trip's time goes. This script
runs ``ackspec broker`` once per event loop (``--loop asyncio``, ``--loop uvloop``) and, for the receipt rows,
a *floor* server (``--serve``): an :class:`asyncio.Protocol` that answers CONNECT and every ``receipt``
header and does nothing else, on either loop. It drives each with the bench's own scenario functions
(:mod:`ackspec.bench.scenarios`, imported, not copied), the targets taking turns, and reads each server's
CPU time (user + system, ``/proc/PID/stat``) around the timed runs, so each figure includes the kernel's
work for the sockets (and, on the persistent rows, the fsyncs).

    python benchmarks/stomp_cpu.py                                  # every row, 3 rounds
    python benchmarks/stomp_cpu.py --scenarios send-receipt-each --messages 5000 --rounds 4

On the two rows the floor serves (``send-async``, ``send-receipt-each``) every target runs the row's timed
part only (the floor keeps nothing to drain); on the others, the bench's scenario function, drain included.
``floor-*`` minus the broker on the same loop is what the broker's logic costs per message; the floor itself
is what the loop and the kernel cost. Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ackspec.bench.client import Endpoint, LeanStompClient, send_frame
from ackspec.bench.scenarios import SCENARIOS, pipelined_send
from ackspec.bench.targets import free_port, stop_child, wait_ready
from ackspec.reference.server import new_event_loop

FLOOR_ROWS = ("send-async", "send-receipt-each")
"""The rows the floor can serve: they only need CONNECTED and RECEIPTs back."""
RECEIPT = re.compile(rb"\nreceipt:([^\n]*)\n")
"""A ``receipt`` header: after a frame's command line or another header, so a frame's first line never matches."""
BODY = b"0123456789" * 10


class FloorProtocol(asyncio.Protocol):
    """Answers CONNECT with CONNECTED and every ``receipt`` header with a RECEIPT; keeps nothing but a count.

    It also serves as an ``ackspec bench`` target (``floor=stomp://127.0.0.1:PORT``, also ``--paired``): the
    bench drains what it sent with an ``ack:auto`` SUBSCRIBE, so the floor counts its connection's SENDs and
    answers a SUBSCRIBE with that many MESSAGE frames (same body for all), and it answers DISCONNECT's receipt
    before closing. The bench client writes one frame (or one batch) and waits for its answer, so a read holds
    whole frames in practice; a header split across two reads would go unanswered and the bench would time
    out."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.sent = 0
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        if data.startswith(b"SEND"):
            self.sent += data.count(b"SEND\n")
        elif data.startswith((b"CONNECT", b"STOMP")):
            self.transport.write(b"CONNECTED\nversion:1.2\n\n\x00")
            return
        elif data.startswith(b"SUBSCRIBE"):
            self.transport.write(self.messages(data))
        receipts = RECEIPT.findall(data)
        if receipts:
            self.transport.write(b"".join(b"RECEIPT\nreceipt-id:" + r + b"\n\n\x00" for r in receipts))
        if data.startswith(b"DISCONNECT"):
            self.transport.close()

    def messages(self, subscribe: bytes) -> bytes:
        """The MESSAGE frames that hand a SUBSCRIBE every SEND counted so far (the bench's drain)."""
        lines = subscribe.split(b"\n\n", 1)[0].split(b"\n")[1:]
        headers = {name: value for name, _, value in (line.partition(b":") for line in lines)}
        destination, subscription = headers.get(b"destination", b""), headers.get(b"id", b"")
        head = b"MESSAGE\ndestination:" + destination + b"\nsubscription:" + subscription
        frames = [head + b"\nmessage-id:" + str(i).encode() + b"\n\n" + BODY + b"\x00" for i in range(self.sent)]
        self.sent = 0
        return b"".join(frames)


def serve(port: int, loop_kind: str) -> None:
    """``--serve``: the floor server on 127.0.0.1:``port`` until killed."""
    loop = new_event_loop(loop_kind)

    async def main() -> None:
        await loop.create_server(FloorProtocol, "127.0.0.1", port)
        print("ready", flush=True)
        await asyncio.Event().wait()

    loop.run_until_complete(main())


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def server(kind: str) -> Iterator[tuple[Endpoint, subprocess.Popen[bytes]]]:
    """``broker-LOOP`` (``ackspec broker --loop LOOP`` on a temporary journal) or ``floor-LOOP``."""
    role, loop_kind = kind.split("-", 1)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="stomp-cpu-") as data:
        if role == "broker":
            cmd = [sys.executable, "-m", "ackspec", "broker", "--loop", loop_kind, "--stomp", f"127.0.0.1:{port}",
                   "--data", str(Path(data) / "d")]
        else:
            cmd = [sys.executable, __file__, "--serve", str(port), "--loop", loop_kind]
        process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            endpoint = Endpoint("127.0.0.1", port, "admin", "admin", "127.0.0.1")
            wait_ready(endpoint, process, 30.0)
            yield endpoint, process
        finally:
            stop_child(process)


def receipts_only(row: str) -> Callable[[Endpoint, int, bytes], float]:
    """The timed part of a floor row, without the bench's drain (the floor keeps no messages to drain): the
    same SENDs and receipts as the bench row, on a fresh queue; a broker's queue keeps them (a few MB)."""

    def run(endpoint: Endpoint, n: int, body: bytes) -> float:
        client = LeanStompClient(endpoint)
        try:
            dest = f"/queue/stomp-cpu-{time.monotonic_ns()}"
            t0 = time.perf_counter()
            if row == "send-async":
                pipelined_send(client, dest, body, n)
            else:
                for i in range(n):
                    client.send_raw(send_frame(dest, body, receipt=str(i)))
                    client.wait_receipt(str(i))
            return n / (time.perf_counter() - t0)
        finally:
            client.close()

    return run


Runner = Callable[[Endpoint, int, bytes], float]
Figures = dict[tuple[str, str], list[tuple[float, float]]]


def measure_once(endpoint: Endpoint, pid: int, run: Runner, n: int) -> tuple[float, float]:
    """(CPU us per message of the server, msg/s) of one run of ``run`` (its untimed drain, if any, included)."""
    c0 = cpu_seconds(pid)
    rate = run(endpoint, n, BODY)
    return 1e6 * (cpu_seconds(pid) - c0) / n, rate


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loops", default="asyncio,uvloop", help="event loops to compare (default asyncio,uvloop)")
    p.add_argument("--scenarios", default=",".join(s.name for s in SCENARIOS), help="bench rows (default: all)")
    p.add_argument("--messages", type=int, default=5000, help="messages per run (persistent rows: a quarter)")
    p.add_argument("--rounds", type=int, default=3, help="runs per row and target; medians are shown")
    p.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    p.add_argument("--loop", default="asyncio", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve is not None:
        serve(args.serve, args.loop)
        return 0
    rows = {s.name: s for s in SCENARIOS}
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    loops = [x.strip() for x in args.loops.split(",") if x.strip()]
    if any(n not in rows for n in names) or args.messages < 1 or args.rounds < 1 or not names or not loops:
        p.error(f"--scenarios takes: {', '.join(rows)}; --messages and --rounds at least 1")
    started, load0 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.getloadavg()[0]
    figures = run_all(names, loops, args.messages, args.rounds)
    print(f"server CPU us per message (msg/s), median of {args.rounds} runs, {started}, "
          f"load average {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    for (name, kind), runs in figures.items():
        cpu = statistics.median(c for c, _ in runs)
        rate = statistics.median(r for _, r in runs)
        print(f"{name:<27} {kind:<15} {cpu:8.1f} us   ({rate:,.0f} msg/s)")
    return 0


def run_all(names: list[str], loops: list[str], messages: int, rounds: int) -> Figures:
    """Each row: its targets started once, then ``rounds`` runs each, taking turns."""
    figures: Figures = {}
    for name in names:
        scenario = next(s for s in SCENARIOS if s.name == name)
        floor = name in FLOOR_ROWS
        kinds = [f"broker-{x}" for x in loops] + ([f"floor-{x}" for x in loops] if floor else [])
        run = receipts_only(name) if floor else scenario.run
        n = max(1, int(messages * scenario.scale))
        with contextlib.ExitStack() as stack:
            targets = {kind: stack.enter_context(server(kind)) for kind in kinds}
            for endpoint, _ in targets.values():
                run(endpoint, min(n, 500), BODY)  # warm-up
            for _ in range(rounds):
                for kind, (endpoint, process) in targets.items():
                    figures.setdefault((name, kind), []).append(measure_once(endpoint, process.pid, run, n))
        print(f"stomp_cpu: {name} done, load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    return figures


if __name__ == "__main__":
    sys.exit(main())
