"""AMQP 1.0 rows of ``ackspec bench`` (``--protocol amqp``): the reference broker's AMQP listener vs
RabbitMQ 3.10, Artemis 2.x and ActiveMQ 6.x, in one run, with two ratios: to the faster of RabbitMQ and
ActiveMQ (the STOMP rows' target, issue 3, with ActiveMQ 6 standing in for 5.17, which has no AMQP) and
to the fastest real broker of all (Artemis, in practice).

Scenarios (each on a fresh queue, 100-byte bodies, the queue left empty afterwards):

``amqp-presettled-send``
    pre-settled transfers (at most once), then one unsettled transfer whose outcome stops the clock
    (the broker handles a link's transfers in order, so it has taken all earlier ones by then).
``amqp-unsettled-window``
    unsettled transfers with at most :data:`WINDOW` in flight; the clock stops when every one is
    ``accepted`` (the AMQP form of a publish window / receipts).
``amqp-consume-credit``
    a queue preloaded outside the clock, consumed over a link with credit :data:`CREDIT`, each
    delivery settled ``accepted``; credit is topped up as deliveries are settled.

The load client is python-qpid-proton's engine driven directly (no reactor, no per-message
``Message.encode``: one encoded message reused), pumped over a non-blocking socket with
``select``. Its per-message work (transfers, dispositions, deliveries) calls proton's C API
(``cproton_ffi``, through :mod:`ackspec.reference.amqp.proton_c`) without wrapper objects, as the
reference listener does, so one Python thread
keeps up with these brokers; the client's own ceiling is printed with the results (a run
against the fastest broker near it would be client-bound). The consumer tops its credit up as
it goes (when less than half is left, in the middle of a batch, and writes at once), so broker
and client work in parallel instead of taking turns over whole windows.
"""

from __future__ import annotations

import contextlib
import select
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from proton import Connection, Endpoint, Event, Link, Message, Transport, symbol

from ackspec.bench.report import Cell
from ackspec.bench.runner import take_turns
from ackspec.bench.targets import broker_process, free_port
from ackspec.brokers import BROKERS
from ackspec.errors import AckspecError
from ackspec.net import connect
from ackspec.reference.amqp.proton_c import ffi, lib
from ackspec.reference.amqp.pump import EnginePump, Fed, client_engine

WINDOW = 1000
"""Unsettled transfers in flight at most (amqp-unsettled-window)."""
CREDIT = 1000
"""Link credit of the consumer (amqp-consume-credit)."""
REAL_BROKERS = ("rabbitmq", "artemis", "activemq6")
ADDRESS_STYLE = {"rabbitmq": "path", "artemis": "capabilities", "activemq6": "activemq", "reference": "path"}
"""How each broker names a queue over AMQP (the profiles' ``settings.amqp_address``)."""
DEFAULT_TARGETS = ("reference", *REAL_BROKERS)
ISSUE_BASELINES = ("rabbitmq", "activemq6")
"""The STOMP rows compare the reference with the faster of RabbitMQ and ActiveMQ (issue 3); over AMQP
ActiveMQ is 6.x (Debian's 5.17 has no AMQP module). Artemis is compared in the second ratio."""

_PN_DELIVERY = int(lib.PN_DELIVERY)
_PN_ACCEPTED = int(lib.PN_ACCEPTED)
_CLOSE_EVENTS = frozenset(int(e) for e in (lib.PN_LINK_REMOTE_CLOSE, lib.PN_SESSION_REMOTE_CLOSE,
                                          lib.PN_CONNECTION_REMOTE_CLOSE))


@dataclass(frozen=True)
class AmqpEndpoint:
    label: str
    host: str
    port: int
    user: str | None
    password: str | None
    style: str

    def terminus(self, name: str) -> tuple[str, str | None]:
        if self.style == "capabilities":
            return name, "queue"
        if self.style == "activemq":
            return f"queue://{name}", None
        return f"/queue/{name}", None


