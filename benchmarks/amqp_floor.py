"""The floor of the AMQP 1.0 rows: how fast can *any* proton + asyncio Python broker go on this machine?

Why this exists. Issue 5 asks the reference broker's AMQP 1.0 listener (python-qpid-proton's
engine driven from asyncio, one Python thread) for parity with the fastest real broker on the
three rows of ``ackspec bench --protocol amqp``. This script answers the question that has to
come first: what does the *architecture* itself allow? It runs a floor server with zero broker
logic (no core, no queue, no journal, no message decoding; a per-address counter is all it
keeps) built the leanest way we found on that architecture, and drives it with the very client
code of the bench (the scenario functions of :mod:`ackspec.bench.amqp`, imported, not copied)
in one run, taking turns with the reference broker and the real brokers. Then:

* ``floor / fastest real`` below 1 means no broker of this architecture can reach parity on
  this machine, whatever its broker logic (the gap is the architecture's);
* ``reference / floor`` is the share of the reachable rate the reference broker gets (the rest
  of the gap is our broker logic, the part worth optimising).

The bench client is one Python process too: when it is busy nearly all the wall time of the
floor's runs (printed under the table), the floor's msg/s is the client's ceiling, not the
floor's, and ``floor / fastest real`` is a lower bound; the floor's CPU per message (``1 /`` it
is what one core could carry) then says how far above it the floor would go.

The floor server (``--serve``, started in its own process like the reference broker):

* one :class:`asyncio.Protocol` per socket; SASL ANONYMOUS by proton itself (the bench client
  offers ANONYMOUS when it has no user);
* every per-message path on proton's C API (``cproton_ffi``, through
  :mod:`ackspec.reference.amqp.proton_c`, which checks each name used here), C pointers only, functions bound
  once, no wrapper objects, as ``src/ackspec/reference/amqp/connection.py`` does;
* no collector: endpoint states are polled once per piece of input and deliveries are walked
  link by link (see :class:`FloorProtocol`), so no proton event is made or read per message;
* a transfer: ``pn_link_recv`` of its bytes, ``pn_link_advance``, ``accepted`` when it is not
  pre-settled, ``pn_delivery_settle``;
* a consumer (the bench drains each queue it filled, and the consume row preloads one): one
  pre-encoded message (the bench's 100-byte non-durable one) per credit, up to what the address
  received, written :data:`SEND_CHUNK` at a time; each ``accepted`` disposition settled;
* credit topped up when half is used (per piece) and, at the end of every read, back to the full
  window: the bench client, after its last pre-settled transfer, waits up to 50 ms for the socket
  to be readable although nothing is owed to it, so a broker that is silent at that moment
  (credit still above half) gets 50 ms added to that run (the reference broker in some runs:
  pre-settled 10,000 at 73k instead of 105-168k; Artemis and ActiveMQ 6 in every one of five
  runs of 20,000 checked, credit 600 left each time); returning credit per read is a real
  broker's choice and keeps the floor off that artefact, so on the pre-settled row
  ``floor / fastest real`` overstates the floor's lead (the artefact is the bench client's:
  ``ackspec.bench.amqp._send`` pumps with a 0.05 s wait once ``sent == n`` even when settled);
* input fed in proton-sized pieces (8 kB) straight from the read (no copies), output written
  after every piece, so the peer gets credit and outcomes while the rest of a large read is
  handled; the garbage collector tuned as ``ackspec broker`` tunes it.

The server measures its own CPU time (``time.process_time``, sampled per read, not per
message) from the read holding a link's first transfer or flow to the read holding its last
transfer or disposition, and reports it per link when the connection closes: the floor's CPU
per message of each row's measured direction (``1 / that`` is what one core could carry).

Variants tried on this machine (floor CPU per message, pre-settled / window / consume; the
machine's load moves single figures by 20-50 %, so only clear differences count):

* proton's collector, one event per transfer and disposition read on the C API (the reference
  listener's design): 2.3-2.4 / 2.7-2.8 / 3.1 us; polling instead (kept): 1.5 / 1.8-2.0 /
  2.0-2.2 us, about a third less;
* uvloop instead of asyncio's loop (``--loop uvloop``): no difference beyond noise (1.4-1.6 /
  1.8-2.2 / 1.9-2.5 us);
* output written once per read instead of once per 8 kB piece: no difference beyond noise;
* deliveries written in chunks of :data:`SEND_CHUNK` instead of all the credit at once: consume
  row 263-269k -> 300-317k msg/s in alternating runs (the client is kept busy sooner).

``--profile FILE`` runs the floor under cProfile: its call counts are exact (the C calls each
message costs), but its times are wall-clock, so on a loaded machine they also count the time
the process waited for a core; ``perf record -p PID`` of the ``--serve`` process is the better
way to see where the CPU goes.

Usage (real brokers from ``brokers/start.sh``; the reference broker is started as the bench does)::

    python benchmarks/amqp_floor.py [--messages N] [--repetitions R]
                                    [--targets floor,reference,artemis,activemq6] [--rows presettled,window,consume]
                                    [--loop asyncio|uvloop]
                                    [--profile FILE]

Wrap it in ``flock /tmp/ackspec/bench.lock`` on a shared machine. It prints a Markdown table
with ``uptime`` before and after. Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import json
import os
import pstats
import select
import signal
import statistics
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import uvloop
from proton import Connection, Link, Message, Transport

from ackspec.bench.amqp import (
    ADDRESS_STYLE,
    REAL_BROKERS,
    SCENARIOS,
    AmqpEndpoint,
    AmqpScenario,
    client_ceiling,
    reference_broker,
)
from ackspec.brokers import BROKERS
from ackspec.errors import AckspecError
from ackspec.reference.amqp.proton_c import ffi, lib  # proton's C API, version-checked there

WINDOW = 1000
"""Credit the floor keeps open on every link a client sends on (as the reference broker does)."""
SEND_CHUNK = 128
"""Deliveries written per flush when credit arrives: the client starts on the first ones while the
floor makes the rest (consume row ~15 % faster than one flush per credit grant; 64-256 alike, 32 slower)."""

Ptr = Any
"""A C pointer of proton's API (cffi ``cdata``)."""

