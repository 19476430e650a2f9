"""RTT arithmetic of the seeds, reproduced on loopback: blocking vs windowed vs asynchronous sends.

Artemis' "Guarantees of sends and commits" (seed 000): a client that blocks on every send
can send at most 1/RTT messages per second (0.25 ms RTT -> 4,000 msg/s); decoupling the
send from its acknowledgement (asynchronous send acknowledgements, Solace's publish window,
Jakarta Messaging CompletionListener) removes that bound.

Setup: the reference broker (in memory, so receipts do not wait for fsync) in its own process,
the reference client over STOMP in this one, and a delay line between them. netem in network
namespaces would be the natural delay line; this machine's kernel has no sch_netem, so:

* ``--delay-line broker`` (default): :class:`EgressDelayLine`, the equivalent of netem on the
  broker's interface, inside the broker's process (the server's opt-in ``egress`` hook): every
  chunk the broker writes is held for the full RTT, in order, by a dedicated writer thread
  with select() timeouts and 1 ns timer slack. No extra hop: a receipt arrives RTT after the
  SEND plus what client and broker themselves cost.
* ``--delay-line proxy``: :class:`DelayProxy`, a TCP proxy in a third process that holds every
  chunk for RTT/2 in each direction (adds a hop: two more socket round trips per message).

Modes (reference client, persistent 100-byte messages):

* blocking: persistent sends with blockOnDurableSend=true (each waits for its receipt);
* windowed: persistent sends with a publish window of 1, 10, 50, 255 (Solace semantics);
* async:    persistent sends with a CompletionListener, no window.

Checks (issue 6): blocking throughput within 20% of the bare bound 1/RTT (also printed: the
ratio to 1/(RTT + base), base being the round trip of the same path with no added delay);
windowed (window >= 50) and async at 1 ms RTT at least 10x blocking. The base round trip is
measured for every path: client straight to the broker, through the broker delay line at 0,
through the proxy at 0. Output: a table on stdout, ``--json`` and ``--plot`` files.

Run: ``python benchmarks/rtt_bench.py [--quick] [--delay-line broker|proxy] [--plot rtt.png] [--json rtt.json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import functools
import importlib.util
import json
import os
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
from ackspec.reference.server import Egress, EmbeddedBroker

PR_SET_TIMERSLACK = 29


def tight_timers() -> None:
    """Ask Linux for 1 ns timer slack in this process (default 50 us): sleeps end when due."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)


class EgressDelayLine:
    """netem on the broker's interface, in the broker's process: each chunk leaves ``delay`` s after it was written.

    Plugged into the reference server's ``egress`` hook (one :class:`_DelayedEgress` per STOMP
    connection). The broker's loop thread stamps each chunk with its due time and appends it to
    one FIFO (the delay is constant, so due times are in order across connections); a dedicated
    writer thread sleeps in ``select()`` until the head is due (1 ns timer slack, so it wakes on
    time; asyncio's epoll selector would round timeouts up to 1 ms) and writes every due chunk of
    a connection with one ``send`` on its own duplicate of the socket. The hand-over to the
    writer thread (a pipe poke, only when the line was empty) happens inside the delay, so it
    costs no latency unless the delay is shorter than a thread wake-up.
    """

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self._lock = threading.Lock()
        self._queue: deque[tuple[float, _DelayedEgress, bytes | None]] = deque()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._thread = threading.Thread(target=self._run, name="egress-delay-line", daemon=True)
        self._thread.start()

    def __call__(self, transport: asyncio.Transport) -> Egress:
        return _DelayedEgress(self, transport, asyncio.get_running_loop())

    def put(self, egress: _DelayedEgress, data: bytes | None) -> None:
        """On the broker's loop thread: queue ``data`` (None = close) for ``delay`` from now."""
        due = time.perf_counter() + self.delay
        with self._lock:
            was_empty = not self._queue
            self._queue.append((due, egress, data))
        if was_empty:
            os.write(self._wake_w, b"x")

    def _run(self) -> None:
        """Sleep until the head is due, write it, then the bookkeeping: as little as possible between
        the timer's wake-up and the write. Only this thread removes entries, so the head stays put."""
        tight_timers()  # timer slack is per thread
        queue, lock, wake_r, clock = self._queue, self._lock, self._wake_r, time.perf_counter
        while True:
            if not queue:
                select.select([wake_r], [], [], None)  # until put() pokes
                os.read(wake_r, 4096)
                continue
            due, egress, data = queue[0]
            wait = due - clock()
            if wait > 0 and select.select([wake_r], [], [], wait)[0]:  # a stale poke, not the timer
                os.read(wake_r, 4096)
                continue
            if data is None:
                egress.finish()
                with lock:
                    queue.popleft()
                continue
            egress.send(data)
            with lock:  # then the ones after it of the same connection that are due too, in one write
                queue.popleft()
                now = clock()
                more = []
                while queue and queue[0][0] <= now and queue[0][1] is egress and queue[0][2] is not None:
                    more.append(queue.popleft()[2])
            if more:
                egress.send(b"".join(more))  # type: ignore[arg-type]


