"""RTT arithmetic of the seeds, reproduced on loopback: blocking vs windowed vs asynchronous sends.

Artemis' "Guarantees of sends and commits" (seed 000): a client that blocks on every send
can send at most 1/RTT messages per second (0.25 ms RTT -> 4,000 msg/s); decoupling the
send from its acknowledgement (asynchronous send acknowledgements, Solace's publish window,
Jakarta Messaging CompletionListener) removes that bound.

Setup: the reference broker (in memory, so receipts do not wait for fsync) behind a
delaying TCP proxy (:class:`DelayProxy`), which holds every chunk for RTT/2 in each
direction with select() timeouts and 1 ns timer slack. (netem in network namespaces would
be the better delay line; this machine's kernel has no sch_netem, so the proxy it is.)
Broker, proxy and client run in three processes. The client is the reference
client over STOMP:

* blocking: persistent sends with blockOnDurableSend=true (each waits for its receipt);
* windowed: persistent sends with a publish window of 1, 10, 50, 255 (Solace semantics);
* async:    persistent sends with a CompletionListener, no window.

Checks: blocking throughput within 20% of the bound 1/(RTT + base), where base is the
round trip of the same path with no added delay (Python client + proxy + broker); also
reported against the bare 1/RTT; windowed (window >= 50) and async at 1 ms RTT at least 10x
blocking. Output: a table on stdout, ``--json`` and ``--plot`` files.

Run: ``python benchmarks/rtt_bench.py [--quick] [--plot rtt.png] [--json rtt.json]``.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import json
import select
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ackspec.reference.client import AUTO_ACKNOWLEDGE, Connection, ConnectionFactory, Message
from ackspec.reference.server import EmbeddedBroker

PR_SET_TIMERSLACK = 29


def tight_timers() -> None:
    """Ask Linux for 1 ns timer slack in this process (default 50 us): sleeps end when due."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)


class DelayProxy:
    """A TCP proxy that delays every chunk by ``one_way`` seconds in each direction, keeping order.

    One thread per proxied connection serves both directions with ``select()``: it wakes when a
    chunk arrives (and stamps it with its due time) or when the oldest chunk is due (and writes
    every due chunk with one ``sendall``). ``select`` timeouts are high-resolution timers, and
    timer slack is set to 1 ns (:func:`tight_timers`), so nothing spins: an earlier asyncio
    version spun for the last 0.3 ms before each due time and took CPU from the client and
    broker on this 2-core machine. All sockets use TCP_NODELAY.
    """

    def __init__(self, upstream: tuple[str, int], one_way: float) -> None:
        self.upstream = upstream
        self.one_way = one_way
        self.port = 0
        self._server = socket.socket()
        self._closed = False

    def __enter__(self) -> DelayProxy:
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(16)
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept_loop, daemon=True, name="delay-accept").start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._server.close()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(client, upstream), daemon=True, name="delay-line").start()

    def _serve(self, client: socket.socket, upstream: socket.socket) -> None:
        peer = {client: upstream, upstream: client}
        queues: dict[socket.socket, deque[tuple[float, bytes]]] = {client: deque(), upstream: deque()}
        open_: set[socket.socket] = {client, upstream}
        try:
            while open_ or any(queues.values()):
                heads = [q[0][0] for q in queues.values() if q]
                timeout = max(0.0, min(heads) - time.perf_counter()) if heads else None
                readable, _, _ = select.select(list(open_), [], [], timeout)
                now = time.perf_counter()
                for sock in readable:
                    data = sock.recv(262144)
                    if data:
                        queues[sock].append((now + self.one_way, data))
                    else:
                        open_.discard(sock)
                now = time.perf_counter()
                for src, queue in queues.items():
                    chunks = []
                    while queue and queue[0][0] <= now:
                        chunks.append(queue.popleft()[1])
                    if chunks:
                        peer[src].sendall(b"".join(chunks))
                if not open_:
                    break
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.close()


@dataclass
class Row:
    rtt_ms: float
    mode: str
    window: int | None
    messages: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0


class _Counter:
    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.failed = 0
        self.event = threading.Event()
        self.lock = threading.Lock()

    def on_completion(self, message: Message) -> None:
        self._tick()

    def on_exception(self, message: Message, exception: Exception) -> None:
        self.failed += 1
        self._tick()

    def _tick(self) -> None:
        with self.lock:
            self.done += 1
            if self.done >= self.total:
                self.event.set()