_delivery_partial = lib.pn_delivery_partial
_delivery_settled = lib.pn_delivery_settled
_delivery_remote_state = lib.pn_delivery_remote_state
_delivery_update = lib.pn_delivery_update
_delivery_settle = lib.pn_delivery_settle
_delivery = lib.pn_delivery
_link_recv = lib.pn_link_recv
_link_send = lib.pn_link_send
_link_advance = lib.pn_link_advance
_link_credit = lib.pn_link_credit
_link_flow = lib.pn_link_flow
_transport_push = lib.pn_transport_push
_transport_capacity = lib.pn_transport_capacity
_transport_pending = lib.pn_transport_pending
_transport_peek = lib.pn_transport_peek
_transport_pop = lib.pn_transport_pop

_connection_state = lib.pn_connection_state
_session_head = lib.pn_session_head
_link_head = lib.pn_link_head
_link_current = lib.pn_link_current

_PN_ACCEPTED = int(lib.PN_ACCEPTED)
_LOCAL_UNINIT = int(lib.PN_LOCAL_UNINIT)
_LOCAL_ACTIVE = int(lib.PN_LOCAL_ACTIVE)
_REMOTE_ACTIVE = int(lib.PN_REMOTE_ACTIVE)
_REMOTE_CLOSED = int(lib.PN_REMOTE_CLOSED)
_RECV_SIZE = 1 << 16
"""pn_link_recv's buffer."""
_TAGS = 1 << 13
"""Delivery tags the floor cycles through (unique: never more deliveries than this unsettled on a link)."""
_TAG_ARGS = [(len(t), ffi.from_buffer(t)) for t in (b"%d" % i for i in range(_TAGS))]
"""Each tag as the ``pn_delivery_tag_t`` argument of ``pn_delivery`` (proton copies it)."""