class _DelayedEgress:
    def __init__(self, line: EgressDelayLine, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.line = line
        self.transport = transport
        self.loop = loop
        # our own descriptor of the socket: asyncio may close (and the OS reuse) its number meanwhile
        self.fd = os.dup(transport.get_extra_info("socket").fileno())
        self.dead = False

    def write(self, data: bytes) -> None:
        self.line.put(self, data)

    def close(self) -> None:
        self.line.put(self, None)

    def connection_lost(self) -> None:
        self.dead = True
        self.line.put(self, None)

    def send(self, data: bytes) -> None:
        """On the writer thread."""
        if self.dead:
            return
        try:
            written = os.write(self.fd, data)
        except BlockingIOError:
            written = 0
        except OSError:
            self.dead = True
            return
        view = memoryview(data)[written:]
        while view and not self.dead:
            try:
                view = view[os.write(self.fd, view):]
            except BlockingIOError:
                select.select([], [self.fd], [], 1.0)
            except OSError:
                self.dead = True

    def finish(self) -> None:
        """On the writer thread, after everything queued before the close went out."""
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
        if not self.dead:
            self.dead = True
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self.transport.close)


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


HELPER_CPUS: set[int] | None = None
"""With ``--pin``: the CPUs helper processes (broker, proxy) are confined to; this process gets the others."""