class BenchConnection:
    """One AMQP connection and session over a non-blocking socket, pumped by the caller."""

    def __init__(self, ep: AmqpEndpoint, timeout: float = 30.0) -> None:
        self.ep = ep
        self.timeout = timeout
        try:
            self.sock = connect(ep.host, ep.port, 5.0, blocking=False)
        except OSError as exc:
            raise AckspecError(f"bench: nothing listening at amqp://{ep.host}:{ep.port} ({exc})") from exc
        self.conn, self.transport, self.collector = client_engine(
            f"ackspec-bench-{uuid.uuid4().hex[:8]}", ep.host, ep.user, ep.password)
        self.engine = EnginePump(self.transport, self.collector, self._on_event, dispatch=self._dispatch)
        self.on_event: Callable[[Event], None] = lambda _e: None
        self.on_delivery: Callable[[Any], None] | None = None
        """Measured loops: called with the C pointer of every delivery event of :attr:`watched`."""
        self.watched: Any = None
        self.conn.open()
        self.session = self.conn.session()
        self.session.open()
        self.wait(lambda: bool(self.session.state & Endpoint.REMOTE_ACTIVE), "the session to open")

    def _dispatch(self) -> None:
        """Events on proton's C API: deliveries of the watched link go to :attr:`on_delivery` unwrapped;
        only close events and (outside the measured loops) deliveries pay for proton's ``Event`` wrapper."""
        collector = self.collector._impl
        while True:
            event = lib.pn_collector_peek(collector)
            if not event:
                return
            try:
                kind = lib.pn_event_type(event)
                if kind == _PN_DELIVERY:
                    dlv = lib.pn_event_delivery(event)
                    if self.on_delivery is not None and lib.pn_delivery_link(dlv) == self.watched:
                        self.on_delivery(dlv)
                        continue
                if kind == _PN_DELIVERY or kind in _CLOSE_EVENTS:
                    wrapped = Event.wrap(event)  # type: ignore[no-untyped-call]
                    if wrapped is not None:
                        self._on_event(wrapped)
            finally:
                lib.pn_collector_pop(collector)

    def flush(self) -> None:
        """Write what proton has, as far as the socket takes it now."""
        engine = self.engine
        while (pending := engine.pending()) > 0:
            try:
                sent = self.sock.send(engine.peek(pending))
            except BlockingIOError:
                break
            except OSError as exc:
                raise AckspecError(f"bench: {self.ep.label}: send failed: {exc}") from exc
            engine.pop(sent)

    def pump(self, wait: float) -> None:
        """Write what proton has, read what the socket has (waiting at most ``wait``), handle events."""
        engine = self.engine
        self.flush()
        writing = [self.sock] if engine.pending() > 0 else []
        readable, _, _ = select.select([self.sock], writing, [], wait)
        if readable:
            try:
                data = self.sock.recv(1 << 20)
            except BlockingIOError:
                data = None
            except OSError as exc:
                raise AckspecError(f"bench: {self.ep.label}: recv failed: {exc}") from exc
            if data == b"":
                raise AckspecError(f"bench: {self.ep.label}: connection closed by the broker "
                                   f"({self._condition() or 'no error'})")
            if data and engine.feed(data) is not Fed.ALL:  # Fed.CLOSED or a buffer full (capacity 0)
                raise AckspecError(f"bench: {self.ep.label}: transport closed ({self._condition()})")
        engine.dispatch()

    def _condition(self) -> str:
        for cond in (self.conn.remote_condition, self.session.remote_condition, self.transport.condition):
            if cond is not None:
                return f"{cond.name}: {cond.description}"
        return ""

    def _on_event(self, event: Event) -> None:
        if event.type in (Event.LINK_REMOTE_CLOSE, Event.SESSION_REMOTE_CLOSE, Event.CONNECTION_REMOTE_CLOSE):
            cond = (event.link or event.session or event.connection).remote_condition  # type: ignore[union-attr]
            if cond is not None:
                raise AckspecError(f"bench: {self.ep.label}: closed by the broker: {cond.name}: {cond.description}")
        self.on_event(event)

    def wait(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not done():
            if time.monotonic() > deadline:
                raise AckspecError(f"bench: {self.ep.label}: timed out waiting for {what}")
            self.pump(0.05)

    def sender(self, queue: str) -> Link:
        address, capability = self.ep.terminus(queue)
        link = self.session.sender(f"bench-s-{uuid.uuid4().hex[:8]}")
        link.target.address = address
        if capability:
            link.target.capabilities.put_object(symbol(capability))
        link.snd_settle_mode = Link.SND_MIXED
        link.open()
        self.wait(lambda: bool(link.state & Endpoint.REMOTE_ACTIVE) and link.credit > 0, "credit to send")
        return link

    def receiver(self, queue: str, credit: int) -> Link:
        address, capability = self.ep.terminus(queue)
        link = self.session.receiver(f"bench-r-{uuid.uuid4().hex[:8]}")
        link.source.address = address
        if capability:
            link.source.capabilities.put_object(symbol(capability))
        link.snd_settle_mode = Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_FIRST
        link.open()
        self.wait(lambda: bool(link.state & Endpoint.REMOTE_ACTIVE), "the receiver to attach")
        link.flow(credit)
        return link

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()
            self.wait(lambda: bool(self.conn.state & Endpoint.REMOTE_CLOSED), "the broker's close")
        with contextlib.suppress(OSError):
            self.sock.close()


def _encoded(body: bytes) -> bytes:
    msg = Message(body=body)
    msg.durable = False
    return msg.encode()


def _send(c: BenchConnection, link: Link, payload: bytes, n: int, *, settled: bool, window: int) -> None:
    """n transfers; unsettled ones at most ``window`` in flight, all of them accepted before return."""
    impl = link._impl
    outcome = [0, 0]  # accepted, other

    def on_delivery(dlv: Any) -> None:
        state = lib.pn_delivery_remote_state(dlv)
        if state:
            outcome[0 if state == _PN_ACCEPTED else 1] += 1
            lib.pn_delivery_settle(dlv)

    c.watched, c.on_delivery = impl, on_delivery
    data = ffi.from_buffer(payload)
    size = len(payload)
    sent = 0
    try:
        while sent < n or outcome[0] + outcome[1] < (0 if settled else n):
            if outcome[1]:
                raise AckspecError(f"bench: {c.ep.label}: {outcome[1]} transfers not accepted")
            room = min(n - sent, lib.pn_link_credit(impl), 256, n if settled else window - (sent - outcome[0]))
            for _ in range(max(room, 0)):
                sent += 1
                tag = b"%d" % sent
                dlv = lib.pn_delivery(impl, (len(tag), ffi.from_buffer(tag)))
                lib.pn_link_send(impl, data, size)
                lib.pn_link_advance(impl)
                if settled:
                    lib.pn_delivery_settle(dlv)
            # wait for the broker only when blocked on credit or outcomes: after the last pre-settled
            # transfer nothing is owed, and a silent broker would otherwise add 50 ms to the row
            c.pump(0 if (room > 0 and sent < n) or (settled and sent >= n) else 0.05)
    finally:
        c.watched, c.on_delivery = None, None


def _barrier(c: BenchConnection, link: Link, payload: bytes) -> None:
    """One unsettled transfer, waited for: everything sent earlier on the link has been taken."""
    _send(c, link, payload, 1, settled=False, window=1)


def _consume(c: BenchConnection, queue: str, n: int, credit: int) -> None:
    """Receive n deliveries, settling each ``accepted``; when less than half the credit is left the
    consumer grants the rest and writes at once, in the middle of a batch, so the broker refills
    while the client works through what it has."""
    link = c.receiver(queue, credit)
    impl = link._impl
    got = [0]
    buffer = bytearray(1 << 16)
    view = [ffi.from_buffer(buffer), len(buffer)]

    def on_delivery(dlv: Any) -> None:
        if lib.pn_delivery_partial(dlv) or not lib.pn_delivery_readable(dlv):
            return
        pending = lib.pn_delivery_pending(dlv)
        if pending > view[1]:
            view[:] = [ffi.new("char[]", pending), pending]
        lib.pn_link_recv(impl, view[0], pending)
        lib.pn_link_advance(impl)
        lib.pn_delivery_update(dlv, _PN_ACCEPTED)
        lib.pn_delivery_settle(dlv)
        got[0] += 1
        left = lib.pn_link_credit(impl)
        if left < credit // 2 and got[0] + left < n:
            lib.pn_link_flow(impl, credit - left)
            c.flush()

    c.watched, c.on_delivery = impl, on_delivery
    try:
        while got[0] < n:
            c.pump(0.05)
    finally:
        c.watched, c.on_delivery = None, None
    link.close()
    c.pump(0)


def _queue(tag: str) -> str:
    return f"ackspec-bench-amqp-{tag}-{uuid.uuid4().hex[:10]}"


@contextlib.contextmanager
def _sending_to_fresh_queue(ep: AmqpEndpoint, tag: str) -> Iterator[tuple[BenchConnection, str, Link]]:
    """A connection to ``ep``, a fresh queue named after ``tag`` and a sender link to it; closed on exit."""
    c = BenchConnection(ep)
    try:
        queue = _queue(tag)
        yield c, queue, c.sender(queue)
    finally:
        c.close()


def presettled_send(ep: AmqpEndpoint, n: int, body: bytes) -> float:
    with _sending_to_fresh_queue(ep, "presettled") as (c, queue, link):
        payload = _encoded(body)
        t0 = time.perf_counter()
        _send(c, link, payload, n, settled=True, window=0)
        _barrier(c, link, payload)
        elapsed = time.perf_counter() - t0
        _consume(c, queue, n + 1, CREDIT)  # what arrived (pre-settled may lose: then this times out loudly)
    return n / elapsed


def unsettled_window(ep: AmqpEndpoint, n: int, body: bytes) -> float:
    with _sending_to_fresh_queue(ep, "window") as (c, queue, link):
        payload = _encoded(body)
        t0 = time.perf_counter()
        _send(c, link, payload, n, settled=False, window=WINDOW)
        elapsed = time.perf_counter() - t0
        _consume(c, queue, n, CREDIT)
    return n / elapsed


def consume_credit(ep: AmqpEndpoint, n: int, body: bytes) -> float:
    with _sending_to_fresh_queue(ep, "consume") as (c, queue, link):
        _send(c, link, _encoded(body), n, settled=False, window=WINDOW)
        t0 = time.perf_counter()
        _consume(c, queue, n, CREDIT)
        elapsed = time.perf_counter() - t0
    return n / elapsed


@dataclass(frozen=True)
class AmqpScenario:
    name: str
    title: str
    run: Callable[[AmqpEndpoint, int, bytes], float]


SCENARIOS: tuple[AmqpScenario, ...] = (
    AmqpScenario("amqp-presettled-send", "pre-settled sends (then one unsettled barrier)", presettled_send),
    AmqpScenario("amqp-unsettled-window", f"unsettled sends, <= {WINDOW} in flight, until all accepted",
                 unsettled_window),
    AmqpScenario("amqp-consume-credit", f"consume with credit {CREDIT}, accepting each", consume_credit),
)


@dataclass
class AmqpBench:
    targets: list[str]
    messages: int
    repetitions: int
    body_bytes: int
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)

    def ratio(self, scenario: str, among: Sequence[str] = REAL_BROKERS) -> tuple[float, str] | None:
        """reference msg/s over the fastest of ``among`` (measured ones only), and which broker that was."""
        ref = self.cells.get((scenario, "reference"))
        real = [(c.median, t) for t in among if (c := self.cells.get((scenario, t))) and c.median]
        if ref is None or not ref.median or not real:
            return None
        best, name = max(real)
        return ref.median / best, name

    def table(self) -> str:
        head = (f"{'scenario':<24}" + "".join(f"{t:>12}" for t in self.targets)
                + f"   {'reference / max(rabbitmq, activemq6)':<40}reference / fastest real")
        lines = [f"AMQP 1.0, {self.messages} messages x {self.repetitions} runs (median msg/s), "
                 f"{self.body_bytes}-byte bodies", head]
        for s in SCENARIOS:
            row = f"{s.name:<24}"
            for t in self.targets:
                cell = self.cells.get((s.name, t))
                row += f"{'error' if cell is None or cell.median is None else f'{cell.median:,.0f}':>12}"
            for among, width in ((ISSUE_BASELINES, 40), (REAL_BROKERS, 0)):
                ratio = self.ratio(s.name, among)
                row += f"   {f'{ratio[0]:.2f} ({ratio[1]})' if ratio else '-':<{width}}"
            lines.append(row)
        errors = [f"  {t} {s}: {c.error}" for (s, t), c in self.cells.items() if c.error]
        return "\n".join(lines + (["errors:", *errors] if errors else []))