def encoded_message(body: bytes) -> bytes:
    """The bench's message: ``body`` as a data section, non-durable (what the floor hands out)."""
    msg = Message(body=body)
    msg.durable = False
    return bytes(msg.encode())


# ------------------------------------------------------------------------------------------------
# the floor server
# ------------------------------------------------------------------------------------------------

@dataclass(eq=False, slots=True)
class _LinkStats:
    """One link's measured direction: messages, and process CPU from its first to its last read."""

    address: str
    incoming: bool
    messages: int = 0
    cpu_first: float = -1.0
    cpu_last: float = 0.0
    wall_first: float = 0.0
    wall_last: float = 0.0

    def report(self) -> dict[str, Any]:
        return {"dir": "in" if self.incoming else "out", "address": self.address, "messages": self.messages,
                "cpu_s": max(self.cpu_last - self.cpu_first, 0.0),
                "wall_s": max(self.wall_last - self.wall_first, 0.0)}


@dataclass(eq=False, slots=True)
class _OutLink:
    """A link the client receives on: the deliveries it has not settled yet, oldest first."""

    impl: Ptr
    stats: _LinkStats
    unsettled: deque[Ptr] = field(default_factory=deque)
    tag_index: int = 0


class FloorProtocol(asyncio.Protocol):
    """One AMQP connection of the floor server.

    No collector: proton's events cost a C allocation and three or more Python-to-C calls each,
    one per transfer and disposition, so instead the endpoint states are polled once per piece
    of input (a handful of calls that find nothing in steady state) and deliveries are walked
    link by link: an incoming link's current delivery until one is still partial, an outgoing
    link's unsettled deliveries from the oldest while the client has given them an outcome (a
    client settling out of order would keep the later ones waiting until the oldest is settled;
    the bench's client settles in order).
    """

    def __init__(self, store: dict[str, int], payload: bytes,
                 report: Callable[[list[dict[str, Any]]], None]) -> None:
        self.store = store
        self.payload = payload
        self.payload_size = len(payload)
        self.report = report
        self.transport_: asyncio.Transport | None = None
        self.pn_transport = Transport(Transport.SERVER)
        self.pn_transport.sasl().allowed_mechs("ANONYMOUS")
        self.connection = Connection()
        self.pn_transport.bind(self.connection)
        self.t = self.pn_transport._impl
        self.c = self.connection._impl
        self.in_links: list[tuple[Ptr, _LinkStats]] = []
        self.out_links: list[_OutLink] = []
        self.finished: list[_LinkStats] = []
        self.reported = False
        self.recv_ptr = ffi.new("char[]", _RECV_SIZE)
        self.out_buffer = bytearray(1 << 16)
        self.out_ptr = ffi.from_buffer(self.out_buffer)
        self.out_view = memoryview(self.out_buffer)
        self.closing = False
        self.touched: set[_LinkStats] = set()
        """Links that moved messages in the current read (to date their first and last)."""

    # -- asyncio ----------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport_ = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        t = self.t
        src = ffi.from_buffer(data)
        size = len(data)
        offset = 0
        while offset < size:  # proton takes at most capacity() (8 kB) at a time
            capacity = _transport_capacity(t)
            if capacity <= 0:
                break
            pushed = _transport_push(t, src + offset, min(capacity, size - offset))
            if pushed < 0:
                break
            offset += pushed
            self.process()
            self.flush()
        for impl, _ in self.in_links:  # the read is over: whatever credit was used is given back
            if (credit := _link_credit(impl)) < WINDOW:
                _link_flow(impl, WINDOW - credit)
        self.flush()
        if self.touched:
            cpu1, wall1 = time.process_time(), time.perf_counter()
            for stats in self.touched:
                if stats.cpu_first < 0:
                    stats.cpu_first, stats.wall_first = cpu0, wall0
                stats.cpu_last, stats.wall_last = cpu1, wall1
            self.touched.clear()
        if offset < size or _transport_pending(t) < 0:
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport_ = None
        self.finish()

    # -- the engine -------------------------------------------------------------------------------

    def process(self) -> None:
        """After each piece of input: endpoints opened, transfers taken, outcomes settled,
        deliveries sent for new credit, credit topped up, endpoints closed."""
        c = self.c
        if _link_head(c, _LOCAL_UNINIT) or _session_head(c, _LOCAL_UNINIT) or _connection_state(c) & _LOCAL_UNINIT:
            self.open_endpoints()
        store = self.store
        recv_ptr = self.recv_ptr
        for impl, stats in self.in_links:
            got = 0
            dlv = _link_current(impl)
            while dlv and not _delivery_partial(dlv):
                while _link_recv(impl, recv_ptr, _RECV_SIZE) == _RECV_SIZE:
                    pass  # a message larger than the buffer: the rest is read (and dropped) too
                _link_advance(impl)
                if not _delivery_settled(dlv):
                    _delivery_update(dlv, _PN_ACCEPTED)
                _delivery_settle(dlv)
                got += 1
                dlv = _link_current(impl)
            if got:
                stats.messages += got
                store[stats.address] += got
                self.touched.add(stats)
            credit = _link_credit(impl)
            if credit <= WINDOW // 2:
                _link_flow(impl, WINDOW - credit)
        for out in self.out_links:
            unsettled = out.unsettled
            if unsettled and (_delivery_remote_state(unsettled[0]) or _delivery_settled(unsettled[0])):
                _delivery_settle(unsettled.popleft())
                while unsettled and (_delivery_remote_state(unsettled[0]) or _delivery_settled(unsettled[0])):
                    _delivery_settle(unsettled.popleft())
                self.touched.add(out.stats)
            self.send(out)
        if (_link_head(c, _LOCAL_ACTIVE | _REMOTE_CLOSED) or _session_head(c, _LOCAL_ACTIVE | _REMOTE_CLOSED)
                or _connection_state(c) & _REMOTE_CLOSED):
            self.close_endpoints()

    def send(self, out: _OutLink) -> None:
        """One pre-encoded message per credit, as long as the address has messages."""
        impl = out.impl
        address = out.stats.address
        while (n := min(_link_credit(impl), self.store[address], _TAGS - len(out.unsettled), SEND_CHUNK)) > 0:
            self.send_chunk(out, n)
            self.flush()

    def send_chunk(self, out: _OutLink, n: int) -> None:
        impl = out.impl
        address = out.stats.address
        self.store[address] -= n
        payload, size = self.payload, self.payload_size
        tags = _TAG_ARGS
        i = out.tag_index
        append = out.unsettled.append
        for _ in range(n):
            append(_delivery(impl, tags[i]))
            i = (i + 1) % _TAGS
            _link_send(impl, payload, size)
            _link_advance(impl)
        out.tag_index = i
        out.stats.messages += n
        self.touched.add(out.stats)

    def open_endpoints(self) -> None:
        c = self.c
        state = _connection_state(c)
        if state & _LOCAL_UNINIT and state & _REMOTE_ACTIVE:
            self.connection.container = "ackspec-amqp-floor"
            self.connection.open()
        while ssn := _session_head(c, _LOCAL_UNINIT):
            lib.pn_session_open(ssn)
        while impl := _link_head(c, _LOCAL_UNINIT):
            link = Link.wrap(impl)  # type: ignore[no-untyped-call]
            link.snd_settle_mode = link.remote_snd_settle_mode
            link.rcv_settle_mode = link.remote_rcv_settle_mode
            link.source.copy(link.remote_source)
            link.target.copy(link.remote_target)
            link.open()
            if link.is_sender:
                address = link.remote_source.address or ""
                self.store.setdefault(address, 0)
                self.out_links.append(_OutLink(impl, _LinkStats(address, incoming=False)))
            else:
                address = link.remote_target.address or ""
                self.store.setdefault(address, 0)
                self.in_links.append((impl, _LinkStats(address, incoming=True)))
                _link_flow(impl, WINDOW)

    def close_endpoints(self) -> None:
        c = self.c
        while impl := _link_head(c, _LOCAL_ACTIVE | _REMOTE_CLOSED):
            self.forget(impl)
            lib.pn_link_close(impl)
        while ssn := _session_head(c, _LOCAL_ACTIVE | _REMOTE_CLOSED):
            lib.pn_session_close(ssn)
        state = _connection_state(c)
        if state & _REMOTE_CLOSED and state & _LOCAL_ACTIVE:
            self.finish()
            self.connection.close()

    def forget(self, impl: Ptr) -> None:
        """A link is gone: its statistics are kept for the report, its unsettled messages go back."""
        for i, (link, stats) in enumerate(self.in_links):
            if link == impl:
                del self.in_links[i]
                self.finished.append(stats)
                return
        for i, out in enumerate(self.out_links):
            if out.impl == impl:
                del self.out_links[i]
                self.store[out.stats.address] += len(out.unsettled)
                self.finished.append(out.stats)
                return

    def finish(self) -> None:
        """The connection is over: report its links' statistics (once)."""
        if self.reported:
            return
        self.reported = True
        for impl, _ in list(self.in_links):
            self.forget(impl)
        for out in list(self.out_links):
            self.forget(out.impl)
        self.report([s.report() for s in self.finished if s.messages])

    # -- output -----------------------------------------------------------------------------------

    def flush(self) -> None:
        transport = self.transport_
        if transport is None:
            return
        t = self.t
        while (pending := _transport_pending(t)) > 0:
            got = _transport_peek(t, self.out_ptr, min(pending, len(self.out_buffer)))
            if got <= 0:
                break
            transport.write(self.out_view[:got].tobytes())
            _transport_pop(t, got)

    def close(self) -> None:
        if not self.closing and self.transport_ is not None:
            self.closing = True
            self.flush()
            self.transport_.close()