@contextlib.contextmanager
def _process(*args: str):  # type: ignore[no-untyped-def]
    """Run this script in a helper mode in its own process (own GIL); yield the port it prints."""
    proc = subprocess.Popen([sys.executable, __file__, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        if HELPER_CPUS:
            os.sched_setaffinity(proc.pid, HELPER_CPUS)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"helper {args} did not start")
        yield int(line.split()[0])
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # the helper exits when its stdin closes
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


BROKER_LOOP = "asyncio"
"""The broker's event loop (``--broker-loop``)."""


@contextlib.contextmanager
def delay_path(line: str, rtt: float):  # type: ignore[no-untyped-def]
    """A broker reachable through ``line`` ("broker", "proxy" or "direct") with ``rtt`` seconds added;
    yields the STOMP URL. Every part runs in its own process."""
    with contextlib.ExitStack() as stack:
        loop = ("--broker-loop", BROKER_LOOP)
        if line == "broker":
            port = stack.enter_context(_process("--serve-broker", *loop, "--egress-delay", repr(rtt)))
        else:
            port = stack.enter_context(_process("--serve-broker", *loop))
            if line == "proxy":
                port = stack.enter_context(_process("--serve-proxy", str(port), repr(rtt / 2)))
        yield f"stomp://127.0.0.1:{port}"


def serve_broker(egress_delay: float | None, event_loop: str) -> int:
    egress = EgressDelayLine(egress_delay) if egress_delay is not None else None
    with EmbeddedBroker(persistent=False, egress=egress, event_loop=event_loop) as broker:
        print(broker.port, flush=True)
        sys.stdin.read()
    return 0


def serve_proxy(port: int, one_way: float) -> int:
    tight_timers()
    with DelayProxy(("127.0.0.1", port), one_way) as proxy:
        print(proxy.port, flush=True)
        sys.stdin.read()
    return 0


_SPINNER = "import os\nos.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\nwhile True:\n    pass\n"


@contextlib.contextmanager
def busy_cpus():  # type: ignore[no-untyped-def]
    """One spinner per CPU at SCHED_IDLE priority: it runs only when nothing else wants the CPU, so no
    vCPU halts and every wake-up is a plain context switch (``--busy-cpus``)."""
    spinners = []
    try:
        for cpu in sorted(os.sched_getaffinity(0)):
            proc = subprocess.Popen([sys.executable, "-c", _SPINNER])
            os.sched_setaffinity(proc.pid, {cpu})
            spinners.append(proc)
        yield
    finally:
        for proc in spinners:
            proc.kill()
            proc.wait()


def best(repeat: int, fn: Callable[[], float]) -> float:
    """Shortest of ``repeat`` runs: the machine is shared, so the fastest run is the least disturbed."""
    return min(fn() for _ in range(repeat))


LINES = ("broker", "proxy")


def base_round_trips(repeat: int, n: int = 2000) -> dict[str, float]:
    """Blocking round trip (ms) with nothing added: straight to the broker, and through each delay line at 0."""
    out = {}
    for line in ("direct", *LINES):
        with delay_path(line, 0.0) as url:
            out[line] = best(repeat, functools.partial(run_blocking, url, n, "/queue/rtt.base")) / n * 1000
    return out


def bench(rtts_ms: list[float], windows: list[int], budget: float, repeat: int = 1,
          line: str = "broker") -> tuple[list[Row], dict[str, Any]]:
    """Broker, client (and proxy) each run in their own process, so they do not share one GIL."""
    rows: list[Row] = []
    load_at_start = os.getloadavg()
    bases = base_round_trips(repeat)
    base = bases[line] / 1000
    for rtt_ms in rtts_ms:
        rtt = rtt_ms / 1000
        with delay_path(line, rtt) as url:
            q = f"/queue/rtt.{rtt_ms}"
            n_block = max(30, min(3000, int(budget / (rtt + base))))
            rows.append(Row(rtt_ms, "blocking", None, n_block,
                            best(repeat, functools.partial(run_blocking, url, n_block, q))))
            for w in windows:
                n_win = max(100, min(6000, int(budget * w / (rtt + base))))
                rows.append(Row(rtt_ms, "windowed", w, n_win,
                                best(repeat, functools.partial(run_windowed, url, n_win, q, w))))
            rows.append(Row(rtt_ms, "async", None, 6000, best(repeat, functools.partial(run_async, url, 6000, q))))
            print(f"  RTT {rtt_ms} ms done", file=sys.stderr)
    return rows, {"delay_line": line, "base_rtt_ms": bases[line], "base_rtt_ms_by_path": bases,
                  "broker_loop": BROKER_LOOP, "pinned": bool(HELPER_CPUS), "load_average_at_start": load_at_start,
                  "load_average": os.getloadavg()}


def checks(rows: list[Row], base_ms: float) -> list[tuple[str, bool, str]]:
    """Issue 6's checks; the blocking bound is the bare 1/RTT (1/(RTT+base) is printed for information)."""
    out = []
    for row in (r for r in rows if r.mode == "blocking"):
        bound = 1000 / row.rtt_ms
        ratio = row.rate / bound
        out.append((f"blocking at RTT {row.rtt_ms} ms within 20% of 1/RTT = {bound:,.0f}/s",
                    0.8 <= ratio <= 1.2,
                    f"{row.rate:,.1f}/s = {ratio:.1%} of 1/RTT "
                    f"({row.rate / (1000 / (row.rtt_ms + base_ms)):.0%} of 1/(RTT+base), base {base_ms:.3f} ms)"))
    blocking_1ms = next((r.rate for r in rows if r.mode == "blocking" and r.rtt_ms == 1.0), None)
    if blocking_1ms:
        for row in rows:
            if row.rtt_ms == 1.0 and (row.mode == "async" or (row.window or 0) >= 50):
                label = "async" if row.mode == "async" else f"window {row.window}"
                out.append((f"{label} at 1 ms RTT >= 10x blocking", row.rate >= 10 * blocking_1ms,
                            f"{row.rate / blocking_1ms:.1f}x"))
    return out


def table(rows: list[Row], meta: dict[str, Any]) -> str:
    bases = ", ".join(f"{k} {v:.3f} ms" for k, v in meta["base_rtt_ms_by_path"].items())
    load = (", ".join(f"{x:.2f}" for x in meta["load_average_at_start"]) + " at the start, "
            + ", ".join(f"{x:.2f}" for x in meta["load_average"]) + " at the end")
    pinned = "; client and broker pinned to separate CPUs" if meta["pinned"] else ""
    pinned += "; CPUs kept out of idle (--busy-cpus, diagnostic)" if meta.get("busy_cpus") else ""
    lines = [f"delay line: {meta['delay_line']}; broker event loop: {meta['broker_loop']}{pinned}",
             f"base round trip (no added delay): {bases}; load average {load}", "",
             f"{'RTT ms':>7} {'mode':>9} {'window':>6} {'msgs':>6} {'msg/s':>10} {'1/RTT':>8} {'vs blocking':>11}"]
    for rtt in sorted({r.rtt_ms for r in rows}):
        blocking = next(r.rate for r in rows if r.rtt_ms == rtt and r.mode == "blocking")
        for r in (x for x in rows if x.rtt_ms == rtt):
            lines.append(f"{r.rtt_ms:>7} {r.mode:>9} {r.window or '-':>6} {r.messages:>6} {r.rate:>10,.0f} "
                         f"{1000 / r.rtt_ms:>8,.0f} {r.rate / blocking:>10.1f}x")
    return "\n".join(lines)


def plot(rows: list[Row], path: Path, delay_line: str) -> None:
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
        ax.axhline(1000 / rtt, color=colour, linestyle="-", linewidth=0.8, alpha=0.35, label=f"1/RTT, RTT {rtt} ms")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("publish window (messages)")
    ax.set_ylabel("messages / second")
    ax.set_title(f"Send throughput vs simulated RTT (reference client -> reference broker, {delay_line} delay line)",
                 fontsize=10)
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
    parser.add_argument("--delay-line", choices=LINES, default="broker",
                        help="broker: delay the broker's output in its own process (no extra hop, default); "
                             "proxy: a delaying TCP proxy process")
    parser.add_argument("--broker-loop", choices=("asyncio", "uvloop"), default="uvloop",
                        help="the broker's event loop (uvloop falls back to asyncio when not installed)")
    parser.add_argument("--pin", action="store_true",
                        help="pin this process (the client) to CPU 0 and the broker/proxy to the others, "
                             "as if they ran on separate hosts")
    parser.add_argument("--busy-cpus", action="store_true",
                        help="diagnostic: keep every CPU out of its idle state (one SCHED_IDLE spinner per CPU, the "
                             "user-space equivalent of idle=poll), to show what waking from idle costs; not a "
                             "configuration the checks are meant for")
    parser.add_argument("--serve-broker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--egress-delay", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--serve-proxy", nargs=2, metavar=("PORT", "ONE_WAY"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_broker:
        return serve_broker(args.egress_delay, args.broker_loop)
    if args.serve_proxy:
        return serve_proxy(int(args.serve_proxy[0]), float(args.serve_proxy[1]))
    global BROKER_LOOP, HELPER_CPUS  # noqa: PLW0603 - set once from the command line
    BROKER_LOOP = args.broker_loop
    if BROKER_LOOP == "uvloop" and importlib.util.find_spec("uvloop") is None:
        print("uvloop is not installed: the broker runs on asyncio's event loop", file=sys.stderr)
        BROKER_LOOP = "asyncio"
    if args.pin:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            parser.error("--pin needs at least two CPUs")
        HELPER_CPUS = set(cpus[1:])
        os.sched_setaffinity(0, {cpus[0]})
    budget = 0.3 if args.quick else args.budget
    with busy_cpus() if args.busy_cpus else contextlib.nullcontext():
        rows, meta = bench(args.rtt, args.windows, budget, 1 if args.quick else args.repeat, args.delay_line)
    meta["busy_cpus"] = args.busy_cpus
    base_ms = meta["base_rtt_ms"]
    print(table(rows, meta))
    print()
    results = checks(rows, base_ms)
    for name, ok, detail in results:
        print(f"[{'PASS' if ok else 'FAIL'}] {name}: {detail}")
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "rows": [{**asdict(r), "rate": r.rate} for r in rows],
                                         "checks": [{"check": n, "ok": ok, "detail": d} for n, ok, d in results]},
                                        indent=2))
    if args.plot:
        plot(rows, args.plot, args.delay_line)
        print(f"plot: {args.plot}")
    return 0 if all(ok for _, ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
