"""Fixtures of the client-side conformance tests.

``env`` gives a test the fault-injecting reference broker (``env.broker.faults``), the
confirmation-control proxy in front of it (``env.proxy``: receipt gates, frame counts),
unique destinations, an observer connection straight to the broker, and background calls.
``cut`` is the client under test, connected through the proxy.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import types
import uuid
from collections.abc import Callable, Iterator
from typing import Any, cast
from urllib.parse import urlsplit

import pytest

from ackspec.adapters.clients import factory
from ackspec.adapters.cut import ClientUnderTest, CutError, NotApplicable
from ackspec.conformance.client.core_gate import ClientGateProxy
from ackspec.conformance.client.proxies.amqp import AmqpConfirmationProxy
from ackspec.conformance.client.proxies.stomp import ConfirmationProxy
from ackspec.conformance.client_evidence import ClientEvidence
from ackspec.conformance.client_target import REFERENCE_BROKER, client_broker, client_spec
from ackspec.reference.client import ConnectionFactory, Message
from ackspec.reference.server import EmbeddedBroker

TIMEOUT = 5.0
STILL_WAITING_FOR = 1.0
"""How long a call that must not return yet is watched once it parked. Parking alone does not show it
waits for the right thing: a client may park on a network answer of its own (a detach's, say) and then
return early. A second is hundreds of loopback round trips; a conformant call costs the test that second."""


def pytest_addoption(parser: pytest.Parser) -> None:
    with contextlib.suppress(ValueError):  # registered already by the ackspec plugin (or another conftest)
        parser.addoption("--ackspec-client", default=None, metavar="NAME",
                         help="client under test for client-side conformance (default: reference)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    try:
        return (yield)
    except NotApplicable as exc:
        pytest.skip(f"not applicable: {exc}")


_BLOCKING_MODULES = ("threading.py", "queue.py", "selectors.py", "socket.py", "subprocess.py")
_BLOCKING_FUNCTIONS = frozenset({"wait", "wait_for", "acquire", "get", "select", "readline", "recv", "read",
                                 "join", "_wait_for_tstate_lock"})
_BLOCKING_BUILTINS = frozenset({"acquire", "select", "poll", "recv", "recv_into", "accept"})  # C calls


def _parked(frame: types.FrameType) -> bool:
    code = frame.f_code
    return code.co_filename.endswith(_BLOCKING_MODULES) or code.co_name in _BLOCKING_FUNCTIONS


class Background:
    """Run a blocking call on a thread; check whether it returned without sleeping."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._waits = 0  # how many blocking calls the call's thread is inside now (its own profile hook)
        self._moves = 0  # how many times it entered or left one

        def run() -> None:
            sys.setprofile(self._profile)
            try:
                self.result = fn()
            except BaseException as exc:
                self.error = exc
            finally:
                sys.setprofile(None)
                self._done.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def _profile(self, frame: types.FrameType, event: str, arg: Any) -> None:
        """Counts the blocking calls (Python or C) the call's thread is in, on that thread.

        The thread watches itself: reading its stack from another thread
        (``sys._current_frames``) made the watcher hold frames of every thread, and when the
        watcher dropped the last reference to a finished frame it freed that frame's locals
        on the wrong thread: proton objects of a live connection were decref'd while the
        connection's I/O thread was inside proton (not thread-safe), which once hung CI.
        """
        if event in {"call", "return"}:
            if not _parked(frame):
                return
            self._waits += 1 if event == "call" else -1
        elif getattr(arg, "__name__", None) in _BLOCKING_BUILTINS:  # c_call, c_return, c_exception
            self._waits += 1 if event == "c_call" else -1
        else:
            return
        self._moves += 1

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def returned_within(self, seconds: float) -> bool:
        """True if the call returned within ``seconds`` (a bounded absence check)."""
        return self._done.wait(seconds)

    def wait_parked(self, timeout: float = TIMEOUT) -> bool:
        """Wait until the call is blocked in a wait (lock, condition, queue, socket, select) or returned.

        The barrier for "must not return yet": a call that returns early is ``done`` here; one
        that correctly waits is parked in a blocking primitive. Whether it is comes from the
        call's own thread (a profile hook counting the blocking calls it is inside), not
        guessed from elapsed time: parked means inside one at two looks in a row with no
        blocking call entered or left in between, so passing through an uncontended lock
        does not count.
        """
        deadline = time.monotonic() + timeout
        seen: int | None = None
        while not self._done.is_set():
            if self._waits > 0:
                if seen == self._moves:
                    return True
                seen = self._moves
            else:
                seen = None
            if time.monotonic() >= deadline:
                return False
            self._done.wait(0.001)
        return True

    def wait(self, timeout: float = TIMEOUT) -> Any:
        if not self._done.wait(timeout):
            raise AssertionError("the call did not return in time")
        if self.error is not None:
            raise self.error
        return self.result


AMQP_OBSERVED = frozenset({"activemq", "activemq6"})
"""Brokers whose STOMP shows a message a client sent over AMQP 1.0 in its AMQP encoding (sections and all), not
its body: with a client speaking AMQP, the observer reads them over AMQP too."""

DEAD_LETTER_QUEUES = {"activemq": "/queue/ActiveMQ.DLQ", "activemq6": "/queue/ActiveMQ.DLQ", "artemis": "/queue/DLQ"}


class _NoFaults:
    """A real broker's stand-in for ``broker.faults``: injecting a fault is not applicable, clearing is a no-op."""

    def __init__(self, broker: str) -> None:
        self.broker = broker

    def add(self, *_: Any, **__: Any) -> Any:
        raise NotApplicable(f"broker fault injection needs the embedded reference broker, not {self.broker}")

    def remove(self, rule: Any) -> None:
        pass

    def clear(self) -> None:
        pass


class RealBroker:
    """A broker that brokers/ starts, in place of the embedded reference broker (``ackspec run --client C --broker
    NAME``, ``--ackspec-client-broker``, ``ACKSPEC_CLIENT_BROKER``).

    The client reaches it through the same confirmation proxies (STOMP, AMQP) where it speaks one of
    those, else straight on the broker's own port (core, OpenWire: no proxy understands them); the
    observer reads it over STOMP. Tests that inject broker faults are not applicable here.
    """

    def __init__(self, name: str) -> None:
        from ackspec.brokers import broker as broker_info  # noqa: PLC0415

        self.info = broker_info(name)
        self.host = "127.0.0.1"
        self.port = self.info.stomp_port
        self.amqp_url = self.info.amqp_url
        self.stomp_url = self.observer_url()
        self.faults = _NoFaults(name)

    def declare(self, destination: str) -> None:
        """Make sure a test's queue exists before the client uses it. RabbitMQ's AMQP 1.0 plugin routes a message
        sent to ``/queue/NAME`` only to an existing queue (a sender's target declares nothing; the message is
        confirmed and dropped), and declares it, not durable, for a receiver's source: a receiver attached and
        detached here declares it as a consuming client would."""
        if self.info.name != "rabbitmq" or not destination.startswith("/queue/") or self.amqp_url is None:
            return
        from proton.utils import BlockingConnection  # noqa: PLC0415 - only for RabbitMQ

        connection = BlockingConnection(self.amqp_url, timeout=TIMEOUT)
        try:
            connection.create_receiver(destination, credit=0)  # attached: declared (closing the connection ends it)
        finally:
            connection.close()

    def observer_url(self) -> str:
        """Where the observer reads the broker: STOMP, except on RabbitMQ, whose STOMP adapter writes the
        properties of a message published over AMQP 1.0 as MESSAGE headers that are not UTF-8 (a
        frame the reference client refuses), and which wants its virtual host as CONNECT's ``host``:
        there the observer reads over AMQP 1.0, as the client under test does."""
        if self.info.name == "rabbitmq" and self.amqp_url is not None:
            return self.amqp_url
        return self.info.stomp_url


class Env:
    def __init__(self, broker: EmbeddedBroker | RealBroker, proxy: ConfirmationProxy,
                 amqp_proxy: AmqpConfirmationProxy | None = None) -> None:
        self.broker = broker
        self._proxy = proxy
        self._amqp_proxy = amqp_proxy
        self.url = proxy.stomp_url
        self.protocol = "stomp"
        # the target profile of what the client talks to (results.json)
        self.broker_name = broker.info.profile if isinstance(broker, RealBroker) else REFERENCE_BROKER
        self.tag = uuid.uuid4().hex[:8]
        self._observer: Any = None
        self.clients: list[ClientUnderTest] = []  # every client the test opened (a gate inside them holds answers)

    @property
    def proxy(self) -> ConfirmationProxy:
        """The confirmation-control proxy of the client's protocol (STOMP receipts or AMQP dispositions)."""
        if self.protocol == "amqp":
            if self._amqp_proxy is None:
                raise NotApplicable("the reference broker runs without its AMQP listener")
            return self._amqp_proxy
        if self.protocol != "stomp":
            if any(getattr(c, "has_gate", False) for c in self.clients):  # held inside the client (core_gate.py)
                return cast(ConfirmationProxy, ClientGateProxy(self.clients))
            raise NotApplicable(f"no confirmation gate for the {self.protocol} protocol (the proxies speak STOMP "
                                "and AMQP 1.0): a rule that holds a broker answer cannot be decided")
        return self._proxy

    @property
    def stomp_proxy(self) -> ConfirmationProxy:
        """The STOMP proxy with its frame log, for the STOMP wire-level client rules."""
        if self.protocol != "stomp":
            raise NotApplicable(f"a STOMP wire rule; the client under test speaks {self.protocol}")
        return self._proxy

    @property
    def dead_letter_queue(self) -> str:
        """Where the broker puts messages it gives up on (a POISON ack, too many redeliveries)."""
        if isinstance(self.broker, RealBroker):
            found = DEAD_LETTER_QUEUES.get(self.broker.info.name)
            if found is None:
                raise NotApplicable(f"{self.broker.info.name} has no dead-letter queue this suite knows")
            return found
        return "/queue/DLQ"

    def require_protocol(self, protocol: str, why: str) -> None:
        if self.protocol != protocol:
            raise NotApplicable(f"{why} (needs {protocol}, the client under test speaks {self.protocol})")

    def _observer_url(self) -> str:
        """The observer reads the broker over STOMP; over AMQP 1.0 on RabbitMQ (see :meth:`RealBroker.observer_url`),
        and on ActiveMQ Classic when the client under test speaks AMQP (:data:`AMQP_OBSERVED`)."""
        if (isinstance(self.broker, RealBroker) and self.protocol == "amqp"
                and self.broker.info.name in AMQP_OBSERVED and self.broker.amqp_url is not None):
            info = self.broker.info
            return f"amqp://{info.login}:{info.passcode}@127.0.0.1:{info.amqp_port}"
        return self.broker.stomp_url

    def url_for(self, protocol: str) -> str:
        if protocol not in ("stomp", "amqp"):  # core, openwire: only a real broker speaks them
            native = dict(self.broker.info.other_ports).get(protocol) if isinstance(self.broker, RealBroker) else None
            if native is None:
                raise NotApplicable(f"the {self.broker_name} broker does not speak {protocol}")
            self.protocol = protocol
            return f"tcp://127.0.0.1:{native}"
        self.protocol = protocol
        if protocol == "amqp":
            if self._amqp_proxy is None:
                raise NotApplicable("the reference broker runs without its AMQP listener")
            return self._amqp_proxy.amqp_url
        return self.url

    def queue(self, name: str = "q") -> str:
        queue = f"/queue/cc.{self.tag}.{name}"
        if isinstance(self.broker, RealBroker):
            self.broker.declare(queue)
        return queue

    def topic(self, name: str = "t") -> str:
        return f"/topic/cc.{self.tag}.{name}"

    def background(self, fn: Callable[[], Any]) -> Background:
        return Background(fn)

    def drain(self, destination: str, count: int, timeout: float = TIMEOUT) -> list[Message]:
        """Receive up to ``count`` messages on an observer connection straight to the broker."""
        if self._observer is None:
            conn = ConnectionFactory(self._observer_url()).create_connection()
            conn.start()
            self._observer = conn
        session = self._observer.create_session(False, 1)
        consumer = session.create_consumer(destination)
        out: list[Message] = []
        try:
            while len(out) < count:
                message = consumer.receive(timeout)
                if message is None:
                    break
                out.append(message)
        finally:
            session.close()
        return out

    def contents(self, destination: str, timeout: float = TIMEOUT) -> list[bytes]:
        """Bodies left on a queue, read without waiting for absence: a marker is sent behind them on
        the observer connection (a confirmed send), then messages are read up to the marker."""
        marker = f"ackspec-marker-{uuid.uuid4().hex}".encode()
        if self._observer is None:
            conn = ConnectionFactory(self._observer_url()).create_connection()
            conn.start()
            self._observer = conn
        session = self._observer.create_session(False, 1)
        try:
            session.create_producer().send(session.create_message(marker), destination)
            consumer = session.create_consumer(destination)
            out: list[bytes] = []
            while True:
                message = consumer.receive(timeout)
                if message is None:
                    raise AssertionError(f"the marker sent to {destination} did not come back")
                if message.body == marker:
                    return out
                out.append(message.body)
        finally:
            session.close()

    def close(self) -> None:
        if self._observer is not None:
            self._observer.close()
        self.broker.faults.clear()
        self._proxy.clear()
        if self._amqp_proxy is not None:
            self._amqp_proxy.clear()


@pytest.fixture(scope="session")
def broker(request: pytest.FixtureRequest) -> Iterator[EmbeddedBroker | RealBroker]:
    real = client_broker(request.config)  # --ackspec-client-broker / ACKSPEC_CLIENT_BROKER (ackspec run --broker)
    if real:
        yield RealBroker(real)
        return
    with EmbeddedBroker(persistent=False, amqp=True) as b:
        yield b


@pytest.fixture(scope="session")
def proxy(broker: EmbeddedBroker | RealBroker) -> Iterator[ConfirmationProxy]:
    with ConfirmationProxy(broker.host, broker.port) as px:
        yield px


@pytest.fixture(scope="session")
def amqp_proxy(broker: EmbeddedBroker | RealBroker) -> Iterator[AmqpConfirmationProxy | None]:
    url = broker.amqp_url
    if url is None:
        yield None
        return
    parts = urlsplit(url)
    px = AmqpConfirmationProxy(parts.hostname or "127.0.0.1", parts.port or 5672)
    px.start()
    try:
        yield px
    finally:
        px.stop()


@pytest.fixture
def env(broker: EmbeddedBroker | RealBroker, proxy: ConfirmationProxy,
        amqp_proxy: AmqpConfirmationProxy | None) -> Iterator[Env]:
    e = Env(broker, proxy, amqp_proxy)
    yield e
    e.close()


def client_name(config: pytest.Config) -> str:
    return client_spec(config)


@pytest.fixture
def make_cut(request: pytest.FixtureRequest, env: Env) -> Iterator[Callable[..., ClientUnderTest]]:
    """Open a client under test (through the proxy) with options; closed after the test.

    Each client built is reported to the suite session, which names the library, its version and
    the broker in results.json (a run of the client-side suite judges the client); in such a run
    the test's client events and wire frames are kept as its evidence (client-logs/)."""
    suite = request.config.pluginmanager.get_plugin("ackspec-suite")
    note = getattr(suite, "note_client", None)
    log = getattr(suite, "client_log_path", lambda _nodeid: None)(request.node.nodeid)
    evidence = ClientEvidence(env)

    def built(cut: ClientUnderTest) -> None:
        evidence.built(cut)
        if note is not None:
            note(cut, env.broker_name)

    with opened_clients(factory(client_name(request.config)), env, on_build=built,
                        before_close=evidence.capture_wire) as make:
        yield make
    if log is not None:
        evidence.capture_wire()
        evidence.write(log)


@contextlib.contextmanager
def opened_clients(build: Callable[[], ClientUnderTest], env: Env, *,
                   before_close: Callable[[ClientUnderTest], None] | None = None,
                   on_build: Callable[[ClientUnderTest], None] | None = None,
                   ) -> Iterator[Callable[..., ClientUnderTest]]:
    """A ``make_cut``: each call builds a client and opens it through ``env``'s proxies.

    On exit every client opened is closed, after ``before_close`` ran on all of them, its blocked
    listeners were let go and the proxies released the receipts they hold (a held receipt or a
    running listener would keep ``close()`` waiting)."""
    opened: list[ClientUnderTest] = []

    def make(**options: Any) -> ClientUnderTest:
        cut = build()
        opened.append(cut)
        env.clients.append(cut)
        if on_build is not None:
            on_build(cut)
        cut.open(env.url_for(getattr(cut, "protocol", "stomp")), options)
        return cut

    try:
        yield make
    finally:
        if before_close is not None:
            for cut in opened:
                before_close(cut)
        for cut in opened:
            with contextlib.suppress(CutError, NotApplicable):
                cut.release_listeners()  # a listener a failed test left blocked would hold close() up
            env._proxy.clear()
            if env._amqp_proxy is not None:
                env._amqp_proxy.clear()
            with contextlib.suppress(CutError, NotApplicable):
                if getattr(cut, "has_gate", False):
                    cut.call("gate_clear")  # type: ignore[attr-defined]
                cut.close()


@pytest.fixture
def cut(make_cut: Callable[..., ClientUnderTest]) -> ClientUnderTest:
    return make_cut()