def serve(port: int, loop_name: str, body: bytes, profile: str | None) -> None:
    """``--serve``: the floor server on 127.0.0.1:``port``; prints ``port N``, then one JSON line
    of link statistics per closed connection, until SIGTERM."""
    if loop_name == "uvloop":
        uvloop.install()
    store: dict[str, int] = {}
    payload = encoded_message(body)

    def report(links: list[dict[str, Any]]) -> None:
        print(json.dumps(links), flush=True)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: FloorProtocol(store, payload, report), "127.0.0.1", port)
        print(f"port {server.sockets[0].getsockname()[1]}", flush=True)
        stop = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        server.close()

    gc.collect()  # as the reference broker does (ackspec broker: tune_collector)
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    asyncio.run(main())
    if profiler is not None and profile:
        profiler.disable()
        profiler.dump_stats(profile)


# ------------------------------------------------------------------------------------------------
# the driver: floor, reference broker and real brokers in one run, the bench's own client
# ------------------------------------------------------------------------------------------------

@dataclass
class FloorProcess:
    """The floor server in a subprocess, with its statistics lines."""

    proc: subprocess.Popen[str]
    port: int
    stdout: IO[str]

    def stats(self, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The link statistics of the next closed connection."""
        ready, _, _ = select.select([self.stdout], [], [], timeout)
        if not ready:
            return []
        line = self.stdout.readline()
        return list(json.loads(line)) if line.strip() else []


@contextlib.contextmanager
def floor_process(loop_name: str, body: bytes, profile: str | None) -> Iterator[FloorProcess]:
    cmd = [sys.executable, os.path.abspath(__file__), "--serve", "--loop", loop_name, "--body-bytes", str(len(body))]
    if profile:
        cmd += ["--profile", profile]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().split()
        if len(first) != 2 or first[0] != "port":
            raise SystemExit(f"amqp_floor: the floor server did not start ({first})")
        yield FloorProcess(proc, int(first[1]), proc.stdout)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


ROW_DIRECTION = {"amqp-presettled-send": "in", "amqp-unsettled-window": "in", "amqp-consume-credit": "out"}
"""Which of the floor's links is the measured one in each row (the others are set-up or drain)."""
LABELS = {"floor": "floor", "reference": "reference", "rabbitmq": "RabbitMQ", "artemis": "Artemis",
          "activemq6": "ActiveMQ 6"}


@dataclass
class Row:
    runs: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    floor_cpu_us: list[float] = field(default_factory=list)
    scenario_cpu_us: dict[str, list[float]] = field(default_factory=dict)
    client_busy: dict[str, list[float]] = field(default_factory=dict)
    """Per target: the bench client's (this process's) CPU time over the scenario's wall time."""
    """floor and reference: the server process's CPU over the whole scenario (both directions) per message."""


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        with open("/proc/loadavg") as f:
            return "load average: " + ", ".join(f.read().split()[:3])


def _cpu_ns(pid: int) -> int:
    """CPU time of a process so far, in ns (the sum of its threads' ``schedstat``; 0 if it is gone)."""
    total = 0
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
    return total


def _reference_pid() -> int | None:
    """The reference broker this process started (``python -m ackspec broker``), found among its children."""
    me = os.getpid()
    for task in os.listdir(f"/proc/{me}/task"):
        with contextlib.suppress(OSError), open(f"/proc/{me}/task/{task}/children") as f:
            for child in f.read().split():
                with contextlib.suppress(OSError), open(f"/proc/{child}/cmdline", "rb") as cmd:
                    if b"ackspec\x00broker" in cmd.read():
                        return int(child)
    return None


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _fmt_us(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _fmt(value: float | None) -> str:
    return "error" if value is None else f"{value:,.0f}"


@dataclass
class Targets:
    """The targets of one run, open: each one's endpoint, the floor server and the server processes' pids."""

    endpoints: dict[str, AmqpEndpoint] = field(default_factory=dict)
    floor: FloorProcess | None = None
    pids: dict[str, int] = field(default_factory=dict)


def _open_targets(stack: contextlib.ExitStack, labels: list[str], rows: dict[str, Row], loop_name: str,
                  body: bytes, profile: str | None) -> Targets:
    """Start the floor and the reference broker (closed with ``stack``) and name the real brokers' ports; a
    reference broker that cannot start is an error in every row."""
    targets = Targets()
    for label in labels:
        if label == "floor":
            floor = targets.floor = stack.enter_context(floor_process(loop_name, body, profile))
            targets.endpoints[label] = AmqpEndpoint("floor", "127.0.0.1", floor.port, None, None, "path")
            targets.pids[label] = floor.proc.pid
        elif label == "reference":
            try:
                targets.endpoints[label] = stack.enter_context(reference_broker())
            except AckspecError as exc:
                print(f"reference: {exc}", file=sys.stderr, flush=True)
                for row in rows.values():
                    row.errors[label] = str(exc)
                continue
            if (pid := _reference_pid()) is not None:
                targets.pids[label] = pid
        elif label in REAL_BROKERS:
            info = BROKERS[label]
            assert info.amqp_port is not None
            targets.endpoints[label] = AmqpEndpoint(label, "127.0.0.1", info.amqp_port, info.login, info.passcode,
                                                    ADDRESS_STYLE[label])
        else:
            raise SystemExit(f"amqp_floor: unknown target {label!r} (floor, reference, {', '.join(REAL_BROKERS)})")
    return targets


def _warm_up(targets: Targets, scenarios: list[AmqpScenario], messages: int, body: bytes) -> None:
    """Every scenario once on every target, not measured: first connections, JITs, caches."""
    for label, ep in targets.endpoints.items():
        for scenario in scenarios:
            try:
                scenario.run(ep, min(messages, 2000), body)
            except (AckspecError, OSError) as exc:
                print(f"{label} warm-up {scenario.name}: ERROR {exc}", file=sys.stderr, flush=True)
            if label == "floor" and targets.floor is not None:
                targets.floor.stats()


def _measure(targets: Targets, label: str, scenario: AmqpScenario, row: Row, messages: int, body: bytes) -> str | None:
    """One timed run of ``scenario`` on ``label``, recorded in ``row``; what it measured, as a line's tail
    (None: it failed, and the row records the error)."""
    pid = targets.pids.get(label)
    cpu0 = _cpu_ns(pid) if pid is not None else 0
    client0, wall0 = time.process_time(), time.perf_counter()
    try:
        rate = scenario.run(targets.endpoints[label], messages, body)
    except (AckspecError, OSError) as exc:
        row.errors[label] = str(exc)
        print(f"{label} {scenario.name}: ERROR {exc}", file=sys.stderr, flush=True)
        return None
    row.runs.setdefault(label, []).append(rate)
    busy = (time.process_time() - client0) / (time.perf_counter() - wall0)
    row.client_busy.setdefault(label, []).append(busy)
    extra = f", client busy {busy:.0%}"
    if pid is not None:
        whole = (_cpu_ns(pid) - cpu0) / 1e3 / messages
        row.scenario_cpu_us.setdefault(label, []).append(whole)
        extra = f", scenario CPU {whole:.2f} us/msg"
    if label == "floor" and targets.floor is not None:
        extra += _floor_direction(targets.floor, scenario, row)
    return f"{rate:,.0f} msg/s{extra}"


def _floor_direction(floor: FloorProcess, scenario: AmqpScenario, row: Row) -> str:
    """The floor's CPU per message over the row's timed direction (its own measurement), recorded in ``row``."""
    links = [s for s in floor.stats() if s["dir"] == ROW_DIRECTION[scenario.name]]
    if not links or not links[0]["messages"]:
        return ""
    us = links[0]["cpu_s"] / links[0]["messages"] * 1e6
    row.floor_cpu_us.append(us)
    return f", measured direction {us:.2f} us/msg over {links[0]['messages']} messages"


def drive(targets: list[str], row_names: list[str], messages: int, repetitions: int, body_bytes: int,
          loop_name: str, profile: str | None) -> int:
    body = (b"0123456789" * (body_bytes // 10 + 1))[:body_bytes]
    print(f"before: {_uptime()}", file=sys.stderr, flush=True)
    scenarios = [s for s in SCENARIOS if s.name in row_names]
    rows = {s.name: Row() for s in scenarios}
    with contextlib.ExitStack() as stack:
        running = _open_targets(stack, targets, rows, loop_name, body, profile)
        _warm_up(running, scenarios, messages, body)
        for scenario in scenarios:  # repetitions take turns over the targets, so load changes hit all alike
            row = rows[scenario.name]
            for rep in range(repetitions):
                for label in running.endpoints:
                    if label in row.errors:
                        continue
                    line = _measure(running, label, scenario, row, messages, body)
                    if line is not None:
                        print(f"{label:<10} {scenario.name:<22} run {rep + 1}/{repetitions}: {line}",
                              file=sys.stderr, flush=True)
    after = _uptime()
    print(f"after: {after}", file=sys.stderr, flush=True)
    _print_table(targets, rows, messages, repetitions, body_bytes, loop_name, after)
    print(f"\nload client ceiling (the bench's, proton engine, no broker): {client_ceiling(messages, body):,.0f} msg/s")
    if profile:
        print(f"\nfloor server profile ({profile}), top 15 by internal time:")
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)
    return 0


def _print_table(targets: list[str], rows: dict[str, Row], messages: int, repetitions: int, body_bytes: int,
                 loop_name: str, uptime: str) -> None:
    real = [t for t in targets if t not in ("floor", "reference")]
    print(f"AMQP 1.0 floor, {messages:,} messages x {repetitions} repetitions (median msg/s), {body_bytes}-byte "
          f"non-durable bodies, floor on {loop_name}; {uptime}\n")
    head = ["row", *(LABELS.get(t, t) for t in targets)]
    if "floor" in targets and real:
        head.append("floor / fastest real")
    if "floor" in targets and "reference" in targets:
        head.append("reference / floor")
    if "floor" in targets:
        head.append("floor CPU us/msg, measured direction")
    cpu_of = [t for t in ("floor", "reference") if t in targets]
    if cpu_of:
        head.append(f"scenario CPU us/msg, {' / '.join(cpu_of)}")
    print("| " + " | ".join(head) + " |")
    print("|---|" + "---:|" * (len(head) - 1))
    for name, row in rows.items():
        medians = {t: _median(row.runs.get(t, [])) for t in targets}
        cells = [name, *(_fmt(medians[t]) for t in targets)]
        floor = medians.get("floor")
        if "floor" in targets and real:
            best = max(((m, t) for t in real if (m := medians[t]) is not None), default=None)
            cells.append(f"{floor / best[0]:.2f} ({LABELS[best[1]]})" if floor and best else "-")
        if "floor" in targets and "reference" in targets:
            ref = medians.get("reference")
            cells.append(f"{ref / floor:.2f}" if floor and ref else "-")
        if "floor" in targets:
            cpu = _median(row.floor_cpu_us)
            cells.append(f"{cpu:.2f}" if cpu is not None else "-")
        if cpu_of:
            cells.append(" / ".join(_fmt_us(_median(row.scenario_cpu_us.get(t, []))) for t in cpu_of))
        print("| " + " | ".join(cells) + " |")
    for label in targets:
        busy = [_median(row.client_busy.get(label, [])) for row in rows.values()]
        shares = " / ".join("-" if b is None else f"{b:.0%}" for b in busy)
        print(f"bench client busy during the {LABELS[label]} runs (its CPU time / wall time, whole scenario; near "
              f"100% the client sets the rate; waiting for a core counts as idle): {shares}")
    print("\nfloor CPU, measured direction: the floor process's CPU from the first to the last message of the row's "
          "timed direction, per message (1 / it = what one core could carry). scenario CPU: the server process's "
          "CPU over the whole scenario run (connect, the timed direction and the untimed preload or drain, "
          "i.e. about two messages handled per message counted), per message, from /proc/PID/task/*/schedstat.")
    for name, row in rows.items():
        for label, error in row.errors.items():
            print(f"error: {label} {name}: {error}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=20000, help="messages per run (default 20000)")
    parser.add_argument("--repetitions", type=int, default=3, help="runs per row and target (default 3)")
    parser.add_argument("--targets", default="floor,reference,artemis,activemq6",
                        help="comma-separated: floor, reference, rabbitmq, artemis, activemq6")
    parser.add_argument("--rows", default="presettled,window,consume",
                        help="comma-separated parts of row names (default: presettled,window,consume)")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio", help="the floor's event loop")
    parser.add_argument("--body-bytes", type=int, default=100)
    parser.add_argument("--profile", help="run the floor server under cProfile, write the stats here and print them")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.messages < 1 or args.repetitions < 1 or args.body_bytes < 1:
        parser.error("--messages, --repetitions and --body-bytes must be positive")
    body = (b"0123456789" * (args.body_bytes // 10 + 1))[:args.body_bytes]
    if args.serve:
        serve(args.port, args.loop, body, args.profile)
        return 0
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = [t for t in targets if t not in LABELS]
    if unknown or not targets:
        parser.error(f"unknown target(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(LABELS)}")
    rows = [s.name for s in SCENARIOS if any(r.strip() and r.strip() in s.name for r in args.rows.split(","))]
    if not rows:
        parser.error(f"--rows {args.rows!r} matches none of {', '.join(s.name for s in SCENARIOS)}")
    return drive(targets, rows, args.messages, args.repetitions, args.body_bytes, args.loop, args.profile)


if __name__ == "__main__":
    sys.exit(main())