def _endpoint(label: str, port: int | None = None) -> AmqpEndpoint:
    if label == "reference":
        assert port is not None
        return AmqpEndpoint(label, "127.0.0.1", port, None, None, "path")
    if "=" in label:  # LABEL=amqp://HOST:PORT: another reference broker (another build, say), /queue/ addresses
        name, url = label.split("=", 1)
        parts = urlsplit(url)
        if parts.scheme != "amqp" or not parts.hostname or not parts.port:
            raise AckspecError(f"bench: target URL {url!r} must look like amqp://127.0.0.1:PORT")
        return AmqpEndpoint(name, parts.hostname, parts.port, parts.username, parts.password, "path")
    info = BROKERS.get(label)
    if info is None or info.amqp_port is None:
        known = ", ".join(["reference", *REAL_BROKERS])
        raise AckspecError(f"bench: {label!r} has no AMQP 1.0 listener (AMQP targets: {known})")
    return AmqpEndpoint(label, "127.0.0.1", info.amqp_port, info.login, info.passcode, ADDRESS_STYLE[label])


@contextlib.contextmanager
def reference_broker() -> Iterator[AmqpEndpoint]:
    """The reference broker in a subprocess with its AMQP listener (journal in a temporary directory)."""
    stomp, amqp = free_port(), free_port()
    listeners = ("--stomp", f"127.0.0.1:{stomp}", "--amqp", f"127.0.0.1:{amqp}")
    with broker_process("ackspec-bench-amqp-", *listeners) as (proc, log_path):
        ep = _endpoint("reference", amqp)
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise AckspecError(f"bench: the reference broker exited ({proc.returncode}): "
                                   f"{log_path.read_text(errors='replace')[-300:]}")
            try:
                BenchConnection(ep, timeout=2).close()
                break
            except AckspecError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield ep