def _connect(url: str, **options: Any) -> Connection:
    conn = ConnectionFactory(url, **options).create_connection()
    conn.start()
    return conn


def run_blocking(url: str, n: int, queue: str) -> float:
    conn = _connect(url)
    try:
        producer = conn.create_session(False, AUTO_ACKNOWLEDGE).create_producer(queue)
        producer.send(Message(b"warm-up"))
        start = time.perf_counter()
        for _ in range(n):
            producer.send(Message(b"x" * 100))
        return time.perf_counter() - start
    finally:
        conn.close()


def run_windowed(url: str, n: int, queue: str, window: int) -> float:
    conn = _connect(url, publish_window_size=window, ack_event_mode="windowed")
    try:
        producer = conn.create_session(False, AUTO_ACKNOWLEDGE).create_producer(queue)
        producer.send(Message(b"warm-up"))
        conn.wait_incomplete("connection", 30)
        start = time.perf_counter()
        for _ in range(n):
            producer.send(Message(b"x" * 100))
        conn.wait_incomplete("connection", 120)  # every send acknowledged
        return time.perf_counter() - start
    finally:
        conn.close()


def run_async(url: str, n: int, queue: str) -> float:
    conn = _connect(url)
    try:
        producer = conn.create_session(False, AUTO_ACKNOWLEDGE).create_producer(queue)
        producer.send(Message(b"warm-up"))
        counter = _Counter(n)
        start = time.perf_counter()
        for _ in range(n):
            producer.send(Message(b"x" * 100), completion_listener=counter)
        if not counter.event.wait(120):
            raise RuntimeError(f"only {counter.done} of {n} completions")
        elapsed = time.perf_counter() - start
        if counter.failed:
            raise RuntimeError(f"{counter.failed} sends failed")
        return elapsed
    finally:
        conn.close()


@contextlib.contextmanager
def _process(*args: str):  # type: ignore[no-untyped-def]
    """Run this script in a helper mode in its own process (own GIL); yield the port it prints."""
    proc = subprocess.Popen([sys.executable, __file__, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"helper {args} did not start")
        yield int(line)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # the helper exits when its stdin closes
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def serve_broker() -> int:
    with EmbeddedBroker(persistent=False) as broker:
        print(broker.port, flush=True)
        sys.stdin.read()
    return 0


def serve_proxy(port: int, one_way: float) -> int:
    tight_timers()
    with DelayProxy(("127.0.0.1", port), one_way) as proxy:
        print(proxy.port, flush=True)
        sys.stdin.read()
    return 0


def best(repeat: int, fn: Callable[[], float]) -> float:
    """Shortest of ``repeat`` runs: the machine is shared, so the fastest run is the least disturbed."""
    return min(fn() for _ in range(repeat))


def bench(rtts_ms: list[float], windows: list[int], budget: float,
          repeat: int = 1) -> tuple[list[Row], dict[str, float]]:
    """Broker, proxy and client each run in their own process, so they do not share one GIL."""
    rows: list[Row] = []
    with _process("--serve-broker") as broker_port:
        with _process("--serve-proxy", str(broker_port), "0") as proxy_port:
            url = f"stomp://127.0.0.1:{proxy_port}"
            n = 2000
            base = best(repeat, lambda: run_blocking(url, n, "/queue/rtt.base")) / n
        for rtt_ms in rtts_ms:
            rtt = rtt_ms / 1000
            with _process("--serve-proxy", str(broker_port), str(rtt / 2)) as proxy_port:
                url = f"stomp://127.0.0.1:{proxy_port}"
                q = f"/queue/rtt.{rtt_ms}"
                n_block = max(30, min(2000, int(budget / (rtt + base))))
                rows.append(Row(rtt_ms, "blocking", None, n_block,
                                best(repeat, functools.partial(run_blocking, url, n_block, q))))
                for w in windows:
                    n_win = max(100, min(6000, int(budget * w / (rtt + base))))
                    rows.append(Row(rtt_ms, "windowed", w, n_win,
                                    best(repeat, functools.partial(run_windowed, url, n_win, q, w))))
                rows.append(Row(rtt_ms, "async", None, 6000, best(repeat, functools.partial(run_async, url, 6000, q))))
                print(f"  RTT {rtt_ms} ms done", file=sys.stderr)
    return rows, {"base_rtt_ms": base * 1000}


def checks(rows: list[Row], base_ms: float) -> list[tuple[str, bool, str]]:
    out = []
    for row in (r for r in rows if r.mode == "blocking"):
        bound = 1000 / (row.rtt_ms + base_ms)
        ratio = row.rate / bound
        out.append((f"blocking at RTT {row.rtt_ms} ms within 20% of 1/(RTT+base) = {bound:,.0f}/s",
                    0.8 <= ratio <= 1.2, f"{row.rate:,.0f}/s = {ratio:.0%} of the bound, "
                                         f"{row.rate / (1000 / row.rtt_ms):.0%} of bare 1/RTT"))
    blocking_1ms = next((r.rate for r in rows if r.mode == "blocking" and r.rtt_ms == 1.0), None)
    if blocking_1ms:
        for row in rows:
            if row.rtt_ms == 1.0 and (row.mode == "async" or (row.window or 0) >= 50):
                label = "async" if row.mode == "async" else f"window {row.window}"
                out.append((f"{label} at 1 ms RTT >= 10x blocking", row.rate >= 10 * blocking_1ms,
                            f"{row.rate / blocking_1ms:.1f}x"))
    return out


def table(rows: list[Row], base_ms: float) -> str:
    lines = [f"base round trip (no added delay): {base_ms:.3f} ms", "",
             f"{'RTT ms':>7} {'mode':>9} {'window':>6} {'msgs':>6} {'msg/s':>10} {'1/RTT':>8} {'vs blocking':>11}"]
    for rtt in sorted({r.rtt_ms for r in rows}):
        blocking = next(r.rate for r in rows if r.rtt_ms == rtt and r.mode == "blocking")
        for r in (x for x in rows if x.rtt_ms == rtt):
            lines.append(f"{r.rtt_ms:>7} {r.mode:>9} {r.window or '-':>6} {r.messages:>6} {r.rate:>10,.0f} "
                         f"{1000 / r.rtt_ms:>8,.0f} {r.rate / blocking:>10.1f}x")
    return "\n".join(lines)


def plot(rows: list[Row], path: Path) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(8, 5))
    for rtt in sorted({r.rtt_ms for r in rows}):
        win = [r for r in rows if r.rtt_ms == rtt and r.mode == "windowed"]
        (line,) = ax.plot([r.window or 0 for r in win], [r.rate for r in win], marker="o",
                          label=f"windowed, RTT {rtt} ms")
        colour = line.get_color()
        blocking = next(r.rate for r in rows if r.rtt_ms == rtt and r.mode == "blocking")
        asynchronous = next(r.rate for r in rows if r.rtt_ms == rtt and r.mode == "async")
        ax.axhline(blocking, color=colour, linestyle=":", label=f"blocking, RTT {rtt} ms")
        ax.axhline(asynchronous, color=colour, linestyle="--", alpha=0.6, label=f"async listener, RTT {rtt} ms")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("publish window (messages)")
    ax.set_ylabel("messages / second")
    ax.set_title("Send throughput vs simulated RTT (reference client -> delay proxy -> reference broker)")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rtt", type=float, nargs="+", default=[0.25, 1.0, 10.0], help="simulated RTTs in ms")
    parser.add_argument("--windows", type=int, nargs="+", default=[1, 10, 50, 255])
    parser.add_argument("--budget", type=float, default=1.5, help="target seconds per blocking/windowed run")
    parser.add_argument("--quick", action="store_true", help="small runs (smoke test)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per cell; the fastest counts")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--plot", type=Path, default=None)
    parser.add_argument("--serve-broker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-proxy", nargs=2, metavar=("PORT", "ONE_WAY"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_broker:
        return serve_broker()
    if args.serve_proxy:
        return serve_proxy(int(args.serve_proxy[0]), float(args.serve_proxy[1]))
    budget = 0.3 if args.quick else args.budget
    rows, meta = bench(args.rtt, args.windows, budget, 1 if args.quick else args.repeat)
    base_ms = meta["base_rtt_ms"]
    print(table(rows, base_ms))
    print()
    results = checks(rows, base_ms)
    for name, ok, detail in results:
        print(f"[{'PASS' if ok else 'FAIL'}] {name}: {detail}")
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "rows": [{**asdict(r), "rate": r.rate} for r in rows],
                                         "checks": [{"check": n, "ok": ok, "detail": d} for n, ok, d in results]},
                                        indent=2))
    if args.plot:
        plot(rows, args.plot)
        print(f"plot: {args.plot}")
    return 0 if all(ok for _, ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