def client_ceiling(n: int, body: bytes) -> float:
    """msg/s of the load client against nothing: pre-settled transfers, as :func:`_send` writes them,
    into a transport whose output is thrown away (the client-side cost per message)."""
    conn, transport = Connection(), Transport()
    transport.bind(conn)
    conn.open()
    session = conn.session()
    session.open()
    link = session.sender("ceiling")
    link.open()
    impl = link._impl
    payload = _encoded(body)
    data = ffi.from_buffer(payload)
    t0 = time.perf_counter()
    for i in range(n):
        tag = b"%d" % i
        dlv = lib.pn_delivery(impl, (len(tag), ffi.from_buffer(tag)))
        lib.pn_link_send(impl, data, len(payload))
        lib.pn_link_advance(impl)
        lib.pn_delivery_settle(dlv)
        if i % 256 == 0:
            while (pending := transport.pending()) > 0:
                transport.pop(pending)
    return n / (time.perf_counter() - t0)


def run_amqp_bench(targets: Sequence[str], *, messages: int, repetitions: int, body_bytes: int,
                   progress: Callable[[str], None]) -> AmqpBench:
    """Every scenario against every target; targets take turns within each repetition."""
    body = (b"0123456789" * (body_bytes // 10 + 1))[:body_bytes]
    result = AmqpBench([_label(t) for t in targets], messages, repetitions, body_bytes)
    with contextlib.ExitStack() as stack:
        endpoints: dict[str, AmqpEndpoint] = {}
        for target in targets:
            label = _label(target)
            try:
                endpoints[label] = (stack.enter_context(reference_broker()) if target == "reference"
                                    else _endpoint(target))
                if target != "reference":
                    BenchConnection(endpoints[label], timeout=5).close()
            except AckspecError as exc:
                endpoints.pop(label, None)
                progress(f"bench: {label}: {exc}")
                for s in SCENARIOS:
                    result.cells[(s.name, label)] = Cell(s.name, label, 0, error=str(exc))
        for s in SCENARIOS:
            cells = {label: Cell(s.name, label, messages) for label in endpoints}
            for label, cell in cells.items():
                result.cells[(s.name, label)] = cell
            take_turns(cells, endpoints, s.run, body, repetitions, progress, name_width=22)
    return result


def _label(target: str) -> str:
    """A target's column: its name, or the LABEL of ``LABEL=amqp://...``."""
    return target.split("=", 1)[0]


def run_cli(targets: str | None, messages: int, repetitions: int, body_bytes: int) -> int:
    """``ackspec bench --protocol amqp``: prints the table (and the client's own ceiling)."""
    names = [t.strip() for t in (targets or ",".join(DEFAULT_TARGETS)).split(",") if t.strip()]
    for name in names:
        if name != "reference":
            _endpoint(name)  # one-line error for a target without AMQP
    result = run_amqp_bench(names, messages=messages, repetitions=repetitions, body_bytes=body_bytes,
                            progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(result.table())
    body = (b"0123456789" * (body_bytes // 10 + 1))[:body_bytes]
    print(f"load client ceiling (proton engine, no broker): {client_ceiling(messages, body):,.0f} msg/s")
    cells = list(result.cells.values())
    return 1 if cells and all(c.error for c in cells) else 0


__all__ = ["SCENARIOS", "AmqpBench", "run_amqp_bench", "run_cli"]
